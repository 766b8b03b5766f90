/* Exactness of the software branch recorder: record example programs (loops, a switch
 * table, function pointers, recursion, tail calls, setjmp/longjmp, a signal handler, C++
 * exceptions, 5 threads, fork) with `tracekit record --btrace`, decode the container's PT
 * streams with libipt's reference instruction decoder, and compare the instructions executed
 * per function with valgrind's callgrind on the same binary and input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>

#include "oracle/btrace_ipt.h"

static char work[256];
static const char *rec_opts = "";   /* extra `record` options for check() */

static void compile(const char *name, const char *src, const char *flags)
{
	const char *cc = strstr(src, ".cc") ? "g++" : "cc";
	assert_int_equal(sh("%s -O2 -g %s -o %s/%s %s/data/btrace/%s", cc, flags, work, name,
			    getenv("TESTS"), src), 0);
}

/* Record NAME ARGS, decode, and compare FNS with callgrind. With CHILD_FNS, the program
 * forks once: FNS are compared for the parent, CHILD_FNS (code only the child runs) for the
 * child, each process's trace against its own callgrind file. */
static void check2(const char *name, const char *args, const char *const *fns,
		   const char *const *child_fns);

static void check(const char *name, const char *args, const char *const *fns)
{
	check2(name, args, fns, NULL);
}

static void check_fork(const char *name, const char *const *fns, const char *const *child_fns)
{
	struct bt_counts *p = calloc(1, sizeof *p), *ch = calloc(1, sizeof *ch);
	char path[600], cg[2][600];
	int ncg = 0, npid[2] = { 0, 0 };
	assert_non_null(p);
	assert_non_null(ch);
	assert_int_equal(sh("cd %s && rm -f %s.tkbt* && \"$TK\" record --btrace -q %s -o %s.tkbt -- ./%s >/dev/null",
			    work, name, rec_opts, name, name), 0);
	DIR *d = opendir(work);
	struct dirent *de;
	int nchild = 0;
	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t l = strlen(name);
		if (strncmp(de->d_name, name, l) || strncmp(de->d_name + l, ".tkbt", 5))
			continue;
		snprintf(path, sizeof path, "%s/%s", work, de->d_name);
		if (de->d_name[l + 5] == '.')
			nchild++;
		assert_int_equal(bt_decode_file(de->d_name[l + 5] == '.' ? ch : p, path), 0);
	}
	closedir(d);
	assert_int_equal(nchild, 1);
	assert_int_equal(p->decode_errors + ch->decode_errors, 0);
	/* valgrind runs the program in its own process: the shell's pid before exec is the
	 * parent's. (Pids wrap at pid_max, so "the lower pid" is not a safe rule.) */
	assert_int_equal(sh("cd %s && rm -f %s.cg.* && sh -c 'echo $$ > %s.cgpid && exec valgrind -q --tool=callgrind --callgrind-out-file=%s.cg.%%p ./%s' >/dev/null 2>&1",
			    work, name, name, name, name), 0);
	snprintf(path, sizeof path, "%s/%s.cgpid", work, name);
	FILE *pf = fopen(path, "r");
	int parent_pid = 0;
	assert_non_null(pf);
	assert_int_equal(fscanf(pf, "%d", &parent_pid), 1);
	fclose(pf);
	d = opendir(work);
	assert_non_null(d);
	while ((de = readdir(d)) && ncg < 2) {
		size_t l = strlen(name);
		if (strncmp(de->d_name, name, l) || strncmp(de->d_name + l, ".cg.", 4))
			continue;
		snprintf(cg[ncg], sizeof cg[ncg], "%s/%s", work, de->d_name);
		npid[ncg++] = atoi(de->d_name + l + 4);
	}
	closedir(d);
	assert_int_equal(ncg, 2);
	assert_true(npid[0] == parent_pid || npid[1] == parent_pid);
	int par = npid[0] == parent_pid ? 0 : 1;
	for (int side = 0; side < 2; side++) {
		const char *const *f = side ? child_fns : fns;
		struct bt_counts *c = side ? ch : p;
		for (; *f; f++) {
			uint64_t ours = bt_fn_insns(c, *f), theirs = bt_cg_self(cg[side ? !par : par], *f);
			fprintf(stderr, "%s %s: %-10s btrace %8llu  callgrind %8llu\n", name,
				side ? "child" : "parent", *f, (unsigned long long)ours, (unsigned long long)theirs);
			assert_true(theirs > 0);
			assert_int_equal(ours, theirs);
		}
	}
	free(p);
	free(ch);
}

