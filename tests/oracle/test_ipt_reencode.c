/* Differential test of the re-encoder (tk_ipt_reencode): generated PT streams over this
 * program's and libc's real code, with every return a TIP (as a branch trace records
 * them) or already compressed, with interrupts, asynchronous disables, syscalls,
 * overflows and MTC/CYC timing, are written again with return compression. libipt's
 * pt_insn decoder and tracekit (one chunk, many chunks, two threads) must find exactly the
 * instructions of the input in the output, tracekit's listing with events and times must
 * not change, the returns compressed must be exactly those the generator's model of the
 * hardware stack compresses (one TIP less each), and the output must not depend on the
 * number of threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "oracle/ptcommon.h"
#include "tracekit/ipt.h"

static void same_insns(const char *what, const struct addrs *want, const struct addrs *got)
{
	assert_int_equal(report_diff(what, want, got), -1);
}

/* tracekit's listing (addresses, events, times) without the overflow lines, whose offsets
 * are the stream's own. */
static void listing(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *fo,
		    struct tk_buf *out, struct tk_ipt_flow_stats *st)
{
	struct tk_buf b;
	const char *p, *end;

	assert_int_equal(tk_buf_init(&b, -1, 1 << 20), 0);
	assert_int_equal(tk_buf_init(out, -1, 1 << 20), 0);
	assert_int_equal(tk_ipt_flow_text(buf, len, fo, TK_IPT_TEXT_NO_DISASM | TK_IPT_TEXT_TIME,
					  &b, st), 0);
	for (p = b.data, end = b.data + b.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)(nl - p) + 1;

		if (!memmem(p, n, "[overflow at offset", 19))
			tk_buf_put(out, p, n);
		p += n;
	}
	tk_buf_free(&b);
}

static uint64_t count_tips(const uint8_t *buf, size_t len)
{
	struct tk_ipt_stats s;

	assert_int_equal(tk_ipt_scan(buf, len, &s, NULL, NULL), 0);
	return s.count[TK_IPT_PKT_TIP];
}

struct expect {
	int overflows;      /* the input has OVF packets */
	int damaged;        /* bytes of the input are overwritten */
	int cut_psbs;       /* and the PSB+s where chunks start lose their PSBEND */
};

