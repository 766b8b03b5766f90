#!/usr/bin/env bash
# -o FILE is kept only when the command ends well (issue 31 review pass, b): an input that
# cannot be read (exit 3) after the output began leaves the file before as it was, and
# SIGTERM or SIGINT during the run removes the temporary file the output was written to.
set -uo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0

# 1. the first input's profile is written, the second cannot be read
echo before >"$W/out.txt"
"$TK" profile -o "$W/out.txt" "$SRC/tests/data/xray/fdr-v5.xray" "$W/missing.xray" 2>/dev/null
rc=$?
if [ $rc -ne 3 ] || [ "$(cat "$W/out.txt")" != before ] || ls -a "$W" | grep -q '\.tk-'; then
	echo "FAIL: exit $rc, out.txt: $(head -c 40 "$W/out.txt"), $(ls -a "$W" | tr '\n' ' ')"
	fail=1
else
	echo "ok: an unreadable input leaves the output as it was (exit 3)"
fi

# 2. a signal while the output is written: a pprof of 10^5 nested calls takes seconds
python3 - "$W/deep.xray" 100000 <<'PY'
import struct, sys
n = int(sys.argv[2])
def rec(typ, fid, tsc):   # basic mode: enter 0, exit 1
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, 11, 77)
out = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)]
out += [rec(0, 2, 101 + i) for i in range(n)]
out += [rec(1, 2, 101 + n + i) for i in range(n)]
open(sys.argv[1], 'wb').write(b''.join(out))
PY
for sig in TERM INT; do
	rm -f "$W/p.pb.gz"
	# (a background job of a script ignores SIGINT unless told otherwise)
	( trap - INT; exec "$TK" profile -q --to pprof -o "$W/p.pb.gz" "$W/deep.xray" 2>/dev/null ) &
	pid=$!
	for _ in $(seq 1200); do
		ls -a "$W" | grep -q '^\.p\.pb\.gz\.tk-' && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	if ! ls -a "$W" | grep -q '^\.p\.pb\.gz\.tk-'; then
		echo "FAIL: SIG$sig: never saw the temporary file"
		fail=1
		wait $pid
		continue
	fi
	kill -$sig $pid
	wait $pid
	rc=$?
	left=$(ls -a "$W" | grep '\.tk-' | tr '\n' ' ')
	if [ -n "$left" ] || [ -e "$W/p.pb.gz" ]; then
		echo "FAIL: SIG$sig (exit $rc) left: $left"
		fail=1
		rm -f "$W"/.p.pb.gz.tk-*
	else
		echo "ok: SIG$sig removes the temporary file (exit $rc)"
	fi
done
exit $fail
