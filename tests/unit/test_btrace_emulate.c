/* The recorder's CTI emulator against the CPU: every branch form is run natively (from a
 * SIGTRAP handler that installs the registers and jumps to it; the branch lands on an int3
 * that catches the result) and emulated from the same registers; RIP, every general
 * register, the flags and the stack must agree. Also checks the PT packet encoder against
 * libipt's packet decoder. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <asm/prctl.h>
#include <cmocka.h>
#include <intel-pt.h>

#include "../../recorder/btrace/cti.h"
#include "../../recorder/btrace/ptenc.h"

#define STACK_SIZE 65536
#define AT 0x100          /* the instruction's offset in the code page */
#define TARGET 0x800      /* where indirect forms go */

static uint8_t *code;               /* RWX page filled with int3 */
static uint8_t *low;                /* a page below 4 GiB for 32-bit addressing */
static uint8_t stack_native[STACK_SIZE] __attribute__((aligned(16)));
static uint8_t stack_emul[STACK_SIZE] __attribute__((aligned(16)));
static greg_t want[NGREG], got[NGREG], saved[NGREG];
static volatile int phase;
static __thread uint64_t tls_target;

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	(void)sig, (void)si;
	/* general registers, RIP and RFLAGS only: REG_CSGSFS and the rest stay the kernel's */
	if (phase == 0) {
		memcpy(saved, g, sizeof saved);
		memcpy(g, want, sizeof(greg_t) * (REG_EFL + 1));
		g[REG_RIP] = (greg_t)(uintptr_t)(code + AT);
		phase = 1;
	} else {
		memcpy(got, g, sizeof got);
		memcpy(g, saved, sizeof(greg_t) * (REG_EFL + 1));
		phase = 0;
	}
}

static void run_native(void)
{
	phase = 0;
	__asm__ volatile("int3" ::: "memory");
	assert_int_equal(phase, 0);
}

static uint64_t fs_base(void)
{
	uint64_t b = 0;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &b);
	return b;
}

static uint64_t gs_base(void)
{
	uint64_t b = 0;
	syscall(SYS_arch_prctl, ARCH_GET_GS, &b);
	return b;
}

static int setup(void **state)
{
	struct sigaction sa;
	(void)state;
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (code == MAP_FAILED || low == MAP_FAILED)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	return sigaction(SIGTRAP, &sa, NULL);
}

/* Base registers: distinct values, RSP inside the given stack. */
static void base_regs(greg_t *g, uint8_t *stack)
{
	static const int regs[] = { REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14,
				    REG_R15, REG_RDI, REG_RSI, REG_RBP, REG_RBX, REG_RDX, REG_RAX, REG_RCX };
	memset(g, 0, sizeof(greg_t) * NGREG);
	for (size_t i = 0; i < sizeof regs / sizeof *regs; i++)
		g[regs[i]] = (greg_t)(0x1111111100000000ULL * (i + 1) + 0x40 * i);
	g[REG_RSP] = (greg_t)(uintptr_t)(stack + STACK_SIZE / 2);
	g[REG_EFL] = 0x202;
}

/* Run BYTES (N long) natively and emulated from registers SET (RSP is relative to the
 * stack); compare everything. Returns the landing offset in the code page. */
