/* Control-transfer instructions (CTIs) of x86-64: a compact description made once from
 * Zydis' decoding at start-up, and the emulation of one CTI on a signal context's registers.
 * Header-only so that the unit tests check the very code the recorder runs. Everything
 * here is async-signal-safe (no allocation, no locks, no libc calls). */
#ifndef TK_BTRACE_CTI_H
#define TK_BTRACE_CTI_H

#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include <Zydis/Zydis.h>

enum cti_kind {
	CTI_NONE = 0,
	CTI_JCC,        /* jcc rel: cond = 0..15 as in the opcode's low nibble */
	CTI_JCXZ,       /* jrcxz/jecxz: asize = 64/32 */
	CTI_LOOP,       /* loop/loope/loopne: cond = 0 plain, 1 e, 2 ne */
	CTI_JMP_IND,    /* jmp r/m64 */
	CTI_CALL_IND,   /* call r/m64 */
	CTI_RET,        /* ret [imm16] */
	CTI_JMP_DIR,    /* jmp rel: not trapped, but walked */
	CTI_CALL_DIR,   /* call rel: not trapped, but walked */
	CTI_OTHER,      /* far transfers, iret, sysret...: neither trapped nor walked */
	CTI_SYSCALL,    /* syscall: trapped (the kernel is not traced), not emulated here */
};

/* Operand register: an index into mcontext gregs, or one of these. */
#define CTI_REG_NONE 0xff
#define CTI_REG_RIP 0xfe
#define CTI_REG_BAD 0xfd   /* a register the emulator does not handle */

/* A `jmp reg` whose target is computed (neither a recognised table nor a loaded address):
 * it may land inside a window, where its landing goes to the window's trampoline. */
#define CTI_COMPUTED 1

enum cti_seg { CTI_SEG_NONE, CTI_SEG_FS, CTI_SEG_GS };

struct cti {
	uint64_t addr;
	uint64_t target;   /* direct target (rel forms) */
	int32_t disp;      /* memory operand displacement */
	uint16_t imm;      /* ret imm16 */
	uint8_t len;
	uint8_t kind;      /* enum cti_kind */
	uint8_t cond;      /* jcc/loop: the condition; jmp reg: CTI_COMPUTED or 0 */
	uint8_t is_mem;    /* indirect operand in memory (else register `base`) */
	uint8_t base, index, scale, seg;
	uint8_t asize;     /* address size 32 or 64 */
	uint8_t orig;      /* the first original byte (replaced by int3) */
};

/* mcontext gregs index of a 64- or 32-bit general register; CTI_REG_NONE if none. */
static inline uint8_t cti_greg(ZydisRegister r)
{
	if (r == ZYDIS_REGISTER_NONE)
		return CTI_REG_NONE;
	if (r == ZYDIS_REGISTER_RIP || r == ZYDIS_REGISTER_EIP)
		return CTI_REG_RIP;
	ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
	switch (big) {
	case ZYDIS_REGISTER_RAX: return REG_RAX;
	case ZYDIS_REGISTER_RCX: return REG_RCX;
	case ZYDIS_REGISTER_RDX: return REG_RDX;
	case ZYDIS_REGISTER_RBX: return REG_RBX;
	case ZYDIS_REGISTER_RSP: return REG_RSP;
	case ZYDIS_REGISTER_RBP: return REG_RBP;
	case ZYDIS_REGISTER_RSI: return REG_RSI;
	case ZYDIS_REGISTER_RDI: return REG_RDI;
	case ZYDIS_REGISTER_R8: return REG_R8;
	case ZYDIS_REGISTER_R9: return REG_R9;
	case ZYDIS_REGISTER_R10: return REG_R10;
	case ZYDIS_REGISTER_R11: return REG_R11;
	case ZYDIS_REGISTER_R12: return REG_R12;
	case ZYDIS_REGISTER_R13: return REG_R13;
	case ZYDIS_REGISTER_R14: return REG_R14;
	case ZYDIS_REGISTER_R15: return REG_R15;
	default: return CTI_REG_BAD;
	}
}