static void check2(const char *name, const char *args, const char *const *fns,
		   const char *const *child_fns)
{
	(void)child_fns;
	struct bt_counts *c = calloc(1, sizeof *c);
	char path[512];
	assert_non_null(c);
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q %s -o %s.tkbt -- ./%s %s >/dev/null",
			    work, rec_opts, name, name, args), 0);
	/* the process's trace and, after fork, its children's */
	DIR *d = opendir(work);
	struct dirent *de;
	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t l = strlen(name);
		if (strncmp(de->d_name, name, l) || strncmp(de->d_name + l, ".tkbt", 5))
			continue;
		snprintf(path, sizeof path, "%s/%s", work, de->d_name);
		assert_int_equal(bt_decode_file(c, path), 0);
	}
	closedir(d);
	assert_int_equal(c->decode_errors, 0);
	assert_true(c->insns > 0);
	/* tracekit's own PT flow decoder agrees with libipt on the whole trace */
	{
		char cmd[1024], line[256];
		uint64_t ours = 0;
		snprintf(cmd, sizeof cmd, "\"$TK\" decode --stat %s/%s.tkbt", work, name);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		while (fgets(line, sizeof line, p))
			if (!strncmp(line, "insn: ", 6))
				ours += strtoull(line + 6, NULL, 10);
		assert_int_equal(pclose(p), 0);
		fprintf(stderr, "%s: tracekit decode %llu instructions, libipt %llu\n", name,
			(unsigned long long)ours, (unsigned long long)c->insns);
		assert_int_equal(ours, c->insns);
	}
	assert_int_equal(sh("cd %s && valgrind -q --tool=callgrind --callgrind-out-file=%s.cg.%%p ./%s %s >/dev/null 2>&1",
			    work, name, name, args), 0);
	char prefix[512];
	snprintf(prefix, sizeof prefix, "%s/%s.cg.", work, name);
	int bad = 0;
	for (const char *const *f = fns; *f; f++) {
		const char *fn = *f;
		uint64_t ours = bt_fn_insns(c, fn), theirs = bt_cg_self(prefix, fn);
		int ok = theirs && ours == theirs;
		fprintf(stderr, "%s: %-10s btrace %8llu  callgrind %8llu%s\n", name, fn,
			(unsigned long long)ours, (unsigned long long)theirs, ok ? "" : "  MISMATCH");
		bad += !ok;
	}
	assert_int_equal(bad, 0);
	free(c);
}

/* Re-entries that could not be placed, over all threads of NAME.tkbt (`tracekit info`). */
static uint64_t unresolved(const char *name)
{
	char cmd[1024], line[1024];
	uint64_t n = 0;
	snprintf(cmd, sizeof cmd, "\"$TK\" info %s/%s.tkbt", work, name);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof line, p)) {
		char *u = strstr(line, " unresolved)");
		if (!strstr(line, "  thread ") || !u)
			continue;
		while (u > line && u[-1] >= '0' && u[-1] <= '9')
			u--;
		n += strtoull(u, NULL, 10);
	}
	assert_int_equal(pclose(p), 0);
	return n;
}

/* Every thread of NAME.tkbt converted to raw Intel PT (`convert --to ipt --tid N`) decodes
 * with libipt to the instructions the container does: returns their sum. */
static uint64_t ipt_converted_insns(const char *name)
{
	char path[600], pt_path[600];
	uint64_t total = 0;
	size_t len, n;
	int err = 0;
	snprintf(path, sizeof path, "%s/%s.tkbt", work, name);
	uint8_t *data = bt_read_file(path, &len);
	assert_non_null(data);
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	assert_non_null(bt);
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		unsigned tid = tk_btrace_thread(bt, i)->tid;
		struct bt_counts *c = calloc(1, sizeof *c);
		assert_non_null(c);
		snprintf(pt_path, sizeof pt_path, "%s/%s.%u.pt", work, name, tid);
		assert_int_equal(sh("\"$TK\" convert --to ipt --tid %u -o %s %s", tid, pt_path, path), 0);
		uint8_t *pt = bt_read_file(pt_path, &n);
		assert_non_null(pt);
		bt_decode_stream(c, bt, pt, n);
		assert_int_equal(c->decode_errors, 0);
		total += c->insns;
		free(pt);
		free(c);
	}
	tk_btrace_free(bt);
	free(data);
	return total;
}

static void test_branches(void **state)
{
	static const char *const fns[] = { "main", "dispatch", "fib", "tail1", "tail2", "sq", "neg", NULL };
	(void)state;
	compile("branches", "branches.c", "");
	check("branches", "2000", fns);
	/* unoptimised code has other branch shapes (frame pointers, no tail calls) */
	compile("branches0", "branches.c", "-O0");
	check("branches0", "500", fns);
}