static void run_case(const struct ptgen_opts *go_in, struct tk_ipt_flow_opts timing,
		     const struct expect *x)
{
	struct ptgen g;
	struct ptgen_opts go = *go_in;
	struct tk_image *img = self_image();
	struct addrs ref = { 0 }, got = { 0 }, one = { 0 }, many = { 0 }, par = { 0 };
	struct tk_ipt_flow_stats st1, st2;
	struct tk_ipt_reencode_stats rs, rs2;
	struct tk_buf out, out2, t1, t2;
	uint64_t nerr;
	long len;

	assert_non_null(img);
	/* where indirect branches go (functions that cannot reach abort's hlt loop, which
	 * libipt walks for ever when a generated stream stops tracing inside it) */
	uint64_t entries[] = { (uintptr_t)&strlen, (uintptr_t)&memcpy, (uintptr_t)&qsort,
			       (uintptr_t)&snprintf, (uintptr_t)&malloc, (uintptr_t)&free,
			       (uintptr_t)&tk_ipt_flow_decode, (uintptr_t)&tk_image_read,
			       (uintptr_t)&tk_isa_classify };
	go.entries = entries;
	go.nentries = sizeof(entries) / sizeof(entries[0]);
	assert_int_equal(ptgen_init(&g, img, &go), 0);
	len = ptgen_run(&g);
	assert_true(len > 0);
	if (x->damaged) {
		/* a few runs of garbage: decode errors, resynchronised at the next PSB */
		uint64_t r = 12345;

		for (int i = 0; i < 6; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			size_t at = 5000 + (size_t)(r >> 33) % (size_t)(len - 10000);
			for (int k = 0; k < 24; k++)
				g.buf[at + (size_t)k] = (uint8_t)(r >> (k % 56));
		}
		/* and right before the PSBs where the re-encoder's chunks (16 KiB) start:
		 * an overflow at the end of a chunk, tracing on again in the next one */
		uint64_t offs[4];
		assert_true(tk_ipt_split(g.buf, (size_t)len, 16384, offs, 4) >= 4);
		for (int i = 1; i < 4; i++)
			memset(g.buf + offs[i] - 12, 0x55, 12);
		/* a chunk's PSB+ cut after its FUP (0x55: no opcode): the flow goes on at
		 * the next PSB+ in that chunk, with no enable in between (not where the
		 * garbage above took the PSBEND already) */
		int cut = 0;
		for (int i = 1; i < 4 && x->cut_psbs; i++) {
			uint8_t *end = memmem(g.buf + offs[i], 64, "\x02\x23", 2);

			if (end) {
				memset(end, 0x55, 2);
				cut++;
			}
		}
		assert_true(!x->cut_psbs || cut >= 2);
	}
	struct tk_ipt_flow_opts fo = timing;
	fo.sz = sizeof(fo);
	fo.image = img;
	fo.nthreads = 1;
	fo.chunk_bytes = 16384;
	struct tk_ipt_reencode_opts ro = { .sz = sizeof(ro), .psb_period = 0 };

	assert_int_equal(tk_buf_init(&out, -1, 1 << 20), 0);
	assert_int_equal(tk_ipt_reencode(g.buf, (size_t)len, &fo, &ro, &out, &rs), 0);
	/* on two threads: the same bytes */
	fo.nthreads = 2;
	assert_int_equal(tk_buf_init(&out2, -1, 1 << 20), 0);
	assert_int_equal(tk_ipt_reencode(g.buf, (size_t)len, &fo, &ro, &out2, &rs2), 0);
	assert_int_equal(out.len, out2.len);
	assert_memory_equal(out.data, out2.data, out.len);
	assert_int_equal(rs.bytes, out.len);
	assert_int_equal(rs.compressed, rs2.compressed);
	tk_buf_free(&out2);
	fprintf(stderr, "%zu bytes -> %zu: %llu of %llu returns compressed, %llu TIPs, %llu PSBs, "
		"%llu OVFs\n", (size_t)len, out.len, (unsigned long long)rs.compressed,
		(unsigned long long)rs.returns, (unsigned long long)rs.tips,
		(unsigned long long)rs.psbs, (unsigned long long)rs.overflows);

	const uint8_t *o = (const uint8_t *)out.data;
	if (getenv("REENC_SAVE")) {
		/* the input and the output, for ptdump and ptxed */
		char path[256];
		FILE *fp;

		snprintf(path, sizeof(path), "%s.%llu.in", getenv("REENC_SAVE"), (unsigned long long)go.seed);
		if ((fp = fopen(path, "wb"))) {
			fwrite(g.buf, 1, (size_t)len, fp);
			fclose(fp);
		}
		snprintf(path, sizeof(path), "%s.%llu.maps", getenv("REENC_SAVE"), (unsigned long long)go.seed);
		FILE *mi = fopen("/proc/self/maps", "r"), *mo = fopen(path, "w");
		int ch;
		while (mi && mo && (ch = fgetc(mi)) != EOF)
			fputc(ch, mo);
		if (mi)
			fclose(mi);
		if (mo)
			fclose(mo);
		snprintf(path, sizeof(path), "%s.%llu.out", getenv("REENC_SAVE"), (unsigned long long)go.seed);
		if ((fp = fopen(path, "wb"))) {
			fwrite(o, 1, out.len, fp);
			fclose(fp);
		}
	}
	if (!x->damaged) {
		/* libipt: the input's instructions from the output, address for address */
		assert_int_equal(libipt_insns(g.buf, (size_t)len, img, &ref, &nerr), 0);
		assert_int_equal(nerr, 0);
		assert_true(ref.n > 10000);
		assert_int_equal(libipt_insns(o, out.len, img, &got, &nerr), 0);
		assert_int_equal(nerr, 0);
		same_insns("libipt, re-encoded", &ref, &got);
	} else {
		/* the input's tracekit flow (errors and all) is the reference */
		assert_int_equal(tk_insns(g.buf, (size_t)len, img, 1, SIZE_MAX / 2, &ref, &st1), 0);
		assert_true(st1.errors > 0);
		assert_int_equal(libipt_insns(o, out.len, img, &got, &nerr), 0);
		assert_int_equal(nerr, 0);   /* what is left decodes cleanly */
	}
	assert_int_equal(tk_insns(o, out.len, img, 1, SIZE_MAX / 2, &one, &st1), 0);
	assert_int_equal(st1.errors, 0);
	assert_int_equal(tk_insns(o, out.len, img, 1, 4096, &many, &st2), 0);
	/* split for real (how many chunks moves with where the test binary is loaded: the
	 * generator walks its own code) */
	assert_true(st2.chunks > 4);
	assert_int_equal(tk_insns(o, out.len, img, 2, 4096, &par, &st2), 0);
	if (!x->damaged) {
		same_insns("tracekit, re-encoded, one chunk", &ref, &one);
	} else {
		/* gaps cut the flow before the error (an overflow stops at the last packet)
		 * and libipt agrees on what the output holds */
		same_insns("tracekit vs libipt, re-encoded", &got, &one);
		assert_true(one.n > ref.n / 2 && one.n <= ref.n);
		assert_true(rs.overflows >= 1);
		assert_true(st1.overflows == rs.overflows);
	}
	same_insns("tracekit, re-encoded, 4 KiB chunks", &one, &many);
	same_insns("tracekit, re-encoded, -j 2", &one, &par);
	if (x->overflows)
		assert_true(st1.overflows > 0 && st1.overflows == rs.overflows);

	/* the returns compressed are those the generator's model of the hardware stack
	 * compresses (it empties at the same PSBs and overflows), each one TIP less */
	uint64_t tips_in = count_tips(g.buf, (size_t)len), tips_out = count_tips(o, out.len);
	assert_int_equal(tips_out, rs.tips);
	if (!x->damaged && !go.timing) {
		assert_int_equal(rs.compressed, g.compressible);
		assert_int_equal(tips_in - tips_out, go.no_retcomp ? rs.compressed : 0);
	}
	assert_true(rs.compressed > 0);

	if (!x->damaged) {
		/* the listing with events and times is the input's */
		fo.nthreads = 1;
		fo.chunk_bytes = SIZE_MAX / 2;
		listing(g.buf, (size_t)len, &fo, &t1, &st1);
		struct tk_ipt_flow_opts fo2 = { .sz = sizeof(fo2), .image = img, .nthreads = 2,
						.chunk_bytes = 4096 };
		listing(o, out.len, &fo2, &t2, &st2);
		assert_true(t1.len > ref.n * 17);
		assert_true(same_text("listings (input, then output)", &t1, &t2));
		tk_buf_free(&t1);
		tk_buf_free(&t2);
	}

	tk_buf_free(&out);
	free(ref.a), free(got.a), free(one.a), free(many.a), free(par.a);
	ptgen_fini(&g);
	tk_image_free(img);
}

