#!/usr/bin/env bash
# Compare `tracekit decode` and `tracekit dump` with the expected listings of libipt's own
# test corpus (libipt's test/src/*.ptt, compiled by its pttc). Not part of the suite: it
# needs a libipt source tree (fetch github:intel/libipt) and yasm, which pttc assembles
# the cases with. A maintainer's check of exactness, whose findings become our own .ptt
# cases in tests/ptt/.
#
#   tests/tools/libipt-corpus.sh LIBIPT_SRC TRACEKIT [WORKDIR]
#
# Prints SAME/DIFF per case and for each tool a count, with the differences in
# WORKDIR/decode.diff and WORKDIR/dump.diff. Normalised away: what only ptxed's newer
# formats change ([disabled] for [async disabled], [interrupt] without addresses, power
# events' punctuation, error texts and offsets, [exec mode: 64-bit] at [enabled],
# speculative '?' marks, spacing).
# Cases asking for options tracekit does not have (sideband, --event:tick and :time,
# --block:*, --stat:*) are skipped; decode has ptxed's --event:iflags, --event:ip,
# --filter:addrN_* and --raw, dump ptdump's --lastip, --no-offset, --exec-mode, --no-sync,
# --raw (--raw-bytes), its time columns and timing parameters.
set -uo pipefail
SRC=$(realpath "${1:?libipt source tree}")
TK=$(realpath "${2:?tracekit binary}")
WORK=${3:-$(mktemp -d)}
command -v yasm >/dev/null || { echo "libipt-corpus: pttc needs yasm (apt-get install yasm)" >&2; exit 2; }
mkdir -p "$WORK"
if [ ! -x "$WORK/build/bin/pttc" ]; then
	cmake -S "$SRC" -B "$WORK/build" -DPTTC=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
		cmake --build "$WORK/build" --target pttc -j "$(nproc)" >/dev/null ||
		{ echo "libipt-corpus: building pttc failed" >&2; exit 2; }
