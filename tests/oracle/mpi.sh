#!/usr/bin/env bash
# mpirun -np 1/2/3 tracekit-mpi profile prints what `tracekit profile -j 1` prints, for an
# Intel PT raw stream with --elf (300-byte chunks: seams between setjmp and longjmp), a
# perf.data with two queues, an XRay FDR log, a branch trace, an xtrace trace and two
# inputs with more ranks than files; damaged data in one rank's chunks is reported as -j 1
# reports it, with exit status 1; a rank that cannot open its input ends the job with
# status 3, without hanging.
set -euo pipefail
mpi="$BUILD/tracekit-mpi"
[ -x "$mpi" ] || { echo "tracekit-mpi was not built: MPI not found (scripts/install-deps.sh" \
	"installs libopenmpi-dev)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# under ASan, no leak check: Open MPI's components (dlopen'ed, unloaded at exit, so their
# frames cannot be named in a suppression) keep memory to the end by design. tracekit-mpi's
# own code (cli_shard_build, cli_merge_partials) is leak-checked through shards.sh.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
. "$SRC/tests/tools/lj-traces.sh"
. "$SRC/tests/tools/mpi-run.sh"
xray="$SRC/tests/data/xray/fdr-v5.xray"
export TK_IPT_CHUNK=300

same() {   # LABEL NP TO ARGS...: tracekit-mpi on NP ranks against profile -j 1
	local label=$1 np=$2 to=$3
	shift 3
	"$TK" profile -j 1 --to "$to" "$@" >"$work/want" 2>/dev/null
	mpi_run "$np" "$mpi" profile -j 1 --to "$to" -o "$work/got" "$@" 2>"$work/err" ||
		{ echo "$label, -np $np: failed"; cat "$work/err"; exit 1; }
	cmp -s "$work/want" "$work/got" || { echo "$label, -np $np, --to $to: differs from -j 1"; exit 1; }
}
for np in 1 2 3; do
	same "Intel PT raw" "$np" csv --elf "$work/lj:$bias" "$work/lj.pt"
done
same "Intel PT raw" 2 pprof --elf "$work/lj:$bias" "$work/lj.pt"
same "perf.data" 3 csv "$work/two.data"
same "XRay" 2 json "$xray"
same "branch trace" 3 folded "$work/lj.tkbt"
same "xtrace" 2 csv "$SRC/tests/data/xtrace/xtrace.1700000000.4242.hint9.xinsndata.bin"
same "two inputs, three ranks" 3 text "$xray" "$work/lj.tkbt"
# to stdout (a file here): mpirun gives the ranks a pseudo-terminal, but no colour or
# progress reaches a file that -j 1 would not write
"$TK" profile -j 1 --elf "$work/lj:$bias" "$work/lj.pt" >"$work/want" 2>/dev/null
mpi_run 2 "$mpi" profile -j 1 --elf "$work/lj:$bias" "$work/lj.pt" >"$work/got" 2>"$work/err" ||
	{ echo "text to stdout: failed"; cat "$work/err"; exit 1; }
cmp -s "$work/want" "$work/got" || { echo "text to stdout: differs from -j 1"; diff "$work/want" "$work/got" | head -5; exit 1; }

# damaged bytes in the middle of one rank's chunks: the same gap report, exit status 1
cp "$work/lj.pt" "$work/dmg.pt"
# (and a second region in another rank's chunks: one summary of the two, as -j 1's)
for at in 50000 100000; do
	printf '\xff%.0s' $(seq 16) | dd of="$work/dmg.pt" bs=1 seek=$at conv=notrunc status=none
done
rc=0; "$TK" profile -j 1 --to csv --elf "$work/lj:$bias" "$work/dmg.pt" >"$work/want" 2>"$work/want.err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: profile exit $rc"; exit 1; }
rc=0; mpi_run 3 "$mpi" profile -j 1 --to csv --elf "$work/lj:$bias" "$work/dmg.pt" >"$work/got" \
	2>"$work/err" || rc=$?
[ "$rc" = 1 ] || { echo "damaged: tracekit-mpi exit $rc, not 1"; cat "$work/err"; exit 1; }
# (exactly: no notice of mpirun's about a rank's status, which also cost 2 s, from the
# job ending with MPI_Abort)
cmp -s "$work/want.err" "$work/err" ||
	{ echo "damaged: the ranks report"; cat "$work/err"; echo "-j 1 reports"; cat "$work/want.err"; exit 1; }
cmp -s "$work/want" "$work/got" || { echo "damaged: output differs from -j 1"; exit 1; }

# a bad command line: status 2, the usage from rank 0 only, and no notice of mpirun's
rc=0; mpi_run 2 "$mpi" bogus >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 2 ] || { echo "bad command line: exit $rc, not 2"; cat "$work/err"; exit 1; }
[ "$(grep -c '^usage:' "$work/err")" = 1 ] && ! grep -q -- '^-----' "$work/err" ||
	{ echo "bad command line: says"; cat "$work/err"; exit 1; }

# rank 1 cannot open its input (a node without the shared file system): status 3, at once
rc=0
mpi_run 3 bash -c 'f=$1; [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && f=$2; exec "$0" profile -j 1 --to csv "$f"' \
	"$mpi" "$xray" "$work/missing.xray" >/dev/null 2>"$work/err" || rc=$?
[ "$rc" = 3 ] || { echo "unreadable input on one rank: exit $rc, not 3"; cat "$work/err"; exit 1; }
grep -q "missing.xray" "$work/err" || { echo "unreadable input: not named"; cat "$work/err"; exit 1; }

# each rank starts decoding before MPI is up, on the rank the launcher's environment names;
# an environment that is not this job's (rank 1 of 2 here, where MPI starts a job of one
# without mpirun) must not leave out the other half
"$TK" profile -j 1 --to csv --elf "$work/lj:$bias" "$work/lj.pt" >"$work/want"
PMI_RANK=1 PMI_SIZE=2 timeout -k 10 120 "$mpi" profile -j 1 --to csv --elf "$work/lj:$bias" \
	"$work/lj.pt" >"$work/got" 2>"$work/err" || { echo "wrong launcher rank: failed"; cat "$work/err"; exit 1; }
cmp -s "$work/want" "$work/got" || { echo "wrong launcher rank: differs from -j 1"; exit 1; }
[ "$launcher_retries" = 0 ] ||
	echo "note: mpirun crashed or hung in its own teardown $launcher_retries times (run again)"
echo "mpi: ok"