static long check_insn(const uint8_t *bytes, size_t n, const greg_t *set, const char *what)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct cti c;
	struct cti_result r = { 0 };   /* (cti_emulate fills it; -O3 cannot tell) */
	struct cti_segs segs = { fs_base(), gs_base() };
	greg_t emu[NGREG];

	if (getenv("TK_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", what);
	memset(code, 0xcc, 4096);
	memcpy(code + AT, bytes, n);
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + AT, n, &in, ops)));
	int kind = cti_classify(&c, (uint64_t)(uintptr_t)(code + AT), &in, ops);
	if (kind == CTI_NONE || kind == CTI_OTHER)
		fail_msg("%s: not classified as an emulated CTI", what);

	/* identical stacks; RSP in each */
	for (size_t i = 0; i < STACK_SIZE; i += 8) {
		uint64_t v = (uint64_t)(uintptr_t)(code + TARGET) + (i % 64);
		memcpy(stack_native + i, &v, 8);
		memcpy(stack_emul + i, &v, 8);
	}
	memcpy(want, set, sizeof want);
	want[REG_RSP] = (greg_t)(uintptr_t)stack_native + (set[REG_RSP] - (greg_t)(uintptr_t)stack_emul);
	memcpy(emu, set, sizeof emu);

	run_native();
	if (getenv("TK_TEST_VERBOSE"))
		fprintf(stderr, "  native done: rip +0x%llx\n", (unsigned long long)(got[REG_RIP] - (greg_t)(uintptr_t)code));
	assert_int_equal(cti_emulate(&c, emu, &segs, &r), 0);

	uint64_t native_next = (uint64_t)got[REG_RIP] - 1;   /* the int3 reports RIP after it */
	if (native_next != r.next)
		fail_msg("%s: native went to +0x%llx, emulation to +0x%llx", what,
			 (unsigned long long)(native_next - (uintptr_t)code),
			 (unsigned long long)(r.next - (uintptr_t)code));
	static const int gprs[] = { REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14,
				    REG_R15, REG_RDI, REG_RSI, REG_RBP, REG_RBX, REG_RDX, REG_RAX, REG_RCX };
	for (size_t i = 0; i < sizeof gprs / sizeof *gprs; i++)
		if (got[gprs[i]] != emu[gprs[i]])
			fail_msg("%s: register %d native 0x%llx emulated 0x%llx", what, gprs[i],
				 (unsigned long long)got[gprs[i]], (unsigned long long)emu[gprs[i]]);
	assert_int_equal(got[REG_RSP] - (greg_t)(uintptr_t)stack_native,
			 emu[REG_RSP] - (greg_t)(uintptr_t)stack_emul);
	assert_int_equal(got[REG_EFL] & 0xcd5, emu[REG_EFL] & 0xcd5);
	/* the words around the stack pointer (pushed return addresses) */
	size_t off = (size_t)(emu[REG_RSP] - (greg_t)(uintptr_t)stack_emul);
	assert_memory_equal(stack_native + off - 32, stack_emul + off - 32, 96);
	return (long)(native_next - (uintptr_t)code);
}

static void test_jcc(void **state)
{
	greg_t g[NGREG];
	int taken = 0, not_taken = 0;
	(void)state;
	base_regs(g, stack_emul);
	for (int cc = 0; cc < 16; cc++)
		for (int f = 0; f < 32; f++) {
			/* every combination of CF, PF, ZF, SF, OF */
			uint64_t fl = 0x202 | (f & 1 ? 0x1 : 0) | (f & 2 ? 0x4 : 0) | (f & 4 ? 0x40 : 0) |
				      (f & 8 ? 0x80 : 0) | (f & 16 ? 0x800 : 0);
			char what[64];
			g[REG_EFL] = (greg_t)fl;
			uint8_t s8[] = { (uint8_t)(0x70 + cc), 0x30 };
			snprintf(what, sizeof what, "j%x rel8 flags %#llx", cc, (unsigned long long)fl);
			long to = check_insn(s8, sizeof s8, g, what);
			to == AT + 2 ? not_taken++ : taken++;
			uint8_t s32[] = { 0x0f, (uint8_t)(0x80 + cc), 0x00, 0x02, 0x00, 0x00 };
			snprintf(what, sizeof what, "j%x rel32 flags %#llx", cc, (unsigned long long)fl);
			check_insn(s32, sizeof s32, g, what);
			uint8_t back[] = { (uint8_t)(0x70 + cc), 0x90 };   /* backwards */
			check_insn(back, sizeof back, g, what);
		}
	assert_int_equal(taken, 256);
	assert_int_equal(not_taken, 256);
}