fi
PTTC=$WORK/build/bin/pttc
cd "$WORK" || exit 2
: >decode.diff
: >dump.diff
declare -A count
# TOOL's verdict on case BASE: SKIP, or ours against theirs (SAME, or DIFF into TOOL.diff)
judge() {
	local tool=$1 base=$2 result=$3
	if [ "$result" != SKIP ]; then
		result=SAME
		if ! cmp -s ours theirs; then
			result=DIFF
			{ echo "=== $base"; diff theirs ours; } >>"$tool.diff"
		fi
	fi
	echo "$tool $result $base"
	count[$tool-$result]=$((${count[$tool-$result]:-0} + 1))
}
# ptxed's options of case BASE (code at ORG) as decode takes them: XRAW, the case's code,
# XFLAGS (a --raw of the case's file names case.bin here), and XREST, those decode does
# not have. Decode resyncs as --resync-on-error does.
decode_opts() {
	local base=$1
	xraw="case.bin:$2"
	xflags=()
	xrest=
	shift 2
	while [ $# -gt 0 ]; do
		case $1 in
		--resync-on-error) ;;
		--event:iflags | --event:ip) xflags+=("$1") ;;
		--filter:addr[0-3]_cfg | --filter:addr[0-3]_a | --filter:addr[0-3]_b)
			xflags+=("$1" "$2")
			shift ;;
		--raw)   # on top of the case's code, as libipt's harness runs ptxed
			xflags+=(--raw "${2/#$base.bin:/case.bin:}")
			shift ;;
		*) xrest="$xrest $1" ;;
		esac
		shift
	done
}
for ptt in "$SRC"/test/src/*.ptt; do
	base=$(basename "$ptt" .ptt)
	cp "$ptt" case.ptt
	rm -f case-*.exp case.pt case.bin
	if ! "$PTTC" case.ptt >/dev/null 2>&1; then
		echo "PTTC-FAIL $base"
		continue
	fi
	org=$(sed -n 's/^[ \t]*org[ \t]*\(0x[0-9a-fA-F]*\).*/\1/p' "$ptt" | head -n 1)
	xopts=$(sed -n 's/[ \t]*;[ \t]*opt:ptxed[ \t][ \t]*\(.*\)[ \t]*/\1/p' "$ptt")
	dopts=$(sed -n 's/[ \t]*;[ \t]*opt:ptdump[ \t][ \t]*\(.*\)[ \t]*/\1/p' "$ptt")
	# the processor a case is for (its first `cpu` line; libipt's harness runs each)
	cpu=$(sed -n 's/^[ \t]*;[ \t]*cpu[ \t][ \t]*\([0-9][0-9]*\/[0-9][0-9]*\).*/\1/p' "$ptt" | head -n 1)
	if [ -f case-ptxed.exp ]; then
		# shellcheck disable=SC2086
		decode_opts "$base" "$org" $xopts
		if [ -n "$xrest" ]; then
			judge decode "$base" SKIP
		else
			"$TK" decode --no-disasm "${xflags[@]}" ${cpu:+--cpu "$cpu"} --raw "$xraw" case.pt 2>/dev/null |
				sed -E -e 's/^\[overflow at offset 0x[0-9a-f]+\]/[overflow]/' \
					-e 's/^\[error: .*\]$/[error]/' -e 's/^\[async disabled/[disabled/' \
					-e 's/^\[interrupt: .*\]/[interrupt]/' \
					-e 's/^\[mwait: ([^,]+), ([^],]+)/[mwait \1 \2/' \
					-e 's/^\[pwre: ([^],]+), hw\]/[pwre \1 hw]/' \
					-e 's/^\[pwre: ([^]]+)\]/[pwre \1]/' \
					-e 's/^\[pwrx: (.*)\(deepest (c[0-9]+)\)\]/[pwrx \1(\2)]/' |
				grep -v '^\[exec mode: 64-bit[],]' >ours
			sed -E -e 's/^\[[0-9a-f]+(, [0-9a-f]+)?: [a-z ]*error: .*\]$/[error]/' \
				-e 's/^\[interrupt, from: .*\]$/[interrupt]/' \
				-e 's/^\? //' -e 's/ *#.*$//' case-ptxed.exp | grep -v '^$' |
				grep -v '^\[exec mode: 64-bit[],]' >theirs
			judge decode "$base" compared
		fi
	fi
	if [ -f case-ptdump.exp ]; then
		# ptdump's options that dump has (--raw is dump's --raw-bytes; the timing
		# parameters' numbers taken out first)
		if [ -n "$(echo "$dopts" | sed -E 's/--(mtc-freq|nom-freq|cpuid-0x15\.e[ab]x) +[0-9a-fx]+//g' |
			tr ' ' '\n' | grep -v -x -e '' -e --lastip -e --no-offset -e --raw -e --exec-mode \
				-e --no-sync -e --time -e --tcal -e --time-delta -e --no-tcal \
				-e --no-wall-clock -e --keep-tcal-on-ovf -e --no-cyc -e --no-pad \
				-e --no-timing)" ]; then
			judge dump "$base" SKIP
		else
			dopts=$(echo "$dopts" | sed 's/--raw/--raw-bytes/')
			# shellcheck disable=SC2086  # the options split at spaces
			"$TK" dump ${cpu:+--cpu "$cpu"} $dopts case.pt 2>/dev/null | tr -s ' \t' '  ' | sed -E 's/ +$//' >ours
			tr -s ' \t' '  ' <case-ptdump.exp | sed -E 's/ +$//' | grep -v '^$' >theirs
			judge dump "$base" compared
		fi
	fi
done
for tool in decode dump; do
	echo "$tool: ${count[$tool-SAME]:-0} same, ${count[$tool-DIFF]:-0} differ," \
		"${count[$tool-SKIP]:-0} skipped (differences in $WORK/$tool.diff)"
done