/* Fill *c from a decoded instruction at ADDR. Returns the kind (CTI_NONE: not a CTI). */
static inline int cti_classify(struct cti *c, uint64_t addr, const ZydisDecodedInstruction *in,
			       const ZydisDecodedOperand *ops)
{
	memset(c, 0, sizeof *c);
	c->addr = addr;
	c->len = in->length;
	c->asize = in->address_width == 32 ? 32 : 64;
	c->base = c->index = CTI_REG_NONE;
	if (in->mnemonic == ZYDIS_MNEMONIC_SYSCALL)
		return c->kind = CTI_SYSCALL;
	switch (in->meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL:
	case ZYDIS_CATEGORY_RET:
		break;
	default:
		return c->kind = CTI_NONE;
	}
	if (in->meta.category == ZYDIS_CATEGORY_RET) {
		if (in->mnemonic != ZYDIS_MNEMONIC_RET)
			return c->kind = CTI_OTHER;
		c->kind = CTI_RET;
		if (in->operand_count_visible > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
			c->imm = (uint16_t)ops[0].imm.value.u;
		return c->kind;
	}
	if (in->operand_count_visible < 1)
		return c->kind = CTI_OTHER;
	const ZydisDecodedOperand *op = &ops[0];
	if (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative) {
		c->target = addr + in->length + (uint64_t)op->imm.value.s;
		switch (in->mnemonic) {
		case ZYDIS_MNEMONIC_JMP: return c->kind = CTI_JMP_DIR;
		case ZYDIS_MNEMONIC_CALL: return c->kind = CTI_CALL_DIR;
		case ZYDIS_MNEMONIC_JO: c->cond = 0; break;
		case ZYDIS_MNEMONIC_JNO: c->cond = 1; break;
		case ZYDIS_MNEMONIC_JB: c->cond = 2; break;
		case ZYDIS_MNEMONIC_JNB: c->cond = 3; break;
		case ZYDIS_MNEMONIC_JZ: c->cond = 4; break;
		case ZYDIS_MNEMONIC_JNZ: c->cond = 5; break;
		case ZYDIS_MNEMONIC_JBE: c->cond = 6; break;
		case ZYDIS_MNEMONIC_JNBE: c->cond = 7; break;
		case ZYDIS_MNEMONIC_JS: c->cond = 8; break;
		case ZYDIS_MNEMONIC_JNS: c->cond = 9; break;
		case ZYDIS_MNEMONIC_JP: c->cond = 10; break;
		case ZYDIS_MNEMONIC_JNP: c->cond = 11; break;
		case ZYDIS_MNEMONIC_JL: c->cond = 12; break;
		case ZYDIS_MNEMONIC_JNL: c->cond = 13; break;
		case ZYDIS_MNEMONIC_JLE: c->cond = 14; break;
		case ZYDIS_MNEMONIC_JNLE: c->cond = 15; break;
		case ZYDIS_MNEMONIC_JRCXZ: c->asize = 64; return c->kind = CTI_JCXZ;
		case ZYDIS_MNEMONIC_JECXZ: c->asize = 32; return c->kind = CTI_JCXZ;
		case ZYDIS_MNEMONIC_LOOP: c->cond = 0; return c->kind = CTI_LOOP;
		case ZYDIS_MNEMONIC_LOOPE: c->cond = 1; return c->kind = CTI_LOOP;
		case ZYDIS_MNEMONIC_LOOPNE: c->cond = 2; return c->kind = CTI_LOOP;
		default: return c->kind = CTI_OTHER;
		}
		return c->kind = CTI_JCC;
	}
	if (in->mnemonic != ZYDIS_MNEMONIC_JMP && in->mnemonic != ZYDIS_MNEMONIC_CALL)
		return c->kind = CTI_OTHER;
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER && op->size == 64) {
		c->base = cti_greg(op->reg.value);
	} else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->size == 64) {
		c->is_mem = 1;
		c->base = cti_greg(op->mem.base);
		c->index = cti_greg(op->mem.index);
		c->scale = op->mem.scale;
		c->disp = op->mem.disp.has_displacement ? (int32_t)op->mem.disp.value : 0;
		c->seg = op->mem.segment == ZYDIS_REGISTER_FS ? CTI_SEG_FS :
			 op->mem.segment == ZYDIS_REGISTER_GS ? CTI_SEG_GS : CTI_SEG_NONE;
	} else {
		return c->kind = CTI_OTHER;   /* far pointers */
	}
	if (c->base == CTI_REG_BAD || c->index == CTI_REG_BAD)
		return c->kind = CTI_OTHER;
	return c->kind = in->mnemonic == ZYDIS_MNEMONIC_JMP ? CTI_JMP_IND : CTI_CALL_IND;
}