/* The same exactness with every CTI trapping (trampolines off). */
static void test_branches_traps_only(void **state)
{
	static const char *const fns[] = { "main", "dispatch", "fib", "tail1", "tail2", "sq", "neg", NULL };
	(void)state;
	setenv("TK_BTRACE_TRAMPOLINES", "0", 1);
	compile("branches_t", "branches.c", "");
	check("branches_t", "1000", fns);
	unsetenv("TK_BTRACE_TRAMPOLINES");
}

/* Record NAME ARGS without address randomisation, with trampolines on or off, and keep
 * the decoded instructions (thread ids dropped) in NAME.decode<MODE>. */
static void decode_fixed(const char *name, const char *args, int trampolines)
{
	assert_int_equal(sh("cd %s && TK_BTRACE_TRAMPOLINES=%d setarch x86_64 -R \"$TK\" record --btrace -q %s "
			    "-o %s.fixed%d.tkbt -- ./%s %s >/dev/null && \"$TK\" decode %s.fixed%d.tkbt | "
			    "grep -v '^\\[thread' >%s.decode%d",
			    work, trampolines, rec_opts, name, trampolines, name, args, name, trampolines, name,
			    trampolines), 0);
}

/* Trap-only and trampoline recordings of the same run decode to the same instructions. */
static void check_modes_agree(const char *name, const char *args)
{
	decode_fixed(name, args, 0);
	decode_fixed(name, args, 1);
	assert_int_equal(sh("cd %s && test -s %s.decode0 && cmp %s.decode0 %s.decode1", work, name, name, name), 0);
}

/* The bundled example: main is called from libc and its first trapped CTI (the loop test)
 * comes after a call-free prologue, so the entry must be placed at main's start, not at the
 * return site of the loop's call that also leads there. Every function of the program
 * (the C run-time's _start, _init, frame_dummy... callgrind names by address or merges). */
static void test_example_loops(void **state)
{
	static const char *const fns[] = { "main", "inner", "leaf", "apply", "twice", "negate", NULL };
	static const char *const opt[] = { "-O0", "-O2" };
	(void)state;
	for (int i = 0; i < 2; i++) {
		char name[32];
		snprintf(name, sizeof name, "loops%s", opt[i] + 1);
		assert_int_equal(sh("cc %s -g -o %s/%s \"$SRC\"/examples/loops.c", opt[i], work, name), 0);
		check(name, "", fns);
		check_modes_agree(name, "");
		/* trap-only, under another name so that callgrind's files are apart */
		assert_int_equal(sh("cp %s/%s %s/%s_t", work, name, work, name), 0);
		strcat(name, "_t");
		setenv("TK_BTRACE_TRAMPOLINES", "0", 1);
		check(name, "", fns);
		unsetenv("TK_BTRACE_TRAMPOLINES");
	}
}

/* Traced code called from untraced libc: qsort comparators (qsort called in a loop), an
 * atexit handler, a signal handler; -O0 and -O2, trap-only and with trampolines. */
static void test_callbacks(void **state)
{
	static const char *const fns[] = { "main", "setup", "by_value", "by_digit_sum", "at_end", "on_usr1", NULL };
	(void)state;
	compile("callbacks", "callbacks.c", "");
	check("callbacks", "300", fns);
	check_modes_agree("callbacks", "300");
	compile("callbacks0", "callbacks.c", "-O0");
	check("callbacks0", "300", fns);
	check_modes_agree("callbacks0", "300");
	compile("callbacks0_t", "callbacks.c", "-O0");
	setenv("TK_BTRACE_TRAMPOLINES", "0", 1);
	check("callbacks0_t", "300", fns);
	unsetenv("TK_BTRACE_TRAMPOLINES");
}

/* Traps and trampoline hits over all threads of a trace, from `tracekit info`. */
static void trap_counts(const char *name, uint64_t *traps, uint64_t *hits)
{
	char cmd[1024], line[1024];
	*traps = *hits = 0;
	snprintf(cmd, sizeof cmd, "\"$TK\" info %s/%s.tkbt", work, name);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof line, p)) {
		char *t = strstr(line, " traps, "), *h = strstr(line, " by trampolines");
		if (!strstr(line, "  thread ") || !t || !h)
			continue;
		while (t > line && t[-1] >= '0' && t[-1] <= '9')
			t--;
		while (h > line && h[-1] >= '0' && h[-1] <= '9')
			h--;
		*traps += strtoull(t, NULL, 10);
		*hits += strtoull(h, NULL, 10);
	}
	assert_int_equal(pclose(p), 0);
}

