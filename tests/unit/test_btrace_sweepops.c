/* The start-up sweep decodes operands only where it reads them (recorder/btrace/sweepops.h).
 * Over every instruction of libc and of this program (a linear sweep of their executable
 * sections, as the recorder's), an instruction decoded without its operands must give every
 * reader the answer its real operands give: the same control transfer (cti_classify), the same
 * suffix facts (reloc_suffix_insn), no address in the code (jl_refs), no write of RSP and
 * not a pop (rsp_effect), not a mov of an immediate (eax_imm). Checked with the code where
 * a PIE lies and with code below 4 GiB (a non-PIE executable: its immediates name code). */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../recorder/btrace/leave.h"
#include "../../recorder/btrace/sweepops.h"

static int writes_rsp(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (unsigned i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER && (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    (ops[i].reg.value == ZYDIS_REGISTER_RSP || ops[i].reg.value == ZYDIS_REGISTER_ESP ||
		     ops[i].reg.value == ZYDIS_REGISTER_SP))
			return 1;
	return 0;
}

static int has_imm(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	for (unsigned i = 0; i < in->operand_count_visible; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
			return 1;
	return 0;
}

/* Sweep the executable sections of the ELF file PATH with code range [LO, HI); counts. */
static void sweep_file(const char *path, uint64_t lo, uint64_t hi, size_t *insns, size_t *skipped)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	assert_true(fd >= 0 && fstat(fd, &st) == 0);
	const uint8_t *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(f != MAP_FAILED);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	struct sweep_ops so = { lo, hi, calloc(SWEEP_DEFS, sizeof(struct sweep_def)) };
	assert_non_null(so.defs);
	for (int s = 0; s < eh->e_shnum; s++) {
		if (sh[s].sh_type != SHT_PROGBITS || !(sh[s].sh_flags & SHF_EXECINSTR))
			continue;
		const uint8_t *code = f + sh[s].sh_offset;
		for (uint64_t off = 0; off < sh[s].sh_size;) {
			uint64_t ip = sh[s].sh_addr + off, n = sh[s].sh_size - off;
			ZydisDecodedInstruction in, full;
			ZydisDecodedOperand buf[ZYDIS_MAX_OPERAND_COUNT], ops[ZYDIS_MAX_OPERAND_COUNT];
			const ZydisDecodedOperand *got;
			int a = sweep_decode(&dec, &so, code + off, n, &in, buf, &got);
			int b = ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, n, &full, ops));
			assert_int_equal(a, b);
			if (!b) {
				off++;
				continue;
			}
			assert_int_equal(in.length, full.length);
			assert_int_equal(in.mnemonic, full.mnemonic);
			(*insns)++;
			off += full.length;
			if (got == buf)
				continue;
			(*skipped)++;
			struct cti c1, c2;
			struct reloc_insn r1, r2;
			uint64_t refs[4];
			int k1 = cti_classify(&c1, ip, &full, ops), k2 = cti_classify(&c2, ip, &in, got);
			if (k1 != k2 || memcmp(&c1, &c2, sizeof c1))   /* a syscall is one without operands */
				fail_msg("%s+0x%llx: a control transfer decoded without operands", path, (unsigned long long)ip);
			memset(&r1, 0, sizeof r1);
			memset(&r2, 0, sizeof r2);
			if (reloc_suffix_insn(ip, &full, ops, k1, &r1) != reloc_suffix_insn(ip, &in, got, k2, &r2) ||
			    memcmp(&r1, &r2, sizeof r1))
				fail_msg("%s+0x%llx: suffix facts differ without operands", path, (unsigned long long)ip);
			for (int r = jl_refs(ip, &full, ops, refs); r-- > 0;)
				if (refs[r] >= lo && refs[r] < hi)
					fail_msg("%s+0x%llx: names code 0x%llx, decoded without operands", path,
						 (unsigned long long)ip, (unsigned long long)refs[r]);
			assert_int_equal(jl_refs(ip, &in, got, refs), 0);
			if (writes_rsp(&full, ops) || full.mnemonic == ZYDIS_MNEMONIC_POP ||
			    (full.mnemonic == ZYDIS_MNEMONIC_MOV && has_imm(&full, ops)))
				fail_msg("%s+0x%llx: RSP or EAX facts decoded without operands", path, (unsigned long long)ip);
		}
	}
	free(so.defs);
	munmap((void *)f, (size_t)st.st_size);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, "libc.so.6"))
		snprintf(data, PATH_MAX, "%s", info->dlpi_name);
	return 0;
}

static void test_same_facts(void **state)
{
	(void)state;
	char libc[PATH_MAX] = "";
	dl_iterate_phdr(find_libc, libc);
	assert_true(libc[0]);
	const char *files[] = { libc, "/proc/self/exe" };
	for (size_t i = 0; i < 2; i++) {
		for (int low = 0; low < 2; low++) {
			size_t insns = 0, skipped = 0;
			/* where a PIE's code lies (this file's addresses, as if loaded at 0x555555554000),
			 * then a non-PIE's (below 4 GiB: immediates of 32 bits name code) */
			sweep_file(files[i], low ? 0x400000 : 0x555555554000ull, low ? 0xffffffffull : 0x7fffffffffffull,
				   &insns, &skipped);
			/* most instructions need no operands: the check is not empty */
			if (insns < 1000 || skipped < insns / 3)
				fail_msg("%s: %zu instructions, %zu without operands", files[i], insns, skipped);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_facts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
