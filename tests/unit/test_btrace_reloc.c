/* The recorder's choice of the code moved into a short CTI's trampoline
 * (recorder/btrace/reloc.h), on bytes as gcc emits them: the 5-byte jump at the window's
 * start B must never cover a place where code can be entered, so a branch into the middle
 * of a candidate window moves the window or leaves the CTI trapped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../recorder/btrace/cti.h"
#include "../../recorder/btrace/reloc.h"

#define BASE 0x401000

struct code {
	struct reloc_insn pre[RELOC_MAX_INSNS + 1], suf[RELOC_MAX_INSNS];
	int npre, nsuf;
	uint64_t cti;
	unsigned len;
};

/* Decode BYTES at BASE: the movable instructions before the first conditional branch are
 * its prefix, those after it up to the next CTI its suffix (as the recorder collects them). */
static void decode(const uint8_t *bytes, size_t n, struct code *k)
{
	ZydisDecoder d;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct cti c;
	size_t off = 0;

	memset(k, 0, sizeof *k);
	ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	while (off < n) {
		assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, bytes + off, n - off, &in, ops)));
		int kind = cti_classify(&c, BASE + off, &in, ops);
		if (kind != CTI_NONE && (!k->cti || (kind != CTI_CALL_DIR && kind != CTI_JMP_DIR))) {
			if (k->cti)
				break;
			assert_int_equal(kind, CTI_JCC);
			k->cti = BASE + off;
			k->len = in.length;
		} else if (!k->cti) {
			assert_true(reloc_movable(BASE + off, &in, ops, &k->pre[k->npre++]));
		} else {
			int r = reloc_suffix_insn(BASE + off, &in, ops, kind, &k->suf[k->nsuf]);
			assert_true(r);
			k->nsuf++;
			if (r == 2)
				break;
		}
		off += in.length;
	}
	assert_true(k->cti != 0);
}

/* reloc_choose with the direct branch targets T[0..NT) (sorted) as the only entries. */
static int choose(const struct code *k, const uint64_t *t, size_t nt, struct reloc_window *w)
{
	struct reloc_entries ent = { { t, NULL, NULL }, { nt, 0, 0 } };
	return reloc_choose(k->pre, k->npre, k->cti, k->len, k->cti + k->len, k->suf, k->nsuf, &ent, 0, w);
}

/* test %eax,%eax; je +0x10; mov $1,%eax; add %edx,%eax: 4 bytes up to the je's end, so the
 * window takes the instruction its not-taken path falls into. */
static const uint8_t short_block[] = { 0x85, 0xc0, 0x74, 0x10, 0xb8, 0x01, 0x00, 0x00, 0x00, 0x01, 0xd0, 0xc3 };

static void test_suffix_when_the_block_is_short(void **state)
{
	(void)state;
	struct code k;
	struct reloc_window w;
	decode(short_block, sizeof short_block, &k);
	assert_int_equal(k.cti, BASE + 2);
	assert_true(choose(&k, NULL, 0, &w));
	assert_int_equal(w.b, BASE + 2);   /* the je itself, then the mov */
	assert_int_equal(w.first, k.npre);
	assert_int_equal(w.nsuf, 1);
}

static void test_branch_into_the_window_is_never_patched(void **state)
{
	(void)state;
	struct code k;
	struct reloc_window w;
	decode(short_block, sizeof short_block, &k);
	/* a jump to the mov (the je's fall-through): every window of 5 bytes would cover
	 * it; the je stays trapped */
	uint64_t to_mov = BASE + 4, to_je = BASE + 2, to_test = BASE;
	assert_false(choose(&k, &to_mov, 1, &w));
	/* a jump to the je or to the test: B may be there (entered at B, the trampoline's
	 * start), never after it */
	assert_true(choose(&k, &to_je, 1, &w));
	assert_int_equal(w.b, BASE + 2);
	assert_true(choose(&k, &to_test, 1, &w));
	assert_int_equal(w.b, BASE + 2);
}

/* mov 0x100(%rip),%rax; add $1,%eax; cmp $5,%eax; jne -0x20; xor %eax,%eax; ret: a long
 * prefix. The window starts at the latest boundary with 5 bytes, and moves back from a
 * branch target inside it. */
static const uint8_t long_block[] = { 0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x83, 0xc0, 0x01, 0x83,
				      0xf8, 0x05, 0x75, 0xe0, 0x31, 0xc0, 0xc3 };

static void test_prefix_moves_back_from_a_target(void **state)
{
	(void)state;
	struct code k;
	struct reloc_window w;
	decode(long_block, sizeof long_block, &k);
	assert_int_equal(k.npre, 3);
	assert_int_equal(k.pre[0].disp_at, 3);   /* the RIP-relative load is adjusted when copied */
	assert_true(choose(&k, NULL, 0, &w));
	assert_int_equal(w.b, BASE + 10);   /* cmp; jne */
	assert_int_equal(w.nsuf, 0);
	uint64_t to_jne = BASE + 13;
	assert_true(choose(&k, &to_jne, 1, &w));
	assert_int_equal(w.b, BASE + 7);    /* add; cmp; jne: the jne lies past B + 5 */
	/* every instruction start as a target: never one inside (B, B + 5) */
	for (uint64_t t = BASE; t < BASE + sizeof long_block; t++) {
		if (!choose(&k, &t, 1, &w))
			continue;
		assert_false(t > w.b && t < w.b + 5);
	}
}

