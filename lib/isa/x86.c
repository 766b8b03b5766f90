/* x86-64/32/16 classification with Zydis: just enough to follow control flow. */
#include <stdio.h>

#include "isa/isa.h"
#include "tracekit/common.h"

void tk_isa_init(struct tk_isa *isa)
{
	ZydisDecoderInit(&isa->dec[TK_ISA_64], ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderInit(&isa->dec[TK_ISA_32], ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_STACK_WIDTH_32);
	ZydisDecoderInit(&isa->dec[TK_ISA_16], ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
	for (int m = 0; m < TK_ISA__MODES; m++)
		ZydisDecoderEnableMode(&isa->dec[m], ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
	ZydisFormatterInit(&isa->fmt, ZYDIS_FORMATTER_STYLE_INTEL);
	/* objdump/ptxed-like: lower-case hex, no zero padding of addresses */
	ZydisFormatterSetProperty(&isa->fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	ZydisFormatterSetProperty(&isa->fmt, ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE,
				  ZYDIS_PADDING_DISABLED);
}

static uint64_t mask_ip(int mode, uint64_t ip)
{
	return mode == TK_ISA_64 ? ip : mode == TK_ISA_32 ? (uint32_t)ip : (uint16_t)ip;
}

int tk_isa_classify(const struct tk_isa *isa, int mode, const uint8_t *p, size_t n, uint64_t ip,
		    struct tk_isa_insn *out)
{
	ZydisDecodedInstruction in;
	ZyanStatus st = ZydisDecoderDecodeInstruction(&isa->dec[mode], NULL, p, n, &in);

	out->cls = TK_ISA_OTHER;
	out->zero_call = 0;
	out->target = 0;
	if (!ZYAN_SUCCESS(st)) {
		out->len = 0;
		out->cls = TK_ISA_BAD;
		return st == ZYDIS_STATUS_NO_MORE_DATA && n < 15 ? -TK_E_TRUNCATED
								  : -TK_E_BAD_OPCODE;
	}
	out->len = in.length;
	if (in.meta.branch_type == ZYDIS_BRANCH_TYPE_NONE &&
	    in.meta.category != ZYDIS_CATEGORY_SYSTEM && in.meta.category != ZYDIS_CATEGORY_INTERRUPT &&
	    in.meta.category != ZYDIS_CATEGORY_SYSCALL && in.meta.category != ZYDIS_CATEGORY_SYSRET &&
	    in.meta.category != ZYDIS_CATEGORY_RET && in.meta.category != ZYDIS_CATEGORY_VTX)
		return 0;

	uint64_t next = ip + in.length;
	int far = in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
	int rel = in.raw.imm[0].is_relative;
	uint64_t target = mask_ip(mode, next + (uint64_t)in.raw.imm[0].value.s);

	switch (in.mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		if (far)
			out->cls = TK_ISA_FAR;
		else if (rel)
			out->cls = TK_ISA_JMP, out->target = target;
		else
			out->cls = TK_ISA_JMP_IND;
		break;
	case ZYDIS_MNEMONIC_CALL:
		if (far)
			out->cls = TK_ISA_FAR;
		else if (rel)
			out->cls = TK_ISA_CALL, out->target = target,
			out->zero_call = in.raw.imm[0].value.s == 0;
		else
			out->cls = TK_ISA_CALL_IND;
		break;
	case ZYDIS_MNEMONIC_RET:
		out->cls = far ? TK_ISA_FAR : TK_ISA_RET;
		break;
	case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INT3:
	case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ: case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_SYSEXIT: case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_VMCALL:
	case ZYDIS_MNEMONIC_VMLAUNCH: case ZYDIS_MNEMONIC_VMRESUME:
		out->cls = TK_ISA_FAR;
		break;
	default:
		if (in.meta.category == ZYDIS_CATEGORY_COND_BR && rel)
			out->cls = TK_ISA_JCC, out->target = target;
		break;
	}
	return 0;
}

int tk_isa_format(const struct tk_isa *isa, int mode, const uint8_t *p, size_t n, uint64_t ip,
		  char *buf, size_t bufsz)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	/* The classification decoders run in minimal mode; formatting needs full operands. */
	dec = isa->dec[mode];
	ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_FALSE);
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p, n, &in, ops))) {
		snprintf(buf, bufsz, "(bad)");
		return -TK_E_BAD_OPCODE;
	}
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&isa->fmt, &in, ops,
							  in.operand_count_visible, buf, bufsz,
							  ip, NULL))) {
		snprintf(buf, bufsz, "(bad)");
		return -TK_E_BAD_OPCODE;
	}
	return in.length;
}
