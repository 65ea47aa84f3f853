# A small image with glovebox, for CI steps in containers:
#   docker build -t glovebox .
#   docker run --rm --security-opt seccomp=unconfined -v "$PWD:/work" -w /work \
#       glovebox sandbox --read . -- make test
# Inside a container glovebox needs what its jail is built from: Landlock
# and seccomp (any recent kernel), and namespaces — run with
# `--security-opt seccomp=unconfined` (Docker's default profile refuses
# unshare/clone with namespace flags) or a profile that allows them;
# `glovebox doctor` says what holds. See README "CI: a GitHub Action and a
# container image".

FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY schemas schemas
COPY sandbox-profiles sandbox-profiles
COPY bench/http_inproc.rs bench/http_inproc.rs
RUN cargo build --release --locked --bin glovebox \
    && strip target/release/glovebox

FROM debian:bookworm-slim
# The jail's baseline is the system's own runtime files (sandbox-profiles/):
# add the interpreters your tools use (python3, nodejs, git …) here.
# Not pinned (hadolint DL3008): the image takes bookworm's security updates
# to these packages each time it is built.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/glovebox /usr/local/bin/glovebox
ENTRYPOINT ["/usr/local/bin/glovebox"]
CMD ["doctor"]
