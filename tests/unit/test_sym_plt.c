/* PLT stubs are named "func@plt", as objdump names them: examples/loops.c linked with lazy
 * binding (.plt + .plt.got), with -z now, and with IBT stubs (.plt.sec); objdump -d is the
 * reference for every stub's address and name. */
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

static void check_binary(const char *flags)
{
	char dir[] = "/tmp/tk-plt-XXXXXX", cmd[4096], exe[256], line[1024];
	assert_non_null(mkdtemp(dir));
	snprintf(exe, sizeof exe, "%s/loops", dir);
	const char *src = getenv("SRC") ? getenv("SRC") : "..";
	snprintf(cmd, sizeof cmd, "cc -O0 -g %s -o %s %s/examples/loops.c", flags, exe, src);
	assert_int_equal(system(cmd), 0);

	struct tk_sym *s = tk_sym_new(NULL, NULL);
	assert_non_null(s);
	assert_true(tk_sym_add_elf(s, exe, 0) >= 0);
	snprintf(cmd, sizeof cmd, "objdump -d %s", exe);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int stubs = 0, printf_seen = 0;
	while (fgets(line, sizeof line, p)) {
		unsigned long long addr;
		char name[512], buf[600];
		/* "0000000000001030 <printf@plt>:" */
		if (sscanf(line, "%llx <%511[^>]>:", &addr, name) != 2 || !strstr(name, "@plt"))
			continue;
		if (strchr(name, '-') || strchr(name, '+'))
			continue;   /* "printf@plt-0x10": objdump's name for PLT0, not a stub */
		const char *ours = tk_sym_addr_name(s, addr, 1, buf, sizeof buf);
		fprintf(stderr, "%s: 0x%llx objdump %s, tracekit %s\n", flags, addr, name, ours);
		assert_string_equal(ours, name);
		struct tk_sym_info si;
		assert_int_equal(tk_sym_lookup(s, addr + 2, &si), 0);
		assert_non_null(si.func);
		assert_string_equal(si.func, name);
		assert_int_equal(si.func_start, addr);
		stubs++;
		printf_seen |= !strcmp(name, "printf@plt");
	}
	pclose(p);
	assert_true(stubs >= 2);   /* printf and __cxa_finalize */
	assert_true(printf_seen);

	/* the stubs are function entries too (calls into them start frames) */
	uint64_t *entries;
	size_t n;
	assert_int_equal(tk_sym_entries(s, &entries, &n), 0);
	assert_true(n > (size_t)stubs);
	for (size_t i = 1; i < n; i++)
		assert_true(entries[i - 1] <= entries[i]);   /* ascending, as promised */
	free(entries);
	tk_sym_free(s);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_lazy(void **state)
{
	(void)state;
	check_binary("-Wl,-z,lazy");
}

static void test_now(void **state)
{
	(void)state;
	check_binary("-Wl,-z,now");
}

static void test_ibt(void **state)
{
	(void)state;
	check_binary("-fcf-protection=full -Wl,-z,ibtplt");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lazy),
		cmocka_unit_test(test_now),
		cmocka_unit_test(test_ibt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
