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

# ops/stack, in a scratch copy whose sluice-devkafka fails at start as a missing time zone would:
# `up` must fail at once and show the end of that process's log (its last 20 lines, not more).
stack_shows_the_log() {
  local dir rc=0 out
  dir=$(mktemp -d)
  mkdir -p "$dir/ops" "$dir/bin"
  cp ops/stack "$dir/ops/stack"
  for b in sluice-sim sluice-scheduler sluice-ingest sluice-dispatcher sluice; do
    printf '#!/bin/sh\nsleep 30\n' >"$dir/bin/$b"
  done
  cat >"$dir/bin/sluice-devkafka" <<'SH'
#!/bin/sh
for i in $(seq 1 25); do echo "startup line $i"; done
echo '{"level":"error","msg":"cannot load time zone Europe/Atlantis"}' >&2
exit 2
SH
  chmod +x "$dir"/bin/*
  out=$(cd "$dir" && timeout 15 ops/stack up 2>&1) || rc=$?
  rm -rf "$dir"
  [ "$rc" -ne 0 ] || { echo "ops/stack up succeeded"; return 1; }
  echo "$out" | grep -q "devkafka exited before it came up" || { echo "$out"; return 1; }
  echo "$out" | grep -q "cannot load time zone Europe/Atlantis" || { echo "$out"; return 1; }
  echo "$out" | grep -q "startup line 7$" || { echo "$out"; return 1; }
  if echo "$out" | grep -q "startup line 6$"; then echo "$out"; return 1; fi
}
check "ops/stack shows the log of a process that did not come up" stack_shows_the_log
# SLUICE_SCHEDULERS=3 ops/stack up, in a scratch copy with stand-in binaries: three schedulers
# start, each on a config of its own (sharded, in a group, its own database, ports and instance
# name), ingest and the dispatcher on the fleet's (sharded too); a plain `down` stops them all.
stack_runs_shards() {
  local dir rc=0 out
  dir=$(mktemp -d)
  mkdir -p "$dir/ops" "$dir/bin" "$dir/examples" "$dir/var"
  cp ops/stack "$dir/ops/stack"
  cp examples/sluice.json "$dir/examples/sluice.json"
  for b in sluice-sim sluice-scheduler sluice-ingest sluice-dispatcher sluice; do
    cat >"$dir/bin/$b" <<'SH'
#!/bin/sh
echo "$0 $*" >>var/started
touch var/dispatch.pub; echo key >var/dispatch.pub
exec sleep 30
SH
  done
  cat >"$dir/bin/sluice-devkafka" <<'SH'
#!/bin/sh
echo 127.0.0.1:1 >var/devkafka.bootstrap
exec sleep 30
SH
  printf '#!/bin/sh\nexit 0\n' >"$dir/bin/curl"
  chmod +x "$dir"/bin/*
  out=$(cd "$dir" && PATH="$dir/bin:$PATH" SLUICE_SCHEDULERS=3 timeout 30 ops/stack up 2>&1) || rc=$?
  local started configs down_out
  started=$(cat "$dir/var/started" 2>/dev/null)
  configs=$(cd "$dir" && python3 - <<'PY'
import json
seen = set()
for i in range(3):
    c = json.load(open(f"var/shards/scheduler-{i}.json"))
    s, k = c["scheduler"], c["kafka"]
    assert s["sharded"] is True and k["membership"] == "group", (s, k)
    seen.add((s["db"], s["metrics_listen"], s["admin_listen"], k["instance"]))
assert len(seen) == 3, seen
assert len({x for t in seen for x in t}) == 12, seen
assert json.load(open("var/shards/fleet.json"))["scheduler"]["sharded"] is True
print("ok")
PY
  ) || configs="bad configs"
  down_out=$(cd "$dir" && timeout 60 ops/stack down 2>&1 && ops/stack status 2>&1)
  rm -rf "$dir"
  [ "$rc" -eq 0 ] || { echo "up failed ($rc): $out"; return 1; }
  for i in 0 1 2; do
    echo "$started" | grep -q "sluice-scheduler --config var/shards/scheduler-$i.json" ||
      { echo "scheduler-$i not started: $started"; return 1; }
  done
  echo "$started" | grep -q "sluice-ingest --config var/shards/fleet.json" || { echo "$started"; return 1; }
  echo "$started" | grep -q "sluice-dispatcher --config var/shards/fleet.json" || { echo "$started"; return 1; }
  [ "$configs" = ok ] || { echo "$configs"; return 1; }
  if echo "$down_out" | grep -q running; then echo "$down_out"; return 1; fi
}
check "ops/stack runs several sharded schedulers (SLUICE_SCHEDULERS)" stack_runs_shards
echo "ops checks failed: ${failed[*]:-none}"
echo "ops: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
