# A small image with glovebox, for CI steps in containers:
#   docker build -t glovebox .
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/work" -w /work \
#       glovebox sandbox --read . -- make test
# The runtime's DEFAULT seccomp profile is enough: where it refuses the
# namespaces (or masks /proc so no jail can have its own), glovebox builds
# its namespace-free jail (Landlock ABI 6, seccomp, a subreaper; kernel
# 6.7 or later). It runs as a non-root user (65534) by default; as the
# container's root (no writable pids cgroup, and RLIMIT_NPROC does not bind
# uid 0) glovebox counts each call's processes itself.
# `glovebox doctor` (the default command) says what holds. Tested with
# podman's default profile (.ci/container); see README "CI: a GitHub
# Action and a container image".

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
# Any uid works (docker run --user): HOME is the world-writable /tmp, where
# glovebox keeps its state and audit log.
ENV HOME=/tmp
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/glovebox"]
CMD ["doctor"]
