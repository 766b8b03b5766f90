/* The start-up sweep's decoding (startup.c): each instruction is decoded alone, and its
 * operands only where something the sweep reads of it depends on them. Every reader of the
 * operands (cti_classify, imap_entry's rsp_effect, reloc_suffix_insn, jl_refs, eax_imm)
 * gives from all-zero operands the answer the real ones give, unless the instruction is:
 * a control transfer; a pop (rsp_effect reads its operand); a mov of an immediate
 * (eax_imm); one with a RIP-relative or absolute memory operand (ModRM mod 0 with a
 * displacement, or a moffs), a relative immediate, or an immediate inside the traced code
 * (jl_refs, reloc_movable: an operand's immediate is the raw one); one with a register
 * field of 4 (rsp, or r12, ah, spl: an explicit write of RSP), or outside the legacy
 * encoding (VEX.vvvv may name RSP); or one whose definition writes RSP implicitly (push,
 * enter, leave...: fixed by the definition, learned from its first instruction). The rest
 * (git: 52% of its 635,601 instructions; libc 56%) skip Zydis's operand decoding.
 * Header-only so that the unit test checks the recorder's very rule. Start-up only (one
 * thread). */
#ifndef TK_RECORDER_BTRACE_SWEEPOPS_H
#define TK_RECORDER_BTRACE_SWEEPOPS_H

#include <stdint.h>
#include <Zydis/Zydis.h>

/* Per Zydis definition (the decoder context's): whether it writes RSP implicitly, + 1 (0:
 * not learned yet); open addressing, SWEEP_DEFS slots. */
#define SWEEP_DEFS 8192
struct sweep_def {
	const void *key;
	uint64_t rsp;
};

struct sweep_ops {
	uint64_t code_lo, code_hi;   /* the traced code: an immediate outside cannot name it */
	struct sweep_def *defs;      /* SWEEP_DEFS zeroed slots, or NULL: operands always decoded */
};

static inline uint64_t *sweep_def_slot(struct sweep_def *defs, const void *def)
{
	uint64_t h = (uint64_t)(uintptr_t)def;
	h = (h ^ h >> 29) * 0x9e3779b97f4a7c15ull >> 51;   /* 13 bits */
	for (unsigned probe = 0; defs && probe < SWEEP_DEFS; probe++, h = (h + 1) & (SWEEP_DEFS - 1)) {
		if (defs[h].key == def)
			return &defs[h].rsp;
		if (!defs[h].key) {
			defs[h].key = def;
			return &defs[h].rsp;
		}
	}
	return NULL;   /* full (never: Zydis has fewer definitions) */
}

/* Does an implicit or hidden operand of the decoded instruction write RSP? */
static inline int sweep_writes_rsp_implicitly(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (unsigned i = 0; i < in->operand_count; i++)
		if (ops[i].visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT && ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    (ops[i].reg.value == ZYDIS_REGISTER_RSP || ops[i].reg.value == ZYDIS_REGISTER_ESP ||
		     ops[i].reg.value == ZYDIS_REGISTER_SP))
			return 1;
	return 0;
}

/* Whether the sweep needs the operands of IN (see above); *LEARN: the definition's slot to
 * fill once they are decoded, or NULL. */
static inline int sweep_needs_operands(const struct sweep_ops *so, const ZydisDecodedInstruction *in,
				       const ZydisDecoderContext *ctx, uint64_t **learn)
{
	*learn = NULL;
	switch (in->meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL:
	case ZYDIS_CATEGORY_RET:
		return 1;
	default:
		break;
	}
	if (in->mnemonic == ZYDIS_MNEMONIC_POP || in->encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY)
		return 1;
	if (in->raw.disp.size && in->raw.modrm.mod == 0)
		return 1;
	for (int k = 0; k < 2; k++)
		if (in->raw.imm[k].size && (in->raw.imm[k].is_relative || in->mnemonic == ZYDIS_MNEMONIC_MOV ||
		    (in->raw.imm[k].value.u >= so->code_lo && in->raw.imm[k].value.u < so->code_hi)))
			return 1;
	if ((in->attributes & ZYDIS_ATTRIB_HAS_MODRM) ?
	    in->raw.modrm.reg == 4 || (in->raw.modrm.mod == 3 && in->raw.modrm.rm == 4) :
	    (in->opcode & 7) == 4)   /* a register in the opcode: push, pop, xchg, mov, bswap */
		return 1;
	uint64_t *r = sweep_def_slot(so->defs, ctx->definition);
	if (!r || !*r) {
		*learn = r;
		return 1;
	}
	return *r == 2;
}

/* Decode the instruction at P (N bytes readable) into *IN; *OPS: its operands in BUF, or
 * all-zero operands where the sweep needs none. Returns whether it decodes. */
static inline int sweep_decode(const ZydisDecoder *dec, struct sweep_ops *so, const uint8_t *p, uint64_t n,
			       ZydisDecodedInstruction *in, ZydisDecodedOperand *buf, const ZydisDecodedOperand **ops)
{
	static const ZydisDecodedOperand none[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecoderContext ctx;
	uint64_t *learn;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(dec, &ctx, p, n, in)))
		return 0;
	*ops = none;
	if (!sweep_needs_operands(so, in, &ctx, &learn))
		return 1;
	/* never fails once the instruction decodes (Zydis 4: operands only assert) */
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeOperands(dec, &ctx, in, buf, in->operand_count)))
		return 0;
	*ops = buf;
	if (learn)
		*learn = (uint64_t)(1 + sweep_writes_rsp_implicitly(in, buf));
	return 1;
}

#endif
