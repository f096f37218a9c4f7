#!/usr/bin/env bash
# scripts/bench_all.sh refuses bad options with one line on stderr and exit status 2, before it
# builds or creates anything: an unknown workload, a bad --idle-wait, an unknown option, and a
# --before that is not a commit.
set -uo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
  local what=$1
  shift
  "$bench" --build "$tmp/build" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || [ -e "$tmp/build" ] || [ -e "$tmp/build-before" ]; then
    echo "FAIL $what: exit $rc, $lines stderr line(s), build dir $( [ -e "$tmp/build" ] && echo created || echo absent)"
    cat "$tmp/err"
    fail=1
  else
    echo "ok   $what: $(cat "$tmp/err")"
  fi
}
check "unknown workload" --only nosuch
check "negative idle wait" --idle-wait -1
check "unknown option" --frobnicate
check "--before a missing commit" --before no-such-ref-of-tokdyn
check "--before without a value" --before
exit $fail
