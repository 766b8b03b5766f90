#!/usr/bin/env bash
# Slowdown of `tracekit record --btrace` over native, side by side with valgrind's nulgrind
# (--tool=none), lackey and callgrind, on three programs: branch-heavy, call-heavy and
# multi-threaded (tests/data/btrace/). Medians of hyperfine runs; peak memory of one run.
# Usage: bench/btrace-slowdown.sh [BUILD_DIR]  (env RUNS, default 3; PROGRAMS, default
# "branches calls threads"; CPU=1: median CPU seconds, user + system, instead of wall time,
# steadier on a shared machine; BEFORE=path/to/an older libtkbtrace.so: a column with that
# recorder, same tracekit, to compare two recorders in one run)
# Debian's own programs (gzip, sort, sqlite3, bzip2, python3, git status), the real-program
# comparison of issue #34, are in bench/btrace-handlers.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
tk=$build/tracekit
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$here/tests/data/btrace

cc -O2 -g -o "$work/branches" "$src/branches.c"
cc -O2 -g -o "$work/calls" "$src/calls.c"
cc -O2 -g -pthread -o "$work/threads" "$src/threads.c"

declare -A args=([branches]=200000 [calls]=200000 [threads]="")
median() { # hyperfine JSON -> median seconds
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$1"
}
measure() { # CMD -> median seconds (wall, or CPU with CPU=1)
	if [ -n "${CPU:-}" ]; then
		# shellcheck disable=SC2086
		BENCH_RUNS=$runs bench_cpu $1
	else
		hyperfine -N -w 1 -r "$runs" --export-json "$work/h.json" --output=null "$1" >/dev/null 2>&1
		median "$work/h.json"
	fi
}
peak_kb() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1; }

printf '%-9s %10s %10s %8s %10s %8s %10s %8s %10s %8s  %s\n' program native_s btrace_s x \
	nulgrind_s x lackey_s x callgrind_s x "btrace traps + trampoline hits, peak KiB btrace/callgrind"
tools="native btrace${BEFORE:+ before} nulgrind lackey callgrind"
for p in ${PROGRAMS:-branches calls threads}; do
	a=${args[$p]}
	cd "$work"
	declare -A t=()
	for tool in $tools; do
		case $tool in
		native) cmd="./$p $a" ;;
		btrace) cmd="$tk record --btrace -q -o $work/$p.tkbt -- ./$p $a" ;;
		before) cmd="env TK_BTRACE_LIB=$BEFORE $tk record --btrace -q -o $work/$p.0.tkbt -- ./$p $a" ;;
		nulgrind) cmd="valgrind -q --tool=none ./$p $a" ;;
		lackey) cmd="valgrind -q --tool=lackey ./$p $a" ;;
		callgrind) cmd="valgrind -q --tool=callgrind --callgrind-out-file=/dev/null ./$p $a" ;;
		esac
		t[$tool]=$(measure "$cmd")
	done
	traps=$("$tk" info "$work/$p.tkbt" | awk '/traps,/ {for (i=1;i<=NF;i++) if ($i=="traps,") s+=$(i-1)} END {print s}')
	tramp=$("$tk" info "$work/$p.tkbt" | awk '/by trampolines/ {for (i=1;i<=NF;i++) if ($i=="trampolines") {gsub(/[(]/,"",$(i+1)); s+=$(i-2)}} END {print s+0}')
	mem_bt=$(peak_kb "$tk" record --btrace -q -o "$work/m.tkbt" -- ./$p $a)
	mem_cg=$(peak_kb valgrind -q --tool=callgrind --callgrind-out-file=/dev/null ./$p $a)
	r() { python3 -c "print('%.0f' % ($1 / $2))"; }
	printf '%-9s %10.4f %10.3f %8s %10.3f %8s %10.3f %8s %10.3f %8s  %s + %s, %s/%s\n' "$p" \
		"${t[native]}" "${t[btrace]}" "$(r "${t[btrace]}" "${t[native]}")" \
		"${t[nulgrind]}" "$(r "${t[nulgrind]}" "${t[native]}")" \
		"${t[lackey]}" "$(r "${t[lackey]}" "${t[native]}")" \
		"${t[callgrind]}" "$(r "${t[callgrind]}" "${t[native]}")" "$traps" "$tramp" "$mem_bt" "$mem_cg"
	if [ -n "${BEFORE:-}" ]; then
		printf '%-9s before: %10.3f s (%s x native), .tkbt %s bytes; after: .tkbt %s bytes\n' "$p" \
			"${t[before]}" "$(r "${t[before]}" "${t[native]}")" "$(stat -c %s "$work/$p.0.tkbt")" \
			"$(stat -c %s "$work/$p.tkbt")"
	fi
done
