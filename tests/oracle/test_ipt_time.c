/* Differential test of PT timing: generated streams with TSC, TMA, CBR and MTC or CYC
 * packets, decoded by libipt's pt_insn decoder (pt_insn_time after each instruction) and
 * by tracekit's --time listing with one chunk and with many chunks on two threads: the
 * same time for every instruction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "oracle/ptcommon.h"
#include "tracekit/out.h"

#define NO_TIME UINT64_MAX

static uint64_t entries[16];
static size_t nentries;

struct timed {
	struct addrs ip, t;
	struct addrs ev;   /* libipt: an event was pending after the instruction */
};

/* libipt: (ip, time) of each instruction; NO_TIME before the first TSC. */
static int libipt_timed(const uint8_t *buf, size_t len, struct tk_image *img,
			const struct tk_ipt_flow_opts *fo, struct timed *out)
{
	struct pt_config cfg;
	struct pt_insn_decoder *d;
	int status;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	cfg.mtc_freq = (uint8_t)fo->mtc_freq;
	cfg.nom_freq = (uint8_t)fo->nom_freq;
	cfg.cpuid_0x15_eax = fo->cpuid_15_eax;
	cfg.cpuid_0x15_ebx = fo->cpuid_15_ebx;
	d = pt_insn_alloc_decoder(&cfg);
	if (!d)
		return -1;
	pt_image_set_callback(pt_insn_get_image(d), pt_read_cb, img);
	for (;;) {
		status = pt_insn_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_insn insn;
			uint64_t tsc;
			uint32_t lost_mtc, lost_cyc;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_insn_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			memset(&insn, 0, sizeof(insn));
			insn.iclass = ptic_error;
			status = pt_insn_next(d, &insn, sizeof(insn));
			if (insn.iclass != ptic_error) {
				addrs_push(&out->ip, insn.ip);
				if (pt_insn_time(d, &tsc, &lost_mtc, &lost_cyc) < 0)
					tsc = NO_TIME;
				addrs_push(&out->t, tsc);
				addrs_push(&out->ev, status >= 0 && (status & pts_event_pending));
			}
			if (status < 0)
				break;
		}
		if (status != -pte_eos)
			break;
	}
	pt_insn_free_decoder(d);
	return 0;
}

static uint64_t hex(const char *s, const char **end)
{
	uint64_t v = 0;

	for (;; s++) {
		int c = *s;

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			break;
	}
	*end = s;
	return v;
}

/* tracekit: the instruction lines of the --time --no-disasm listing. */
static void tk_timed(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *fo,
		     struct timed *out)
{
	struct tk_buf b;
	struct tk_ipt_flow_stats st;
	const char *p, *end, *e;

	assert_int_equal(tk_buf_init(&b, -1, 1 << 20), 0);
	assert_int_equal(tk_ipt_flow_text(buf, len, fo, TK_IPT_TEXT_NO_DISASM | TK_IPT_TEXT_TIME,
					  &b, &st), 0);
	assert_int_equal(st.errors, 0);
	for (p = b.data, end = b.data + b.len; p < end; p = memchr(p, '\n', (size_t)(end - p)) + 1) {
		uint64_t t;

		if (!strncmp(p, "[no time] ", 10)) {
			t = NO_TIME;
			p += 10;
		} else {
			assert_int_equal(*p, '[');
			t = hex(p + 1, &e);
			assert_int_equal(*e, ']');
			p = e + 2;
		}
		if (*p == '[')
			continue;   /* an event */
		addrs_push(&out->ip, hex(p, &e));
		addrs_push(&out->t, t);
	}
	tk_buf_free(&b);
}

/* libipt gives an instruction the time of the last TNT or TIP packet it queried (a
 * branch gets the time of the packet that resolved it), and a PSB+ met in the middle of a
 * block changes the time from that instruction on. tracekit stamps a whole block with the
 * time of the packet that resolves its last instruction (fetched before the block is
 * walked). So the times agree at every instruction that needs trace to go on (conditional
 * branch, return, indirect branch), which is what is compared. */
static void compare(const char *what, const struct tk_image *img, const struct timed *want,
		    const struct timed *got)
{
	struct tk_isa isa;
	size_t checked = 0;

	tk_isa_init(&isa);
	assert_int_equal(first_diff(&want->ip, &got->ip), -1);
	for (size_t i = 0; i + 1 < want->t.n; i++) {
		uint8_t code[16];
		struct tk_isa_insn in;
		uint64_t ip = want->ip.a[i];
		int n = tk_image_read(img, ip, code, sizeof(code));

		assert_true(n > 0);
		assert_true(tk_isa_classify(&isa, TK_ISA_64, code, (size_t)n, ip, &in) >= 0);
		if (in.cls != TK_ISA_JCC && in.cls != TK_ISA_RET && in.cls != TK_ISA_JMP_IND &&
		    in.cls != TK_ISA_CALL_IND)
			continue;
		/* libipt looks for events bound to the next IP before it returns a branch
		 * and reads their packets' time then (a PSB+ right after a TIP gives the
		 * branch the PSB's TSC): not comparable */
		if (want->ev.a[i])
			continue;
		if (got->t.a[i] != want->t.a[i]) {
			fprintf(stderr, "%s: time of insn %zu (%llx): want %llx got %llx\n", what,
				i, (unsigned long long)ip, (unsigned long long)want->t.a[i],
				(unsigned long long)got->t.a[i]);
			for (size_t k = i > 6 ? i - 6 : 0; k < i + 3 && k < want->t.n; k++)
				fprintf(stderr, "  %zu: %llx %llx %llx\n", k,
					(unsigned long long)want->ip.a[k],
					(unsigned long long)want->t.a[k], (unsigned long long)got->t.a[k]);
		}
		assert_int_equal(got->t.a[i], want->t.a[i]);
		checked += want->t.a[i] != NO_TIME;
	}
	assert_true(checked > 1000);
}