/* Call-heavy code: short returns and `call reg` are relocated into trampolines at start-up
 * (the windows before them), so almost nothing traps; the counts stay exact, and equal with
 * relocation off. */
static void test_calls_relocated(void **state)
{
	static const char *const fns[] = { "main", "mid", "leaf", "twice", NULL };
	uint64_t traps, hits;
	(void)state;
	compile("calls", "calls.c", "");
	check("calls", "3000", fns);
	trap_counts("calls", &traps, &hits);
	fprintf(stderr, "calls: %llu traps, %llu trampoline hits\n", (unsigned long long)traps,
		(unsigned long long)hits);
	assert_true(hits > 12000);
	assert_true(traps * 100 < hits);
	setenv("TK_BTRACE_RELOCATE", "0", 1);
	compile("calls_nr", "calls.c", "");
	check("calls_nr", "3000", fns);
	unsetenv("TK_BTRACE_RELOCATE");
	trap_counts("calls_nr", &traps, &hits);
	assert_true(traps > 12000);
}

/* Functions with indirect tail calls and calls through memory (`jmp *(%rax,%rdx,8)`,
 * `call *0x8(%rdi)`), a tail call through a loaded pointer and computed gotos are
 * relocated (recorder/btrace/leave.h): their CTIs are recorded by trampolines, the counts
 * stay exact, with the same counts trap-only. */
static void test_indirect_relocated(void **state)
{
	static const char *const fns[] = { "main", "pick", "sum_calls", "last", "run", "inc", "dbl", "neg", "sq", NULL };
	uint64_t traps, hits;
	(void)state;
	compile("indirect", "indirect.c", "");
	check("indirect", "3000", fns);
	trap_counts("indirect", &traps, &hits);
	fprintf(stderr, "indirect: %llu traps, %llu trampoline hits\n", (unsigned long long)traps,
		(unsigned long long)hits);
	assert_true(hits > 60000);
	assert_true(traps * 1000 < hits);
	setenv("TK_BTRACE_TRAMPOLINES", "0", 1);
	compile("indirect_t", "indirect.c", "");
	check("indirect_t", "3000", fns);
	unsetenv("TK_BTRACE_TRAMPOLINES");
}

/* NAME (from SRC) run with ARGS: its counts equal callgrind's with trampolines and
 * trap-only, and with trampolines at most MAX_TRAPS traps and more than MIN_HITS records
 * by trampolines. */
static void check_untrapped(const char *name, const char *src, const char *args, const char *const *fns,
			    uint64_t min_hits, uint64_t max_traps)
{
	char name_t[64];
	uint64_t traps, hits;
	compile(name, src, "");
	check(name, args, fns);
	trap_counts(name, &traps, &hits);
	fprintf(stderr, "%s: %llu traps, %llu trampoline hits\n", name, (unsigned long long)traps,
		(unsigned long long)hits);
	assert_true(hits > min_hits);
	assert_true(traps <= max_traps);
	snprintf(name_t, sizeof name_t, "%s_t", name);
	setenv("TK_BTRACE_TRAMPOLINES", "0", 1);
	compile(name_t, src, "");
	check(name_t, args, fns);
	unsetenv("TK_BTRACE_TRAMPOLINES");
}

/* Returns that are branch targets with under 5 bytes to the next entry (no window fits):
 * the trampolines of the conditional branches that reach them record them (the ret's
 * tail), so they do not trap. */
static void test_rets_untrapped(void **state)
{
	static const char *const fns[] = { "main", "hw", "nz", "sp", NULL };
	(void)state;
	check_untrapped("rets", "rets.c", "20000", fns, 120000, 100);
}

/* A jump whose target is computed (neither a table nor a loaded address) is recorded by a
 * trampoline of its own, and does not keep its function trapping: its landing inside a
 * relocated window goes to the trampoline's copy (window_entry). The jump no longer traps
 * (20,006 traps in 20,000 calls before; a few first executions elsewhere remain). */
static void test_computed_jump(void **state)
{
	static const char *const fns[] = { "main", "cg", NULL };
	(void)state;
	check_untrapped("computed", "computed.c", "20000", fns, 70000, 100);
}

/* A jcc rel8 with a branch target right after it and 2 bytes before it (no window fits)
 * jumps (rel8) to an island in the padding after a return, which jumps to its trampoline:
 * it does not trap. */
static void test_island(void **state)
{
	static const char *const fns[] = { "main", "isl", NULL };
	(void)state;
	check_untrapped("island", "island.c", "20000", fns, 70000, 100);
}

