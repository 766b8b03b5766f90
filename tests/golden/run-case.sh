#!/usr/bin/env bash
# Run one golden case: DIR/cmd is a shell command (it may use $TK, the tracekit binary;
# $SRC, the source tree; $DATA, ../shared/data; $CASE, this directory; $TMP, a scratch
# directory). Its stdout must equal DIR/expected byte for byte, its exit status
# DIR/expected_status (default 0), and every line of DIR/expected_stderr must occur in its
# stderr (a substring check: messages may carry more detail).
set -uo pipefail
CASE=$(cd "$1" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export CASE TMP
cd "$CASE"
bash "$CASE/cmd" >"$TMP/.stdout" 2>"$TMP/.stderr"
status=$?
want_status=0
[ -f "$CASE/expected_status" ] && want_status=$(cat "$CASE/expected_status")
fail=0
if [ "$status" != "$want_status" ]; then
	echo "exit status $status, expected $want_status"
	fail=1
fi
if [ -f "$CASE/expected" ] && ! cmp -s "$TMP/.stdout" "$CASE/expected"; then
	echo "stdout differs from $CASE/expected:"
	diff -u "$CASE/expected" "$TMP/.stdout" | head -n 40
	fail=1
fi
if [ -f "$CASE/expected_stderr" ]; then
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		if ! grep -qF -- "$line" "$TMP/.stderr"; then
			echo "stderr lacks: $line"
			fail=1
		fi
	done <"$CASE/expected_stderr"
fi
if [ $fail -ne 0 ]; then
	echo "--- stderr:"
	head -n 20 "$TMP/.stderr"
fi
exit $fail
