/* `tracekit convert --to ipt` of recorded branch traces writes what hardware with return
 * compression writes. Real programs (loops, recursion with longjmp and deeper than the
 * 64-entry return stack, function pointers, callbacks from untraced code, signals, C++
 * exceptions, threads, a shared module) are recorded with `tracekit record --btrace`;
 * each thread's stream is converted with and without return compression, and:
 *  (a) libipt's pt_insn decoder finds in the compressed stream, address for address, the
 *      instructions `tracekit decode` reconstructs from the container;
 *  (b) `tracekit decode` of the compressed stream (-j 1 and -j 2) lists the same
 *      instructions and events;
 *  (c) most returns became TNT bits: the TIPs drop by more than half the returns to
 *      traced code libipt saw, and --no-retcomp writes the recorded stream byte for byte;
 *  (d) `tracekit profile` of the compressed stream equals the container's;
 *  (e) `tracekit decode --stat` (-j 1 and -j 2), whose walk takes whole paths through
 *      calls and returns at a time, counts the instructions libipt found. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "oracle/btrace_ipt.h"
#include "tracekit/ipt.h"

static char work[256];

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long len;
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	assert_non_null(p = malloc((size_t)len + 1));
	assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return p;
}

static uint64_t tips(const uint8_t *pt, size_t n)
{
	struct tk_ipt_stats st;
	assert_int_equal(tk_ipt_scan(pt, n, &st, NULL, NULL), 0);
	assert_int_equal(st.gaps.count, 0);
	return st.count[TK_IPT_PKT_TIP];
}

/* One thread of a recorded container at BASE.tkbt (module map in BT). */
static void check_thread(const char *base, const struct tk_btrace *bt, size_t k, const char *elf)
{
	uint32_t tid = tk_btrace_thread(bt, k)->tid;
	char p[600];
	size_t n, rn, ln;

	/* the container's flow, and both conversions */
	assert_int_equal(sh("\"$TK\" decode --no-disasm --tid %u %s.tkbt | tail -n +2 > %s.%u.ref",
			    tid, base, base, tid), 0);
	assert_int_equal(sh("\"$TK\" convert --to ipt -q --tid %u -o %s.%u.pt %s.tkbt", tid, base,
			    tid, base), 0);
	assert_int_equal(sh("\"$TK\" convert --to ipt --no-retcomp -q --tid %u -o %s.%u.raw %s.tkbt",
			    tid, base, tid, base), 0);

	/* (b) tracekit decodes the compressed stream into the same listing */
	for (int j = 1; j <= 2; j++)
		assert_int_equal(sh("\"$TK\" decode --no-disasm -j %d %s %s.%u.pt | cmp - %s.%u.ref",
				    j, elf, base, tid, base, tid), 0);

	/* (a) so does libipt, from the modules' files */
	struct bt_counts *c = calloc(1, sizeof *c);
	assert_non_null(c);
	c->keep_ips = 1;
	snprintf(p, sizeof p, "%s.%u.pt", base, tid);
	uint8_t *pt = slurp(p, &n);
	bt_decode_stream(c, bt, pt, n);
	assert_int_equal(c->decode_errors, 0);
	snprintf(p, sizeof p, "%s.%u.ref", base, tid);
	char *ref = (char *)slurp(p, &ln), *s = ref, *end = ref + ln;
	size_t i = 0;
	ref[ln] = 0;
	for (; s < end; s = strchr(s, '\n') + 1) {
		if (*s == '[')
			continue;   /* an event */
		uint64_t ip = strtoull(s, NULL, 16);
		if (i >= c->nips || c->ips[i] != ip) {
			fprintf(stderr, "%s thread %u: instruction %zu: tracekit %llx, libipt %llx\n", base,
				tid, i, (unsigned long long)ip,
				(unsigned long long)(i < c->nips ? c->ips[i] : 0));
			fail();
		}
		i++;
	}
	assert_int_equal(i, c->nips);
	assert_true(i > 0);

	/* (c) returns compressed; --no-retcomp is the recorded stream */
	snprintf(p, sizeof p, "%s.%u.raw", base, tid);
	uint8_t *raw = slurp(p, &rn), *rec;
	size_t recn;
	assert_int_equal(tk_btrace_thread_stream(bt, k, &rec, &recn), 0);
	assert_int_equal(rn, recn);
	assert_memory_equal(raw, rec, rn);
	uint64_t t_raw = tips(raw, rn), t_pt = tips(pt, n);
	fprintf(stderr, "%s thread %u: %zu instructions, %llu returns (%llu to traced code); "
		"%zu bytes, %llu TIPs -> %zu bytes, %llu TIPs\n", base, tid, i,
		(unsigned long long)c->returns, (unsigned long long)c->returns_in, rn,
		(unsigned long long)t_raw, n, (unsigned long long)t_pt);
	assert_true(t_raw >= c->returns_in);   /* recorded: each one a TIP */
	if (c->returns_in >= 20) {
		assert_true(t_raw - t_pt > c->returns_in / 2);
		assert_true(n < rn);
	}
	assert_true(t_pt <= t_raw);

	/* (e) counting alone: the number libipt found */
	for (int j = 1; j <= 2; j++)
		assert_int_equal(sh("test \"$(\"$TK\" decode --stat -j %d %s %s.%u.pt | "
				    "awk '/^insn:/ {print $2}')\" = %zu", j, elf, base, tid, i), 0);

	/* (d) the same profile, times in us: the branch trace's TSC rate (measured by the
	 * recording) is given to the raw stream, which has none */
	assert_int_equal(sh("\"$TK\" profile --to csv --tid %u -o %s.%u.p1 %s.tkbt", tid, base, tid,
			    base), 0);
	assert_int_equal(sh("hz=$(\"$TK\" info %s.tkbt | awk '$1 == \"TSC\" && $3 == \"ticks/s\" {print $2}') && "
			    "[ \"$hz\" -gt 1000000 ] && "
			    "\"$TK\" profile --to csv --tsc-hz \"$hz\" %s -o %s.%u.p2 %s.%u.pt", base, elf, base,
			    tid, base, tid), 0);
	assert_int_equal(sh("cmp %s.%u.p1 %s.%u.p2", base, tid, base, tid), 0);

	free(ref);
	free(pt);
	free(raw);
	free(rec);
	free(c->ips);
	free(c);
}

