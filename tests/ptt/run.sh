#!/usr/bin/env bash
# Run one .ptt case (see tests/tools/ptt.c for the format): build its trace and code with
# $PTT, then `tracekit decode` must print the expected listing and exit with the expected
# status; split at every PSB on four threads it must print the same; written again by
# `convert --to ipt` (whole and with a chunk at every PSB) it must decode without a decode
# error; and where the file
# says `libipt yes`, libipt's instruction decoder must give the same instructions and
# events (compared without what libipt does not know: disassembly, offsets, error text).
set -uo pipefail
FILE=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PTT" "$FILE" "$TMP" || exit 1
# shellcheck disable=SC2046
read -r -a ARGS <"$TMP/args"
fail=0
"$TK" decode "${ARGS[@]}" "$TMP/trace.pt" >"$TMP/out" 2>"$TMP/err"
status=$?
if [ "$status" != "$(cat "$TMP/status")" ]; then
	echo "exit status $status, expected $(cat "$TMP/status")"
	fail=1
fi
if ! cmp -s "$TMP/expected" "$TMP/out"; then
	echo "decode differs from the expected listing:"
	diff -u "$TMP/expected" "$TMP/out" | head -n 60
	fail=1
fi
TK_IPT_CHUNK=1 "$TK" decode -j 4 "${ARGS[@]}" "$TMP/trace.pt" >"$TMP/out-j4" 2>/dev/null
if ! cmp -s "$TMP/out" "$TMP/out-j4"; then
	echo "-j 4 with a chunk at every PSB differs from -j 1:"
	diff -u "$TMP/out" "$TMP/out-j4" | head -n 40
	fail=1
fi
# Written again with return compression (convert --to ipt), whole and in chunks (one at
# every PSB), the stream must decode without a decode error (what the input lost is an
# overflow there) and, where nothing was lost and no event was left out, to the same
# instructions.
grep -E '^[0-9a-f]{16} ' "$TMP/out" >"$TMP/insns"
CONVERT_ARGS=()   # decode's listing options are not convert's
for a in "${ARGS[@]}"; do
	case $a in --event:*) ;; *) CONVERT_ARGS+=("$a") ;; esac
done
for chunk in 0 1; do
	TK_IPT_CHUNK=$chunk "$TK" convert -j 2 --to ipt "${CONVERT_ARGS[@]}" -o "$TMP/re.pt" \
		"$TMP/trace.pt" 2>"$TMP/re-err"
	crc=$?
	if [ $crc -gt 1 ]; then
		echo "convert --to ipt (chunk at every PSB: $chunk) failed, exit $crc:"
		cat "$TMP/re-err"
		fail=1
	fi
	"$TK" decode "${ARGS[@]}" "$TMP/re.pt" >"$TMP/re-out" 2>/dev/null
	rm -f "$TMP/re.pt"
	if grep -q '^\[error' "$TMP/re-out"; then
		echo "the re-encoded stream (chunk at every PSB: $chunk) has a decode error:"
		cat "$TMP/re-out"
		fail=1
	elif [ "$status" = 0 ] && ! grep -q 'not in the re-encoded stream' "$TMP/re-err"; then
		grep -E '^[0-9a-f]{16} ' "$TMP/re-out" >"$TMP/re-insns"
		if ! cmp -s "$TMP/insns" "$TMP/re-insns"; then
			echo "the re-encoded stream (chunk at every PSB: $chunk) decodes to other instructions:"
			diff -u "$TMP/insns" "$TMP/re-insns" | head -n 40
			fail=1
		fi
	fi
done
if [ -f "$TMP/libipt" ]; then
	sed -E -e 's/^([0-9a-f]{16}) .*/\1/' -e 's/^\[overflow at offset 0x[0-9a-f]+\]/[overflow]/' \
		-e 's/^\[error: .*\]$/[error]/' "$TMP/expected" >"$TMP/expected-libipt"
	if ! cmp -s "$TMP/expected-libipt" "$TMP/libipt"; then
		echo "libipt differs from the expected listing:"
		diff -u "$TMP/expected-libipt" "$TMP/libipt" | head -n 60
		fail=1
	fi
fi
if [ $fail -ne 0 ]; then
	echo "--- stderr:"
	head -n 20 "$TMP/err"
fi
exit $fail
