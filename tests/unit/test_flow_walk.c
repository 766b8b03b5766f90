/* The generic flow walker with a scripted oracle (as the branch-trace and xtrace formats
 * use it): blocks, calls, returns, compressed returns, stops at an IP, missing code,
 * a trace that does not fit the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "flow/bcache.h"
#include "flow/share.h"
#include "tracekit/flow.h"

static const uint8_t code[] = {
	0x31, 0xc0,                   /* 1000 xor eax, eax */
	0x83, 0xf8, 0x01,             /* 1002 cmp eax, 1 */
	0x74, 0x02,                   /* 1005 jz 1009 */
	0xeb, 0x03,                   /* 1007 jmp 100c */
	0x90, 0x90, 0x90,             /* 1009 nop x3 */
	0xe8, 0x0f, 0x00, 0x00, 0x00, /* 100c call 1020 */
	0xff, 0xe0,                   /* 1011 jmp rax */
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	0x90, 0xc3,                   /* 1020 nop; ret */
};

struct script {
	struct tk_flow_q q[64];
	int n, i;
};

static int next(void *ctx, struct tk_flow_q *q)
{
	struct script *s = ctx;

	if (s->i == s->n) {
		q->kind = TK_FLOWQ_END;
		return 0;
	}
	*q = s->q[s->i++];
	return 0;
}

static struct tk_event got[64];
static size_t ngot;

static int collect(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n && ngot < 64; i++)
		got[ngot++] = ev[i];
	return 0;
}

static int walk(struct tk_flow *f, struct script *s, uint64_t *ip, struct tk_flow_result *res)
{
	struct tk_flow_oracle o = { next, s };
	struct tk_event_batch b;
	int mode = TK_FLOW_64, rc;

	ngot = 0;
	tk_event_batch_init(&b, (struct tk_sink){ collect, NULL });
	rc = tk_flow_walk(f, ip, &mode, &o, &b, res);
	tk_event_batch_flush(&b);
	return rc;
}

static void test_walk(void **state)
{
	(void)state;
	int err;
	struct tk_image *img = tk_image_new(&err);
	struct tk_flow *f;
	struct tk_flow_result res;
	uint64_t ip = 0x1000;

	tk_image_add_mem(img, code, sizeof(code), 0x1000);
	f = tk_flow_new(img, &err);
	assert_non_null(f);
	/* jz not taken, call, ret compressed (TNT 1), jmp rax -> 0x1009, then the trace
	 * stops at 0x100a */
	struct script s = { .n = 3 };
	s.q[0] = (struct tk_flow_q){ .kind = TK_FLOWQ_TNT, .ntnt = 2, .tnt = 0x1 };
	s.q[1] = (struct tk_flow_q){ .kind = TK_FLOWQ_TIP, .ip = 0x1009, .mode = -1 };
	s.q[2] = (struct tk_flow_q){ .kind = TK_FLOWQ_STOP, .ip = 0x100a, .has_ip = 1 };
	assert_int_equal(walk(f, &s, &ip, &res), TK_FLOW_STOPPED);
	assert_int_equal(ip, 0x100a);
	assert_int_equal(res.insns, 3 + 1 + 1 + 2 + 1 + 1);
	/* blocks: [1000..1005] [1007] [100c] call [1020..1021] return [1011] [1009] */
	assert_int_equal(got[0].kind, TK_EV_BLOCK);
	assert_int_equal(got[0].addr, 0x1000);
	assert_int_equal(got[0].addr2, 0x1005);
	assert_int_equal(got[0].count, 3);
	assert_int_equal(got[2].addr, 0x100c);
	assert_int_equal(got[3].kind, TK_EV_CALL);
	assert_int_equal(got[3].addr2, 0x1020);
	assert_int_equal(got[3].arg, 0x1011);
	assert_int_equal(got[5].kind, TK_EV_RETURN);
	assert_int_equal(got[5].addr2, 0x1011);
	assert_int_equal(got[7].kind, TK_EV_BLOCK);
	assert_int_equal(got[7].addr, 0x1009);
	assert_int_equal(got[7].count, 1);   /* stopped inside the nop run */

	/* a compressed return with an empty call stack does not fit */
	tk_flow_reset_stack(f);
	tk_flow_clear_pending(f);
	ip = 0x1020;
	s = (struct script){ .n = 1 };
	s.q[0] = (struct tk_flow_q){ .kind = TK_FLOWQ_TNT, .ntnt = 1, .tnt = 1 };
	assert_int_equal(walk(f, &s, &ip, &res), -TK_E_BAD_FORMAT);
	assert_int_equal(res.from, 0x1021);

	/* an indirect jump into missing code */
	tk_flow_clear_pending(f);
	ip = 0x1011;
	s = (struct script){ .n = 2 };   /* (more trace after the TIP: not its end) */
	s.q[0] = (struct tk_flow_q){ .kind = TK_FLOWQ_TIP, .ip = 0x5000, .mode = -1 };
	s.q[1] = (struct tk_flow_q){ .kind = TK_FLOWQ_TNT, .ntnt = 1, .tnt = 1 };
	assert_int_equal(walk(f, &s, &ip, &res), -TK_E_NOMAP);
	assert_int_equal(ip, 0x5000);

	/* the end of the trace: the walk stops at once, before the next instruction (nothing
	 * says it ran; libipt's end of trace) */
	tk_flow_clear_pending(f);
	ip = 0x1000;
	s = (struct script){ .n = 0 };
	assert_int_equal(walk(f, &s, &ip, &res), TK_FLOW_ENDED);
	assert_int_equal(res.from, 0x1000);
	assert_int_equal(ip, 0x1000);
	assert_int_equal(res.insns, 0);
	tk_flow_free(f);
	tk_image_free(img);
}

