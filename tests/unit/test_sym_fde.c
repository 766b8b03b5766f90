/* A stripped program's local functions are entries (tk_sym_entries) through the FDE starts
 * of .eh_frame_hdr; the PLT's FDE is not one. A damaged table adds nothing, reads nothing
 * out of bounds (the ASan build checks) and leaves the module's symbols loaded; a count the
 * table cannot hold is reported with the table's offset. Reference: nm and objdump on the
 * unstripped program. */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

static char dir[] = "/tmp/tk-fde-XXXXXX";
static uint64_t cmp_addr, plt0_addr, qsort_plt_addr;
static char logged[512];

static void keep_log(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	if (level <= TK_LOG_WARN)
		snprintf(logged, sizeof logged, "%s", msg);
}

static const char program[] =
	"#include <stdio.h>\n#include <stdlib.h>\n"
	"static int cmp(const void *a, const void *b)\n"
	"{ return *(const int *)a - *(const int *)b; }\n"
	"int main(int argc, char **argv)\n"
	"{ int v[3] = { 3, argc, 1 }; (void)argv; qsort(v, 3, sizeof *v, cmp);\n"
	"  printf(\"%d\\n\", v[0]); return 0; }\n";

static int entries_have(const char *path, uint64_t addr)
{
	struct tk_sym *s = tk_sym_new(NULL, NULL);
	uint64_t *e;
	size_t n;
	int found = 0;

	assert_non_null(s);
	assert_true(tk_sym_add_elf(s, path, 0) >= 0);
	assert_int_equal(tk_sym_entries(s, &e, &n), 0);
	for (size_t i = 0; i < n; i++)
		found |= e[i] == addr;
	free(e);
	tk_sym_free(s);
	return found;
}

/* File offset of the PT_GNU_EH_FRAME segment of a 64-bit ELF file. */
static long eh_frame_hdr_offset(const char *path)
{
	FILE *f = fopen(path, "rb");
	Elf64_Ehdr eh;
	long off = -1;

	assert_non_null(f);
	assert_int_equal(fread(&eh, sizeof eh, 1, f), 1);
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		assert_int_equal(fseek(f, (long)(eh.e_phoff + (uint64_t)i * eh.e_phentsize), SEEK_SET), 0);
		assert_int_equal(fread(&ph, sizeof ph, 1, f), 1);
		if (ph.p_type == PT_GNU_EH_FRAME)
			off = (long)ph.p_offset;
	}
	fclose(f);
	return off;
}

/* A copy of the stripped program with LEN bytes at OFF of its .eh_frame_hdr replaced. */
static void patched_copy(const char *to, long off, const void *bytes, size_t len)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cp %s/progs %s", dir, to);
	assert_int_equal(system(cmd), 0);
	long hdr = eh_frame_hdr_offset(to);
	assert_true(hdr > 0);
	FILE *f = fopen(to, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, hdr + off, SEEK_SET), 0);
	assert_int_equal(fwrite(bytes, len, 1, f), 1);
	fclose(f);
}

static int setup(void **state)
{
	char cmd[1024], line[512];
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(cmd, sizeof cmd, "%s/prog.c", dir);
	FILE *f = fopen(cmd, "w");
	if (!f)
		return -1;
	fputs(program, f);
	fclose(f);
	snprintf(cmd, sizeof cmd,
		 "cd %s && cc -O1 -fasynchronous-unwind-tables -Wl,-z,lazy -o prog prog.c && "
		 "strip -o progs prog", dir);
	if (system(cmd) != 0)
		return -1;
	/* "0000000000001149 t cmp"; "0000000000001020 <printf@plt-0x10>:" (PLT0) */
	snprintf(cmd, sizeof cmd, "nm %s/prog; objdump -d %s/prog", dir, dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof line, p)) {
		unsigned long long a;
		char name[256];
		if (sscanf(line, "%llx t %255s", &a, name) == 2 && !strcmp(name, "cmp"))
			cmp_addr = a;
		if (sscanf(line, "%llx <%255[^>]>:", &a, name) == 2 && strstr(name, "@plt-0x"))
			plt0_addr = a;
		else if (sscanf(line, "%llx <%255[^>]>:", &a, name) == 2 && !strcmp(name, "qsort@plt"))
			qsort_plt_addr = a;
	}
	pclose(p);
	return cmp_addr && plt0_addr && qsort_plt_addr ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[256];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_local_function_is_entry(void **state)
{
	char path[256];
	(void)state;
	snprintf(path, sizeof path, "%s/progs", dir);
	assert_true(entries_have(path, cmp_addr));
	assert_false(entries_have(path, plt0_addr));
	/* unstripped: the symbol says so (its .symtab, not the FDEs) */
	snprintf(path, sizeof path, "%s/prog", dir);
	assert_true(entries_have(path, cmp_addr));
	assert_false(entries_have(path, plt0_addr));
}

static void test_damaged_table(void **state)
{
	char path[256], want[64];
	const uint8_t huge_count[4] = { 0xf0, 0xff, 0xff, 0x7f }, version2 = 2;
	(void)state;
	snprintf(path, sizeof path, "%s/count", dir);
	patched_copy(path, 8, huge_count, sizeof huge_count);
	tk_set_log(keep_log, NULL);
	logged[0] = 0;
	assert_false(entries_have(path, cmp_addr));
	tk_set_log(NULL, NULL);
	/* said, with where the table is */
	snprintf(want, sizeof want, "offset 0x%lx", eh_frame_hdr_offset(path));
	fprintf(stderr, "logged: %s\n", logged);
	assert_non_null(strstr(logged, ".eh_frame_hdr"));
	assert_non_null(strstr(logged, want));
	/* the rest of the module still loads: its PLT stubs are entries */
	assert_true(entries_have(path, qsort_plt_addr));
	snprintf(path, sizeof path, "%s/version", dir);
	patched_copy(path, 0, &version2, 1);
	assert_false(entries_have(path, cmp_addr));
	assert_true(entries_have(path, qsort_plt_addr));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_function_is_entry),
		cmocka_unit_test(test_damaged_table),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
