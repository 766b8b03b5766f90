#!/usr/bin/env bash
# Intel PT instruction flow: tracekit decode/profile against libipt's block decoder
# (bench/ipt-blk.c: pt_blk_next with an image section cache, as ptxed --block-decoder) on
# traces of at least MBYTES MB.
# Inputs (docs/PERFORMANCE.md, section "Intel PT flow"):
#   libc      real program over libc: bench/ipt-flow-libc.c (snprintf, strtod, qsort with
#             strcmp, bsearch, malloc), recorded with `tracekit record --btrace --module main
#             --module libc.so.6` (90% of its instructions are libc's)
#   llvm-O2   real work inside a large library: libLLVM's O2 pipeline (bench/ipt-flow-llvm.c)
#             on the IR of lib/flow/walk.c as of commit $LLVM_INPUT_COMMIT (pinned: the
#             input must not change when walk.c does), recorded with `--module libLLVM`
#   gzip      real program: `gzip -9` of the first 200 KiB of libc.so.6, recorded in gzip's
#             own code (the deflate loops)
#   libc-walk stress case: a random walk over all of libc (bench/ipt-flow-gen.c,
#             tests/oracle/ptgen.h: 50% taken TNTs, random indirect targets, a system call
#             every ~20 instructions)
#   llvm-walk stress case: the same random walk over libc and libLLVM
# Recorded traces are converted with `tracekit convert --to ipt`, which writes what the
# processor would (return compression).
# A recorded run is repeated end to end (each copy starts with a PSB) up to MBYTES, as a
# longer run of the same program would be. Recording is slow (every branch is emulated:
# minutes), so the recorded traces are kept in $BENCH_CACHE (default build/bench-ipt-flow),
# named by a hash of the recorded program's input files: a changed input is recorded again.
# Besides the medians of each command's runs, the one-core ratios to pt_blk are measured
# in interleaved rounds (pt_blk and tracekit one right after the other, every other round
# tracekit first: bench_interleaved_ratio), which this machine's drifting speed does not
# bias. "profile's walk alone" is bench/ipt-walk-floor.c: profile's decoding (count mode)
# with its events thrown away, the least `profile -j 1` can take whatever its builder costs.
# usage: bench/ipt-flow.sh [MBYTES]   (env BENCH_RUNS=N, default 5; BENCH_CASES="libc llvm-O2
#        gzip libc-walk llvm-walk" to choose)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-100}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
BUILD=$SRC/build
CACHE=${BENCH_CACHE:-$BUILD/bench-ipt-flow}
CASES=${BENCH_CASES:-libc llvm-O2 gzip libc-walk llvm-walk}
LLVM_INPUT_COMMIT=603d209
# The text output (gigabytes) goes to a file on disk, as a user's would: past 64 MiB
# tracekit writes it with direct I/O, which costs less than a tmpfs file's page
# allocation (BENCH_OUTDIR to choose another place)
OUTDIR=${BENCH_OUTDIR:-$W}
mkdir -p "$CACHE"
LIBS=$TK_STATIC_LIBS
gcc -O2 -o "$W/gen" "$SRC/bench/ipt-flow-gen.c" -I"$SRC/tests" -I"$SRC/lib" \
	-I"$SRC/include" "$BUILD/libtracekit.a" $LIBS
gcc -O2 -o "$W/blk" "$SRC/bench/ipt-blk.c" -lipt -lelf
gcc -O2 -o "$W/floor" "$SRC/bench/ipt-walk-floor.c" -I"$SRC/include" "$BUILD/libtracekit.a" $LIBS
LLVM=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-1[0-9].so.1 2>/dev/null | tail -n 1 || true)

