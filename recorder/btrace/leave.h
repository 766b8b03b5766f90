/* Indirect jumps that are not jump tables, and the code addresses a module names: what
 * lets a function with such a jump be relocated (see reloc.h). A jump table computes its
 * targets (table + entry) inside the function, so a window could cover any of them; a
 * jump through memory (`jmp *0x80(%rax)`, an indirect tail call or a computed goto through
 * a table of addresses) or through a register just loaded from memory (`mov 0x140(%rcx),
 * %rax; pop %rbx; jmp *%rax`) goes to an address that was stored. An address inside a
 * function is stored only where code forms it (a RIP-relative or absolute operand, an
 * immediate) or the module's data holds it, so every such address is counted as a place
 * where the code may be entered (jl_refs, and the data scan of startup.c), and windows
 * keep off them; a jump whose target is computed otherwise keeps its own trap (window_entry).
 * Header-only so that the unit test checks the recorder's very rule. Start-up only. */
#ifndef TK_RECORDER_BTRACE_LEAVE_H
#define TK_RECORDER_BTRACE_LEAVE_H

#include <stdint.h>
#include <Zydis/Zydis.h>

#include "cti.h"
#include "jtab.h"
#include "reloc.h"

/* Is the target of `jmp JREG` at JMP_IP a 64-bit word loaded from memory? H[0..N): the
 * instructions before the jump, the last one just before it. Read backwards to the
 * register's last write: a 64-bit `mov reg, [mem]` (through register copies), with no
 * call, unconditional jump or return between (conditional branches leave the path, they
 * do not join it), and nothing between it and the jump where ENT says code is entered (a
 * path from there would skip the load). */
static inline int jl_loaded(const struct jt_insn *h, int n, uint64_t jmp_ip, uint8_t jreg,
			    const struct reloc_entries *ent)
{
	uint8_t a = jreg, d, s;
	uint64_t next = jmp_ip;
	for (int i = n - 1; i >= 0; i--) {
		const struct jt_insn *x = &h[i];
		const ZydisDecodedOperand *o = x->ops;
		if (reloc_entered(ent, next - 1, next + 1) || x->ip + x->in.length != next)
			return 0;
		next = x->ip;
		if (x->in.meta.category != ZYDIS_CATEGORY_COND_BR && jt_branches(x))
			return 0;
		if (!jt_writes(x, a))
			continue;
		if (x->in.mnemonic != ZYDIS_MNEMONIC_MOV || o[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
		    o[0].size != 64)
			return 0;
		if (jt_move(x, &d, &s)) {
			a = s;
			continue;
		}
		return o[1].type == ZYDIS_OPERAND_TYPE_MEMORY && o[1].size == 64;
	}
	return 0;
}

/* The addresses the instruction IN at IP names (at most 4, into OUT): RIP-relative and
 * absolute memory operands (lea included), immediates; never 0. Returns how many. */
static inline int jl_refs(uint64_t ip, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
			  uint64_t *out)
{
	int n = 0;
	for (unsigned i = 0; i < in->operand_count && n < 4; i++) {
		const ZydisDecodedOperand *x = &ops[i];
		if (x->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			if (x->mem.base == ZYDIS_REGISTER_RIP)
				out[n++] = ip + in->length + (uint64_t)x->mem.disp.value;
			else if (x->mem.base == ZYDIS_REGISTER_NONE && x->mem.disp.has_displacement)
				out[n++] = (uint64_t)x->mem.disp.value;
		} else if (x->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && !x->imm.is_relative) {
			out[n++] = x->imm.value.u;
		}
		if (n && !out[n - 1])   /* 0 is never code */
			n--;
	}
	return n;
}

#endif
