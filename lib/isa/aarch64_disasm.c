/* AArch64 disassembly through LLVM's C API (SVE, SVE2 and SME included, which Capstone 4
 * lacks). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Disassembler.h>
#include <llvm-c/Target.h>

#include "tracekit/xtrace.h"

struct tk_a64_disasm {
	LLVMDisasmContextRef ctx;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_llvm(void)
{
	LLVMInitializeAArch64TargetInfo();
	LLVMInitializeAArch64TargetMC();
	LLVMInitializeAArch64Disassembler();
}

struct tk_a64_disasm *tk_a64_disasm_new(int *err)
{
	pthread_once(&init_once, init_llvm);
	struct tk_a64_disasm *d = calloc(1, sizeof *d);
	if (!d) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	d->ctx = LLVMCreateDisasmCPUFeatures("aarch64-linux-gnu", "generic",
					     "+v9a,+sve,+sve2,+sme,+sme2,+crypto,+rcpc,+lse",
					     NULL, 0, NULL, NULL);
	if (!d->ctx) {
		free(d);
		*err = -TK_E_UNSUPPORTED;
		return NULL;
	}
	/* Print immediates in hex, as objdump does. */
	LLVMSetDisasmOptions(d->ctx, LLVMDisassembler_Option_PrintImmHex);
	return d;
}

void tk_a64_disasm_free(struct tk_a64_disasm *d)
{
	if (!d)
		return;
	LLVMDisasmDispose(d->ctx);
	free(d);
}

size_t tk_a64_disasm(struct tk_a64_disasm *d, uint64_t pc, uint32_t opcode, char *buf,
		     size_t len)
{
	uint8_t bytes[4] = { (uint8_t)opcode, (uint8_t)(opcode >> 8), (uint8_t)(opcode >> 16),
			     (uint8_t)(opcode >> 24) };
	char tmp[256];
	size_t n = LLVMDisasmInstruction(d->ctx, bytes, 4, pc, tmp, sizeof tmp);
	const char *s = tmp;
	if (n != 4)
		s = "<undefined>";
	while (*s == ' ' || *s == '\t')
		s++;
	size_t l = strlen(s);
	if (l >= len)
		l = len ? len - 1 : 0;
	memcpy(buf, s, l);
	if (len)
		buf[l] = 0;
	/* LLVM separates the mnemonic with a tab: make it one space. */
	for (size_t i = 0; i < l; i++)
		if (buf[i] == '\t')
			buf[i] = ' ';
	return l;
}