# run_case NAME PT ARGS NODIS_PT: NODIS_PT is a smaller input for the text output (17
# bytes per instruction: a 100 MB trace of a real program would print tens of GB)
run_case() {
	local name=$1 pt=$2 args=$3 npt=$4
	local insns
	insns=$("$TK" decode --stat -j 1 $args "$pt" | awk '/^insn:/ {print $2}')
	local blk_insns
	blk_insns=$("$W/blk" "$pt" $args | awk '/^insn:/ {print $2}')
	local t_blk t_stat1 t_stat2 t_prof1 t_prof2 t_nodis1 t_nodis2 t_null1 t_null2
	t_blk=$(bench_time "$W/blk" "$pt" $args)
	t_stat1=$(bench_time "$TK" decode --stat -j 1 $args "$pt")
	t_stat2=$(bench_time "$TK" decode --stat -j 2 $args "$pt")
	t_prof1=$(bench_time "$TK" profile -j 1 $args "$pt")
	t_prof2=$(bench_time "$TK" profile -j 2 $args "$pt")
	# profile's decoding with its events thrown away: the least profile -j 1 can take
	local t_floor
	t_floor=$(bench_time "$W/floor" "$pt" $args)
	local ninsns
	ninsns=$("$TK" decode --stat -j 1 $args "$npt" | awk '/^insn:/ {print $2}' || true)
	t_nodis1=$(bench_time "$TK" decode --no-disasm -j 1 -o "$OUTDIR/out.txt" $args "$npt")
	t_nodis2=$(bench_time "$TK" decode --no-disasm -j 2 -o "$OUTDIR/out.txt" $args "$npt")
	rm -f "$OUTDIR/out.txt"
	# the same text into /dev/null: what decoding and formatting scale to without the disk
	t_null1=$(bench_time "$TK" decode --no-disasm -j 1 -o /dev/null $args "$npt")
	t_null2=$(bench_time "$TK" decode --no-disasm -j 2 -o /dev/null $args "$npt")
	local mem_blk mem_tk
	mem_blk=$(bench_peak_kb "$W/blk" "$pt" $args)
	mem_tk=$(bench_peak_kb "$TK" decode --stat -j 2 $args "$pt")
	echo "== $name: $(stat -c %s "$pt") bytes, $insns instructions (pt_blk: $blk_insns)"
	printf '%-36s %8s s\n' "libipt pt_blk_next" "$t_blk"
	printf '%-36s %8s s  %sx pt_blk\n' "tracekit decode --stat -j 1" "$t_stat1" "$(bench_ratio "$t_blk" "$t_stat1")"
	printf '%-36s %8s s  %sx -j 1\n' "tracekit decode --stat -j 2" "$t_stat2" "$(bench_ratio "$t_stat1" "$t_stat2")"
	printf '%-36s %8s s  %sx pt_blk\n' "tracekit profile -j 1" "$t_prof1" "$(bench_ratio "$t_blk" "$t_prof1")"
	printf '%-36s %8s s  %sx -j 1\n' "tracekit profile -j 2" "$t_prof2" "$(bench_ratio "$t_prof1" "$t_prof2")"
	printf '%-36s %8s s  %sx pt_blk\n' "profile's walk alone (floor)" "$t_floor" "$(bench_ratio "$t_blk" "$t_floor")"
	printf '%-36s %8s   %sx pt_blk\n' "interleaved rounds: decode --stat -j 1" "" \
		"$(bench_interleaved_ratio "$W/blk $pt $args" "$TK decode --stat -j 1 $args $pt")"
	printf '%-36s %8s   %sx pt_blk\n' "interleaved rounds: profile -j 1" "" \
		"$(bench_interleaved_ratio "$W/blk $pt $args" "$TK profile -j 1 $args $pt")"
	echo "text output: $(stat -c %s "$npt") bytes of the trace, $ninsns instructions, into $OUTDIR"
	printf '%-36s %8s s  %s M insn/s (disk-bound)\n' "tracekit decode --no-disasm -j 1 -o F" \
		"$t_nodis1" "$(echo "scale=1; $ninsns / $t_nodis1 / 1000000" | bc -l)"
	printf '%-36s %8s s  %s M insn/s, %sx -j 1 (disk-bound)\n' \
		"tracekit decode --no-disasm -j 2 -o F" \
		"$t_nodis2" "$(echo "scale=1; $ninsns / $t_nodis2 / 1000000" | bc -l)" \
		"$(bench_ratio "$t_nodis1" "$t_nodis2")"
	printf '%-36s %8s s  %s M insn/s\n' "tracekit decode --no-disasm -j 1 >null" "$t_null1" \
		"$(echo "scale=1; $ninsns / $t_null1 / 1000000" | bc -l)"
	printf '%-36s %8s s  %s M insn/s, %sx -j 1\n' "tracekit decode --no-disasm -j 2 >null" \
		"$t_null2" "$(echo "scale=1; $ninsns / $t_null2 / 1000000" | bc -l)" \
		"$(bench_ratio "$t_null1" "$t_null2")"
	echo "peak memory: pt_blk ${mem_blk} KiB, tracekit -j 2 ${mem_tk} KiB"
}

