#!/usr/bin/env bash
# Runs each end-to-end driver given as an argument (they start the real processes themselves);
# prints a closing "N passed, N failed" over the drivers.
set -u
cd "$(dirname "$0")/.."
# promtool unpacked by ops/install-deps.sh, ahead of any on PATH.
export PATH="$PWD/var/tools/bin:$PATH"
pass=0; fail=0
for t in "$@"; do
  echo "== $t"
  started=$SECONDS
  if timeout 600 "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  echo "== $t: $((SECONDS - started)) s"
done
echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
