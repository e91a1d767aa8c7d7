#!/usr/bin/env bash
# Checks the operator files in ops/: Prometheus config and alert rules (promtool, unpacked by
# ops/install-deps.sh), the alert rules' unit tests, and the Grafana dashboard's JSON. Prints a closing
# "ops: N passed, N failed" and exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
# promtool unpacked by ops/install-deps.sh, ahead of any on PATH.
export PATH="$PWD/var/tools/bin:$PATH"
pass=0; fail=0; failed=()
check() {
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name"; echo "$out" | sed 's/^/     /'
  fi
}
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found (run ops/install-deps.sh)"
  echo "ops: 0 passed, 1 failed"
  exit 1
fi
check "promtool check config" promtool check config ops/prometheus/prometheus.yml
check "promtool check rules" promtool check rules ops/prometheus/sluice-alerts.yml
check "promtool test rules" promtool test rules ops/prometheus/sluice-alerts.test.yml
check "dashboard JSON" python3 -m json.tool ops/grafana/sluice-dashboard.json
echo "ops checks failed: ${failed[*]:-none}"
echo "ops: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