static void test_jcxz_loop(void **state)
{
	static const uint64_t rcxs[] = { 0, 1, 2, 0x100000000ULL, 0x100000001ULL, ~0ULL };
	greg_t g[NGREG];
	(void)state;
	base_regs(g, stack_emul);
	for (size_t i = 0; i < sizeof rcxs / sizeof *rcxs; i++)
		for (int zf = 0; zf < 2; zf++) {
			char what[64];
			g[REG_RCX] = (greg_t)rcxs[i];
			g[REG_EFL] = zf ? 0x246 : 0x202;
			static const uint8_t forms[][3] = {
				{ 0xe3, 0x20 }, { 0x67, 0xe3, 0x20 },          /* jrcxz, jecxz */
				{ 0xe2, 0x20 }, { 0xe1, 0x20 }, { 0xe0, 0x20 }, /* loop, loope, loopne */
				{ 0x67, 0xe2, 0x20 }, { 0x67, 0xe1, 0x20 }, { 0x67, 0xe0, 0x20 },
			};
			for (size_t k = 0; k < sizeof forms / sizeof *forms; k++) {
				size_t n = forms[k][0] == 0x67 ? 3 : 2;
				snprintf(what, sizeof what, "form %zu rcx %#llx zf %d", k,
					 (unsigned long long)rcxs[i], zf);
				check_insn(forms[k], n, g, what);
			}
		}
}