/* Whether jcc condition COND holds for RFLAGS value F. */
static inline int cti_cond(unsigned cond, uint64_t f)
{
	int cf = f & 1, pf = f >> 2 & 1, zf = f >> 6 & 1, sf = f >> 7 & 1, of = f >> 11 & 1;
	int r;
	switch (cond >> 1) {
	case 0: r = of; break;
	case 1: r = cf; break;
	case 2: r = zf; break;
	case 3: r = cf | zf; break;
	case 4: r = sf; break;
	case 5: r = pf; break;
	case 6: r = sf != of; break;
	default: r = zf | (sf != of); break;
	}
	return (cond & 1) ? !r : r;
}

/* Segment bases for FS/GS operands; supplied by the caller (the recorder reads them once
 * per thread). */
struct cti_segs {
	uint64_t fs_base, gs_base;
};

/* Effective address of C's memory operand in context G. */
static inline uint64_t cti_ea(const struct cti *c, const greg_t *g, const struct cti_segs *s)
{
	uint64_t ea = (uint64_t)(int64_t)c->disp;
	if (c->base == CTI_REG_RIP)
		ea += c->addr + c->len;
	else if (c->base != CTI_REG_NONE)
		ea += (uint64_t)g[c->base];
	if (c->index != CTI_REG_NONE)
		ea += (uint64_t)g[c->index] * c->scale;
	if (c->asize == 32)
		ea = (uint32_t)ea;
	if (c->seg == CTI_SEG_FS)
		ea += s->fs_base;
	else if (c->seg == CTI_SEG_GS)
		ea += s->gs_base;
	return ea;
}

/* The outcome of one emulated CTI. */
struct cti_result {
	uint64_t next;     /* the new RIP */
	int taken;         /* conditional forms: branch taken */
};

/* Emulate C on context G (registers updated in place, return address pushed to memory).
 * Returns 0, or -1 for a kind that cannot be emulated. */
static inline int cti_emulate(const struct cti *c, greg_t *g, const struct cti_segs *s,
			      struct cti_result *r)
{
	uint64_t fall = c->addr + c->len, t;

	r->taken = 0;
	switch (c->kind) {
	case CTI_JCC:
		r->taken = cti_cond(c->cond, (uint64_t)g[REG_EFL]);
		break;
	case CTI_JCXZ:
		r->taken = c->asize == 32 ? (uint32_t)g[REG_RCX] == 0 : g[REG_RCX] == 0;
		break;
	case CTI_LOOP: {
		/* loop decrements rCX without touching the flags. */
		uint64_t rcx = (uint64_t)g[REG_RCX] - 1;
		int zf = g[REG_EFL] >> 6 & 1;
		if (c->asize == 32) {
			/* ECX as the count: a 32-bit write, zero-extended (checked against the CPU) */
			rcx = (uint32_t)rcx;
			g[REG_RCX] = (greg_t)rcx;
		} else {
			g[REG_RCX] = (greg_t)rcx;
		}
		r->taken = rcx != 0 && (c->cond == 0 || (c->cond == 1 ? zf : !zf));
		break;
	}
	case CTI_JMP_DIR:
		r->next = c->target;
		return 0;
	case CTI_CALL_DIR:
		g[REG_RSP] -= 8;
		memcpy((void *)(uintptr_t)g[REG_RSP], &fall, 8);
		r->next = c->target;
		return 0;
	case CTI_JMP_IND:
	case CTI_CALL_IND:
		if (c->is_mem)
			memcpy(&t, (const void *)(uintptr_t)cti_ea(c, g, s), 8);
		else
			t = (uint64_t)g[c->base];
		if (c->kind == CTI_CALL_IND) {
			g[REG_RSP] -= 8;
			memcpy((void *)(uintptr_t)g[REG_RSP], &fall, 8);
		}
		r->next = t;
		return 0;
	case CTI_RET:
		memcpy(&t, (const void *)(uintptr_t)g[REG_RSP], 8);
		g[REG_RSP] += 8 + c->imm;
		r->next = t;
		return 0;
	default:
		return -1;
	}
	r->next = r->taken ? c->target : fall;
	return 0;
}

#endif
