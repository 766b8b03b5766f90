/* When a function with an indirect jump that is not a jump table may still be relocated
 * (recorder/btrace/leave.h): its target is a word loaded from memory. From real compilers'
 * bytes at their addresses: Debian 12's python3.11 (an indirect tail call through a loaded
 * pointer, with a pop between), gcc 12 -O2 of tests/data/btrace/indirect.c (`last`: the
 * load before a conditional branch; `run`: a computed goto), and sqlite3VdbeExec's jump
 * table (an add makes the target: not loaded). The same jumps with an entry between the
 * load and the jump, or a call, are not. And the addresses code forms (a computed goto's
 * `lea label(%rip)`, gcc 12 -O2) are where code may be entered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../recorder/btrace/leave.h"

struct shape {
	const char *what;
	uint64_t at;
	uint8_t bytes[48];
	size_t n;
	uint64_t entry;   /* an address where code is entered, 0: none */
	int loaded;
};

static const struct shape shapes[] = {
	{ "python3.11: mov 0x140(%rcx),%rax; pop %rbx; jmp *%rax", 0x428b42,
	  { 0x48, 0x89, 0xdf, 0x48, 0x8b, 0x81, 0x40, 0x01, 0x00, 0x00, 0x5b, 0xff, 0xe0 }, 13, 0, 1 },
	{ "indirect.c last: mov 0x18(%rdi),%rax; test; js; add; mov %esi,%edi; jmp *%rax", 0x1300,
	  { 0x48, 0x8b, 0x47, 0x18, 0x85, 0xf6, 0x78, 0x07, 0x03, 0x77, 0x20, 0x89, 0xf7, 0xff, 0xe0 }, 15, 0, 1 },
	{ "indirect.c run: lea; ...; mov (%r8,%rdx,8),%rdx; jmp *%rdx", 0x1320,
	  { 0x89, 0xd0, 0x0f, 0xb6, 0x17, 0x4c, 0x8d, 0x05, 0x94, 0x2a, 0x00, 0x00, 0x31, 0xc9, 0x41, 0xba,
	    0x0f, 0x00, 0x00, 0x00, 0x41, 0xb9, 0x55, 0x00, 0x00, 0x00, 0x49, 0x8b, 0x14, 0xd0, 0xff, 0xe2 },
	  32, 0, 1 },
	{ "sqlite3VdbeExec: movslq; add %rcx,%rax; jmp *%rax (a table: computed)", 0xea7e1,
	  { 0x44, 0x0f, 0xb6, 0x38, 0x41, 0x80, 0xff, 0xb5, 0x0f, 0x87, 0xa9, 0x01, 0x00, 0x00, 0x48,
	    0x8d, 0x0d, 0x12, 0x1f, 0x04, 0x00, 0x41, 0x0f, 0xb6, 0xd7, 0x48, 0x63, 0x04, 0x91, 0x48,
	    0x01, 0xc8, 0xff, 0xe0 }, 34, 0, 0 },
	/* entered at the add after the js: a path from there skips the load */
	{ "last, entered at the add", 0x1300,
	  { 0x48, 0x8b, 0x47, 0x18, 0x85, 0xf6, 0x78, 0x07, 0x03, 0x77, 0x20, 0x89, 0xf7, 0xff, 0xe0 }, 15, 0x1308, 0 },
	{ "last, entered at the jump itself", 0x1300,
	  { 0x48, 0x8b, 0x47, 0x18, 0x85, 0xf6, 0x78, 0x07, 0x03, 0x77, 0x20, 0x89, 0xf7, 0xff, 0xe0 }, 15, 0x130d, 0 },
	{ "last, entered at the load: the load is on every path", 0x1300,
	  { 0x48, 0x8b, 0x47, 0x18, 0x85, 0xf6, 0x78, 0x07, 0x03, 0x77, 0x20, 0x89, 0xf7, 0xff, 0xe0 }, 15, 0x1300, 1 },
	/* python's with a call in place of the pop: the callee may change rax */
	{ "python3.11 with a call between", 0x428b42,
	  { 0x48, 0x89, 0xdf, 0x48, 0x8b, 0x81, 0x40, 0x01, 0x00, 0x00, 0xe8, 0x00, 0x00, 0x00, 0x00,
	    0xff, 0xe0 }, 17, 0, 0 },
	/* ... the load 32 bits wide (mov 0x140(%rcx),%eax) */
	{ "python3.11 with a 32-bit load", 0x428b42,
	  { 0x48, 0x89, 0xdf, 0x8b, 0x81, 0x40, 0x01, 0x00, 0x00, 0x5b, 0xff, 0xe0 }, 12, 0, 0 },
};