/* PyObject_Free's `test; je; test; je; 1: pop; ret` (1: an entry): the second jcc rel8 has
 * neither a window nor an island; its tail records it when the first one's trampoline falls
 * into it, so it does not trap (11,436 traps in 20,000 calls before). */
static void test_jcc_tail(void **state)
{
	static const char *const fns[] = { "main", "tl", NULL };
	(void)state;
	check_untrapped("tail", "tail.c", "20000", fns, 70000, 100);
}

/* libsqlite3's branches to an instruction of a ret's window past its first 5 bytes (`jne
 * 1b` to `1: xor %eax,%eax; ret`, and a not-taken path through `jmp 4b` to `4: pop %rbx;
 * ret`): their trampolines go to the copy of it in the ret's trampoline, so the ret does
 * not trap (12,340 traps in 20,000 iterations before). */
static void test_paths_into_windows(void **state)
{
	static const char *const fns[] = { "main", "pa", "pb", "pz", NULL };
	(void)state;
	check_untrapped("prefix", "prefix.c", "20000", fns, 100000, 100);
}

/* A ret without a window whose straight-line block is entered by branches (git's `jae 1f`
 * to `1: pop %rbx; ret`, 500 traps in git status): its tail copies the block, and the
 * branches' trampolines go to the copies of their targets (12,005 traps in 20,000 calls
 * before: the paths ran into the ret's trap). */
static void test_ret_tail_prefix(void **state)
{
	static const char *const fns[] = { "main", "rt", NULL };
	(void)state;
	check_untrapped("rettail", "rettail.c", "20000", fns, 60000, 100);
}

/* A conditional branch's target inside a window's first 5 bytes (git's `jae 1f` to `1: pop
 * %rbx; ret`, the window from a `jmp` target before it): the branch's trampoline goes to the
 * window's copy, so the window is made, and the code the jump reaches natively runs into it
 * instead of the ret's trap (8,889 traps in 20,000 calls before). */
static void test_jcc_target_in_window(void **state)
{
	static const char *const fns[] = { "main", "je", NULL };
	(void)state;
	check_untrapped("jccentry", "jccentry.c", "20000", fns, 60000, 100);
}

/* First executions: the trampolines of 256 `jcc rel32` run once each (twice in all) are made
 * at start-up, so none of them traps (256 traps before: each one's first execution). `info`
 * gives the share trapped after warm-up (traps past each CTI's first) beside the whole. */
static void test_first_executions(void **state)
{
	static const char *const fns[] = { "main", "many", NULL };
	char path[512];
	(void)state;
	check_untrapped("first", "first.c", "2", fns, 500, 20);
	snprintf(path, sizeof path, "%s/first.tkbt", work);
	assert_int_equal(sh("\"$TK\" info %s | grep -Eq 'trapped, [0-9.]+%% after warm-up \\([0-9]+ traps "
			    "were their CTI.s first\\)'", path), 0);
	/* trap-only: each of them traps every time; only its first trap is warm-up */
	assert_int_equal(sh("\"$TK\" info %s/first_t.tkbt | awk '/CTIs patched/ { t = $4; for (i = 1; i <= NF; "
			    "i++) if ($i == \"traps\" && $(i + 1) == \"were\") f = $(i - 1) } END { exit !(f >= 256 "
			    "&& t - f >= 256) }'", work), 0);
}

/* --module: a shared library the executable links, traced alone (the executable is not);
 * a requested module that is only dlopen'ed later is named as not traced. */
static void test_shared_module(void **state)
{
	static const char *const fns[] = { "shape_walk", "shape_pick", "step", NULL };
	struct bt_counts *c = calloc(1, sizeof *c);
	char path[512];
	(void)state;
	assert_non_null(c);
	compile("libshape.so", "libshape.c", "-shared -fPIC");
	compile("libother.so", "libshape.c", "-shared -fPIC");
	assert_int_equal(sh("cc -O2 -g -o %s/useshape %s/data/btrace/useshape.c -L%s -lshape "
			    "-Wl,-rpath,'$ORIGIN' -ldl", work, getenv("TESTS"), work), 0);
	rec_opts = "--module ./libshape.so";
	check("useshape", "", fns);
	rec_opts = "";
	snprintf(path, sizeof path, "%s/useshape.tkbt", work);
	assert_int_equal(bt_decode_file(c, path), 0);
	assert_int_equal(bt_fn_insns(c, "main"), 0);
	assert_int_equal(sh("\"$TK\" info %s | grep -q 'module .*/libshape.so '", path), 0);
	assert_int_equal(sh("\"$TK\" info %s | grep -q 'module .*/useshape '", path), 1);
	/* libother.so: requested, opened by dlopen after start-up */
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -o late.tkbt --module ./libshape.so "
			    "--module ./libother.so -- ./useshape ./libother.so > late.out 2>&1", work), 0);
	assert_int_equal(sh("grep -q 'libother.so is not loaded at start-up' %s/late.out", work), 0);
	assert_int_equal(sh("grep -q 'libother.so was loaded after start-up (dlopen); it is not traced' "
			    "%s/late.out", work), 0);
	free(c);
}

