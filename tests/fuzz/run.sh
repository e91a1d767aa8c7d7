#!/usr/bin/env bash
# Runs each fuzz target given (bin-fuzz/fuzz/fuzz_NAME) for FUZZ_SECONDS (default 60) on its
# corpus in build-fuzz/corpus/NAME, seeded from examples/ and tests/fixtures/ (corpus.py), with
# the dictionary corpus.py makes of the seeds' JSON keys and header names.
# Prints libFuzzer's final figures per target and a closing "N passed, N failed"; a crash, a
# broken contract, a leak or an input slower than FUZZ_TIMEOUT seconds fails its target, and its
# input is saved as build-fuzz/findings/NAME/crash-* (reproduce: bin-fuzz/fuzz/fuzz_NAME FILE).
set -u
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
timeout_s=${FUZZ_TIMEOUT:-10}
out=build-fuzz
python3 tests/fuzz/corpus.py "$out/corpus" >/dev/null || exit 1
pass=0; fail=0; failed=()
for bin in "$@"; do
  name=$(basename "$bin"); name=${name#fuzz_}
  mkdir -p "$out/corpus/$name" "$out/findings/$name" "$out/logs"
  log="$out/logs/$name.log"
  # -rss_limit_mb: a target that needs more than 2 GiB is a finding too.
  dict=()
  [ -s "$out/corpus/$name.dict" ] && dict=(-dict="$out/corpus/$name.dict")
  if "$bin" -max_total_time="$seconds" -timeout="$timeout_s" -rss_limit_mb=2048 "${dict[@]}" \
       -print_final_stats=1 -artifact_prefix="$out/findings/$name/" \
       "$out/corpus/$name" >"$log" 2>&1; then
    pass=$((pass + 1)); verdict=ok
  else
    fail=$((fail + 1)); failed+=("$name"); verdict=FAILED
  fi
  # The last status line (executions, cov, ft, corpus) and the totals.
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  printf 'fuzz %-10s %-6s %ss  execs %s  %s\n' "$name" "$verdict" "$seconds" "${runs:-?}" \
    "$(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+')"
  [ "$verdict" = ok ] || tail -30 "$log"
done
echo "fuzz targets: $#; failed: ${failed[*]:-none}"
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
