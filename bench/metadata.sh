#!/usr/bin/env bash
# The metadata family in the jail's two modes (issue 18): the cost of one
# chmod and one utime (python's os.chmod / os.utime, 5000 each, mean) bare,
# in the namespaces jail (a read-write bind: the kernel alone) and in the
# namespace-free jail (each call a seccomp user notification answered by
# the supervisor), stat as the control. As nobody under bubblewrap, with
# or without user namespaces, like bench/modes.sh.
#
#   GB=path/to/glovebox bash bench/metadata.sh
#
# Prints a markdown table; nothing is rewritten.
source "$(dirname "$0")/lib.sh"
need_tools bwrap
STATE=$(mktemp -d)
chown 65534:65534 "$STATE"
trap 'rm -rf "$STATE"' EXIT
LOOP='import os,time
open("f","w").close()
def mean(f):
    t=time.perf_counter()
    for i in range(5000): f(i)
    return (time.perf_counter()-t)/5000*1e6
c=mean(lambda i: os.chmod("f", 0o644 if i%2 else 0o600))
u=mean(lambda i: os.utime("f", None))
s=mean(lambda i: os.stat("f"))
print("%.1f %.1f %.1f" % (c,u,s))'
row() {
  local mode=$1 extra=()
  [ "$mode" = namespace-free ] && extra=(--disable-userns)
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    bwrap --dev-bind / / --unshare-user "${extra[@]}" --uid 1000 --gid 1000 -- \
    env GLOVEBOX_STATE_DIR="$STATE" GB="$GB" LOOP="$LOOP" bash -c '
      d=$(mktemp -d); cd "$d"
      bare=$(python3 -c "$LOOP")
      jail=$("$GB" sandbox --write "$d" --cwd "$d" -- python3 -c "$LOOP")
      rm -rf "$d"
      echo "$bare $jail"'
}
echo "| mode | chmod bare µs | chmod jail µs | ×bare | utime bare µs | utime jail µs | ×bare | stat bare µs | stat jail µs |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
for mode in namespaces namespace-free; do
  read -r cb ub sb cj uj sj < <(row "$mode")
  python3 -c "import sys; cb,ub,sb,cj,uj,sj=map(float,sys.argv[2:]); print(f'| {sys.argv[1]} | {cb:.1f} | {cj:.1f} | {cj/cb:.1f} | {ub:.1f} | {uj:.1f} | {uj/ub:.1f} | {sb:.1f} | {sj:.1f} |')" \
    "$mode" "$cb" "$ub" "$sb" "$cj" "$uj" "$sj"
done
