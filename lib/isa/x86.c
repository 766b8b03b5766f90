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

/* Transfers newer than Debian's Zydis 4.0 (it refuses them): FRED's far returns ERETU
 * and ERETS, and APX's JMPABS (REX2, opcode A1, 64-bit target), 64-bit code only. Their
 * encodings are fixed, so they are recognised here. Returns the length, or 0. */
static unsigned newer_insn(int mode, const uint8_t *p, size_t n, const char **name)
{
	if (mode != TK_ISA_64)
		return 0;
	if (n >= 4 && (p[0] == 0xf3 || p[0] == 0xf2) && p[1] == 0x0f && p[2] == 0x01 &&
	    p[3] == 0xca) {
		*name = p[0] == 0xf3 ? "eretu" : "erets";
		return 4;
	}
	if (n >= 11 && p[0] == 0xd5 && p[1] == 0x00 && p[2] == 0xa1) {
		*name = "jmpabs";
		return 11;
	}
	return 0;
}

int tk_isa_classify(const struct tk_isa *isa, int mode, const uint8_t *p, size_t n, uint64_t ip,
		    struct tk_isa_insn *out)
{
	ZydisDecodedInstruction in;
	const char *name;
	unsigned len = newer_insn(mode, p, n, &name);

	out->cls = TK_ISA_OTHER;
	out->zero_call = 0;
	out->sys = 0;
	out->target = 0;
	if (len) {
		/* JMPABS is direct, but the processor sends a TIP for it (as libipt reads
		 * it): the TIP gives the target */
		out->len = len;
		out->cls = name[0] == 'j' ? TK_ISA_JMP_IND : TK_ISA_FAR;
		return 0;
	}

	ZyanStatus st = ZydisDecoderDecodeInstruction(&isa->dec[mode], NULL, p, n, &in);

	if (!ZYAN_SUCCESS(st)) {
		out->len = 0;
		out->cls = TK_ISA_BAD;
		return st == ZYDIS_STATUS_NO_MORE_DATA && n < 15 ? -TK_E_TRUNCATED
								  : -TK_E_BAD_OPCODE;
	}
	out->len = in.length;
	/* MOV CR3, reg (0F 22 /3): a context switch, which may end tracing */
	if (in.mnemonic == ZYDIS_MNEMONIC_MOV && in.opcode_map == ZYDIS_OPCODE_MAP_0F &&
	    in.opcode == 0x22 && in.raw.modrm.reg == 3)
		out->sys = TK_ISA_SYS_MOV_CR3;
	else if (in.mnemonic == ZYDIS_MNEMONIC_VMPTRLD)
		out->sys = TK_ISA_SYS_VMPTRLD;
	else if (in.mnemonic == ZYDIS_MNEMONIC_PTWRITE)
		out->sys = TK_ISA_SYS_PTWRITE;
	if (in.mnemonic == ZYDIS_MNEMONIC_UIRET) {   /* user-interrupt return: far */
		out->cls = TK_ISA_FAR;
		return 0;
	}
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

	const char *name;
	unsigned len = newer_insn(mode, p, n, &name);

	if (len == 4) {
		snprintf(buf, bufsz, "%s", name);
		return (int)len;
	}
	if (len) {
		snprintf(buf, bufsz, "%s 0x%llx", name, (unsigned long long)tk_le64(p + 3));
		return (int)len;
	}
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
