/* Relocation of the code around a short CTI into its trampoline (reloc_install): which
 * instructions may move, and which window of them to move. A `jcc rel8` (2 bytes), a `ret`
 * or a `call/jmp reg` has no room for the 5-byte `jmp rel32` to a trampoline; the whole
 * instructions around it do. The window starts at an instruction boundary B; its first 5
 * bytes are overwritten by the jump, so nothing may enter (B, B+5): no direct branch target
 * of the module, recovered jump-table target, return site, or function (symbol or FDE)
 * start. It holds the straight-line instructions before the CTI up to it (the prefix), and
 * for a conditional branch whose prefix is too short, the instructions its not-taken path
 * falls into (the suffix), up to the first boundary at or past B+5. Bytes from B+5 on keep
 * the original code: a branch there still finds the CTI's int3, or a whole suffix
 * instruction that falls through as before. A suffix may end with a direct `call` or
 * `jmp` (the trampoline pushes the original return address and jumps to the target): the
 * common `call f; test %eax,%eax; jne; call g`. Header-only so that the unit test checks the
 * recorder's very rule. Start-up only (Zydis). */
#ifndef TK_RECORDER_BTRACE_RELOC_H
#define TK_RECORDER_BTRACE_RELOC_H

#include <stddef.h>
#include <stdint.h>
#include <Zydis/Zydis.h>

#include "cti.h"

#define RELOC_MAX_INSNS 6   /* prefix + suffix instructions (+1 for the suffix's end) */

struct reloc_insn {
	uint64_t addr;
	uint8_t len;
	uint8_t disp_at;    /* offset of a RIP-relative disp32 in the instruction, 0 if none */
	uint8_t transfer;   /* a suffix's last: RELOC_CALL or RELOC_JMP (rel32, never trapped) */
};
#define RELOC_CALL 1
#define RELOC_JMP 2

/* Whether the decoded instruction IN at IP (not a CTI) runs the same from a trampoline, and
 * its description in *R: no relative immediate (xbegin), RIP-relative addressing only as a
 * disp32 (adjusted when copied), and nothing that faults or stops on purpose (ud2, int3,
 * int, hlt): a program's handler would see the trampoline's address. */
static inline int reloc_movable(uint64_t ip, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
				struct reloc_insn *r)
{
	r->addr = ip;
	r->len = in->length;
	r->disp_at = 0;
	r->transfer = 0;
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_HLT:
		return 0;
	default:
		break;
	}
	for (unsigned o = 0; o < in->operand_count; o++) {
		if (ops[o].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[o].imm.is_relative)
			return 0;
		if (ops[o].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    (ops[o].mem.base == ZYDIS_REGISTER_RIP || ops[o].mem.base == ZYDIS_REGISTER_EIP)) {
			if (in->raw.disp.size != 32 || ops[o].mem.base != ZYDIS_REGISTER_RIP)
				return 0;
			r->disp_at = in->raw.disp.offset;
		}
	}
	return 1;
}

/* Whether the instruction IN at IP, of CTI kind KIND (cti.h), may be part of a suffix:
 * 1 movable, 2 a direct `call rel32` or `jmp rel32` that ends it, 0 neither (*R filled
 * unless 0). */
static inline int reloc_suffix_insn(uint64_t ip, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
				    int kind, struct reloc_insn *r)
{
	if ((kind == CTI_CALL_DIR || kind == CTI_JMP_DIR) && in->length == 5 && in->raw.imm[0].size == 32 &&
	    in->opcode == (kind == CTI_CALL_DIR ? 0xe8 : 0xe9)) {
		*r = (struct reloc_insn){ ip, 5, 0, kind == CTI_CALL_DIR ? RELOC_CALL : RELOC_JMP };
		return 2;
	}
	return kind == CTI_NONE && reloc_movable(ip, in, ops, r);
}

/* May the indirect call or jump C be recorded by a trampoline made at start-up: through a
 * register other than RSP, or through memory addressed by registers other than RSP (the
 * trampoline reads the pointer with a copy of the instruction as `push [mem]`, below the
 * red zone), no segment, 64-bit addresses? Through [rip + disp] it is 6 bytes and gets
 * its trampoline like a jcc rel32 (start_tramps). */
static inline int reloc_indirect_ok(const struct cti *c)
{
	if (!c->is_mem)
		return c->base != REG_RSP;
	return c->base != CTI_REG_RIP && c->base != REG_RSP && c->index != REG_RSP && c->seg == CTI_SEG_NONE &&
	       c->asize == 64;
}

/* Is anything in the sorted array A[0..N) within (LO, HI)? */
static inline int reloc_any_between(const uint64_t *a, size_t n, uint64_t lo, uint64_t hi)
{
	size_t l = 0, h = n;   /* the first element >= HI */
	while (l < h) {
		size_t mid = (l + h) / 2;
		if (a[mid] < hi)
			l = mid + 1;
		else
			h = mid;
	}
	return l > 0 && a[l - 1] > lo;
}

/* Where code may be entered other than by falling through: sorted address arrays. The
 * last (RELOC_JCC) holds the targets of conditional branches, which never land in a window
 * before its CTI: their trampoline paths go to the window's copy of their target (path_to),
 * and their traps too (window_entry). Optionally the same as bits, one per byte of
 * [BITS_LO, BITS_HI) (a module's code): BITS[0] for the first three arrays, BITS[1] for
 * RELOC_JCC, which answer a question inside that range without the binary searches (most
 * of the relocation pass's time over git). */