static int timeline_events(void *ctx, const struct tk_event *ev, size_t n)
{
	return tk_timeline_events(ctx, ev, n);
}

/* The trace's Perfetto timeline through tk_ipt_flow_events at -j NTHREADS in chunks of
 * CHUNK bytes; COUNTED: with the timeline's own sink (blocks counted in the walker, time
 * events held back to a chunk's end, chunks passed ahead at -j 2), else with one that
 * gets every block and time event. */
static struct tk_buf timeline_of(const uint8_t *buf, size_t len, struct tk_ipt_flow_opts fo,
				 unsigned nthreads, size_t chunk, int counted)
{
	struct tk_timeline_opts to = { .sz = sizeof to, .kind = TK_TIMELINE_PERFETTO, .nthreads = nthreads };
	struct tk_ipt_flow_stats st;
	struct tk_buf b;

	assert_int_equal(tk_buf_init(&b, -1, 1 << 16), 0);
	struct tk_timeline *t = tk_timeline_new(&b, &to, NULL);
	assert_non_null(t);
	struct tk_sink s = counted ? tk_timeline_sink(t) : (struct tk_sink){ timeline_events, t, NULL };
	fo.nthreads = nthreads;
	fo.chunk_bytes = chunk;
	assert_int_equal(tk_ipt_flow_events(buf, len, &fo, s, &st), 0);
	assert_int_equal(tk_timeline_finish(t), 0);
	tk_timeline_free(t);
	return b;
}

static void run_case(unsigned timing, struct tk_ipt_flow_opts fo, uint64_t seed)
{
	struct ptgen g;
	struct ptgen_opts go = { .seed = seed, .max_bytes = 120000, .psb_every = 3000,
				 .timing = timing, .mtc_freq = fo.mtc_freq };
	struct tk_image *img = self_image();
	struct timed ref = { 0 }, one = { 0 }, par = { 0 };
	size_t distinct = 0;
	long len;

	assert_non_null(img);
	nentries = 0;
	entries[nentries++] = (uint64_t)(uintptr_t)&strlen;
	entries[nentries++] = (uint64_t)(uintptr_t)&qsort;
	entries[nentries++] = (uint64_t)(uintptr_t)&snprintf;
	entries[nentries++] = (uint64_t)(uintptr_t)&malloc;
	entries[nentries++] = (uint64_t)(uintptr_t)&tk_ipt_flow_decode;
	entries[nentries++] = (uint64_t)(uintptr_t)&tk_isa_classify;
	go.entries = entries;
	go.nentries = nentries;
	assert_int_equal(ptgen_init(&g, img, &go), 0);
	len = ptgen_run(&g);
	assert_true(len > 0);

	assert_int_equal(libipt_timed(g.buf, (size_t)len, img, &fo, &ref), 0);
	assert_true(ref.ip.n > 1000);
	for (size_t i = 1; i < ref.t.n; i++)
		distinct += ref.t.a[i] != ref.t.a[i - 1];
	assert_true(distinct > 100);   /* the test exercises MTC/CYC, not just TSC */

	fo.sz = sizeof(fo);
	fo.image = img;
	fo.nthreads = 1;
	fo.chunk_bytes = SIZE_MAX / 2;
	tk_timed(g.buf, (size_t)len, &fo, &one);
	compare("-j 1, one chunk", img, &ref, &one);
	fo.nthreads = 2;
	fo.chunk_bytes = 4096;
	tk_timed(g.buf, (size_t)len, &fo, &par);
	compare("-j 2, 4 KiB chunks", img, &ref, &par);
	/* and the chunk seams change nothing at all */
	assert_int_equal(first_diff(&one.t, &par.t), -1);

	/* a timeline from counted blocks and held-back times is the one from every event,
	 * whole or in chunks passed ahead (the times of its last slices' ends included) */
	struct tk_buf want = timeline_of(g.buf, (size_t)len, fo, 1, SIZE_MAX / 2, 0);
	assert_true(want.len > 10000);
	for (int k = 0; k < 3; k++) {
		struct tk_buf got = timeline_of(g.buf, (size_t)len, fo, k ? 2 : 1, k ? 4096 : SIZE_MAX / 2, 1);
		assert_int_equal(got.len, want.len);
		assert_memory_equal(got.data, want.data, want.len);
		tk_buf_free(&got);
		if (k == 1) {   /* uncounted in chunks too */
			got = timeline_of(g.buf, (size_t)len, fo, 2, 4096, 0);
			assert_int_equal(got.len, want.len);
			assert_memory_equal(got.data, want.data, want.len);
			tk_buf_free(&got);
		}
	}
	tk_buf_free(&want);

	free(ref.ip.a), free(ref.t.a), free(ref.ev.a), free(one.ip.a), free(one.t.a), free(par.ip.a), free(par.t.a);
	ptgen_fini(&g);
	tk_image_free(img);
}

static void test_mtc(void **state)
{
	(void)state;
	struct tk_ipt_flow_opts fo = { .mtc_freq = 3, .cpuid_15_eax = 2, .cpuid_15_ebx = 170 };

	run_case(PTGEN_MTC, fo, 11);
	fo.mtc_freq = 0;
	fo.cpuid_15_eax = 1;
	fo.cpuid_15_ebx = 84;
	run_case(PTGEN_MTC, fo, 12);
}

static void test_cyc(void **state)
{
	(void)state;
	struct tk_ipt_flow_opts fo = { .nom_freq = 24, .cpuid_15_eax = 2, .cpuid_15_ebx = 170 };

	run_case(PTGEN_CYC, fo, 21);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mtc),
		cmocka_unit_test(test_cyc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