static void test_longjmp_and_signals(void **state)
{
	static const char *const fns[] = { "main", "deep", "on_usr1", NULL };
	(void)state;
	compile("longjmp", "longjmp.c", "");
	check("longjmp", "", fns);
}

static void test_threads(void **state)
{
	static const char *const fns[] = { "main", "work", "collatz", "start_early", NULL };
	(void)state;
	compile("threads", "threads.c", "-pthread");
	check("threads", "", fns);
}

static void test_fork(void **state)
{
	static const char *const fns[] = { "main", "spin", "before", NULL };
	static const char *const child_fns[] = { "child_work", NULL };
	(void)state;
	compile("fork", "fork.c", "");
	check_fork("fork", fns, child_fns);
}

static void test_exceptions(void **state)
{
	static const char *const fns[] = { "main+main.cold", "_ZL7throwerii+_ZL7throwerii.cold+thrower(int,", NULL };
	(void)state;
	if (sh("command -v g++ >/dev/null") != 0) {
		fprintf(stderr, "g++ missing: C++ exceptions not checked\n");
		fail();
	}
	compile("exceptions", "exceptions.cc", "");
	check("exceptions", "", fns);
}

/* A fast SIGPROF timer interrupts the program anywhere, trampolines included: the trace must
 * decode without error, count `work` exactly, and contain one whole handler run per tick. */
static void async_signals(const char *name)
{
	struct bt_counts *c = calloc(1, sizeof *c);
	char path[512], line[256];
	long ticks = 0, cg_ticks = 0;
	assert_non_null(c);
	compile(name, "sigprof.c", "");
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q %s -o %s.tkbt -- ./%s > %s.out", work, rec_opts,
			    name, name, name), 0);
	assert_int_equal(sh("cd %s && valgrind -q --tool=callgrind --callgrind-out-file=%s.cg.%%p ./%s > %s.cgout 2>/dev/null",
			    work, name, name, name), 0);
	snprintf(path, sizeof path, "%s/%s.out", work, name);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof line, f));
	assert_int_equal(sscanf(strstr(line, "ticks"), "ticks %ld", &ticks), 1);
	fclose(f);
	snprintf(path, sizeof path, "%s/%s.cgout", work, name);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof line, f));
	assert_int_equal(sscanf(strstr(line, "ticks"), "ticks %ld", &cg_ticks), 1);
	fclose(f);
	snprintf(path, sizeof path, "%s/%s.tkbt", work, name);
	assert_int_equal(bt_decode_file(c, path), 0);
	assert_int_equal(c->decode_errors, 0);
	snprintf(path, sizeof path, "%s/%s.cg.", work, name);
	uint64_t w = bt_fn_insns(c, "work"), cw = bt_cg_self(path, "work");
	uint64_t h = bt_fn_insns(c, "on_prof"), ch = bt_cg_self(path, "on_prof");
	fprintf(stderr, "%s: work btrace %llu callgrind %llu; on_prof btrace %llu (%ld ticks), callgrind %llu (%ld ticks)\n",
		name, (unsigned long long)w, (unsigned long long)cw, (unsigned long long)h, ticks,
		(unsigned long long)ch, cg_ticks);
	assert_int_equal(w, cw);
	/* every tick ran the whole handler once, the same way (callgrind also charges the
	 * signal-return stub to the handler, so its per-tick figure is not comparable) */
	assert_true(ticks > 0);
	assert_true(h > 0);
	assert_int_equal(h % (uint64_t)ticks, 0);
	(void)ch;
	free(c);
}

static void test_async_signals(void **state)
{
	(void)state;
	async_signals("sigprof");
}

