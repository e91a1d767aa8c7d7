#!/usr/bin/env bash
# Runs the benchmarks (from the repository root). BENCH_QUICK=1 runs a small variant.
set -euo pipefail
cd "$(dirname "$0")/.."
export SLUICE_BIN=${SLUICE_BIN:-$PWD/bin}
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  bin/bench/pipeline --jobs 2000 --rate 200 --seconds 3
  bin/bench/ledger --decisions 20000
  bin/bench/scenarios --quick
  # sluice vs the cookbook baseline: one scenario, two baseline settings (about 45 s).
  bin/bench/compare --quick --scenario steady --fractions 0.75,1
else
  bin/bench/pipeline --jobs 20000 --rate 500 --seconds 10
  bin/bench/ledger --decisions 200000
  bin/bench/scenarios
  # sluice vs the cookbook baseline at 50/75/100 %: four scenarios (about 7 minutes).
  bin/bench/compare
fi
