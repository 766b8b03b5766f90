/* A PSB whose first bytes a packet before it has eaten (corrupt or hostile input): the
 * packet that runs over it is an error and decoding resumes at the PSB, in one chunk as
 * where a chunk starts at that PSB; the packet scan does not count a negative skip; and
 * re-encoding writes the loss as an overflow so its output decodes cleanly. Found by
 * fuzz_ipt_flow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "tracekit/flow.h"
#include "tracekit/ipt.h"
#include "tracekit/ipt_flow.h"

/* The fuzz target's code image (the bytes at 0x1000..0x1013 matter here). */
static const uint8_t code[] = {
	0x31, 0xc0, 0x83, 0xf8, 0x01, 0x74, 0x02, 0xeb, 0x03, 0x90, 0x90, 0x90,
	0xe8, 0x0f, 0x00, 0x00, 0x00, 0xff, 0xe0, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	0x90, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	0xcc, 0xcc, 0xcc, 0xcc,
	0x0f, 0x05, 0xc3,
};

#define PSB16 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, \
	      0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82

/* PSB+ (TSC, MODE.Exec), MODE.Exec, TIP.PGE 0x1003 (into the middle of an instruction),
 * TNT ".", then at 0x26 a CYC of four bytes whose last byte, 0x02 at 0x29, starts the
 * second PSB: the one-chunk decoder reads on from 0x2a; a chunk boundary sits at 0x29. */
static const uint8_t stream[] = {
	PSB16,
	0x19, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,         /* 0x10 tsc 0x1000 */
	0x99, 0x01, 0x02, 0x23,                                 /* mode.exec, psbend */
	0x99, 0x01,                                             /* 0x1c mode.exec */
	0x71, 0x03, 0x10, 0x00, 0x00, 0x00, 0x00,               /* 0x1e tip.pge 0x1003 */
	0x04,                                                   /* 0x25 tnt "." */
	0x8f, 0xff, 0x55,                                       /* 0x26 cyc ... */
	PSB16,                                                  /* 0x29: its 02 ends the cyc */
	0x19, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00,         /* tsc 0x3000 */
	0x99, 0x01,
	0x7d, 0x20, 0x10, 0x00, 0x00, 0x00, 0x00,               /* fup 0x1020 */
	0x02, 0x23,                                             /* psbend */
	0x6d, 0x11, 0x10, 0x00, 0x00, 0x00, 0x00,               /* tip 0x1011 (jmp rax) */
	0x6d, 0x30, 0x10, 0x00, 0x00, 0x00, 0x00,               /* tip 0x1030 (syscall) */
	0x01,                                                   /* tip.pgd */
};

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ev;
	*(size_t *)ctx += n;
	return 0;
}

static struct tk_image *image(void)
{
	int err;
	struct tk_image *img = tk_image_new(&err);

	assert_non_null(img);
	assert_int_equal(tk_image_add_mem(img, code, sizeof(code), 0x1000), 0);
	return img;
}

static void test_overrun_is_an_error(void **state)
{
	struct tk_image *img = image();
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = 1 };
	struct tk_ipt_flow_stats st;
	struct tk_buf text[2];
	size_t n = 0;
	struct tk_sink sink = { count_events, &n };

	(void)state;
	/* in one chunk and with a chunk starting at the PSB: the CYC at 0x26 ran over the PSB
	 * at 0x29: an error there, its 3 bytes skipped; what follows the PSB decodes whole,
	 * the same either way */
	for (int split = 0; split < 2; split++) {
		o.chunk_bytes = split ? 32 : 0;
		assert_int_equal(tk_ipt_flow_events(stream, sizeof(stream), &o, sink, &st), 0);
		assert_int_equal(st.chunks, split ? 2 : 1);
		assert_int_equal(st.errors, 1);
		assert_int_equal(st.gaps.first_offsets[0], 0x26);
		assert_int_equal(st.gaps.bytes_skipped, 3);
		/* 0x1003..0x1012 before; nop, ret, jmp rax, syscall after */
		assert_int_equal(st.insns, 6 + 4);
		assert_int_equal(tk_buf_init(&text[split], -1, 4096), 0);
		assert_int_equal(tk_ipt_flow_text(stream, sizeof(stream), &o, 0, &text[split], &st), 0);
	}
	assert_int_equal(text[0].len, text[1].len);
	assert_memory_equal(text[0].data, text[1].data, text[0].len);
	tk_buf_free(&text[0]);
	tk_buf_free(&text[1]);
	tk_image_free(img);
}

static void test_reencoded_loss_is_overflow(void **state)
{
	struct tk_image *img = image();
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = 1,
				      .chunk_bytes = 32 };
	struct tk_ipt_flow_opts d = { .sz = sizeof(d), .image = img, .nthreads = 1 };
	struct tk_ipt_reencode_stats rs;
	struct tk_ipt_flow_stats st;
	struct tk_buf out;
	size_t n = 0;
	struct tk_sink sink = { count_events, &n };

	(void)state;
	assert_int_equal(tk_buf_init(&out, -1, 4096), 0);
	assert_int_equal(tk_ipt_reencode(stream, sizeof(stream), &o, NULL, &out, &rs), 0);
	assert_int_equal(rs.overflows, 1);
	assert_int_equal(tk_ipt_flow_events((const uint8_t *)out.data, out.len, &d, sink, &st), 0);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.overflows, 1);
	tk_buf_free(&out);
	tk_image_free(img);
}

struct errs {
	unsigned n;
	uint64_t off, skipped;
};

static int on_error(void *ctx, uint64_t off, int err, uint64_t skipped)
{
	struct errs *e = ctx;

	(void)err;
	e->n++;
	e->off = off;
	e->skipped = skipped;
	return 0;
}

static void test_scan_skips_nothing_backwards(void **state)
{
	struct tk_ipt_stats st;
	struct errs e = { 0 };

	(void)state;
	/* one chunk: the TNT at 0x2a decodes, the 02 82 at 0x2b is a PSB cut short; the
	 * scan resyncs at the PSB at 0x29, before the bad packet: nothing skipped */
	assert_int_equal(tk_ipt_scan(stream, sizeof(stream), &st, on_error, &e), 0);
	assert_int_equal(e.n, 1);
	assert_int_equal(e.off, 0x2b);
	assert_int_equal(e.skipped, 0);
	assert_int_equal(st.gaps.bytes_skipped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_overrun_is_an_error),
		cmocka_unit_test(test_reencoded_loss_is_overflow),
		cmocka_unit_test(test_scan_skips_nothing_backwards),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
