/* The parser of qemu-aarch64's -d cpu,fpu register dumps (lib/formats/xtrace/qemu_regs.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tracekit/internal/qemu_regs.h"

/* As QEMU 7.2 prints it with a 256-bit vector length (abridged: X02..X29 left out). */
static const char dump[] =
	" PC=000000000041de50 X00=0000005500800888 X01=00000055008005c0\n"
	"X30=0000000000400834  SP=00000055008004e0\n"
	"PSTATE=60000000 -ZC- EL0t  SVCR=00000000 --  BTYPE=0     FPCR=03000000 FPSR=00000010\n"
	"P00=000000000000ffff P01=0000000000000000 P15=0000000000000001 FFR=00000000000000ff\n"
	"Z00[1-0]=1111111111111111:2222222222222222:3333333333333333:4444444444444444\n"
	"Z31[1-0]=8877665544332211:0000000000000000:0000000000000000:00000000000000aa\n";

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void test_full_dump(void **state)
{
	static struct tk_qemu_regs r;
	tk_qemu_regs_parse(dump, sizeof dump - 1, 0, &r);
	assert_int_equal(r.x[0], 0x5500800888);
	assert_int_equal(r.x[1], 0x55008005c0);
	assert_int_equal(r.x[30], 0x400834);
	assert_int_equal(r.x[31], 0x55008004e0);
	assert_int_equal(r.nzcv, 0x60000000);
	assert_int_equal(r.fpcr, 0x03000000);
	assert_int_equal(r.fpsr, 0x10);
	assert_int_equal(r.p[0], 0xff);
	assert_int_equal(r.p[1], 0xff);
	assert_int_equal(r.p[2], 0);
	assert_int_equal(r.p[32 * 15], 1);
	assert_int_equal(r.ffr[0], 0xff);
	/* four words, the most significant first: little-endian bytes, word 3 at offset 0 */
	assert_int_equal(r.vl_bits, 256);
	assert_int_equal(le64(r.z), 0x4444444444444444);
	assert_int_equal(le64(r.z + 24), 0x1111111111111111);
	assert_int_equal(le64(r.z + 31 * 32), 0xaa);
	assert_int_equal(le64(r.z + 31 * 32 + 24), 0x8877665544332211);
}

static void test_gprs_only(void **state)
{
	static struct tk_qemu_regs r;
	tk_qemu_regs_parse(dump, sizeof dump - 1, TK_QEMU_REGS_GPRS, &r);
	assert_int_equal(r.x[31], 0x55008004e0);
	assert_int_equal(r.nzcv, 0x60000000);
	assert_int_equal(r.fpcr, 0);      /* after PSTATE: not read */
	assert_int_equal(r.vl_bits, 0);
}

/* Vectors longer than SVE's 2048 bits (the old parser in cli/record.c wrote them past
 * its buffer): the first 32 words QEMU prints are taken (here 40 down to 9). */
static void test_too_long(void **state)
{
	static struct tk_qemu_regs r;
	static char text[16384];
	size_t n = 0;
	for (int z = 0; z < 32; z += 31) {
		n += (size_t)snprintf(text + n, sizeof text - n, "Z%02d[19-0]=", z);
		for (int w = 40; w > 0; w--)
			n += (size_t)snprintf(text + n, sizeof text - n, "%016x%s", w, w > 1 ? ":" : "\n");
	}
	tk_qemu_regs_parse(text, n, 0, &r);
	assert_int_equal(r.vl_bits, 2048);
	assert_int_equal(le64(r.z), 9);
	assert_int_equal(le64(r.z + 248), 40);
	assert_int_equal(le64(r.z + 31 * 256), 9);
	assert_int_equal(le64(r.z + 31 * 256 + 248), 40);
}

/* No NUL needed: nothing past N is read. */
static void test_length(void **state)
{
	static struct tk_qemu_regs r;
	tk_qemu_regs_parse("X00=12345678", 6, 0, &r);
	assert_int_equal(r.x[0], 0x12);
	tk_qemu_regs_parse("X05=ffffffffffffffffff", 22, 0, &r);
	assert_int_equal(r.x[5], UINT64_MAX);   /* too many digits saturate, as strtoull */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_dump),
		cmocka_unit_test(test_gprs_only),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
