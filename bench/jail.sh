#!/usr/bin/env bash
# Jail overhead: wall time of `glovebox sandbox -- CMD` against the bare
# command, bubblewrap and firejail with comparable policies, for /bin/true
# (pure start-up cost) and `python3 -c pass` (a realistic small tool).
# Rewrites the "jail" section of bench/RESULTS.md.
#
#   bash bench/jail.sh          (RUNS=500 WARMUP=20; QUICK=1 for a smoke run)
#
# firejail is measured only when it works here (it needs its setuid helper
# and mount namespaces); otherwise the table says why, loudly.
#
# Beside them, two rows that split `sandbox` into its parts: `floor`, the
# kernel's floor for a one-shot jail (bench/jail_floor.c `once`: a small C
# program that only makes the system calls of a jail shaped like
# glovebox's — namespaces, a tmpfs root with 25 read-only binds + /usr and
# /proc, pivot_root, Landlock, an 835-instruction seccomp program — and
# execs the command; as root, with a C compiler), and `glovebox --version`
# (starting and ending the glovebox binary, no jail). What `sandbox` costs
# above floor + (glovebox --version − bare) is glovebox's own work.
source "$(dirname "$0")/lib.sh"
if [ -n "$QUICK" ]; then RUNS=${RUNS:-20}; WARMUP=${WARMUP:-3}; fi
RUNS=${RUNS:-500}
WARMUP=${WARMUP:-20}
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --new-session --die-with-parent"
FIREJAIL="firejail --quiet --noprofile --net=none"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

need_release
need_tools bwrap firejail hyperfine

# firejail: one probe run, which must succeed and print.
FJ_ROWS=()
FJ_STATUS=ok
if ! fj_out=$($FIREJAIL /bin/echo firejail-probe 2>&1) || [[ $fj_out != *firejail-probe* ]]; then
  FJ_STATUS="firejail cannot run here: $(echo "$fj_out" | tr '\n' ' ' | cut -c1-300)"
  echo "== $FJ_STATUS" >&2
fi

FLOOR_ROWS=()
if [ "$(id -u)" = 0 ] && command -v cc > /dev/null && cc -O2 -o "$OUT/jail_floor" bench/jail_floor.c; then
  FLOOR_ROWS=(-n floor "$OUT/jail_floor once 25 835")
else
  echo "== no floor row: bench/jail_floor.c needs root and a C compiler" >&2
fi

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== /bin/true" >&2
[ "$FJ_STATUS" = ok ] && FJ_ROWS=(-n firejail "$FIREJAIL /bin/true")
hf "$OUT/true.json" "$RUNS" "$WARMUP" \
  -n bare /bin/true \
  -n glovebox "$GB sandbox -- /bin/true" \
  -n "glovebox --netns" "$GB sandbox --netns -- /bin/true" \
  -n bwrap "$BWRAP /bin/true" \
  "${FLOOR_ROWS[@]}" \
  -n "glovebox --version" "$GB --version" \
  "${FJ_ROWS[@]}"

echo "== python3 -c pass" >&2
[ "$FJ_STATUS" = ok ] && FJ_ROWS=(-n firejail "$FIREJAIL $PY -c pass")
hf "$OUT/python.json" "$((RUNS / 2))" "$WARMUP" \
  -n bare "$PY -c pass" \
  -n glovebox "$GB sandbox -- $PY -c pass" \
  -n bwrap "$BWRAP $PY -c pass" \
  "${FJ_ROWS[@]}"

python3 bench/report.py --glovebox "$GB" --bwrap "$BWRAP" --firejail "$FIREJAIL" \
  --firejail-status "$FJ_STATUS" --note "$(quick_note)" \
  --load "$LOAD_BEFORE -> $(cut -d' ' -f1-3 /proc/loadavg)" \
  --results "$BENCH_RESULTS" "$OUT/true.json" "$OUT/python.json"
echo "== wrote the jail section of $BENCH_RESULTS" >&2
