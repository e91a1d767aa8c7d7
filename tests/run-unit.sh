#!/usr/bin/env bash
# Runs each Check unit-test binary given as an argument; prints a closing "N passed, N failed".
set -u
# promtool unpacked by ops/install-deps.sh, ahead of any on PATH.
export PATH="$(cd "$(dirname "$0")/.." && pwd)/var/tools/bin:$PATH"
pass=0; fail=0; failed=()
for t in "$@"; do
  if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$t"); fi
done
echo "unit test binaries: ${#@}; failed: ${failed[*]:-none}"
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
