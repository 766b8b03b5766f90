/* Compiler jump tables behind `jmp reg`: the shapes gcc and clang emit, recognised from the
 * instructions before the jump. Read backwards: `add a, b` makes the jump's register (a
 * and b: the table's base and an entry, in either order), `movsxd entry, [base + idx*4]`
 * reads the entry, `lea base, [rip + T]` makes the base, and `cmp idx, N; ja` (or `jae`)
 * bounds the index, with register moves and zero or sign extensions between them followed
 * back to their source (sqlite3VdbeExec: cmp $0xb5,%r15b; ja; lea T(%rip),%rcx; movzbl
 * %r15b,%edx; movslq (%rcx,%rdx,4),%rax; add %rcx,%rax; jmp *%rax). Any other write of a
 * followed register, or another branch, and it is not a table. Start-up only (Zydis). */
#ifndef TK_RECORDER_BTRACE_JTAB_H
#define TK_RECORDER_BTRACE_JTAB_H

#include <stdint.h>
#include <Zydis/Zydis.h>

#include "cti.h"

#define JT_WINDOW 16   /* instructions kept before the jump */

struct jt_insn {
	uint64_t ip;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

static inline int jt_writes(const struct jt_insn *x, uint8_t r)
{
	for (unsigned i = 0; i < x->in.operand_count; i++)
		if (x->ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (x->ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && cti_greg(x->ops[i].reg.value) == r)
			return 1;
	return 0;
}

static inline int jt_branches(const struct jt_insn *x)
{
	ZydisInstructionCategory k = x->in.meta.category;
	return k == ZYDIS_CATEGORY_COND_BR || k == ZYDIS_CATEGORY_UNCOND_BR || k == ZYDIS_CATEGORY_CALL ||
	       k == ZYDIS_CATEGORY_RET || k == ZYDIS_CATEGORY_SYSCALL || k == ZYDIS_CATEGORY_INTERRUPT;
}

/* A register-to-register move, zero or sign extension: *D gets its copy of *S. */
static inline int jt_move(const struct jt_insn *x, uint8_t *d, uint8_t *s)
{
	ZydisMnemonic m = x->in.mnemonic;
	if ((m != ZYDIS_MNEMONIC_MOV && m != ZYDIS_MNEMONIC_MOVZX && m != ZYDIS_MNEMONIC_MOVSX &&
	     m != ZYDIS_MNEMONIC_MOVSXD) || x->ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    x->ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER)
		return 0;
	*d = cti_greg(x->ops[0].reg.value);
	*s = cti_greg(x->ops[1].reg.value);
	return *d < 16 && *s < 16;
}

/* `cmp byte [M], N` (C), `ja`/`jae` (J), then `movzx reg, byte [M]` (L), back to back, with
 * the same memory operand: the byte loaded is at most N (ja) or below N (jae); *ENTRIES
 * gets how many values it may have. */
static inline int jt_same_byte_bound(const struct jt_insn *c, const struct jt_insn *j, const struct jt_insn *l,
				     uint64_t *entries)
{
	const ZydisDecodedOperand *a = &c->ops[0], *b = &l->ops[1];
	if (c->in.mnemonic != ZYDIS_MNEMONIC_CMP || a->type != ZYDIS_OPERAND_TYPE_MEMORY || a->size != 8 ||
	    c->ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
	    (j->in.mnemonic != ZYDIS_MNEMONIC_JNBE && j->in.mnemonic != ZYDIS_MNEMONIC_JNB) ||
	    b->type != ZYDIS_OPERAND_TYPE_MEMORY || b->size != 8 || a->mem.base == ZYDIS_REGISTER_RIP ||
	    a->mem.base != b->mem.base || a->mem.index != b->mem.index || a->mem.scale != b->mem.scale ||
	    a->mem.disp.value != b->mem.disp.value || a->mem.segment != b->mem.segment ||
	    a->mem.segment == ZYDIS_REGISTER_FS || a->mem.segment == ZYDIS_REGISTER_GS)
		return 0;
	*entries = (c->ops[1].imm.value.u & 0xff) + (j->in.mnemonic == ZYDIS_MNEMONIC_JNBE);
	return 1;
}

/* The bound is found at H[FROM + 1]: the table is T, or where the base register BASE, if
 * still followed, was last set by `lea base, [rip + T]` in H[0..FROM] or before (LEA_T). */
static inline int jt_table(const struct jt_insn *h, int from, uint8_t base, const uint64_t *lea_t, uint64_t t,
			   uint64_t *table, uint64_t entries)
{
	for (int j = from; j >= 0 && base < 16 && !t; j--) {
		const struct jt_insn *y = &h[j];
		if (y->in.mnemonic == ZYDIS_MNEMONIC_LEA && y->ops[1].mem.base == ZYDIS_REGISTER_RIP &&
		    cti_greg(y->ops[0].reg.value) == base && y->ops[0].size == 64)
			t = y->ip + y->in.length + (uint64_t)y->ops[1].mem.disp.value;
		else if (jt_writes(y, base) || jt_branches(y))
			break;
	}
	if (!t && base < 16)
		t = lea_t[base];
	*table = t;
	return t && entries && entries <= 4096;
}

/* H[0..N): the instructions before `jmp JREG`, the last one just before it. LEA_T: per
 * register, the table of the last `lea reg, [rip + T]` earlier in the function (0: none),
 * for a base made before the window. Returns 1 with the table and its entry count. */
static inline int jt_shape(const struct jt_insn *h, int n, uint8_t jreg, const uint64_t *lea_t,
			   uint64_t *table, uint64_t *entries)
{
	uint8_t a = jreg, b = CTI_REG_NONE, base = CTI_REG_NONE, idx = CTI_REG_NONE, d, s;
	int state = 0;   /* 0: the add, 1: the entry's load, 2: the bound and the base */
	uint64_t t = 0;

	for (int i = n - 1; i >= 0; i--) {
		const struct jt_insn *x = &h[i];
		const ZydisDecodedOperand *o = x->ops;
		ZydisMnemonic m = x->in.mnemonic;
		if (state == 0) {
			if (m == ZYDIS_MNEMONIC_ADD && o[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
			    o[1].type == ZYDIS_OPERAND_TYPE_REGISTER && o[0].size == 64 &&
			    cti_greg(o[0].reg.value) == a) {
				b = cti_greg(o[1].reg.value);
				state = b < 16 ? 1 : -1;
			} else if (m == ZYDIS_MNEMONIC_MOV && o[0].size == 64 && jt_move(x, &d, &s) && d == a) {
				a = s;
			} else if (jt_writes(x, a) || jt_branches(x)) {
				return 0;
			}
		} else if (state == 1) {
			if (m == ZYDIS_MNEMONIC_MOVSXD && o[0].size == 64 && o[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    o[1].mem.scale == 4 && (!o[1].mem.disp.has_displacement || !o[1].mem.disp.value) &&
			    o[1].mem.segment != ZYDIS_REGISTER_FS && o[1].mem.segment != ZYDIS_REGISTER_GS) {
				uint8_t e = cti_greg(o[0].reg.value), mb = cti_greg(o[1].mem.base);
				if ((e == a && mb == b) || (e == b && mb == a)) {
					base = mb;
					idx = cti_greg(o[1].mem.index);
					state = idx < 16 ? 2 : -1;
					continue;
				}
			}
			if (jt_writes(x, a) || jt_writes(x, b) || jt_branches(x))
				return 0;
		} else if (state == 2) {
			if (m == ZYDIS_MNEMONIC_LEA && base < 16 && o[1].mem.base == ZYDIS_REGISTER_RIP &&
			    cti_greg(o[0].reg.value) == base && o[0].size == 64) {
				t = x->ip + x->in.length + (uint64_t)o[1].mem.disp.value;
				base = CTI_REG_NONE;   /* found: no longer followed */
			} else if ((m == ZYDIS_MNEMONIC_JNBE || m == ZYDIS_MNEMONIC_JNB) && i > 0 &&
				   h[i - 1].in.mnemonic == ZYDIS_MNEMONIC_CMP &&
				   h[i - 1].ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
				   h[i - 1].ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
				   cti_greg(h[i - 1].ops[0].reg.value) == idx) {
				unsigned w = h[i - 1].ops[0].size;
				uint64_t mask = w >= 64 ? ~0ull : (1ull << w) - 1;
				uint64_t bound = h[i - 1].ops[1].imm.value.u & mask;
				*entries = bound + (m == ZYDIS_MNEMONIC_JNBE);
				/* the lea may come before the cmp, or before the window */
				return jt_table(h, i - 2, base, lea_t, t, table, *entries);
			} else if (i >= 2 && m == ZYDIS_MNEMONIC_MOVZX && o[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
				   cti_greg(o[0].reg.value) == idx && jt_same_byte_bound(&h[i - 2], &h[i - 1], x, entries)) {
				/* `cmpb $N, M; ja; movzbl M, idx` (sqlite3GetToken): the byte compared is the index */
				return jt_table(h, i - 3, base, lea_t, t, table, *entries);
			} else if (jt_branches(x)) {
				return 0;
			} else if (jt_move(x, &d, &s) && d == idx) {
				idx = s;
			} else if (base < 16 && m == ZYDIS_MNEMONIC_MOV && o[0].size == 64 && jt_move(x, &d, &s) &&
				   d == base) {
				base = s;
			} else if (jt_writes(x, idx) || (base < 16 && jt_writes(x, base))) {
				return 0;
			}
		}
		if (state < 0)
			return 0;
	}
	return 0;
}

#endif
