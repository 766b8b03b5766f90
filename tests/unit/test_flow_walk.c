/* The generic flow walker with a scripted oracle (as the branch-trace and xtrace formats
 * use it): blocks, calls, returns, compressed returns, stops at an IP, missing code,
 * a trace that does not fit the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

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
	struct tk_flow_q q[8];
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
	s = (struct script){ .n = 1 };
	s.q[0] = (struct tk_flow_q){ .kind = TK_FLOWQ_TIP, .ip = 0x5000, .mode = -1 };
	assert_int_equal(walk(f, &s, &ip, &res), -TK_E_NOMAP);
	assert_int_equal(ip, 0x5000);

	/* the end of the trace at a branch: reported like libipt, branch included */
	tk_flow_clear_pending(f);
	ip = 0x1000;
	s = (struct script){ .n = 0 };
	assert_int_equal(walk(f, &s, &ip, &res), TK_FLOW_ENDED);
	assert_int_equal(res.from, 0x1005);
	assert_int_equal(res.insns, 3);
	tk_flow_free(f);
	tk_image_free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_walk) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
