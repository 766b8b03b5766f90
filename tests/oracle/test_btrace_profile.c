/* `tracekit profile` of a branch trace against valgrind's callgrind: examples/loops.c
 * (-O0 -g) recorded with `tracekit record --btrace`, which traces only the executable.
 * libc calls main, so main is entered from untraced code (the trace resumes at its entry)
 * and returns into it; its printf call goes out through the PLT and comes back. Calls per
 * function must equal callgrind's and what the program provably does, main included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "oracle/btrace_ipt.h"

static char work[256];

/* Calls of FN in `tracekit profile --to csv` output: "name",calls,... */
static uint64_t our_calls(const char *csv, const char *fn)
{
	char line[4096], want[256];
	uint64_t calls = 0;
	int found = 0;
	FILE *f = fopen(csv, "r");
	assert_non_null(f);
	snprintf(want, sizeof want, "\"%s\",", fn);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, want, strlen(want))) {
			calls += strtoull(line + strlen(want), NULL, 10);
			found = 1;
		}
	fclose(f);
	assert_true(found);
	return calls;
}

/* Calls of FN in a callgrind output file (uncompressed names): the calls= lines after
 * cfn=FN, over all callers. */
static uint64_t cg_calls(const char *out, const char *fn)
{
	char line[4096], cfn[4096] = "";
	uint64_t calls = 0;
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "cfn=", 4)) {
			snprintf(cfn, sizeof cfn, "%s", line + 4);
			cfn[strcspn(cfn, "'")] = 0; /* fib'2: a recursion level */
		} else if (!strncmp(line, "calls=", 6) && !strcmp(cfn, fn)) {
			calls += strtoull(line + 6, NULL, 10);
		}
	}
	fclose(f);
	return calls;
}

static void test_loops_calls(void **state)
{
	(void)state;
	static const char *const fns[] = { "main", "inner", "leaf", "apply", "twice", "negate" };
	static const uint64_t expect[] = { 1, 10, 1000, 7, 4, 3 };
	char csv[512], cg[512];

	assert_int_equal(sh("cc -O0 -g -o %s/loops \"$SRC\"/examples/loops.c", work), 0);
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q -o l.tkbt -- ./loops >/dev/null", work), 0);
	snprintf(csv, sizeof csv, "%s/prof.csv", work);
	assert_int_equal(sh("\"$TK\" profile --to csv -o %s %s/l.tkbt", csv, work), 0);
	snprintf(cg, sizeof cg, "%s/cg.out", work);
	assert_int_equal(sh("cd %s && valgrind -q --tool=callgrind --callgrind-out-file=%s "
			    "--compress-strings=no ./loops >/dev/null 2>&1", work, cg), 0);
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
		uint64_t ours = our_calls(csv, fns[i]), theirs = cg_calls(cg, fns[i]);
		fprintf(stderr, "%-8s tracekit %6llu  callgrind %6llu  expected %6llu\n", fns[i],
			(unsigned long long)ours, (unsigned long long)theirs, (unsigned long long)expect[i]);
		assert_int_equal(theirs, expect[i]);
		assert_int_equal(ours, theirs);
	}
	/* main ended with its return: nothing is left open but _start (which never returns) */
	assert_int_equal(sh("\"$TK\" profile %s/l.tkbt | grep -q '^# .*open at end 1$'", work), 0);
	/* and the call paths go through main */
	assert_int_equal(sh("\"$TK\" profile --to folded %s/l.tkbt | grep -q '^_start;main;inner;leaf 10000$'", work), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(work, sizeof work, "/tmp/tk-btprof-XXXXXX");
	return mkdtemp(work) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return sh("rm -rf %s", work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loops_calls),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
