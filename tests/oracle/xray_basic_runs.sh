#!/usr/bin/env bash
# A basic-mode XRay log whose two threads take turns record by record: 120,000 runs of one
# record each. Its pages used to be given back run by run (a madvise, and a TLB flush on
# every CPU, per 32 bytes: 38 MB took 33 s in info, 82 s in profile) and the YAML in blocks
# kept every run with arrays of its own (561 MB). Checked: the same output at -j 1 and -j 2
# for info, the YAML and the timeline; the log's pages given back in a few dozen calls, not
# one per run; the YAML at -j 2 within a few times the log's size in memory.
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W/turns.xray" <<'PY'
import struct, sys
def rec(typ, fid, tsc, tid):
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, tid, 77)
out, t = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)], 100
for i in range(30000):
    for typ in (0, 1):
        for tid in (11, 12):
            out.append(rec(typ, 1 + i % 7, t, tid))
            t += 3
open(sys.argv[1], 'wb').write(b''.join(out))
PY
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
cd "$W"
for j in 1 2; do
	"$TK" info -j $j turns.xray >info$j.out
	/usr/bin/time -f %M -o rss$j "$TK" convert --to xray-yaml -j $j -o yaml$j turns.xray
	"$TK" convert --to perfetto -j $j -o tl$j.pftrace turns.xray
done
check "info: the same at -j 1 and 2" "cmp -s info1.out info2.out && grep -q 'records: *120000' info1.out"
check "YAML: the same at -j 1 and 2" "cmp -s yaml1 yaml2 && [ \$(grep -c 'kind: function-' yaml1) = 120000 ]"
check "timeline: the same at -j 1 and 2" "cmp -s tl1.pftrace tl2.pftrace"
# peak memory (KiB) against -j 1's, which holds a run at a time (a sanitizer build's own
# memory is in both)
check "YAML -j 2: memory within twice -j 1's ($(cat rss1) / $(cat rss2) KiB)" \
	"[ \$(cat rss2) -lt \$((2 * \$(cat rss1))) ]"
if command -v strace >/dev/null; then
	for c in "info -j 2" "profile -j 2 -o /dev/null" "convert --to xray-yaml -j 1 -o /dev/null"; do
		# (LeakSanitizer cannot run under ptrace; $c split at spaces on purpose)
		# shellcheck disable=SC2086
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
			strace -f -o trace.out -e trace=madvise "$TK" $c turns.xray >/dev/null
		n=$(grep -c 'MADV_DONTNEED' trace.out || true)
		check "$c: the log given back in a few calls ($n), not per run" "[ $n -lt 200 ]"
	done
else
	echo "FAIL: strace is missing (scripts/install-deps.sh installs it)"
	fail=1
fi
[ $fail -eq 0 ] && echo "xray basic runs: all passed"
exit $fail