/* A loop: dec ecx; jnz back; call f; jmp back; f: ret */
static const uint8_t loop_code[] = {
	0xff, 0xc9,                   /* 2000 dec ecx */
	0x75, 0xfc,                   /* 2002 jnz 2000 */
	0xe8, 0x07, 0x00, 0x00, 0x00, /* 2004 call 2010 */
	0xeb, 0xf5,                   /* 2009 jmp 2000 */
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, /* 200b */
	0xc3,                         /* 2010 ret */
};

struct tally {
	struct tk_flow *f;
	uint64_t blocks, calls, returns, insns;
	struct tk_buf text;           /* --no-disasm lines printed as the events arrive */
};

static int tally(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tally *t = ctx;

	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind == TK_EV_BLOCK) {
			t->blocks++;
			t->insns += ev[i].count;
			assert_int_equal(tk_flow_print_block(t->f, &t->text, &ev[i], 0), 0);
		}
		t->calls += ev[i].kind == TK_EV_CALL;
		t->returns += ev[i].kind == TK_EV_RETURN;
	}
	return 0;
}

static void line(void *ctx, uint64_t addr, unsigned len)
{
	(void)len;
	tk_buf_hex(ctx, addr, 16);
	tk_buf_putc(ctx, '\n');
}

/* Many TNT packets through the walker's TNT fast path, with more events than a batch
 * holds: the same instructions with and without flow events, and the printed addresses
 * equal to the block expansion. */
