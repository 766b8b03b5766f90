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

/* Calls (column 2) or exclusive instructions (column 6) of the functions PAT names in
 * `tracekit profile --to csv` output. */
static uint64_t our_col(const char *csv, const char *pat, int col)
{
	char line[4096];
	uint64_t total = 0;
	FILE *f = fopen(csv, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		char *e = strchr(line + 1, '"'), *v = e;
		if (line[0] != '"' || !e || !bt_name_match(pat, line + 1, (size_t)(e - line - 1)))
			continue;
		for (int c = 1; c < col && v; c++)
			v = strchr(v + 1, ',');
		if (v)
			total += strtoull(v + 1, NULL, 10);
	}
	fclose(f);
	return total;
}

/* NAME (from SRC) recorded and profiled; the exclusive instructions and calls of FNS equal
 * callgrind's (PLT stubs apart: --skip-plt=no), frames unwound by untraced code are said
 * (UNWOUND: some), and nothing is left open but _start. The same trace as raw Intel PT
 * (convert --to ipt, against the executable) profiles to the same counts. */
static void check_unwinding(const char *name, const char *src, const char *const *fns)
{
	char csv[512], ptcsv[512], cg[512];
	const char *cc = strstr(src, ".cc") ? "g++" : "cc";

	assert_int_equal(sh("%s -O2 -g -o %s/%s \"$TESTS\"/data/btrace/%s", cc, work, name, src), 0);
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q -o %s.tkbt -- ./%s >/dev/null", work,
			    name, name), 0);
	snprintf(csv, sizeof csv, "%s/%s.csv", work, name);
	assert_int_equal(sh("\"$TK\" profile --to csv -o %s %s/%s.tkbt", csv, work, name), 0);
	assert_int_equal(sh("\"$TK\" profile %s/%s.tkbt | grep -q '^# .*open at end 1, unwound [1-9]'",
			    work, name), 0);
	snprintf(ptcsv, sizeof ptcsv, "%s/%s.pt.csv", work, name);
	assert_int_equal(sh("cd %s && \"$TK\" convert -q --to ipt -o %s.pt %s.tkbt && "
			    "bias=$(\"$TK\" info %s.tkbt | sed -n 's/.*module .*%s .* bias \\(0x[0-9a-f]*\\).*/\\1/p') && "
			    "\"$TK\" profile --to csv --elf %s:$bias -o %s %s.pt",
			    work, name, name, name, name, name, ptcsv, name), 0);
	snprintf(cg, sizeof cg, "%s/%s.cg", work, name);
	assert_int_equal(sh("cd %s && valgrind -q --tool=callgrind --skip-plt=no --compress-strings=no "
			    "--callgrind-out-file=%s ./%s >/dev/null 2>&1", work, cg, name), 0);
	for (const char *const *f = fns; *f; f++) {
		uint64_t ours = our_col(csv, *f, 6), theirs = bt_cg_self(cg, *f);
		uint64_t pt = our_col(ptcsv, *f, 6);
		fprintf(stderr, "%s: %-30s exclusive: tracekit %6llu  as PT %6llu  callgrind %6llu\n", name, *f,
			(unsigned long long)ours, (unsigned long long)pt, (unsigned long long)theirs);
		assert_true(theirs > 0);
		assert_int_equal(ours, theirs);
		assert_int_equal(pt, theirs);
		assert_int_equal(our_col(ptcsv, *f, 2), our_col(csv, *f, 2));
	}
}

/* longjmp out of a recursion: main's code after the resume is main's, and the frames of deep
 * and of longjmp's PLT stub end there (issue 31 item 1). */
static void test_longjmp_unwinds(void **state)
{
	static const char *const fns[] = { "main", "deep", NULL };
	char csv[512], cg[512];
	(void)state;
	check_unwinding("unwind", "unwind.c", fns);
	snprintf(csv, sizeof csv, "%s/unwind.csv", work);
	snprintf(cg, sizeof cg, "%s/unwind.cg", work);
	assert_int_equal(our_col(csv, "deep", 2), cg_calls(cg, "deep"));
	assert_int_equal(our_col(csv, "deep", 2), 2490);   /* i % 9 + 1 for i < 500 */
}

/* A C++ exception thrown through recursion and cleanups, caught in main. */
static void test_exception_unwinds(void **state)
{
	/* thrower as tracekit names it (demangled, its cold part as c++filt says it) and as
	 * callgrind_annotate's table does */
	static const char *const fns[] = { "main+main.cold", "thrower(int, int)+"
					   "thrower(int, int) [clone .cold]+_ZL7throwerii+"
					   "_ZL7throwerii.cold+thrower(int,", NULL };
	(void)state;
	if (sh("command -v g++ >/dev/null") != 0) {
		fprintf(stderr, "g++ missing: C++ exceptions not checked\n");
		fail();
	}
	check_unwinding("exceptions", "exceptions.cc", fns);
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
		cmocka_unit_test(test_longjmp_unwinds),
		cmocka_unit_test(test_exception_unwinds),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