static void test_indirect(void **state)
{
	greg_t g[NGREG];
	uint64_t target = (uint64_t)(uintptr_t)(code + TARGET);
	static uint64_t table[8];
	(void)state;

	base_regs(g, stack_emul);
	/* registers */
	g[REG_RAX] = (greg_t)target;
	check_insn((const uint8_t[]){ 0xff, 0xe0 }, 2, g, "jmp rax");
	check_insn((const uint8_t[]){ 0x3e, 0xff, 0xe0 }, 3, g, "notrack jmp rax");
	g[REG_R11] = (greg_t)target + 8;
	check_insn((const uint8_t[]){ 0x41, 0xff, 0xe3 }, 3, g, "jmp r11");
	g[REG_RBX] = (greg_t)target + 16;
	check_insn((const uint8_t[]){ 0xff, 0xd3 }, 2, g, "call rbx");
	g[REG_R15] = (greg_t)target + 24;
	check_insn((const uint8_t[]){ 0x41, 0xff, 0xd7 }, 3, g, "call r15");

	/* memory: base, base+index*scale+disp, negative displacement, RIP-relative */
	for (int i = 0; i < 8; i++)
		table[i] = target + 8 * (uint64_t)i;
	base_regs(g, stack_emul);
	g[REG_RAX] = (greg_t)(uintptr_t)&table[1];
	check_insn((const uint8_t[]){ 0xff, 0x20 }, 2, g, "jmp [rax]");
	g[REG_RAX] = (greg_t)(uintptr_t)&table[0];
	g[REG_RBX] = 2;
	check_insn((const uint8_t[]){ 0xff, 0x64, 0xd8, 0x10 }, 4, g, "jmp [rax+rbx*8+0x10]");
	check_insn((const uint8_t[]){ 0xff, 0x54, 0xd8, 0x08 }, 4, g, "call [rax+rbx*8+8]");
	g[REG_R12] = (greg_t)(uintptr_t)&table[2];
	g[REG_R13] = 2;
	check_insn((const uint8_t[]){ 0x43, 0xff, 0x64, 0xac, 0xf8 }, 5, g, "jmp [r12+r13*4-8]");
	g[REG_RBP] = (greg_t)(uintptr_t)&table[0] - 0x100;
	g[REG_RSI] = 12;
	check_insn((const uint8_t[]){ 0xff, 0x94, 0x75, 0x00, 0x01, 0x00, 0x00 }, 7, g,
		   "call [rbp+rsi*2+0x100]");
	/* RIP-relative: the pointer sits 0x40 bytes past the instruction */
	{
		uint8_t jmp[6] = { 0xff, 0x25, 0x3a, 0x00, 0x00, 0x00 }, call[6] = { 0xff, 0x15, 0x3a, 0x00, 0x00, 0x00 };
		uint64_t t2 = target + 40;
		memset(code, 0xcc, 4096);
		/* check_insn rewrites the page, so place the pointer by hand each time via the stack of
		 * expectations: rebuild the page after the copy */
		memcpy(code + AT + 0x40, &t2, 8);
		ZydisDecoder dec;
		ZydisDecodedInstruction in;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		struct cti c;
		struct cti_result r;
		struct cti_segs segs = { 0, 0 };
		greg_t emu[NGREG];
		for (int k = 0; k < 2; k++) {
			memset(code, 0xcc, 4096);
			memcpy(code + AT, k ? call : jmp, 6);
			memcpy(code + AT + 0x40, &t2, 8);
			ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
			assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + AT, 6, &in, ops)));
			cti_classify(&c, (uint64_t)(uintptr_t)(code + AT), &in, ops);
			memcpy(want, g, sizeof want);
			want[REG_RSP] = (greg_t)(uintptr_t)(stack_native + STACK_SIZE / 2);
			memcpy(emu, g, sizeof emu);
			emu[REG_RSP] = (greg_t)(uintptr_t)(stack_emul + STACK_SIZE / 2);
			run_native();
			assert_int_equal(cti_emulate(&c, emu, &segs, &r), 0);
			assert_int_equal((uint64_t)got[REG_RIP] - 1, r.next);
			assert_int_equal(r.next, t2);
			assert_int_equal(got[REG_RSP] - (greg_t)(uintptr_t)stack_native,
					 emu[REG_RSP] - (greg_t)(uintptr_t)stack_emul);
			uint64_t pn, pe;
			memcpy(&pn, (void *)(uintptr_t)got[REG_RSP], 8);
			memcpy(&pe, (void *)(uintptr_t)emu[REG_RSP], 8);
			if (k)
				assert_int_equal(pn, pe);
		}
	}
	/* stack-relative: call [rsp+8] reads the slot before pushing */
	base_regs(g, stack_emul);
	check_insn((const uint8_t[]){ 0xff, 0x54, 0x24, 0x08 }, 4, g, "call [rsp+8]");
	check_insn((const uint8_t[]){ 0xff, 0x64, 0x24, 0x10 }, 4, g, "jmp [rsp+16]");
	/* FS and GS segments */
	tls_target = target + 48;
	g[REG_RAX] = (greg_t)((uint64_t)(uintptr_t)&tls_target - fs_base());
	check_insn((const uint8_t[]){ 0x64, 0xff, 0x20 }, 3, g, "jmp fs:[rax]");
	g[REG_RAX] = (greg_t)((uint64_t)(uintptr_t)&table[3] - gs_base());
	check_insn((const uint8_t[]){ 0x65, 0xff, 0x10 }, 3, g, "call gs:[rax]");
	/* 32-bit address size */
	uint64_t t3 = target + 56;
	memcpy(low, &t3, 8);
	g[REG_RAX] = (greg_t)(0xdead000000000000ULL | (uint32_t)(uintptr_t)low);
	check_insn((const uint8_t[]){ 0x67, 0xff, 0x20 }, 3, g, "jmp [eax]");
}

static void test_ret(void **state)
{
	greg_t g[NGREG];
	(void)state;
	base_regs(g, stack_emul);
	assert_int_equal(check_insn((const uint8_t[]){ 0xc3 }, 1, g, "ret") >= TARGET, 1);
	check_insn((const uint8_t[]){ 0xc2, 0x10, 0x00 }, 3, g, "ret 0x10");
	check_insn((const uint8_t[]){ 0xc2, 0x08, 0x01 }, 3, g, "ret 0x108");
	check_insn((const uint8_t[]){ 0xf2, 0xc3 }, 2, g, "bnd ret");
}