static void test_loop_quiet(void **state)
{
	(void)state;
	int err, mode;
	struct tk_image *img = tk_image_new(&err);
	struct tk_flow_result res[2];
	struct tally t[2];
	uint64_t ip[2];
	int rc[2];

	tk_image_add_mem(img, loop_code, sizeof(loop_code), 0x2000);
	for (int quiet = 0; quiet < 2; quiet++) {
		struct tk_flow *f = tk_flow_new(img, &err);
		struct script s = { .n = 40 };
		struct tk_event_batch b;
		struct tk_flow_oracle o = { next, &s };

		assert_non_null(f);
		tk_flow_set_flow_events(f, !quiet);
		/* per iteration: jnz taken 3 times, not taken, compressed return: 11101 */
		for (int i = 0; i < s.n; i++)
			s.q[i] = (struct tk_flow_q){ .kind = TK_FLOWQ_TNT, .ntnt = 30,
						     .tnt = 0x1d * 0x2108421ull };
		memset(&t[quiet], 0, sizeof(t[quiet]));
		t[quiet].f = f;
		assert_int_equal(tk_buf_init(&t[quiet].text, -1, 4096), 0);
		tk_event_batch_init(&b, (struct tk_sink){ tally, &t[quiet] });
		ip[quiet] = 0x2000;
		mode = TK_FLOW_64;
		rc[quiet] = tk_flow_walk(f, &ip[quiet], &mode, &o, &b, &res[quiet]);
		assert_int_equal(tk_event_batch_flush(&b), 0);
		if (!quiet) {
			/* 240 iterations of 3 * 2 + 2 + 1 + 1 + 1 instructions; the trace
			 * ends with the last return's bit: the jump back after it is not
			 * listed (nothing says it ran) */
			assert_int_equal(rc[0], TK_FLOW_ENDED);
			assert_int_equal(res[0].insns, 240 * 11 - 1);
			assert_int_equal(t[0].insns, res[0].insns);
			assert_int_equal(t[0].calls, 240);
			assert_int_equal(t[0].returns, 240);
			assert_true(t[0].blocks > TK_EVENT_BATCH);
			/* printed lines = the expansion of each block */
			struct tk_buf want;

			assert_int_equal(tk_buf_init(&want, -1, 4096), 0);
			for (int it = 0; it < 240; it++) {
				for (int k = 0; k < 4; k++) {
					line(&want, 0x2000, 2);
					line(&want, 0x2002, 2);
				}
				line(&want, 0x2004, 5);
				line(&want, 0x2010, 1);
				if (it < 239)
					line(&want, 0x2009, 2);
			}
			assert_int_equal(ip[0], 0x2009);
			assert_int_equal(t[0].text.len, want.len);
			assert_memory_equal(t[0].text.data, want.data, want.len);
			tk_buf_free(&want);
		} else {
			assert_int_equal(t[1].blocks + t[1].calls + t[1].returns, 0);
			assert_int_equal(rc[1], rc[0]);
			assert_int_equal(res[1].insns, res[0].insns);
			assert_int_equal(res[1].from, res[0].from);
			assert_int_equal(ip[1], ip[0]);
		}
		tk_buf_free(&t[quiet].text);
		tk_flow_free(f);
	}
	tk_image_free(img);
}

/* --no-disasm lines of blocks that cross a 64 KiB and a 4 GiB boundary or stay in a page
 * (the printer keeps the upper digits of the last page), walked in turn with one walker:
 * each address as tk_buf_hex writes it. */
static void test_print_pages(void **state)
{
	(void)state;
	static const uint64_t at[] = { 0xfff8, 0xfffffff8, 0x1000, 0xfff8, 0x7ffffffffff8, 0x1000 };
	const int n = sizeof at / sizeof at[0];
	uint8_t run[17];
	int err;
	struct tk_image *img = tk_image_new(&err);
	struct tk_flow *f;
	struct tally t = { 0 };
	struct tk_buf want;

	memset(run, 0x90, 16);        /* 16 nops, then a ret to itself: the walk stops there */
	run[16] = 0xc3;
	for (int i = 0; i < 5; i++)
		if (i != 3)
			assert_int_equal(tk_image_add_mem(img, run, sizeof run, at[i]), 0);
	assert_non_null(f = tk_flow_new(img, &err));
	t.f = f;
	assert_int_equal(tk_buf_init(&t.text, -1, 4096), 0);
	assert_int_equal(tk_buf_init(&want, -1, 4096), 0);
	for (int i = 0; i < n; i++) {
		struct script s = { .n = 1 };
		struct tk_flow_oracle o = { next, &s };
		struct tk_flow_result res;
		struct tk_event_batch b;
		uint64_t ip = at[i];
		int mode = TK_FLOW_64;

		s.q[0] = (struct tk_flow_q){ .kind = TK_FLOWQ_TIP, .ip = at[i] + 16, .has_ip = 1,
					     .mode = -1 };
		tk_event_batch_init(&b, (struct tk_sink){ tally, &t });
		assert_int_equal(tk_flow_walk(f, &ip, &mode, &o, &b, &res), TK_FLOW_ENDED);
		assert_int_equal(tk_event_batch_flush(&b), 0);
		assert_int_equal(res.insns, 17);
		tk_flow_clear_pending(f);
		for (int k = 0; k < 17; k++)
			line(&want, at[i] + (uint64_t)k, 1);
	}
	assert_int_equal(t.text.len, want.len);
	assert_memory_equal(t.text.data, want.data, want.len);
	tk_buf_free(&want);
	tk_buf_free(&t.text);
	tk_flow_free(f);
	tk_image_free(img);
}

