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
#include "fuzz/ipt_flow_code.h"

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

/* The same with a CYC of three bytes: the second PSB is whole, but the flow (at an int3,
 * waiting for an event) cannot reach its FUP's IP: an error there, nothing skipped, and
 * decoding goes on at that PSB. (With chunks of 32 bytes, a resync past the first chunk's
 * end once decoded on after it for ever.) */
static uint8_t stream_psb_whole[sizeof(stream)];

/* A PSB+ cut short: no PSBEND before the next PSB, which starts a sound one. */
static const uint8_t stream_no_psbend[] = {
	PSB16,
	0x19, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,         /* tsc 0x1000 */
	0x99, 0x01,                                             /* mode.exec */
	0x7d, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00,               /* fup 0x1000 */
	PSB16,                                                  /* 0x21 */
	0x19, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x99, 0x01,
	0x7d, 0x20, 0x10, 0x00, 0x00, 0x00, 0x00,               /* fup 0x1020 */
	0x02, 0x23,                                             /* psbend */
	0x6d, 0x11, 0x10, 0x00, 0x00, 0x00, 0x00,               /* tip 0x1011 */
	0x6d, 0x30, 0x10, 0x00, 0x00, 0x00, 0x00,               /* tip 0x1030 */
	0x01,                                                   /* tip.pgd */
};

/* A bad packet, then a PSB whose own PSB+ is bad right after the PSB: two errors, not a
 * second try at that PSB (a chunk that starts at it does not retry it either). */
static const uint8_t stream_bad_psb_plus[] = {
	PSB16,
	0x19, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,         /* tsc */
	0x99, 0x01, 0x02, 0x23,                                 /* mode.exec, psbend */
	0x99, 0xb1,                                             /* 0x1c: reserved bits */
	0x00, 0x00,                                             /* pad */
	PSB16,                                                  /* 0x20 */
	0x25,                                                   /* an unknown opcode */
	0x00, 0x00, 0x00, 0x00,
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
	assert_int_equal(tk_image_add_mem(img, ipt_flow_code, sizeof(ipt_flow_code), 0x1000), 0);
	return img;
}

/* BUF decoded in one chunk and in chunks of 32 bytes (one starting at each PSB): the same
 * text and counts either way; those of the one chunk in *ST. */
static void same_either_way(const uint8_t *buf, size_t len, struct tk_ipt_flow_stats *st)
{
	struct tk_image *img = image();
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = 1 };
	struct tk_ipt_flow_stats s[2];
	struct tk_buf text[2];

	for (int split = 0; split < 2; split++) {
		o.chunk_bytes = split ? 32 : 0;
		assert_int_equal(tk_buf_init(&text[split], -1, 4096), 0);
		assert_int_equal(tk_ipt_flow_text(buf, len, &o, 0, &text[split], &s[split]), 0);
	}
	assert_int_equal(s[0].chunks, 1);
	assert_int_equal(s[1].chunks, 2);
	assert_int_equal(s[0].insns, s[1].insns);
	assert_int_equal(s[0].errors, s[1].errors);
	assert_int_equal(s[0].gaps.bytes_skipped, s[1].gaps.bytes_skipped);
	assert_int_equal(s[0].gaps.first_offsets[0], s[1].gaps.first_offsets[0]);
	assert_int_equal(text[0].len, text[1].len);
	assert_memory_equal(text[0].data, text[1].data, text[0].len);
	*st = s[0];
	tk_buf_free(&text[0]);
	tk_buf_free(&text[1]);
	tk_image_free(img);
}

static void test_overrun_is_an_error(void **state)
{
	struct tk_ipt_flow_stats st;

	(void)state;
	/* the CYC at 0x26 ran over the PSB at 0x29: an error there, its 3 bytes skipped;
	 * what follows the PSB decodes whole */
	same_either_way(stream, sizeof(stream), &st);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.gaps.first_offsets[0], 0x26);
	assert_int_equal(st.gaps.bytes_skipped, 3);
	/* 0x1003..0x1012 before; nop, ret, jmp rax, syscall after */
	assert_int_equal(st.insns, 6 + 4);
}

static void test_unreachable_psb(void **state)
{
	struct tk_ipt_flow_stats st;

	(void)state;
	memcpy(stream_psb_whole, stream, sizeof(stream));
	stream_psb_whole[0x28] = 0xa6;   /* the CYC's last byte */
	same_either_way(stream_psb_whole, sizeof(stream_psb_whole), &st);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.gaps.first_offsets[0], 0x29);
	assert_int_equal(st.gaps.bytes_skipped, 0);
	/* 0x1003..0x1014 (the int3) before; nop, ret, jmp rax, syscall after */
	assert_int_equal(st.insns, 7 + 4);
}

static void test_psb_without_psbend(void **state)
{
	struct tk_ipt_flow_stats st;

	(void)state;
	same_either_way(stream_no_psbend, sizeof(stream_no_psbend), &st);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.gaps.first_offsets[0], 0x21);
	assert_int_equal(st.gaps.bytes_skipped, 0);
	assert_int_equal(st.insns, 4);   /* nop, ret, jmp rax, syscall */
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

static void test_bad_psb_plus(void **state)
{
	struct tk_ipt_flow_stats st;

	(void)state;
	same_either_way(stream_bad_psb_plus, sizeof(stream_bad_psb_plus), &st);
	assert_int_equal(st.errors, 2);
	assert_int_equal(st.gaps.first_offsets[0], 0x1c);
	assert_int_equal(st.gaps.first_offsets[1], 0x20);
	assert_int_equal(st.insns, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_overrun_is_an_error),
		cmocka_unit_test(test_unreachable_psb),
		cmocka_unit_test(test_psb_without_psbend),
		cmocka_unit_test(test_bad_psb_plus),
		cmocka_unit_test(test_reencoded_loss_is_overflow),
		cmocka_unit_test(test_scan_skips_nothing_backwards),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