/* Record NAME ARGS (built from SRC with FLAGS unless SRC is NULL), then check each thread. */
static void check(const char *name, const char *src, const char *flags, const char *rec_opts,
		  const char *args)
{
	char base[512], elf[4096] = "";
	if (src) {
		const char *cc = strstr(src, ".cc") ? "g++" : "cc";
		const char *dir = strncmp(src, "examples/", 9) ? "$TESTS/data/btrace/" : "$SRC/";
		assert_int_equal(sh("%s -g %s -o %s/%s %s%s", cc, flags, work, name, dir, src), 0);
	}
	assert_int_equal(sh("cd %s && \"$TK\" record --btrace -q %s -o %s.tkbt -- ./%s %s >/dev/null",
			    work, rec_opts, name, name, args), 0);
	snprintf(base, sizeof base, "%s/%s", work, name);

	size_t n;
	char path[600];
	snprintf(path, sizeof path, "%s.tkbt", base);
	uint8_t *data = slurp(path, &n);
	int err;
	struct tk_btrace *bt = tk_btrace_open(data, n, NULL, &err);
	assert_non_null(bt);
	assert_true(tk_btrace_info(bt)->complete);
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		size_t l = strlen(elf);
		snprintf(elf + l, sizeof elf - l, " --elf %s:0x%llx", m->path, (unsigned long long)m->bias);
	}
	for (size_t k = 0; k < tk_btrace_thread_count(bt); k++)
		check_thread(base, bt, k, elf);
	tk_btrace_free(bt);
	free(data);
}

static void test_loops_recursion(void **state)
{
	(void)state;
	check("loops", "examples/loops.c", "-O0", "", "");
	check("recursion", "examples/recursion.c", "-O0", "", "");
	check("deep", "deep.c", "-O2", "", "");
}

static void test_calls_callbacks(void **state)
{
	(void)state;
	check("calls", "calls.c", "-O2", "", "3000");
	check("callbacks", "callbacks.c", "-O2", "", "300");
}

static void test_signals_longjmp(void **state)
{
	(void)state;
	check("longjmp", "longjmp.c", "-O2", "", "");
	check("sigprof", "sigprof.c", "-O2", "", "");
}

static void test_exceptions(void **state)
{
	(void)state;
	if (sh("command -v g++ >/dev/null") != 0) {
		fprintf(stderr, "g++ missing: C++ exceptions not checked\n");
		fail();
	}
	check("exceptions", "exceptions.cc", "-O2", "", "");
}

static void test_threads(void **state)
{
	(void)state;
	check("threads", "threads.c", "-O2 -pthread", "", "");
}

static void test_shared_module(void **state)
{
	(void)state;
	assert_int_equal(sh("cc -O2 -g -shared -fPIC -o %s/libshape.so \"$TESTS\"/data/btrace/libshape.c",
			    work), 0);
	assert_int_equal(sh("cc -O2 -g -o %s/useshape \"$TESTS\"/data/btrace/useshape.c -L%s -lshape "
			    "-Wl,-rpath,'$ORIGIN' -ldl", work, work), 0);
	check("useshape", NULL, NULL, "--module ./libshape.so", "");
}

int main(void)
{
	snprintf(work, sizeof work, "/tmp/tk-btrace-rc-XXXXXX");
	if (!mkdtemp(work))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loops_recursion),
		cmocka_unit_test(test_calls_callbacks),
		cmocka_unit_test(test_signals_longjmp),
		cmocka_unit_test(test_exceptions),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_shared_module),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sh("rm -rf %s", work);
	return rc;
}