/* Block caches that share their blocks (the decoders of one parallel decode): a cache
 * given a block another decoded gets the block it would have decoded itself, without
 * decoding it; a function entry stays the flag of the cache that has it. */
static void test_shared_blocks(void **state)
{
	(void)state;
	static const uint64_t starts[] = { 0x1000, 0x1007, 0x1009, 0x100c, 0x1011, 0x1020,
					   0x1021, 0x2000 /* no code: empty */ };
	const size_t n = sizeof starts / sizeof *starts;
	const uint64_t entry = 0x1020;
	int err;
	struct tk_image *img = tk_image_new(&err);
	struct tk_bshare *sh = tk_bshare_new();
	struct tk_bcache alone, first, second;

	assert_non_null(img);
	assert_non_null(sh);
	assert_int_equal(tk_image_add_mem(img, code, sizeof code, 0x1000), 0);
	assert_int_equal(tk_bcache_init(&alone, img), 0);
	assert_int_equal(tk_bcache_init(&first, img), 0);
	assert_int_equal(tk_bcache_init(&second, img), 0);
	first.share = second.share = sh;
	assert_int_equal(tk_bcache_set_entries(&second, &entry, 1), 0);
	for (size_t i = 0; i < n; i++)
		assert_non_null(tk_bcache_get(&first, starts[i], TK_ISA_64));
	/* backwards: a cache's blocks are its own, in the order it met them */
	for (size_t i = n; i-- > 0;) {
		assert_non_null(tk_bcache_get(&alone, starts[i], TK_ISA_64));
		assert_non_null(tk_bcache_get(&second, starts[i], TK_ISA_64));
	}
	assert_true(first.decoded_bytes > 0);
	assert_int_equal(alone.decoded_bytes, first.decoded_bytes);
	assert_int_equal(second.decoded_bytes, 0);   /* every block from the share */
	for (size_t i = 0; i < n; i++) {
		const struct tk_block *a = tk_bcache_get(&alone, starts[i], TK_ISA_64);
		const struct tk_block *b = tk_bcache_get(&second, starts[i], TK_ISA_64);
		uint32_t ia = tk_bcache_index(&alone, starts[i], TK_ISA_64);
		uint32_t ib = tk_bcache_index(&second, starts[i], TK_ISA_64);

		assert_int_equal(a->start, b->start);
		assert_int_equal(a->last, b->last);
		assert_int_equal(a->next, b->next);
		assert_int_equal(a->target, b->target);
		assert_int_equal(a->ninsn, b->ninsn);
		assert_int_equal(a->cls, b->cls);
		assert_int_equal(a->sys, b->sys);
		assert_int_equal(b->flags & TK_BLK_ENTRY, starts[i] == entry ? TK_BLK_ENTRY : 0);
		assert_int_equal(a->flags, b->flags & ~TK_BLK_ENTRY);
		assert_memory_equal(alone.lens + a->lens, second.lens + b->lens, a->ninsn);
		assert_int_equal(alone.links[ia].flags, second.links[ib].flags & ~TK_BLK_ENTRY);
		assert_int_equal(alone.links[ia].target_rel, second.links[ib].target_rel);
	}
	assert_int_equal(tk_bcache_get(&second, 0x2000, TK_ISA_64)->flags & TK_BLK_EMPTY,
			 TK_BLK_EMPTY);
	tk_bcache_fini(&alone);
	tk_bcache_fini(&first);
	tk_bcache_fini(&second);
	tk_bshare_free(sh);
	tk_image_free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_walk),
					    cmocka_unit_test(test_loop_quiet),
					    cmocka_unit_test(test_print_pages),
					    cmocka_unit_test(test_shared_blocks) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
