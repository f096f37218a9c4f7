#!/usr/bin/env bash
# scripts/output_identity.sh save never replaces or deletes a path that is not one of its own saves.
set -u
script=$1
t=$(mktemp -d "${TMPDIR:-/tmp}/tokdyn-identity-test-XXXXXX")
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# A user folder named FILE.d (no marker): refused with exit 2, its file kept.
mkdir -p "$t/a.txt.d"; echo keep > "$t/a.txt.d/user.txt"
"$script" save "$t/a.txt" --build "$t/nobuild" 2>"$t/err"; rc=$?
[ $rc -eq 2 ] || fail "user FILE.d: exit $rc, expected 2"
grep -q "not a previous save" "$t/err" || fail "user FILE.d: message $(cat "$t/err")"
[ "$(cat "$t/a.txt.d/user.txt")" = keep ] || fail "user FILE.d was touched"
# A user file named FILE: refused, kept.
echo "my notes" > "$t/b.txt"
"$script" save "$t/b.txt" --build "$t/nobuild" 2>"$t/err"; rc=$?
[ $rc -eq 2 ] || fail "user FILE: exit $rc, expected 2"
[ "$(cat "$t/b.txt")" = "my notes" ] || fail "user FILE was touched"
# A symlink named FILE.d pointing at a folder with the marker: refused, target kept.
mkdir -p "$t/target"; : > "$t/target/.tokdyn-identity"; echo keep > "$t/target/x"; ln -s "$t/target" "$t/c.txt.d"
"$script" save "$t/c.txt" --build "$t/nobuild" 2>"$t/err"; rc=$?
[ $rc -eq 2 ] || fail "symlinked FILE.d: exit $rc, expected 2"
[ -f "$t/target/x" ] || fail "symlink target was touched"
# A previous save (hash lines, marker) passes the checks (then stops: no tokdyn in --build).
printf '%064d  preset  metrics.csv\n' 0 > "$t/d.txt"; mkdir -p "$t/d.txt.d"; : > "$t/d.txt.d/.tokdyn-identity"
"$script" save "$t/d.txt" --build "$t/nobuild" 2>"$t/err"; rc=$?
grep -q "no $t/nobuild/tokdyn" "$t/err" || fail "previous save was refused: $(cat "$t/err")"
[ -f "$t/d.txt.d/.tokdyn-identity" ] || fail "previous save was removed before any work"
echo ok
