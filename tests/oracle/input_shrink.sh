#!/usr/bin/env bash
# An input truncated by someone else while tracekit reads it (issue 31 item 19) was SIGBUS,
# exit 135, no message. A preloaded shim truncates the file right after tracekit maps it
# (at its madvise(MADV_SEQUENTIAL)), so the reads past the new end happen every time, with
# no race: the command must name the file and the offset and exit 1.
set -euo pipefail
: "${TK:?}"
D=${DATA:-${SRC:?}/../shared/data}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat >"$W/shrink.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
int madvise(void *addr, size_t len, int advice)
{
	static int done;
	static int (*real)(void *, size_t, int);
	const char *f = getenv("SHRINK_FILE"), *sz = getenv("SHRINK_SIZE");
	if (!real)
		real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
	if (advice == MADV_SEQUENTIAL && f && sz && !done) {
		done = 1;
		if (truncate(f, atol(sz)) != 0)
			abort();
	}
	return real(addr, len, advice);
}
C
cc -shared -fPIC -o "$W/shrink.so" "$W/shrink.c" -ldl
zcat "$D/kanata/kanata-sample-2.log.gz" >"$W/big.log"
# an ASan build wants its runtime first; the shim only wraps madvise
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
fail=0
# at the default chunk sizes (the statistics' 8 MiB: read in order; the decoder's and
# dump's 1 MiB: in chunks), then in 64 KiB chunks (whose reads of the file with pread come
# back short: the same zeros and mark as the mapping's)
for chunk in "" 65536; do
	for cmd in stats check "convert --to json" report dump; do
		cp "$W/big.log" "$W/t.log"
		st=0
		TK_KANATA_CHUNK=$chunk SHRINK_FILE="$W/t.log" SHRINK_SIZE=1000000 \
			LD_PRELOAD="$W/shrink.so" "$TK" $cmd -j 2 -o /dev/null "$W/t.log" 2>"$W/err" || st=$?
		if [ $st = 1 ] && grep -q "t.log: offset 0xf4240: the file was truncated while being read" "$W/err"; then
			echo "ok: $cmd${chunk:+ in chunks of $chunk}"
		else
			echo "FAIL: $cmd${chunk:+ in chunks of $chunk}: status $st"; head -5 "$W/err"; fail=1
		fi
		[ "$(stat -c %s "$W/t.log")" = 1000000 ] || { echo "FAIL: the shim did not truncate"; fail=1; }
	done
done
[ $fail -eq 0 ] && echo "input truncated while read: all passed"
exit $fail