static const struct tk_ipt_flow_opts no_timing = { 0 };

static void test_branches(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 3, .max_bytes = 200000, .psb_every = 4096, .no_retcomp = 1 };

	run_case(&o, no_timing, &(struct expect){ 0 });
}

/* interrupts (FUP + TIP), FUP + TIP.PGD ... TIP.PGE, syscalls (TIP.PGD, TIP.PGE) */
static void test_async_events(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 8, .max_bytes = 200000, .psb_every = 2048, .p_async = 5,
				.p_async_disable = 3, .p_taken = 60, .no_retcomp = 1 };

	run_case(&o, no_timing, &(struct expect){ 0 });
}

static void test_overflow(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 98, .max_bytes = 150000, .psb_every = 4096, .p_ovf = 2,
				.p_async = 2, .no_retcomp = 1 };

	run_case(&o, no_timing, &(struct expect){ .overflows = 1 });
}

/* a hardware-like input (returns compressed already) keeps its flow */
static void test_compressed_input(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 5, .max_bytes = 150000, .psb_every = 4096, .p_async = 2,
				.max_depth = 80 };

	run_case(&o, no_timing, &(struct expect){ 0 });
}

/* MTC and CYC between branches: a TSC where the time changes keeps every time */
static void test_timing(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 11, .max_bytes = 120000, .psb_every = 3000,
				.timing = PTGEN_MTC | PTGEN_CYC, .mtc_freq = 3, .no_retcomp = 1 };
	struct tk_ipt_flow_opts t = { .mtc_freq = 3, .nom_freq = 24, .cpuid_15_eax = 2,
				      .cpuid_15_ebx = 170 };

	run_case(&o, t, &(struct expect){ 0 });
}

/* damaged input: the output is a clean stream with an overflow where data was lost */
static void test_damaged(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 21, .max_bytes = 150000, .psb_every = 4096, .no_retcomp = 1 };

	run_case(&o, no_timing, &(struct expect){ .damaged = 1 });
}

/* the damage cuts the PSB+s where chunks start: tracing goes on at the next PSB+ */
static void test_damaged_chunk_starts(void **state)
{
	(void)state;
	struct ptgen_opts o = { .seed = 23, .max_bytes = 150000, .psb_every = 4096, .no_retcomp = 1 };

	run_case(&o, no_timing, &(struct expect){ .damaged = 1, .cut_psbs = 1 });
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_branches),
		cmocka_unit_test(test_async_events),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_compressed_input),
		cmocka_unit_test(test_timing),
		cmocka_unit_test(test_damaged),
		cmocka_unit_test(test_damaged_chunk_starts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
