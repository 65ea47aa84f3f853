#!/bin/sh
# Times `glovebox list` and `glovebox lint` on a project of N valid tools
# (default 1000) and prints the median wall time of each.
#
#   bench/lint.sh [N] [RUNS]
#
# Uses hyperfine when installed (unless BENCH_NO_HYPERFINE=1), else a loop
# timed with `date +%s%N`. With hyperfine it also writes the "lint" section
# of bench/RESULTS.md.
set -eu

n="${1:-1000}"
if [ -n "${QUICK:-}" ]; then
    runs="${2:-3}"
    export BENCH_RESULTS="${BENCH_RESULTS:-$here/bench/RESULTS.quick.md}" BENCH_METRICS="${BENCH_METRICS:-$here/bench/metrics.quick.json}"
    [ -e "$BENCH_RESULTS" ] || cp "$here/bench/RESULTS.md" "$BENCH_RESULTS"
else
    runs="${2:-15}"
fi
here="$(cd "$(dirname "$0")/.." && pwd)"

[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --quiet --manifest-path "$here/Cargo.toml" --bin glovebox
bin="$here/target/release/glovebox"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT INT TERM

i=0
while [ "$i" -lt "$n" ]; do
    name="tool_$i"
    mkdir -p "$work/.glee/tools/$name"
    cat > "$work/.glee/tools/$name/tool.yml" <<YAML
name: $name
description: Benchmark tool number $i, counts matches of a pattern
kind: command
version: 1

inputs:
  schema:
    type: object
    additionalProperties: false
    required: [pattern]
    properties:
      pattern:
        type: string
        description: Pattern to search for
      path:
        type: string
        description: Directory to scan
        default: "."
      max:
        type: integer
        minimum: 1
        default: 100

outputs:
  format: json
  schema:
    type: object
    required: [matches]
    properties:
      matches: {type: integer}

exec:
  command:
    entrypoint: grep
    args: ["-r", "-c", "--max-count=\${max}", "\${pattern}", "\${path}"]
    cwd: .
    stdout:
      format: text
    exit_codes_ok: [0, 1]
    timeout_ms: 10000

permissions:
  network: false
  fs:
    read: ["src/", "docs/"]
    write: []
  secrets: {}

approval:
  required: false

examples:
  - description: Count TODO markers
    params:
      pattern: TODO
      path: src
    expected_output: |
      {"matches": 3}
YAML
    i=$((i + 1))
done

# Sanity: the generated project must lint clean.
if ! "$bin" --root "$work" lint > /dev/null 2>&1; then
    echo "bench: the generated project does not lint clean" >&2
    "$bin" --root "$work" lint | head >&2
    exit 1
fi

echo "project: $n tools ($(nproc 2>/dev/null || echo '?') cores)"
if [ -z "${BENCH_NO_HYPERFINE:-}" ] && command -v hyperfine > /dev/null 2>&1; then
    hyperfine -N --warmup 2 --runs "$runs" --style none \
        --export-json "$work/hyperfine.json" \
        "$bin --root $work list" \
        "$bin --root $work lint" > /dev/null
    # One "median" (seconds) per command, in order.
    grep '"median"' "$work/hyperfine.json" | tr -dc '0-9.\n' | {
        read -r list
        read -r lint
        python3 "$here/bench/metric.py" lint.list_ms "$(awk -v a="$list" 'BEGIN { printf "%.1f", a * 1000 }')"
        python3 "$here/bench/metric.py" lint.lint_ms "$(awk -v b="$lint" 'BEGIN { printf "%.1f", b * 1000 }')"
        awk -v a="$list" -v b="$lint" -v r="$runs" 'BEGIN {
            printf "glovebox list  median: %.1f ms (%d runs, hyperfine)\n", a * 1000, r
            printf "glovebox lint  median: %.1f ms (%d runs, hyperfine)\n", b * 1000, r
        }'
    }
    python3 "$here/bench/section.py" lint "Loading and linting $n tools (\`bench/lint.sh\`)" \
        "${BENCH_RESULTS:-$here/bench/RESULTS.md}" \
        "$([ -n "${QUICK:-}" ] && echo '**QUICK=1 smoke run: too few runs to trust.** ')Target: well under a second for 1,000 tools. Each tool has an input schema with defaults, an output schema, templated args and an example that is validated." \
        "$work/hyperfine.json"
    exit 0
fi

median_ms() {
    # Runs "$@" $runs times; prints the median wall time in milliseconds.
    k=0
    : > "$work/times"
    "$@" > /dev/null 2>&1 || true # warm-up
    while [ "$k" -lt "$runs" ]; do
        start=$(date +%s%N)
        "$@" > /dev/null 2>&1 || true
        end=$(date +%s%N)
        echo $(((end - start) / 1000)) >> "$work/times"
        k=$((k + 1))
    done
    sort -n "$work/times" | awk '{ a[NR] = $1 } END {
        m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%.1f ms (min %.1f, max %.1f, %d runs)\n", m / 1000, a[1] / 1000, a[NR] / 1000, NR
    }'
}

printf 'glovebox list  median: '
median_ms "$bin" --root "$work" list
printf 'glovebox lint  median: '
median_ms "$bin" --root "$work" lint