static void test_exec(void **state)
{
	struct bt_counts *c = calloc(1, sizeof *c);
	char path[512];
	(void)state;
	assert_non_null(c);
	compile("exec", "exec.c", "");
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q -o exec.tkbt -- ./exec > exec.out", work), 0);
	assert_int_equal(sh("grep -q \"exec'd\" %s/exec.out", work), 0);
	assert_int_equal(sh("\"$TK\" info %s/exec.tkbt | grep -q 'ends at exec'", work), 0);
	assert_int_equal(sh("\"$TK\" info %s/exec.tkbt | grep -q 'module .*/exec '", work), 0);
	snprintf(path, sizeof path, "%s/exec.tkbt", work);
	assert_int_equal(bt_decode_file(c, path), 0);
	assert_int_equal(c->decode_errors, 0);
	assert_true(bt_fn_insns(c, "main") > 100);
	free(c);
}

static void test_refusals(void **state)
{
	(void)state;
	compile("sigtrap", "sigtrap.c", "");
	/* its own SIGTRAP handler: refused, exit 3, the program does not go on */
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q -o sigtrap.tkbt -- ./sigtrap > sigtrap.out 2>&1", work), 3);
	assert_int_equal(sh("grep -q 'own SIGTRAP handler' %s/sigtrap.out", work), 0);
	assert_int_not_equal(sh("grep -q 'not reached' %s/sigtrap.out", work), 0);
	/* a static binary cannot take a preload library */
	if (sh("cc -static -O1 -o %s/static %s/data/btrace/fork.c 2>/dev/null", work, getenv("TESTS")) == 0) {
		assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q -o static.tkbt -- ./static > static.out 2>&1", work), 3);
		assert_int_equal(sh("grep -q 'statically linked' %s/static.out", work), 0);
	}
}

/* libc functions compared with callgrind when libc is traced: those whose work depends only
 * on the program (its input, its calls). Left out, for principled reasons:
 * - string functions chosen by IFUNC (strcmp, strlen, strchrnul, memcpy): valgrind reports
 *   its own CPUID, so glibc runs __strcmp_avx2 under callgrind and __strcmp_evex natively;
 *   callgrind also counts each iteration of a rep-prefixed instruction;
 * - malloc internals: the loader and libc's start-up allocate before the recorder starts
 *   (the recorder itself takes no heap memory), so part of the heap's history is missing;
 * - start_thread and clone: valgrind has no clone3, so glibc falls back to clone under it;
 *   pthread_join: whether it waits depends on timing;
 * - what walks the loaded libraries or atfork handlers (__cxa_finalize, _dl_fini, fork
 *   handlers): the recorder adds its library, Zydis and an atfork handler;
 * - qsort_r: it calls malloc and free through libc's .plt.got, whose jumps callgrind does
 *   not charge to the caller, while this test's count puts code without a symbol there;
 * - libc's own start-up, which runs before the recorder does (only libc.so.6's code from
 *   __libc_start_main on is traced), and _exit, where the trace ends.
 * The program's libc work runs in three places: main, a second thread and an atexit
 * handler, and the exit path (stdio's flush after the destructors) is recorded too. */
static const char *const libc_fns[] = {
	"qsort", "msort_with_tmp.part.0", "strtol", "____strtol_l_internal", "snprintf",
	"__vsnprintf_internal", "__vfprintf_internal", "_itoa_word", "read_int", "_IO_default_xsputn",
	"_IO_str_init_static_internal", "_IO_setb", "_IO_no_init", "_IO_old_init", "_IO_padn", "printf",
	"__libc_start_main@@GLIBC_2.34", "exit", "__run_exit_handlers", "_IO_cleanup", NULL };

/* The trace of NAME decodes without an unresolved re-entry, and converted to raw PT per
 * thread, libipt counts the same instructions as in the container. */
static void check_clean(const char *name)
{
	struct bt_counts *c = calloc(1, sizeof *c);
	char path[512];
	assert_non_null(c);
	snprintf(path, sizeof path, "%s/%s.tkbt", work, name);
	assert_int_equal(bt_decode_file(c, path), 0);
	assert_int_equal(c->decode_errors, 0);
	assert_int_equal(unresolved(name), 0);
	assert_int_equal(sh("\"$TK\" info %s | grep -q 'complete'", path), 0);
	uint64_t converted = ipt_converted_insns(name);
	fprintf(stderr, "%s: %llu instructions, %llu after convert --to ipt\n", name,
		(unsigned long long)c->insns, (unsigned long long)converted);
	assert_int_equal(converted, c->insns);
	free(c);
}

/* libc traced with the program: per-function counts of the program and of libc equal
 * callgrind's, and the trace is clean. */
