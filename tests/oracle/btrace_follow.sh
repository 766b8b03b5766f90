#!/usr/bin/env bash
# record follows the programs a traced program starts: a fork+exec, system() (dash, which
# forks and execs the command), posix_spawn, and the program's own exec at the end. Each
# process writes its own file (OUT, OUT.<pid>, OUT.<pid>.<n>); every one decodes without
# error; each program's work() count is its own (no child's records in the parent's
# stream); record and info name every file; record exits with the program's status, and
# with --no-follow only the first program is traced.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/fam.c" <<'C'
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
volatile long sink;   /* work() has an effect: no call of it is merged or dropped */
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? i : -i;
	sink += s;
	return s;
}
/* "child N": call work() N times */
int main(int argc, char **argv)
{
	long s = 0;
	if (argc > 2 && !strcmp(argv[1], "child")) {
		for (int i = atoi(argv[2]); i > 0; i--)
			s += work(100);
		return s == 42;
	}
	s += work(10);
	pid_t p = fork();
	if (p == 0) {
		execl(argv[0], argv[0], "child", "2", (char *)0);
		_exit(9);
	}
	waitpid(p, 0, 0);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "%s child 3", argv[0]);
	if (system(cmd) != 0)
		return 8;
	char *av[] = { argv[0], "child", "4", NULL };
	if (posix_spawn(&p, argv[0], NULL, NULL, av, environ) != 0)
		return 8;
	waitpid(p, 0, 0);
	s += work(20);
	fflush(stdout);
	execl(argv[0], argv[0], "child", "5", (char *)0);
	return 9;
}
C
cc -O1 -o "$work/fam" "$work/fam.c"
cd "$work"
set +e
"$TK" record --btrace -o t.tkbt -- ./fam 2>rec.err
rc=$?
set -e
[ "$rc" = 0 ] || { echo "record exited $rc, the program 0"; cat rec.err; exit 1; }
# the files: fam (ends at exec), its fork child (ends at exec) and that child's program,
# dash and the program it ran, the spawned program, fam's own exec'd program
ls t.tkbt* | sort >files
[ "$(wc -l <files)" = 7 ] || { echo "expected 7 trace files"; cat files rec.err; exit 1; }
# work() per program: each count appears once per program, never summed into a parent
counts=""
for f in $(cat files); do
	grep -q "tracekit: $work/$f: pid " rec.err || { echo "record does not name $f"; cat rec.err; exit 1; }
	"$TK" decode --stat "$f" >stat 2>&1 || { echo "$f: decode failed"; cat stat; exit 1; }
	grep -q '^errors: 0$' stat || { echo "$f: decode errors"; cat stat; exit 1; }
	"$TK" profile --to csv "$f" >csv 2>perr || { echo "$f: profile failed"; cat perr; exit 1; }
	n=$(awk -F, '$1 == "\"work\"" { print $2 }' csv)
	counts="$counts ${n:-0}"
done
sorted=$(echo $counts | tr ' ' '\n' | sort -n | tr '\n' ' ')
# fam: 2 (work(10), work(20)); its fork child before exec: 0; dash: 0; children: 2 3 4 5
[ "$sorted" = "0 0 2 2 3 4 5 " ] || { echo "work() counts per file: '$sorted'"; exit 1; }
"$TK" info t.tkbt >info
[ "$(grep -c '^  followed: ' info)" = 6 ] || { echo "info does not list the 6 other files"; cat info; exit 1; }
grep -q 'ends at exec' info || { echo "info: fam's trace should end at exec"; cat info; exit 1; }

# --no-follow: one file; the program's status is record's
rm -f t.tkbt*
set +e
"$TK" record --btrace --no-follow -q -o t.tkbt -- ./fam child 0 2>rec.err
rc=$?
set -e
[ "$rc" = 0 ] || { echo "--no-follow: record exited $rc"; cat rec.err; exit 1; }
set +e
"$TK" record --btrace --no-follow -q -o t.tkbt -- sh -c 'exit 7' 2>rec.err
rc=$?
set -e
[ "$rc" = 7 ] || { echo "record exited $rc where the program exited 7"; cat rec.err; exit 1; }
[ "$(ls t.tkbt* | wc -l)" = 1 ] || { echo "--no-follow wrote more than one file"; ls t.tkbt*; exit 1; }
set +e
"$TK" record --btrace -q -o t.tkbt -- sh -c 'kill -TERM $$' 2>rec.err
rc=$?
set -e
[ "$rc" = 143 ] || { echo "record exited $rc where SIGTERM ended the program (143)"; cat rec.err; exit 1; }
echo "follow: 7 files, counts $sorted; statuses 7 and 143 passed on"
