/* Format detection by content: each format's signature, and near misses that must not match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tracekit/tracekit.h"

static enum tk_format_id detect(const void *p, size_t n, struct tk_format_info *fi)
{
	memset(fi, 0, sizeof *fi);
	if (tk_detect_format(p, n, fi) < 0)
		return TK_FMT_UNKNOWN;
	return fi->id;
}

static void test_ipt(void **state)
{
	(void)state;
	uint8_t buf[64] = { 0 };
	struct tk_format_info fi;
	for (int i = 0; i < 16; i += 2) {
		buf[4 + i] = 0x02;
		buf[4 + i + 1] = 0x82;
	}
	buf[20] = 0x02, buf[21] = 0x23; /* PSBEND */
	assert_int_equal(detect(buf, sizeof buf, &fi), TK_FMT_IPT);
	assert_true(fi.confidence >= 90); /* PADs then PSB */
	buf[9] = 0x00; /* broken PSB */
	assert_int_equal(detect(buf, sizeof buf, &fi), TK_FMT_UNKNOWN);
}

static void test_xray(void **state)
{
	(void)state;
	uint8_t hdr[64] = { 0 };
	struct tk_format_info fi;
	hdr[0] = 5;     /* version 5 */
	hdr[2] = 1;     /* FDR */
	hdr[4] = 3;     /* constant + nonstop TSC */
	hdr[8] = 0x00, hdr[9] = 0x94, hdr[10] = 0x35, hdr[11] = 0x77; /* 2 GHz */
	hdr[32] = 0x0f; /* BufferExtents */
	assert_int_equal(detect(hdr, sizeof hdr, &fi), TK_FMT_XRAY);
	assert_int_equal(fi.version, 5);
	assert_non_null(strstr(fi.detail, "FDR"));
	hdr[32] = 0x44; /* not a metadata record */
	assert_int_equal(detect(hdr, sizeof hdr, &fi), TK_FMT_UNKNOWN);

	/* basic mode, version 3, big-endian */
	memset(hdr, 0, sizeof hdr);
	hdr[1] = 3;
	assert_int_equal(detect(hdr, sizeof hdr, &fi), TK_FMT_XRAY);
	assert_int_equal(fi.version, 3);
	assert_int_equal(fi.big_endian, 1);
	assert_non_null(strstr(fi.detail, "basic"));
	hdr[1] = 9; /* no such version */
	assert_int_equal(detect(hdr, sizeof hdr, &fi), TK_FMT_UNKNOWN);
}

static void test_text_formats(void **state)
{
	(void)state;
	struct tk_format_info fi;
	const char *k = "Kanata\t0004\nC=\t0\nI\t0\t0\t0\n";
	assert_int_equal(detect(k, strlen(k), &fi), TK_FMT_KANATA);
	assert_int_equal(fi.version, 4);
	const char *k3 = "Kanata 0003  \n";
	assert_int_equal(detect(k3, strlen(k3), &fi), TK_FMT_KANATA);
	assert_int_equal(fi.version, 3);
	const char *g = "O3PipeView:fetch:1000:0x400000:0:1:  add r1, r2\n"
			"O3PipeView:decode:2000\n";
	assert_int_equal(detect(g, strlen(g), &fi), TK_FMT_GEM5_O3);
	const char *txt = "hello world\nthis is text\n";
	assert_int_equal(detect(txt, strlen(txt), &fi), TK_FMT_UNKNOWN);
}

static void test_magic_formats(void **state)
{
	(void)state;
	struct tk_format_info fi;
	uint8_t perf[32] = "PERFILE2";
	perf[8] = 104;
	assert_int_equal(detect(perf, sizeof perf, &fi), TK_FMT_PERF);
	uint8_t bt[32] = "TKBTRACE";
	bt[8] = TK_BTRACE_VERSION;
	assert_int_equal(detect(bt, sizeof bt, &fi), TK_FMT_TKBT);
	assert_int_equal(fi.version, TK_BTRACE_VERSION);
}

static void test_xtrace(void **state)
{
	(void)state;
	struct tk_format_info fi;
	uint8_t buf[4096];
	size_t n = 0;
	/* PCINST at a block start, then INSTs and a LOAD of 8 bytes, repeated */
	while (n + 64 < sizeof buf) {
		buf[n++] = 0x09; /* PCINST, EL0 */
		memset(buf + n, 0x11, 12);
		n += 12;
		for (int i = 0; i < 3; i++) {
			buf[n++] = 0x01; /* INST */
			memset(buf + n, 0x22, 4);
			n += 4;
		}
		buf[n++] = 0x32; /* LOAD, 2^3 bytes */
		memset(buf + n, 0x33, 16);
		n += 16;
	}
	assert_int_equal(detect(buf, n, &fi), TK_FMT_XTRACE_INSN);
	assert_int_equal(tk_xtrace_item_len(buf, n), 13);
	buf[0] = 0x00; /* class 0 is no token */
	assert_int_equal(detect(buf, n, &fi), TK_FMT_UNKNOWN);

	uint8_t snap[64] = { 0 };
	uint32_t magic = TK_XTRACE_SNAP_MAGIC;
	memcpy(snap, &magic, 4);
	assert_int_equal(detect(snap, sizeof snap, &fi), TK_FMT_XTRACE_SNAP);
}

static void test_names(void **state)
{
	(void)state;
	for (int id = 1; id < TK_FMT__COUNT; id++)
		assert_int_equal(tk_format_by_name(tk_format_name((enum tk_format_id)id)), id);
	assert_int_equal(tk_format_by_name("nonsense"), TK_FMT_UNKNOWN);
}

static void test_random_is_unknown(void **state)
{
	(void)state;
	/* Random bytes must not be claimed by any format (with overwhelming probability:
	 * check many seeds). */
	uint8_t buf[8192];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct tk_format_info fi;
	int claimed = 0;
	for (int seed = 0; seed < 200; seed++) {
		for (size_t i = 0; i < sizeof buf; i++) {
			x = tk_hash64(x + (uint64_t)seed);
			buf[i] = (uint8_t)x;
		}
		if (detect(buf, sizeof buf, &fi) != TK_FMT_UNKNOWN)
			claimed++;
	}
	assert_int_equal(claimed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipt),          cmocka_unit_test(test_xray),
		cmocka_unit_test(test_text_formats), cmocka_unit_test(test_magic_formats),
		cmocka_unit_test(test_xtrace),       cmocka_unit_test(test_names),
		cmocka_unit_test(test_random_is_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
