/* AArch64 instruction classes and disassembly (lib/isa/aarch64*.c): the instruction set,
 * for any format or recorder that sees AArch64 opcodes (xtrace, the qemu plugin). */
#ifndef TRACEKIT_ISA_H
#define TRACEKIT_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tk_a64_class {
	TK_A64_OTHER,          /* integer data processing */
	TK_A64_FP_SIMD,
	TK_A64_SVE,
	TK_A64_SME,
	TK_A64_LOAD,
	TK_A64_STORE,
	TK_A64_ATOMIC,         /* load-and-store (LDADD, SWP, CAS) */
	TK_A64_SVE_MEM,
	TK_A64_BR_COND,        /* B.cond, CBZ/CBNZ, TBZ/TBNZ */
	TK_A64_BR,             /* B */
	TK_A64_CALL,           /* BL */
	TK_A64_BR_IND,         /* BR */
	TK_A64_CALL_IND,       /* BLR */
	TK_A64_RET,            /* RET */
	TK_A64_ERET,
	TK_A64_SVC,            /* SVC, HVC, SMC */
	TK_A64_SYSTEM,         /* MRS, MSR, HINT, barriers, SYS (DC, IC) */
	TK_A64_UNDEF,
	TK_A64__COUNT
};
TK_API unsigned tk_a64_classify(uint32_t opcode);
TK_API const char *tk_a64_class_name(unsigned cls);
static inline int tk_a64_is_branch(unsigned cls)
{
	return cls >= TK_A64_BR_COND && cls <= TK_A64_SVC;
}
/* HINT #imm (HINT #9 starts/stops collection in the seed's tools). */
static inline int tk_a64_hint(uint32_t op)
{
	return (op & 0xfffff01fu) == 0xd503201fu ? (int)(op >> 5 & 0x7f) : -1;
}

/* Disassembler (LLVM, with SVE/SVE2/SME). One per thread. */
struct tk_a64_disasm;
TK_API struct tk_a64_disasm *tk_a64_disasm_new(int *err);
TK_API void tk_a64_disasm_free(struct tk_a64_disasm *d);
/* Text of OPCODE at PC into BUF; returns its length ("<undefined>" if not decodable). */
TK_API size_t tk_a64_disasm(struct tk_a64_disasm *d, uint64_t pc, uint32_t opcode, char *buf,
		     size_t len);

#ifdef __cplusplus
}
#endif
#endif
