#!/usr/bin/env bash
# Runs the benchmarks (from the repository root), all of them or those named:
#   bench/run.sh                      everything (about 25 minutes)
#   bench/run.sh storm503 backfill    one compare scenario and the backfill
#   BENCH_QUICK=1 bench/run.sh        the small variant CI runs (about 2 minutes)
# Names: pipeline, sign, ledger, store, seal, queued, takeover, shards, scenarios, scenarios:<name> (equal, weights, noisy, guarantee,
# shapes, shapes_itpm, shapes_weights, shapes_weights_rev, noisy100, noisy1000), backfill,
# compare (all its scenarios), or one compare scenario: steady, burst, noisy, storm, storm503,
# longctx, maxout, daily, stream, bigjobs. `make bench SCENARIO="..."` passes the names here.
set -euo pipefail
cd "$(dirname "$0")/.."
export SLUICE_BIN=${SLUICE_BIN:-$PWD/bin}
quick=${BENCH_QUICK:-0}
compare_scenarios=" steady burst noisy storm storm503 longctx maxout daily stream bigjobs "
scenarios_names=" equal weights noisy guarantee shapes shapes_itpm shapes_weights shapes_weights_rev noisy100 noisy1000 "

run_one() {
  local name=$1
  echo "== bench: $name"
  case "$name" in
    pipeline)
      if [ "$quick" = 1 ]; then bin/bench/pipeline --jobs 2000 --rate 200 --seconds 3
      else bin/bench/pipeline --jobs 20000 --rate 500 --seconds 10; fi ;;
    sign)
      if [ "$quick" = 1 ]; then bin/bench/sign_bench --seconds 0.05 --trials 1
      else bin/bench/sign_bench --seconds 0.5 --trials 3; fi ;;
    ledger)
      if [ "$quick" = 1 ]; then bin/bench/ledger --decisions 20000
      else bin/bench/ledger --decisions 200000; fi ;;
    store)
      if [ "$quick" = 1 ]; then bin/bench/store --seconds 0.5 --trials 1
      else bin/bench/store --seconds 2 --trials 3; fi ;;
    seal)
      nice -n 10 bin/bench/seal ;;
    scenarios)
      if [ "$quick" = 1 ]; then bin/bench/scenarios --quick; else bin/bench/scenarios; fi ;;
    scenarios:*)
      if [[ "$scenarios_names" != *" ${name#scenarios:} "* ]]; then
        echo "bench/run.sh: unknown scenario \"${name#scenarios:}\" of bench/scenarios" >&2
        echo "known:$scenarios_names" >&2
        exit 2
      fi
      if [ "$quick" = 1 ]; then bin/bench/scenarios --quick --scenario "${name#scenarios:}"
      else bin/bench/scenarios --scenario "${name#scenarios:}"; fi ;;
    queued)
      if [ "$quick" = 1 ]; then bin/bench/queued --jobs 20000; else bin/bench/queued; fi ;;
    takeover)
      if [ "$quick" = 1 ]; then bin/bench/takeover --quick
      else bin/bench/takeover && bin/bench/takeover --keep-db; fi ;;
    shards)
      if [ "$quick" = 1 ]; then bin/bench/shards --quick --schedulers 1,2
      else bin/bench/shards; fi ;;
    backfill)
      if [ "$quick" = 1 ]; then bin/bench/backfill --quick; else bin/bench/backfill; fi ;;
    compare)
      if [ "$quick" = 1 ]; then bin/bench/compare --quick; else bin/bench/compare; fi ;;
    *)
      if [[ "$compare_scenarios" != *" $name "* ]]; then
        echo "bench/run.sh: unknown benchmark \"$name\"" >&2
        echo "known: pipeline sign ledger store seal queued takeover shards scenarios scenarios:<name> backfill compare$compare_scenarios" >&2
        exit 2
      fi
      if [ "$quick" = 1 ]; then bin/bench/compare --quick --scenario "$name"
      else bin/bench/compare --scenario "$name"; fi ;;
  esac
}

if [ $# -gt 0 ]; then
  for name in "$@"; do run_one "$name"; done
elif [ "$quick" = 1 ]; then
  # every program once, small: about 2 minutes
  run_one pipeline
  run_one sign
  run_one ledger
  run_one store
  run_one seal
  run_one queued
  run_one takeover
  run_one shards
  run_one scenarios:noisy
  # sluice vs the cookbook baseline on one scenario at two settings, and the streaming one.
  echo "== bench: compare steady (quick, cookbook at 75 and 100 %)"
  bin/bench/compare --quick --scenario steady --fractions 0.75,1
  run_one stream
  run_one backfill
else
  run_one pipeline
  run_one sign
  run_one ledger
  run_one store
  run_one seal
  run_one queued
  run_one takeover
  run_one shards
  run_one scenarios
  run_one compare
  run_one backfill
fi
