#!/usr/bin/env bash
# A program that closes the descriptors it did not open (a loop up to 1024, closefrom) or
# puts /dev/null over them keeps its whole trace: the recorder finds its descriptor gone or
# replaced before writing, reopens the trace file, and says so (`record`, `info`, and its
# own message on a private copy of the original stderr, even where the program put
# /dev/null over descriptor 2). work() runs before and after: 2 calls; the trace is
# complete and decodes without error.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/fds.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? i : -i;
	return s;
}
int main(int argc, char **argv)
{
	long s = work(300000);   /* pieces of the trace are written before the descriptors go */
	(void)argc;
	if (!strcmp(argv[1], "loop")) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	} else if (!strcmp(argv[1], "closefrom")) {
		closefrom(3);
	} else {
		int null = open("/dev/null", O_WRONLY);
		for (int fd = 2; fd < 1000; fd++)   /* stderr too; a few left for fopen */
			if (fd != null)
				dup2(null, fd);
	}
	FILE *f = fopen("/dev/null", "w");   /* the program's own files take the low numbers */
	if (!f)
		return 1;
	s += work(2000);
	fprintf(f, "%ld\n", s);
	fclose(f);
	printf("%ld\n", s);
	return 0;
}
C
cc -O1 -o "$work/fds" "$work/fds.c"
ulimit -n 1024   # Debian's default: the loop reaches every descriptor
for how in loop closefrom dup2; do
	want=$("$work/fds" $how)
	got=$("$TK" record --btrace -o "$work/$how.tkbt" -- "$work/fds" $how 2>"$work/$how.err") ||
		{ echo "$how: record failed"; cat "$work/$how.err"; exit 1; }
	[ "$got" = "$want" ] || { echo "$how: printed '$got', not '$want'"; exit 1; }
	grep -q "reopened the trace file" "$work/$how.err" || { echo "$how: record does not say what happened"; cat "$work/$how.err"; exit 1; }
	# the recorder's own message, on the stderr the program started with (after dup2 over
	# descriptor 2; a loop that closes every descriptor closes its copy too)
	if [ $how = dup2 ] && ! grep -q "^tracekit btrace: the program closed or replaced the trace's file descriptor" "$work/$how.err"; then
		echo "$how: the recorder's message is lost"; cat "$work/$how.err"; exit 1
	fi
	"$TK" info "$work/$how.tkbt" >"$work/$how.info" || { echo "$how: info failed"; cat "$work/$how.info"; exit 1; }
	grep -q ', complete$' "$work/$how.info" || { echo "$how: trace not complete"; cat "$work/$how.info"; exit 1; }
	grep -q "reopened the trace file" "$work/$how.info" || { echo "$how: info does not say what happened"; cat "$work/$how.info"; exit 1; }
	"$TK" profile --to csv "$work/$how.tkbt" >"$work/$how.csv" 2>"$work/$how.perr" ||
		{ echo "$how: profile failed"; cat "$work/$how.perr"; exit 1; }
	grep -q '^"work",2,' "$work/$how.csv" || { echo "$how: work() not called twice"; cat "$work/$how.csv"; exit 1; }
	"$TK" decode --stat "$work/$how.tkbt" >"$work/$how.stat" 2>&1 || { echo "$how: decode failed"; cat "$work/$how.stat"; exit 1; }
	grep -q '^errors: 0$' "$work/$how.stat" || { echo "$how: decode errors"; cat "$work/$how.stat"; exit 1; }
done
echo ok
