/* AArch64 instruction classes from the encoding (Arm ARM, A64 top-level encodings). Cheap
 * bit tests only: stats runs this once per traced instruction. */
#include "tracekit/isa.h"

static const char *const class_names[TK_A64__COUNT] = {
	[TK_A64_OTHER] = "integer", [TK_A64_FP_SIMD] = "fp-simd", [TK_A64_SVE] = "sve",
	[TK_A64_SME] = "sme", [TK_A64_LOAD] = "load", [TK_A64_STORE] = "store",
	[TK_A64_ATOMIC] = "atomic", [TK_A64_SVE_MEM] = "sve-mem", [TK_A64_BR_COND] = "cond-branch",
	[TK_A64_BR] = "branch", [TK_A64_CALL] = "call", [TK_A64_BR_IND] = "indirect-branch",
	[TK_A64_CALL_IND] = "indirect-call", [TK_A64_RET] = "return", [TK_A64_ERET] = "eret",
	[TK_A64_SVC] = "syscall", [TK_A64_SYSTEM] = "system", [TK_A64_UNDEF] = "undefined",
};

const char *tk_a64_class_name(unsigned cls)
{
	return cls < TK_A64__COUNT ? class_names[cls] : "?";
}

static unsigned branch_sys(uint32_t op)
{
	if ((op & 0x7c000000u) == 0x14000000u)
		return op >> 31 ? TK_A64_CALL : TK_A64_BR;
	if ((op & 0x7e000000u) == 0x34000000u || (op & 0x7e000000u) == 0x36000000u ||
	    (op & 0xff000000u) == 0x54000000u)
		return TK_A64_BR_COND;
	if ((op & 0xfe000000u) == 0xd6000000u) {
		switch (op >> 21 & 0xf) {
		case 0: case 8: return TK_A64_BR_IND;      /* BR, BRAA/BRAB */
		case 1: case 9: return TK_A64_CALL_IND;    /* BLR, BLRAA/BLRAB */
		case 2: return TK_A64_RET;                 /* RET, RETAA/RETAB */
		case 4: case 5: return TK_A64_ERET;        /* ERET(AA/AB), DRPS */
		default: return TK_A64_UNDEF;
		}
	}
	if ((op & 0xff000000u) == 0xd4000000u)
		return (op & 3) ? TK_A64_SVC : TK_A64_SYSTEM; /* SVC/HVC/SMC; BRK/HLT */
	if ((op & 0xffc00000u) == 0xd5000000u)
		return TK_A64_SYSTEM;
	return TK_A64_OTHER;
}

static unsigned load_store(uint32_t op)
{
	/* Atomic memory operations: size 111 V 00 A R 1 Rs o3 opc 00. */
	if ((op & 0x3f200c00u) == 0x38200000u)
		return TK_A64_ATOMIC;
	/* Compare and swap (exclusive group, o2=1 o1=... L=x o0 with bit 21 = 1). */
	if ((op & 0x3f200000u) == 0x08200000u && (op & 0x00800000u))
		return TK_A64_ATOMIC;
	/* Load/store register (unsigned imm, imm9, register): opc in bits 23:22. */
	if ((op & 0x3a000000u) == 0x38000000u) {
		unsigned opc = op >> 22 & 3;
		return opc == 0 ? TK_A64_STORE : TK_A64_LOAD;
	}
	/* Literal loads: op0 xx01 1x0x, bit 24 = 0. */
	if ((op & 0x3b000000u) == 0x18000000u)
		return TK_A64_LOAD;
	/* Everything else (pairs, exclusives, SIMD structures) has L in bit 22. */
	return op & 0x00400000u ? TK_A64_LOAD : TK_A64_STORE;
}

unsigned tk_a64_classify(uint32_t op)
{
	switch (op >> 25 & 0xf) {
	case 0x0:
		return op >> 31 ? TK_A64_SME : TK_A64_UNDEF;
	case 0x2:
		return (op >> 29) >= 4 ? TK_A64_SVE_MEM : TK_A64_SVE;
	case 0x1: case 0x3:
		return TK_A64_UNDEF;
	case 0x8: case 0x9: /* data processing, immediate */
		return TK_A64_OTHER;
	case 0xa: case 0xb:
		return branch_sys(op);
	case 0x5: case 0xd: /* data processing, register */
		return TK_A64_OTHER;
	case 0x7: case 0xf:
		return TK_A64_FP_SIMD;
	default: /* 0x4, 0x6, 0xc, 0xe: loads and stores */
		return load_store(op);
	}
}