#define RELOC_JCC 3
struct reloc_entries {
	const uint64_t *a[4];
	size_t n[4];
	const uint8_t *bits[2];
	uint64_t bits_lo, bits_hi;
};

/* Set the bits of E's arrays inside [E->bits_lo, E->bits_hi) into B0 (the first three) and
 * B1 (RELOC_JCC), zeroed, (bits_hi - bits_lo + 7) / 8 bytes each, and use them. */
static inline void reloc_entries_bits(struct reloc_entries *e, uint8_t *b0, uint8_t *b1)
{
	for (int k = 0; k < 4; k++) {
		uint8_t *b = k == RELOC_JCC ? b1 : b0;
		for (size_t i = 0; i < e->n[k]; i++) {
			uint64_t a = e->a[k][i];
			if (a >= e->bits_lo && a < e->bits_hi)
				b[(a - e->bits_lo) >> 3] |= (uint8_t)(1u << ((a - e->bits_lo) & 7));
		}
	}
	e->bits[0] = b0;
	e->bits[1] = b1;
}

/* Is a bit of B set for an address within (LO, HI) (inside [base, ...): the caller checks)? */
static inline int reloc_bits_between(const uint8_t *b, uint64_t base, uint64_t lo, uint64_t hi)
{
	for (uint64_t a = lo + 1; a < hi; a++)
		if (b[(a - base) >> 3] >> ((a - base) & 7) & 1)
			return 1;
	return 0;
}

/* Whether E's bits answer for (LO, HI): they exist and cover it, and it is short. */
static inline int reloc_bits_cover(const struct reloc_entries *e, uint64_t lo, uint64_t hi)
{
	return e->bits[0] && lo >= e->bits_lo && hi <= e->bits_hi && hi - lo <= 16;
}

static inline int reloc_entered(const struct reloc_entries *e, uint64_t lo, uint64_t hi)
{
	if (reloc_bits_cover(e, lo, hi))
		return reloc_bits_between(e->bits[0], e->bits_lo, lo, hi) ||
		       reloc_bits_between(e->bits[1], e->bits_lo, lo, hi);
	for (int k = 0; k < 4; k++)
		if (reloc_any_between(e->a[k], e->n[k], lo, hi))
			return 1;
	return 0;
}

/* May code enter the window's jump at B other than at B, for a window whose CTI is at CTI?
 * A conditional branch may target a moved instruction or the CTI (git: `jae 1f` to `1: pop
 * %rbx; ret`, with `jmp 2f` to `2: movb $0,(%rax); 1: ...` from elsewhere), not past it: a
 * copy is found only from the instructions before the CTI (slot_copy). */
static inline int reloc_window_entered(const struct reloc_entries *e, uint64_t b, uint64_t cti)
{
	if (reloc_bits_cover(e, b < cti ? b : cti, b + 5))
		return reloc_bits_between(e->bits[0], e->bits_lo, b, b + 5) ||
		       reloc_bits_between(e->bits[1], e->bits_lo, cti, b + 5);
	for (int k = 0; k < RELOC_JCC; k++)
		if (reloc_any_between(e->a[k], e->n[k], b, b + 5))
			return 1;
	return reloc_any_between(e->a[RELOC_JCC], e->n[RELOC_JCC], cti, b + 5);
}

/* The chosen window: B = PRE[first].addr (or the CTI's address when first == npre), then
 * the CTI, then SUF[0..nsuf). */
struct reloc_window {
	uint64_t b;
	int first, nsuf;
};

/* Choose the window for the CTI at CTI (LEN bytes). PRE[0..NPRE): the movable instructions
 * that fall into it, oldest first; ROOM: where the bytes that may be overwritten end
 * without a suffix (the CTI's end, or past the never-executed padding after a `ret`);
 * SUF[0..NSUF): the movable instructions the CTI falls into when not taken (none unless it
 * is a conditional branch, whose ROOM is its end); COVERED: where the previous window's
 * jump ends. Prefers the prefix alone, then with the padding or the suffix; each from the
 * latest B on. Returns 1 and fills *W, or 0: keep the trap. */
static inline int reloc_choose(const struct reloc_insn *pre, int npre, uint64_t cti, unsigned len, uint64_t room,
			       const struct reloc_insn *suf, int nsuf, const struct reloc_entries *ent,
			       uint64_t covered, struct reloc_window *w)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int j = npre; j >= 0; j--) {
			uint64_t b = j < npre ? pre[j].addr : cti, end = pass ? room : cti + len;
			int ns = 0;
			if (b < covered)
				break;
			while (pass && end - b < 5 && ns < nsuf && suf[ns].addr == end && !(ns && suf[ns - 1].transfer))
				end += suf[ns++].len;
			if (end - b < 5 || (pass && end == cti + len) ||
			    (npre - j) + ns + (ns > 0) > RELOC_MAX_INSNS || reloc_window_entered(ent, b, cti))
				continue;
			w->b = b;
			w->first = j;
			w->nsuf = ns;
			return 1;
		}
	}
	return 0;
}

#endif
