#!/usr/bin/env bash
# A compressed log read in order is decompressed on a thread of its own at -j 2 or more
# (tk_input_read_ahead). Every command that reads it so must give what -j 1 gives: the same
# output, messages and exit status, on whole logs and on logs cut short or corrupt, whose
# cut the thread finds blocks before the reader gets there.
set -euo pipefail
: "${TK:?}"
D=${DATA:-${SRC:?}/../shared/data}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
zcat "$D/kanata/kanata-sample-2.log.gz" >k.log   # 3.3 MB: four blocks of 1 MiB
gzip -c k.log >k.log.gz
zstd -q -c k.log >k.log.zst
size=$(stat -c %s k.log.gz)
head -c $((size * 2 / 3)) k.log.gz >cut.log.gz
head -c $(($(stat -c %s k.log.zst) * 2 / 3)) k.log.zst >cut.log.zst
# 64 bytes turned over two thirds in: zlib reads garbage until the check at the end
python3 - <<'P'
d = bytearray(open("k.log.gz", "rb").read())
at = len(d) * 2 // 3
d[at:at + 64] = bytes(b ^ 0x5A for b in d[at:at + 64])
open("bad.log.gz", "wb").write(d)
P
fail=0
cases=0
for f in k.log.gz k.log.zst cut.log.gz cut.log.zst bad.log.gz; do
	for cmd in "stats" "check" "dump" "report -o /dev/stdout" "convert --to chrome -o /dev/stdout"; do
		for j in 1 2 3; do
			set +e
			# shellcheck disable=SC2086
			"$TK" $cmd -j $j "$f" >"out.$j" 2>"err.$j"
			echo $? >"st.$j"
			set -e
		done
		for j in 2 3; do
			cases=$((cases + 1))
			if ! cmp -s out.1 "out.$j" || ! cmp -s err.1 "err.$j" || ! cmp -s st.1 "st.$j"; then
				echo "FAIL: $cmd $f: -j $j differs from -j 1 (status $(cat st.1) / $(cat "st.$j"))"
				diff err.1 "err.$j" | head -5 || true
				fail=1
			fi
		done
		# the damaged logs say where they were cut, and exit 1
		case $f in cut.* | bad.*)
			grep -q "offset 0x" err.1 && [ "$(cat st.1)" = 1 ] ||
				{ echo "FAIL: $cmd $f: no offset or not exit 1"; cat err.1; fail=1; } ;;
		esac
	done
done
[ $fail = 0 ] || exit 1
echo "ok: $cases runs at -j 2 and 3 match -j 1 on whole, cut and corrupt .gz and .zst logs"
