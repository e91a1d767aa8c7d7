#!/usr/bin/env bash
# Runs each end-to-end driver given as an argument (they start the real processes themselves);
# prints a closing "N passed, N failed" over the drivers.
#
# Drivers that measure rates, utilisation, latency or memory run alone, one after another, with
# their output as it comes. The functional ones named in BESIDE (no figure of theirs depends on
# the machine's speed) then run two at a time, each in a network namespace of its own, so that
# the daemons' default ports and the dev broker's locks of two stacks cannot meet; each one's
# output is printed whole when it ends. That takes about a minute off each phase of `make test`.
# Namespaces need root (CI runs as root); without them, or with E2E_SERIAL=1, every driver runs
# alone.
set -u
cd "$(dirname "$0")/.."
# promtool unpacked by ops/install-deps.sh, ahead of any on PATH.
export PATH="$PWD/var/tools/bin:$PATH"
# Longest first, so the lanes end together.
BESIDE=" e2e_shards e2e_store e2e_admin e2e_security e2e_isolation e2e_log_flood e2e_cli e2e_replay \
e2e_contracts e2e_providers e2e_backlog "
LANES=2
pass=0; fail=0
failed=() # names of the drivers that failed, for the closing summary

alone() {
  local t=$1 started=$SECONDS name rc
  name=$(basename "$t")
  echo "== $t"
  timeout 600 "$t" 2>&1 | tee "$out_dir/$name.out"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$name:$rc"); fi
  echo "== $t: $((SECONDS - started)) s"
}

# A loopback of its own: the same 127.0.0.1, nothing shared with the host's or another lane's.
in_netns() {
  unshare --net sh -c 'ip link set lo up && exec "$@"' sh "$@"
}

out_dir=$(mktemp -d /tmp/sluice-e2e-out-XXXXXX)
trap 'rm -rf "$out_dir"' EXIT

lanes=0
if [ "${E2E_SERIAL:-0}" != 1 ] && in_netns true 2>/dev/null; then
  lanes=$LANES
fi

declare -A given=() # name -> path, of the drivers that run beside another
for t in "$@"; do
  if [ "$lanes" -gt 0 ] && [[ "$BESIDE" == *" $(basename "$t") "* ]]; then
    given[$(basename "$t")]=$t
  else
    alone "$t"
  fi
done
beside=()
for name in $BESIDE; do
  [ -n "${given[$name]:-}" ] && beside+=("${given[$name]}")
done

# Runs driver $1 in its own namespace; its output, status and seconds go to $out_dir.
lane() {
  local t=$1 name started=$SECONDS
  name=$(basename "$t")
  in_netns timeout 600 "$t" > "$out_dir/$name.out" 2>&1
  echo $? > "$out_dir/$name.rc"
  echo $((SECONDS - started)) > "$out_dir/$name.s"
}

report() {
  local t=$1 name
  name=$(basename "$t")
  echo "== $t (beside another driver)"
  cat "$out_dir/$name.out"
  echo "== $t: $(cat "$out_dir/$name.s") s"
  if [ "$(cat "$out_dir/$name.rc")" = 0 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); failed+=("$name:$(cat "$out_dir/$name.rc")")
  fi
}

# Reports the next lane to end (bash 5.1's wait -p names it).
reap() {
  local pid
  wait -n -p pid
  report "${running[$pid]}"
  unset "running[$pid]"
}

declare -A running=() # pid -> driver
for t in "${beside[@]}"; do
  [ "${#running[@]}" -ge "$lanes" ] && reap
  lane "$t" &
  running[$!]=$t
done
while [ "${#running[@]}" -gt 0 ]; do
  reap
done
# A log's tail is often all that is kept (CI prints its last lines): name what failed there,
# with each failed driver's failing checks and last lines.
for f in "${failed[@]}"; do
  name=${f%%:*}
  echo "== failed: $name (exit status ${f##*:}); its failed checks and last lines:"
  grep -a '\[FAIL\]' "$out_dir/$name.out" | head -20
  tail -n 5 "$out_dir/$name.out"
done
echo "e2e: $pass passed, $fail failed${failed[*]:+ (${failed[*]})}"
[ "$fail" -eq 0 ]