static void test_loaded(void **state)
{
	(void)state;
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
		const struct shape *s = &shapes[k];
		struct jt_insn h[JT_WINDOW];
		int n = 0;
		size_t off = 0;
		uint8_t jreg = CTI_REG_NONE;
		for (;;) {   /* every instruction before the jmp, then the jmp */
			struct jt_insn x;
			assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, s->bytes + off, s->n - off, &x.in, x.ops)));
			x.ip = s->at + off;
			off += x.in.length;
			if (off == s->n) {
				assert_int_equal(x.in.mnemonic, ZYDIS_MNEMONIC_JMP);
				jreg = cti_greg(x.ops[0].reg.value);
				break;
			}
			assert_true(n < JT_WINDOW);
			h[n++] = x;
		}
		uint64_t entries[1] = { s->entry };
		struct reloc_entries ent = { { entries, NULL, NULL }, { s->entry ? 1 : 0, 0, 0 } };
		int got = jl_loaded(h, n, s->at + s->n - 2, jreg, &ent);
		if (got != s->loaded)
			fail_msg("%s: %s", s->what, got ? "loaded" : "not loaded");
	}
}

/* gcc 12 -O2 of `void *p = x > 3 ? &&big : &&small; keep = p; goto *p;`: each label's
 * `lea label(%rip),%rax` names the label, the store `mov %rax,keep(%rip)` the variable,
 * `lea 0x0(,%rdi,8),%eax` nothing (0 is never code), `mov $imm` its value. */
static void test_refs(void **state)
{
	(void)state;
	static const struct {
		uint64_t at;
		uint8_t bytes[8];
		size_t n;
		int nrefs;
		uint64_t ref;
	} insns[] = {
		{ 0x5, { 0x48, 0x8d, 0x05, 0xf9, 0xff, 0xff, 0xff }, 7, 1, 0x5 },
		{ 0x20, { 0x48, 0x8d, 0x05, 0xf9, 0xff, 0xff, 0xff }, 7, 1, 0x20 },
		{ 0xc, { 0x48, 0x89, 0x05, 0x10, 0x00, 0x00, 0x00 }, 7, 1, 0x23 },
		{ 0x2e, { 0x8d, 0x04, 0xfd, 0x00, 0x00, 0x00, 0x00 }, 7, 0, 0 },
		{ 0x400000, { 0xb8, 0x44, 0x33, 0x42, 0x00 }, 5, 1, 0x423344 },
		{ 0x431097, { 0x48, 0x8b, 0x04, 0xc5, 0x00, 0xaf, 0x73, 0x00 }, 8, 1, 0x73af00 },
	};
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t k = 0; k < sizeof insns / sizeof *insns; k++) {
		ZydisDecodedInstruction in;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		uint64_t refs[4];
		assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, insns[k].bytes, insns[k].n, &in, ops)));
		int n = jl_refs(insns[k].at, &in, ops, refs), found = 0;
		for (int i = 0; i < n; i++)
			found += refs[i] == insns[k].ref;
		if (insns[k].nrefs ? !found : n != 0)
			fail_msg("instruction %zu: %d addresses, 0x%llx %s", k, n, (unsigned long long)insns[k].ref,
				 found ? "named" : "not named");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loaded),
		cmocka_unit_test(test_refs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
