/* Memory image: ELF segments at their addresses or relocated to a base, raw files,
 * buffers, shadowing, reads that stop at the end of contiguous code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracekit/image.h"
#include "tracekit/common.h"

static void test_mem_and_shadow(void **state)
{
	(void)state;
	int err;
	struct tk_image *img = tk_image_new(&err);
	uint8_t a[16], b[4] = { 0xaa, 0xbb, 0xcc, 0xdd }, out[32];

	for (int i = 0; i < 16; i++)
		a[i] = (uint8_t)i;
	assert_non_null(img);
	assert_int_equal(tk_image_add_mem(img, a, sizeof(a), 0x1000), 0);
	assert_int_equal(tk_image_read(img, 0x1004, out, 4), 4);
	assert_int_equal(out[0], 4);
	/* reads stop at the end of the segment */
	assert_int_equal(tk_image_read(img, 0x100e, out, 8), 2);
	assert_int_equal(tk_image_read(img, 0x1010, out, 1), -TK_E_NOMAP);
	assert_int_equal(tk_image_read(img, 0xfff, out, 1), -TK_E_NOMAP);
	/* a later buffer shadows the older one and cuts its runs */
	assert_int_equal(tk_image_add_mem(img, b, sizeof(b), 0x1008), 0);
	assert_int_equal(tk_image_read(img, 0x1009, out, 2), 2);
	assert_int_equal(out[0], 0xbb);
	assert_int_equal(tk_image_read(img, 0x1004, out, 16), 4);
	assert_int_equal(tk_image_read(img, 0x100c, out, 4), 4);
	assert_int_equal(out[0], 12);
	assert_int_equal(tk_image_nsegments(img), 2);
	tk_image_free(img);
}

static void test_elf_and_raw(void **state)
{
	(void)state;
	int err;
	struct tk_image *img = tk_image_new(&err), *img2 = tk_image_new(&err);
	char self[4096], arg[4200];
	uint8_t x[16], y[16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	assert_true(n > 0);
	self[n] = 0;
	/* this test's own ELF file at its link addresses (PIE: from 0) */
	assert_int_equal(tk_image_add_elf(img, self, 0, 0), 0);
	assert_true(tk_image_nsegments(img) >= 2);
	assert_true(tk_image_read(img, 0x0, x, sizeof(x)) > 0);
	assert_memory_equal(x, "\177ELF", 4);   /* first PT_LOAD maps the ELF header */
	/* relocated: the lowest segment at 0x400000, via ptxed's FILE:BASE spelling */
	snprintf(arg, sizeof(arg), "%s:0x400000", self);
	assert_int_equal(tk_image_add_elf_arg(img2, arg), 0);
	assert_true(tk_image_read(img2, 0x400000, y, sizeof(y)) > 0);
	assert_memory_equal(x, y, sizeof(x));
	assert_int_equal(tk_image_read(img2, 0x0, y, 1), -TK_E_NOMAP);
	/* raw: the whole file at an address; FILE without ADDR is refused */
	snprintf(arg, sizeof(arg), "%s:0x7000", self);
	assert_int_equal(tk_image_add_raw_arg(img2, arg), 0);
	assert_true(tk_image_read(img2, 0x7000, y, 4) == 4);
	assert_memory_equal(y, "\177ELF", 4);
	assert_true(tk_image_add_raw_arg(img2, self) < 0);
	assert_true(tk_image_add_elf(img2, "/nonexistent", 0, 0) < 0);
	assert_true(tk_image_add_elf_arg(img2, "/dev/null") < 0);
	tk_image_free(img);
	tk_image_free(img2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mem_and_shadow),
		cmocka_unit_test(test_elf_and_raw),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