gen_case() {
	local name=$1 lib=${2:-}
	"$W/gen" "$W/$name.pt" "$MB" $lib >"$W/$name.args" 2>"$W/$name.gen"
	# text: the first 30 MiB (the generator puts a PSB every few KiB)
	head -c $((30 << 20)) "$W/$name.pt" >"$W/$name.head.pt"
	run_case "$name (random walk)" "$W/$name.pt" "$(tr '\n' ' ' <"$W/$name.args")" \
		"$W/$name.head.pt"
}

# record_case NAME "MODULE..." CMD...: record CMD once (the .tkbt is cached), convert it to
# the raw PT a processor would write (return compression: a return to the address its call
# pushed is a TNT bit, as with perf's default), then repeat that PT up to MB
record_case() {
	local name=$1 mods=() m
	for m in $2; do mods+=(--module "$m"); done
	shift 2
	# the data files in $W the command reads (its input, not the program) name the recording
	local a key
	key=$(for a in "$@"; do if [[ $a == "$W"/* && -f $a && ! -x $a ]]; then cat "$a"; fi; done |
		md5sum | cut -c1-12)
	local c=$CACHE/$name-$key
	if [ ! -s "$c.tkbt" ] || [ ! -s "$c.args" ]; then
		echo "recording $name (slow: every branch is emulated) ..." >&2
		(cd "$W" && "$TK" record --btrace -o "$c.tkbt" "${mods[@]}" -- "$@" >/dev/null) ||
			[ $? -eq 1 ]
		"$TK" info "$c.tkbt" | awk '$1 == "module" {print "--elf " $2 ":" $(NF - 2)}' >"$c.args"
		"$TK" info "$c.tkbt" | sed 's/^/  /' >"$c.info"
	fi
	"$TK" convert --to ipt -o "$W/$name.one.pt" "$c.tkbt"
	local one=$W/$name.one.pt
	local n=$(( (MB * 1048576 + $(stat -c %s "$one") - 1) / $(stat -c %s "$one") ))
	for ((i = 0; i < n; i++)); do cat "$one"; done >"$W/$name.pt"
	run_case "$name (recorded, $n copies)" "$W/$name.pt" "$(tr '\n' ' ' <"$c.args")" "$one"
}

for c in $CASES; do
	case $c in
	gzip)
		# gzip -9 of 200 KiB of a binary that does not change with tracekit: deflate's
		# match loops
		head -c 204800 "$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)" >"$W/gzip.in"
		record_case gzip main gzip -9 -c "$W/gzip.in"
		;;
	llvm-O2)
		[ -n "$LLVM" ] || continue
		LLVMDIR=/usr/lib/llvm-$(basename "$LLVM" | sed 's/libLLVM-\([0-9]*\).*/\1/')
		gcc -O2 -I"$LLVMDIR/include" -o "$W/llvm-o2" "$SRC/bench/ipt-flow-llvm.c" \
			-L"$LLVMDIR/lib" -lLLVM -Wl,-rpath,"$LLVMDIR/lib"
		# the sources as of the pinned commit; relative paths keep the IR free of $W's name
		local_src=$SRC
		if git -C "$SRC" cat-file -e "$LLVM_INPUT_COMMIT^{commit}" 2>/dev/null; then
			mkdir -p "$W/pin"
			git -C "$SRC" archive "$LLVM_INPUT_COMMIT" include lib | tar -x -C "$W/pin"
			local_src=$W/pin
		else
			echo "warning: commit $LLVM_INPUT_COMMIT is not in this clone: the IR comes from" \
				"today's walk.c, not comparable with docs/PERFORMANCE.md" >&2
		fi
		(cd "$local_src" && "$LLVMDIR/bin/clang" -O0 -Xclang -disable-O0-optnone -S \
			-emit-llvm -Iinclude -Ilib -o "$W/walk.ll" lib/flow/walk.c)
		record_case llvm-O2 "$(readlink -f "$LLVM")" "$W/llvm-o2" "$W/walk.ll" 1
		;;
	libc)
		# its own copy in the cache: the recording names the program
		[ -x "$CACHE/libcwork" ] || gcc -O2 -o "$CACHE/libcwork" "$SRC/bench/ipt-flow-libc.c"
		record_case libc "main $(readlink -f /lib/x86_64-linux-gnu/libc.so.6)" \
			"$CACHE/libcwork" 20000 3
		;;
	libc-walk) gen_case libc-walk ;;
	llvm-walk) [ -n "$LLVM" ] && gen_case llvm-walk "$LLVM" ;;
	esac
done
