#!/usr/bin/env bash
# A vfork child runs in its parent's memory: its _exit or exec must not end the parent's
# trace, and its branches must not go into the parent's stream. The parent calls work()
# before and after the child, the child calls child_only(): the profile shows work twice
# and child_only never, the trace is complete (not "ends at exec"), and it decodes without
# error.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/vf.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) static long child_only(long n)
{
	return n & 1 ? n * 3 : n / 2;
}
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? i : -i;
	return s;
}
int main(int argc, char **argv)
{
	int exec_child = argc > 1 && !strcmp(argv[1], "exec");
	long s = work(1000);
	pid_t pid = vfork();
	if (pid == 0) {
		if (exec_child)
			execl("/bin/true", "true", (char *)0);
		_exit(child_only(argc) > 0 ? 3 : 4);
	}
	int st;
	waitpid(pid, &st, 0);
	s += work(2000);
	printf("%ld %d\n", s, WEXITSTATUS(st));
	return 0;
}
C
cc -O1 -o "$work/vf" "$work/vf.c"
for mode in exit exec; do
	want=$("$work/vf" $mode)
	got=$("$TK" record --btrace -q -o "$work/$mode.tkbt" -- "$work/vf" $mode 2>"$work/$mode.err") ||
		{ echo "$mode: record failed"; cat "$work/$mode.err"; exit 1; }
	[ "$got" = "$want" ] || { echo "$mode: printed '$got', not '$want'"; exit 1; }
	"$TK" info "$work/$mode.tkbt" >"$work/$mode.info" || { echo "$mode: info failed"; cat "$work/$mode.info"; exit 1; }
	grep -q ', complete$' "$work/$mode.info" || { echo "$mode: trace not complete"; cat "$work/$mode.info"; exit 1; }
	"$TK" profile --to csv "$work/$mode.tkbt" >"$work/$mode.csv" 2>"$work/$mode.perr" ||
		{ echo "$mode: profile failed"; cat "$work/$mode.perr"; exit 1; }
	grep -q '^"work",2,' "$work/$mode.csv" || { echo "$mode: work() not called twice"; cat "$work/$mode.csv"; exit 1; }
	if grep -q '^"child_only"' "$work/$mode.csv"; then
		echo "$mode: the vfork child's code is in the parent's trace"; cat "$work/$mode.csv"; exit 1
	fi
	"$TK" decode --stat "$work/$mode.tkbt" >"$work/$mode.stat" 2>&1 || { echo "$mode: decode failed"; cat "$work/$mode.stat"; exit 1; }
	grep -q '^errors: 0$' "$work/$mode.stat" || { echo "$mode: decode errors"; cat "$work/$mode.stat"; exit 1; }
done
echo ok
