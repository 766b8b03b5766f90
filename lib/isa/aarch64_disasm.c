/* AArch64 disassembly through LLVM's C API (SVE, SVE2 and SME included, which Capstone 4
 * lacks). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Disassembler.h>

#include "tracekit/isa.h"

struct tk_a64_disasm {
	LLVMDisasmContextRef ctx;
};

/* libLLVM is loaded on first use (dlopen), not at program start: it is large, and its
 * relocation would cost every tracekit command tens of milliseconds. */
static struct {
	void (*init_info)(void), (*init_mc)(void), (*init_dis)(void);
	LLVMDisasmContextRef (*create)(const char *, const char *, const char *, void *, int,
				       LLVMOpInfoCallback, LLVMSymbolLookupCallback);
	int (*set_options)(LLVMDisasmContextRef, uint64_t);
	size_t (*disasm)(LLVMDisasmContextRef, uint8_t *, uint64_t, uint64_t, char *, size_t);
	void (*dispose)(LLVMDisasmContextRef);
	int ok;
} llvm;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_llvm(void)
{
	const char *names[] = { "libLLVM-16.so.1", "libLLVM-16.so", TK_LLVM_LIBRARY };
	void *h = NULL;
	for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&llvm.init_info = dlsym(h, "LLVMInitializeAArch64TargetInfo");
	*(void **)&llvm.init_mc = dlsym(h, "LLVMInitializeAArch64TargetMC");
	*(void **)&llvm.init_dis = dlsym(h, "LLVMInitializeAArch64Disassembler");
	*(void **)&llvm.create = dlsym(h, "LLVMCreateDisasmCPUFeatures");
	*(void **)&llvm.set_options = dlsym(h, "LLVMSetDisasmOptions");
	*(void **)&llvm.disasm = dlsym(h, "LLVMDisasmInstruction");
	*(void **)&llvm.dispose = dlsym(h, "LLVMDisasmDispose");
	if (!llvm.init_info || !llvm.init_mc || !llvm.init_dis || !llvm.create ||
	    !llvm.set_options || !llvm.disasm || !llvm.dispose)
		return;
	llvm.init_info();
	llvm.init_mc();
	llvm.init_dis();
	llvm.ok = 1;
}

struct tk_a64_disasm *tk_a64_disasm_new(int *err)
{
	pthread_once(&init_once, init_llvm);
	if (!llvm.ok) {
		*err = -TK_E_UNSUPPORTED;
		return NULL;
	}
	struct tk_a64_disasm *d = calloc(1, sizeof *d);
	if (!d) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	d->ctx = llvm.create("aarch64-linux-gnu", "generic",
			     "+v9a,+sve,+sve2,+sme,+sme2,+crypto,+rcpc,+lse", NULL, 0, NULL, NULL);
	if (!d->ctx) {
		free(d);
		*err = -TK_E_UNSUPPORTED;
		return NULL;
	}
	/* Print immediates in hex, as objdump does. */
	llvm.set_options(d->ctx, LLVMDisassembler_Option_PrintImmHex);
	return d;
}

void tk_a64_disasm_free(struct tk_a64_disasm *d)
{
	if (!d)
		return;
	llvm.dispose(d->ctx);
	free(d);
}

size_t tk_a64_disasm(struct tk_a64_disasm *d, uint64_t pc, uint32_t opcode, char *buf,
		     size_t len)
{
	uint8_t bytes[4] = { (uint8_t)opcode, (uint8_t)(opcode >> 8), (uint8_t)(opcode >> 16),
			     (uint8_t)(opcode >> 24) };
	char tmp[256];
	size_t n = llvm.disasm(d->ctx, bytes, 4, pc, tmp, sizeof tmp);
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