static void test_libc(void **state)
{
	static const char *const prog_fns[] = { "main", "by_str", "convert", "worker", "at_end" };
	const char *fns[sizeof prog_fns / sizeof *prog_fns + sizeof libc_fns / sizeof *libc_fns];
	size_t n = 0;
	(void)state;
	for (size_t i = 0; i < sizeof prog_fns / sizeof *prog_fns; i++)
		fns[n++] = prog_fns[i];
	for (size_t i = 0; libc_fns[i]; i++)
		fns[n++] = libc_fns[i];
	fns[n] = NULL;
	compile("libcwork", "libcwork.c", "-pthread");
	rec_opts = "--module main --module libc.so.6";
	check("libcwork", "500", fns);
	check_clean("libcwork");
	rec_opts = "";
}

/* libc alone: the program's calls into it, its comparator's calls back (strcmp from by_str,
 * called by msort) and the thread enter from untraced code. */
static void test_libc_alone(void **state)
{
	(void)state;
	compile("libcwork_l", "libcwork.c", "-pthread");
	rec_opts = "--module libc.so.6";
	check("libcwork_l", "500", libc_fns);
	check_clean("libcwork_l");
	rec_opts = "";
}

/* The programs of the tests above, with libc traced as well: the program's counts stay
 * exact, the traces clean. One case a program, so that each stays short. */
static void with_libc(const char *name, const char *src, const char *flags, const char *args,
		      const char *const *fns)
{
	rec_opts = "--module main --module libc.so.6";
	compile(name, src, flags);
	check(name, args, fns);
	check_clean(name);
	rec_opts = "";
}

static void test_threads_with_libc(void **state)
{
	static const char *const thr[] = { "main", "work", "collatz", "start_early", NULL };
	(void)state;
	with_libc("threads_lc", "threads.c", "-pthread", "", thr);
}

static void test_longjmp_with_libc(void **state)
{
	static const char *const lj[] = { "main", "deep", "on_usr1", "longjmp", "_setjmp", "__longjmp", NULL };
	(void)state;
	with_libc("longjmp_lc", "longjmp.c", "", "", lj);
}

static void test_callbacks_with_libc(void **state)
{
	static const char *const cb[] = { "main", "setup", "by_value", "by_digit_sum", "at_end", "on_usr1",
					  "msort_with_tmp.part.0", NULL };
	(void)state;
	with_libc("callbacks_lc", "callbacks.c", "", "300", cb);
	/* trap-only and trampoline recordings of libc decode to the same instructions */
	rec_opts = "--module main --module libc.so.6";
	check_modes_agree("callbacks_lc", "300");
	rec_opts = "";
}

static void test_exceptions_with_libc(void **state)
{
	static const char *const ex[] = { "main+main.cold", "_ZL7throwerii+_ZL7throwerii.cold+thrower(int,", NULL };
	(void)state;
	with_libc("exceptions_lc", "exceptions.cc", "", "", ex);
}

static void test_fork_and_signals_with_libc(void **state)
{
	static const char *const fk[] = { "main", "spin", "before", NULL };
	static const char *const fk_child[] = { "child_work", NULL };
	(void)state;
	rec_opts = "--module main --module libc.so.6";
	compile("fork_lc", "fork.c", "");
	check_fork("fork_lc", fk, fk_child);
	assert_int_equal(unresolved("fork_lc"), 0);
	async_signals("sigprof_lc");
	rec_opts = "";
}

int main(void)
{
	snprintf(work, sizeof work, "/tmp/tk-btrace-cg-XXXXXX");
	if (!mkdtemp(work))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_branches),
		cmocka_unit_test(test_branches_traps_only),
		cmocka_unit_test(test_rets_untrapped),
		cmocka_unit_test(test_computed_jump),
		cmocka_unit_test(test_island),
		cmocka_unit_test(test_jcc_tail),
		cmocka_unit_test(test_paths_into_windows),
		cmocka_unit_test(test_first_executions),
		cmocka_unit_test(test_ret_tail_prefix),
		cmocka_unit_test(test_jcc_target_in_window),
		cmocka_unit_test(test_calls_relocated),
		cmocka_unit_test(test_indirect_relocated),
		cmocka_unit_test(test_shared_module),
		cmocka_unit_test(test_longjmp_and_signals),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_exceptions),
		cmocka_unit_test(test_async_signals),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_example_loops),
		cmocka_unit_test(test_callbacks),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_libc_alone),
		cmocka_unit_test(test_threads_with_libc),
		cmocka_unit_test(test_longjmp_with_libc),
		cmocka_unit_test(test_callbacks_with_libc),
		cmocka_unit_test(test_exceptions_with_libc),
		cmocka_unit_test(test_fork_and_signals_with_libc),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sh("rm -rf %s", work);
	return rc;
}