/* ---- the PT encoder, checked with libipt's packet decoder ---- */
static void test_ptenc(void **state)
{
	uint8_t buf[512];
	struct ptenc e = { .buf = buf };
	static const uint64_t ips[] = { 0x555555554321, 0x555555559876, 0x555566660000, 0x7fffffffe000,
					0xffffffff81000000ULL, 0x1234 };
	(void)state;
	ptenc_psb(&e, 0x123456789abcULL, 0, 0);
	ptenc_ip(&e, PT_TIP_PGE, ips[0], 0);
	for (int i = 0; i < 9; i++)
		ptenc_tnt(&e, i % 3 == 0);
	for (size_t i = 1; i < sizeof ips / sizeof *ips; i++)
		ptenc_ip(&e, PT_TIP, ips[i], 0);
	ptenc_psb(&e, 0x42, 1, ips[2]);
	ptenc_ip(&e, PT_FUP, ips[3], 0);
	ptenc_ip(&e, PT_TIP_PGD, 0, 1);
	ptenc_ovf(&e);

	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + e.len;
	struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
	assert_non_null(d);
	assert_true(pt_pkt_sync_forward(d) >= 0);
	struct pt_packet p;
	uint64_t last = 0, tnt_bits = 0;
	int ntnt = 0, tips = 0, psbs = 0, pge = 0, pgd = 0, fup = 0, ovf = 0, tsc = 0, mode = 0;
	size_t ipi = 1;
	for (;;) {
		int rc = pt_pkt_next(d, &p, sizeof p);
		if (rc == -pte_eos)
			break;
		assert_true(rc >= 0);
		uint64_t ip = 0;
		if (p.type == ppt_tip || p.type == ppt_tip_pge || p.type == ppt_tip_pgd || p.type == ppt_fup) {
			/* decompress against the last IP */
			switch (p.payload.ip.ipc) {
			case pt_ipc_suppressed: ip = 0; break;
			case pt_ipc_update_16: ip = (last & ~0xffffULL) | p.payload.ip.ip; break;
			case pt_ipc_update_32: ip = (last & ~0xffffffffULL) | p.payload.ip.ip; break;
			case pt_ipc_update_48: ip = (last & ~0xffffffffffffULL) | p.payload.ip.ip; break;
			case pt_ipc_sext_48: ip = (uint64_t)((int64_t)(p.payload.ip.ip << 16) >> 16); break;
			case pt_ipc_full: ip = p.payload.ip.ip; break;
			}
			if (p.payload.ip.ipc != pt_ipc_suppressed)
				last = ip;
		}
		switch (p.type) {
		case ppt_psb: psbs++; last = 0; break;
		case ppt_tsc: tsc++; assert_true(p.payload.tsc.tsc == 0x123456789abcULL || p.payload.tsc.tsc == 0x42); break;
		case ppt_mode: mode++; assert_int_equal(p.payload.mode.bits.exec.csl, 1); break;
		case ppt_tip_pge: pge++; assert_int_equal(ip, ips[0]); break;
		case ppt_tnt_8:
			for (int b = p.payload.tnt.bit_size - 1; b >= 0; b--) {
				assert_int_equal((p.payload.tnt.payload >> b) & 1, ntnt % 3 == 0);
				ntnt++;
			}
			tnt_bits += p.payload.tnt.bit_size;
			break;
		case ppt_tip: tips++; assert_int_equal(ip, ips[ipi++]); break;
		case ppt_fup: fup++; assert_true(ip == ips[2] || ip == ips[3]); break;
		case ppt_tip_pgd: pgd++; assert_int_equal(p.payload.ip.ipc, pt_ipc_suppressed); break;
		case ppt_ovf: ovf++; break;
		default: break;
		}
	}
	pt_pkt_free_decoder(d);
	assert_int_equal(tnt_bits, 9);
	assert_int_equal(tips, 5);
	assert_int_equal(psbs, 2);
	assert_int_equal(tsc, 2);
	assert_int_equal(mode, 2);
	assert_int_equal(pge, 1);
	assert_int_equal(fup, 2);
	assert_int_equal(pgd, 1);
	assert_int_equal(ovf, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jcc),
		cmocka_unit_test(test_jcxz_loop),
		cmocka_unit_test(test_indirect),
		cmocka_unit_test(test_ret),
		cmocka_unit_test(test_ptenc),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
