/* x86 instruction classification for flow reconstruction (internal). */
#ifndef TK_ISA_ISA_H
#define TK_ISA_ISA_H

#include <stddef.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

/* What an instruction does to control flow. */
enum tk_isa_class {
	TK_ISA_OTHER = 0,
	TK_ISA_JCC,        /* conditional: jcc, jcxz, loop*  (one TNT bit) */
	TK_ISA_JMP,        /* direct near jump */
	TK_ISA_CALL,       /* direct near call */
	TK_ISA_RET,        /* near return (TNT bit if compressed, else TIP) */
	TK_ISA_JMP_IND,    /* indirect near jump (TIP) */
	TK_ISA_CALL_IND,   /* indirect near call (TIP) */
	TK_ISA_FAR,        /* far transfer: syscall, sysret, int, iret, far jmp/call/ret (TIP) */
	TK_ISA_BAD,        /* undecodable bytes */
};

enum tk_isa_mode { TK_ISA_64 = 0, TK_ISA_32, TK_ISA_16, TK_ISA__MODES };

struct tk_isa_insn {
	uint64_t target;   /* direct target (JCC, JMP, CALL) */
	uint8_t len;
	uint8_t cls;       /* enum tk_isa_class */
	uint8_t zero_call; /* call to the next instruction: not a call for return compression */
	uint8_t sys;       /* enum tk_isa_sys (OTHER): an event in the trace may bind to it */
};

/* Instructions that are no branch but that trace events bind to (libipt binds them so). */
enum tk_isa_sys {
	TK_ISA_SYS_MOV_CR3 = 1,   /* a TIP.PGD without IP, a PIP */
	TK_ISA_SYS_VMPTRLD,       /* a VMCS */
	TK_ISA_SYS_PTWRITE,       /* a PTW without IP */
};

struct tk_isa {
	ZydisDecoder dec[TK_ISA__MODES];
	ZydisFormatter fmt;
};

void tk_isa_init(struct tk_isa *isa);
/* Classify the instruction at P (N bytes available) at address IP. Returns 0, or
 * -TK_E_TRUNCATED if N is too short, -TK_E_BAD_OPCODE if the bytes do not decode. */
int tk_isa_classify(const struct tk_isa *isa, int mode, const uint8_t *p, size_t n, uint64_t ip,
		    struct tk_isa_insn *out);
/* Format the instruction at P as Intel-syntax text into BUF (NUL-terminated). */
int tk_isa_format(const struct tk_isa *isa, int mode, const uint8_t *p, size_t n, uint64_t ip,
		  char *buf, size_t bufsz);

#endif
