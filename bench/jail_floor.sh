#!/usr/bin/env bash
# The kernel's floor for a jailed call shaped like glovebox's, side by side
# with bare fork+exec and with glovebox's own served calls (hand-run, as
# root; issue 19). bench/jail_floor.c does, per call, only the system calls
# that build the jail: the namespaces, a tmpfs root with BINDS read-only
# binds, /proc, pivot_root, Landlock, a seccomp filter of FILTER
# instructions, exec /bin/true. Prints a markdown table: calls/s with 1 and
# 2 loops side by side, and the CPU of one call (1 loop: the parent only
# waits, so wall time is the call's CPU). `reuse` is the same jail with the
# tree and the Landlock ruleset built once per loop: each call then gets a
# copy of the tree in its own mount and PID namespaces, a fresh /proc and
# a tmpfs home (what keeping a jail per policy could cost).
#
#   BINDS=25 FILTER=835 SECS=3 ROUNDS=3 bash bench/jail_floor.sh
#
# BINDS 25 + /usr + /proc + the root = the 28 mounts of a `true` tool's
# tree; FILTER is the length of glovebox's deny program with the network
# off. Compare with bench/cpu_per_call.sh run in the same window (the CPU
# a served call costs glovebox, its jail included).
source "$(dirname "$0")/lib.sh"
BINDS=${BINDS:-25}
FILTER=${FILTER:-835}
SECS=${SECS:-3}
ROUNDS=${ROUNDS:-3}
[ "$(id -u)" = 0 ] || { echo "jail_floor.sh: run as root (the floor mounts without a user namespace)" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cc -O2 -o "$OUT/jail_floor" bench/jail_floor.c
row() { # NAME JSON
  $PY -c '
import json, sys
d = json.loads(sys.argv[2])
print("| %s | %d | %s | %.0f | %.0f |" % (sys.argv[1], d["workers"], d["calls"], d["calls_per_s"], d["us_per_call_per_worker"]))
' "$1" "$2"
}
echo "| round | what | loops | calls | calls/s | µs per call per loop |"
echo "|--:|---|--:|--:|--:|--:|"
for r in $(seq "$ROUNDS"); do
  for w in 1 2; do
    echo -n "| $r "; row "bare fork+exec" "$("$OUT/jail_floor" bare 0 0 "$w" "$SECS")"
    echo -n "| $r "; row "floor: $BINDS binds, $FILTER-insn filter" "$("$OUT/jail_floor" jail "$BINDS" "$FILTER" "$w" "$SECS")"
    echo -n "| $r "; row "floor, tree built once (reuse)" "$("$OUT/jail_floor" reuse "$BINDS" "$FILTER" "$w" "$SECS")"
  done
done
