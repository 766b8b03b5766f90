#!/usr/bin/env bash
# The branch recorder on programs that install signal handlers (Debian's gzip and sort do,
# as sqlite3, python and git do), side by side with callgrind: median CPU seconds of
# BENCH_RUNS runs (default 5) and the slowdown over native. Until the recorder deferred
# signals that arrive during a trampoline record, each such record blocked and unblocked
# all signals: two system calls per recorded branch once the program had a handler.
# BEFORE=path/to/an older libtkbtrace.so adds a column with that recorder (same tracekit).
# Nulgrind (valgrind --tool=none) is the floor of a dynamic binary translator. PROGRAMS:
# default "gzip sort"; "sqlite3" adds sqlite3 with libsqlite3 traced (20,000 inserted rows,
# a scan, an index, a LIKE query); "bzip2" bzip2 with libbz2 traced on the same 256 KiB;
# "python3" Debian's python3.11 running a loop; "git" git status in a repository of
# tracekit's lib/ with ten files changed. The last columns: the share of recorded CTIs that
# trapped, and after warm-up (leaving out each CTI's first trap).
# Usage: [BEFORE=LIB] [BENCH_RUNS=N] [PROGRAMS="gzip sort sqlite3 bzip2 python3 git"] bench/btrace-handlers.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 262144 "$TK" >"$work/in.bin"   # 256 KiB
python3 -c 'import random; r = random.Random(1); print("\n".join(str(r.randrange(10**9)) for _ in range(20000)))' >"$work/lines.txt"
python3 - "$work/q.sql" <<'PY'
import random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    f.write("create table t(a integer, b text);\nbegin;\n")
    for _ in range(20000):
        f.write("insert into t values(%d,'%s');\n" % (r.randrange(10**6), "".join(r.choice("abcdefgh") for _ in range(8))))
    f.write("commit;\nselect count(*), sum(a) from t;\ncreate index ti on t(b);\n"
            "select count(*) from t where b like 'ab%';\nselect max(a) from t where b > 'c';\n")
PY

if [[ " ${PROGRAMS:-} " == *" git "* ]]; then
	mkdir "$work/repo"
	cp -r "$BENCH_SRC/lib" "$work/repo/"
	git -C "$work/repo" init -q
	git -C "$work/repo" add -A
	git -C "$work/repo" -c user.name=b -c user.email=b@b commit -qm x
	for f in $(find "$work/repo/lib" -name '*.c' | sort | head -n 10); do echo '/* changed */' >>"$f"; done
fi

printf '%-6s %9s %10s %7s' program native_s btrace_s x
[ -n "${BEFORE:-}" ] && printf ' %10s %7s' before_s x
printf ' %12s %7s %12s %7s %9s %9s\n' nulgrind_s x callgrind_s x trapped warm
for p in ${PROGRAMS:-gzip sort}; do
	mods=()
	case $p in
	gzip) cmd=(gzip -c "$work/in.bin") ;;
	sort) cmd=(sort "$work/lines.txt") ;;
	sqlite3) cmd=(sqlite3 :memory: ".read $work/q.sql"); mods=(--module libsqlite3.so.0) ;;
	bzip2) cmd=(bzip2 -c "$work/in.bin"); mods=(--module main --module libbz2.so.1.0) ;;
	python3) cmd=(/usr/bin/python3.11 -c 's = 0
for i in range(300000): s += i * i % 7
print(s)') ;;
	git) cmd=(git -C "$work/repo" status) ;;
	esac
	n=$(bench_cpu "${cmd[@]}")
	b=$(bench_cpu "$TK" record --btrace -q "${mods[@]}" -o "$work/t.tkbt" -- "${cmd[@]}")
	printf '%-6s %9s %10s %7s' $p "$n" "$b" "$(bench_ratio "$b" "$n")"
	if [ -n "${BEFORE:-}" ]; then
		o=$(TK_BTRACE_LIB=$BEFORE bench_cpu "$TK" record --btrace -q "${mods[@]}" -o "$work/t0.tkbt" -- "${cmd[@]}")
		printf ' %10s %7s' "$o" "$(bench_ratio "$o" "$n")"
	fi
	g=$(bench_cpu valgrind -q --tool=none "${cmd[@]}")
	c=$(bench_cpu valgrind -q --tool=callgrind --callgrind-out-file=/dev/null "${cmd[@]}")
	share=$("$TK" info "$work/t.tkbt" | awk '/went through trampolines:/ { for (i = 1; i <= NF; i++) { if ($i ~ /%,?$/ && !s) s = $i; if ($i == "after") w = $(i - 1) } }
		END { sub(/,$/, "", s); print s, w }')
	printf ' %12s %7s %12s %7s %9s %9s\n' "$g" "$(bench_ratio "$g" "$n")" "$c" "$(bench_ratio "$c" "$n")" $share
done
