#!/usr/bin/env bash
# A compressed log read in order (Kanata, gem5) is decompressed on a thread of its own at -j 2 or more
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
# a gem5 O3PipeView log of 20,000 instructions (4 MB), converted to Kanata as it is read
python3 - <<'P'
with open("g.txt", "w") as f:
    for i in range(20000):
        t = 1000 * (i + 1)
        f.write(f"O3PipeView:fetch:{t}:0x{0x1000 + 4 * (i % 512):08x}:0:{i + 1}: add r{i % 8}, r2\n")
        for k, st in enumerate(("decode", "rename", "dispatch", "issue", "complete")):
            f.write(f"O3PipeView:{st}:{t + 500 * (k + 1)}\n")
        f.write(f"O3PipeView:retire:{t + 4000}:store:0\n")
P
gzip -c g.txt >g.txt.gz
head -c $(($(stat -c %s g.txt.gz) * 2 / 3)) g.txt.gz >gcut.txt.gz
fail=0
cases=0
for f in k.log.gz k.log.zst cut.log.gz cut.log.zst bad.log.gz g.txt.gz gcut.txt.gz; do
	cmds=("stats" "check" "dump" "report -o /dev/stdout" "convert --to chrome -o /dev/stdout")
	case $f in g*) cmds=("convert --to kanata -o /dev/stdout") ;; esac
	for cmd in "${cmds[@]}"; do
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
		case $f in *cut.* | bad.*)
			grep -q "offset 0x" err.1 && [ "$(cat st.1)" = 1 ] ||
				{ echo "FAIL: $cmd $f: no offset or not exit 1"; cat err.1; fail=1; } ;;
		esac
		# a line the cut went through is skipped, not read as what is left of it
		# ("1477" of the tick "14770": the gem5 clock's period would become 1)
		# (report and the timelines count skipped lines without listing them)
		case $f:$cmd in cut.log.gz:stats | cut.log.gz:check | cut.log.gz:dump | gcut.txt.gz:*)
			[ "$(zcat "$f" 2>/dev/null | tail -c 1 | od -An -c | tr -d ' ')" != '\n' ] &&
				grep -q "line cut short where the compressed data ends; skipped" out.1 err.1 ||
				{ echo "FAIL: $cmd $f: the cut line is not skipped"; cat err.1; fail=1; } ;;
		esac
		case $f in gcut.txt.gz)
			grep -q ", 500 ticks per cycle" err.1 ||
				{ echo "FAIL: $cmd $f: the clock's period is lost"; cat err.1; fail=1; } ;;
		esac
	done
done
[ $fail = 0 ] || exit 1
echo "ok: $cases runs at -j 2 and 3 match -j 1 on whole, cut and corrupt .gz and .zst logs (Kanata, gem5)"
