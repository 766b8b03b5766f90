#!/usr/bin/env bash
# record -o naming the program it runs (or a hard link to it) is refused with exit 2 and
# leaves the program as it was (before, --btrace removed it first and the run failed with
# exit 3, the program gone). --xray and --btrace both.
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf 'int main(void) { return 0; }\n' >"$W/p.c"
cc -O1 -o "$W/prog" "$W/p.c"
cp "$W/prog" "$W/orig"
ln "$W/prog" "$W/link"
fail=0
for how in --btrace --xray; do
	for o in "$W/prog" "$W/link"; do
		rc=0
		"$TK" record $how -o "$o" -- "$W/prog" >/dev/null 2>"$W/err" || rc=$?
		if [ $rc -ne 2 ] || ! grep -q 'names the program' "$W/err" || ! cmp -s "$W/prog" "$W/orig"; then
			echo "FAIL: record $how -o $(basename "$o"): exit $rc"; cat "$W/err"; fail=1
		else
			echo "ok: record $how -o $(basename "$o") refused, program kept"
		fi
	done
done
[ $fail -eq 0 ] && echo "record output: all passed"
exit $fail
