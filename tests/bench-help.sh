#!/usr/bin/env bash
# Checks that every benchmark program answers --help without running anything: each program
# given as an argument (default: every bin/bench/*) must, within 5 s, exit 0 and print its
# usage on stdout, and must refuse an unknown option with exit status 2 and a message on
# stderr. Prints a closing "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- bin/bench/*; fi
pass=0; fail=0; failed=()
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# Runs "$@" for at most 5 s with stdout and stderr in $out and $err; returns its status (124
# on the time limit). timeout puts it in a process group of its own (whose id is timeout's
# pid); whatever is left in that group afterwards (a stack a program started instead of
# answering) is killed, so a failing program leaves nothing behind.
run_limited() {
  timeout -k 2 5 "$@" >"$out" 2>"$err" &
  local tpid=$! status
  wait "$tpid"
  status=$?
  kill -KILL -- "-$tpid" 2>/dev/null
  return "$status"
}
for p in "$@"; do
  why=""
  if [ ! -x "$p" ]; then
    why="not an executable"
  else
    run_limited "$p" --help
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then why="--help took longer than 5 s"
    elif [ "$rc" -ne 0 ]; then why="--help exited $rc"
    elif [ ! -s "$out" ]; then why="--help printed nothing on stdout"
    else
      run_limited "$p" --no-such-option
      rc=$?
      if [ "$rc" -ne 2 ]; then why="an unknown option exited $rc, not 2"
      elif [ ! -s "$err" ]; then why="an unknown option got no message on stderr"
      fi
    fi
  fi
  if [ -z "$why" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); failed+=("$p")
    echo "FAIL $p: $why"
  fi
done
echo "bench programs: $#; failed: ${failed[*]:-none}"
echo "bench-help: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