/* The same with conditional branches' targets (RELOC_JCC): inside (B, B + 5) up to the CTI
 * they do not move the window (their trampolines go to its copies), past it they do. */
static void test_conditional_targets_inside_a_window(void **state)
{
	(void)state;
	struct code k;
	struct reloc_window w;
	decode(long_block, sizeof long_block, &k);
	uint64_t to_jne = BASE + 13;
	struct reloc_entries ent = { { NULL, NULL, NULL, &to_jne }, { 0, 0, 0, 1 } };
	assert_true(reloc_choose(k.pre, k.npre, k.cti, k.len, k.cti + k.len, k.suf, k.nsuf, &ent, 0, &w));
	assert_int_equal(w.b, BASE + 10);   /* cmp; jne, the jne inside: a direct jump's target
					       moved it back to the add (above) */
	/* a target of the short block's je past it (the mov its suffix moves): never inside */
	decode(short_block, sizeof short_block, &k);
	uint64_t to_mov = BASE + 4;
	ent.a[RELOC_JCC] = &to_mov;
	assert_false(reloc_choose(k.pre, k.npre, k.cti, k.len, k.cti + k.len, k.suf, k.nsuf, &ent, 0, &w));
}

/* call memcmp; test %eax,%eax; jne +0x1e; call __errno_location; movl $0,(%rax) (sort's
 * hottest trap): the window starts at the jne and ends with the call, whose return site
 * lies past the jump. */
static const uint8_t call_after[] = { 0x85, 0xc0, 0x75, 0x1e, 0xe8, 0x93, 0xe9, 0xfe, 0xff, 0xc7, 0x00,
				      0x00, 0x00, 0x00, 0x00 };

static void test_suffix_ends_with_a_call(void **state)
{
	(void)state;
	struct code k;
	struct reloc_window w;
	decode(call_after, sizeof call_after, &k);
	assert_int_equal(k.nsuf, 1);
	assert_int_equal(k.suf[0].transfer, RELOC_CALL);
	uint64_t entries[] = { BASE, BASE + 9 };   /* the block's start, the call's return site */
	assert_true(choose(&k, entries, 2, &w));
	assert_int_equal(w.b, BASE + 2);
	assert_int_equal(w.nsuf, 1);
	/* a branch to the call itself: the jump would cover it */
	uint64_t to_call = BASE + 4;
	assert_false(choose(&k, &to_call, 1, &w));
}

/* ud2 and int3 fault at their address: never moved to a trampoline. */
static void test_faulting_instructions_stay(void **state)
{
	(void)state;
	static const uint8_t ud2[] = { 0x0f, 0x0b }, int3[] = { 0xcc };
	ZydisDecoder d;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct reloc_insn r;
	ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, ud2, sizeof ud2, &in, ops)));
	assert_false(reloc_movable(BASE, &in, ops, &r));
	assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, int3, sizeof int3, &in, ops)));
	assert_false(reloc_movable(BASE, &in, ops, &r));
}

/* The entries as bits (reloc_entries_bits, a module's code from LO) answer every question
 * the binary searches answer: random entries, some outside the range, every short
 * interval and window, at the range's edges too. */
static void test_entry_bits_answer_as_the_searches(void **state)
{
	(void)state;
	enum { LO = 0x1000, HI = 0x1400, N = 64 };
	static uint64_t a[4][N];
	static uint8_t b0[(HI - LO + 7) / 8], b1[(HI - LO + 7) / 8];
	uint64_t x = 12345;
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			a[k][i] = LO - 16 + (x >> 33) % (HI - LO + 32);
		}
	for (int k = 0; k < 4; k++)   /* sorted, as the recorder's */
		for (int i = 1; i < N; i++)
			for (int j = i; j > 0 && a[k][j - 1] > a[k][j]; j--) {
				uint64_t t = a[k][j];
				a[k][j] = a[k][j - 1];
				a[k][j - 1] = t;
			}
	struct reloc_entries plain = { { a[0], a[1], a[2], a[3] }, { N, N, N, N } }, bits = plain;
	bits.bits_lo = LO;
	bits.bits_hi = HI;
	reloc_entries_bits(&bits, b0, b1);
	int seen = 0;
	for (uint64_t lo = LO - 8; lo < HI + 8; lo++)
		for (uint64_t w = 0; w <= 8; w++) {
			int e = reloc_entered(&plain, lo, lo + w);
			assert_int_equal(reloc_entered(&bits, lo, lo + w), e);
			seen += e;
			assert_int_equal(reloc_window_entered(&bits, lo, lo + w), reloc_window_entered(&plain, lo, lo + w));
		}
	assert_true(seen > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suffix_when_the_block_is_short),
		cmocka_unit_test(test_branch_into_the_window_is_never_patched),
		cmocka_unit_test(test_prefix_moves_back_from_a_target),
		cmocka_unit_test(test_conditional_targets_inside_a_window),
		cmocka_unit_test(test_suffix_ends_with_a_call),
		cmocka_unit_test(test_faulting_instructions_stay),
		cmocka_unit_test(test_entry_bits_answer_as_the_searches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
