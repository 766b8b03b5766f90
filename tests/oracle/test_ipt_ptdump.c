/* Differential test of tracekit's dump layout: libipt's pt_pkt_next + a ptdump-style
 * printer (oracle/ptdump_fmt.h) against tk_ipt_dump, byte for byte, with and without
 * offsets and --lastip, on libipt-encoded streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracekit/ipt.h"
#include "oracle/ipt_gen.h"
#include "oracle/ptdump_fmt.h"

static char *reference_dump(uint8_t *buf, size_t len, int show_offset, int lastip, size_t *n)
{
	char *out = NULL;
	FILE *f = open_memstream(&out, n);
	struct pt_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.size = sizeof cfg;
	cfg.begin = buf;
	cfg.end = buf + len;
	struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
	struct pd_last_ip last = { 0, 0, 0 };
	assert_int_equal(pt_pkt_sync_forward(d), 0);
	for (;;) {
		uint64_t off;
		struct pt_packet p;
		pt_pkt_get_offset(d, &off);
		if (pt_pkt_next(d, &p, sizeof p) < 0)
			break;
		pd_print(f, off, &p, show_offset, lastip ? &last : NULL);
	}
	pt_pkt_free_decoder(d);
	fclose(f);
	return out;
}

static void test_dump_matches_ptdump(void **state)
{
	(void)state;
	size_t cap = 1 << 15;
	uint8_t *buf = malloc(cap);
	for (int round = 0; round < 24; round++) {
		size_t len = gen_stream(buf, 1024 + gen_rand() % (cap - 1024), round & 1, 2048);
		int show_offset = !(round & 2), lastip = !!(round & 4);
		size_t n;
		char *want = reference_dump(buf, len, show_offset, lastip, &n);
		struct tk_buf b;
		tk_buf_init(&b, -1, 0);
		struct tk_ipt_dump_opts o = { .sz = sizeof o, .no_offset = !show_offset,
					      .lastip = lastip };
		struct tk_gap_stats gaps = { 0 };
		assert_int_equal(tk_ipt_dump(buf, len, &o, &b, &gaps), 0);
		assert_int_equal(gaps.count, 0);
		tk_buf_putc(&b, 0);
		assert_true(n > 1000);
		assert_string_equal(b.data, want);
		tk_buf_free(&b);
		free(want);
	}
	free(buf);
}

/* A dump big enough to be written by the writer thread (into a file descriptor) is the
 * same bytes as the dump into memory, also on a damaged stream (error marks between
 * the packets) and with a small caller buffer. */
static void test_dump_to_fd(void **state)
{
	(void)state;
	size_t cap = 6 << 20;
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	size_t len = gen_stream(buf, cap, 1, 4096);
	assert_true(len > (5u << 20));
	for (int round = 0; round < 2; round++) {
		if (round)
			for (int i = 0; i < 40; i++)
				buf[gen_rand() % len] ^= (uint8_t)(1 + gen_rand() % 255);
		struct tk_ipt_dump_opts o = { .sz = sizeof o };
		struct tk_gap_stats g1 = { 0 }, g2 = { 0 };
		struct tk_buf mem, file;
		tk_buf_init(&mem, -1, 0);
		assert_int_equal(tk_ipt_dump(buf, len, &o, &mem, &g1), 0);
		char path[] = "/tmp/tk-dump-fd-XXXXXX";
		int fd = mkstemp(path);
		assert_true(fd >= 0);
		unlink(path);
		tk_buf_init(&file, fd, round ? 4096 : 0);
		assert_int_equal(tk_ipt_dump(buf, len, &o, &file, &g2), 0);
		assert_int_equal(tk_buf_flush(&file), 0);
		assert_int_equal(g1.count, g2.count);
		assert_true(round ? g1.count > 0 : g1.count == 0);
		off_t n = lseek(fd, 0, SEEK_END);
		assert_int_equal((size_t)n, mem.len);
		char *got = malloc(mem.len);
		assert_int_equal(pread(fd, got, mem.len, 0), (ssize_t)mem.len);
		assert_memory_equal(got, mem.data, mem.len);
		free(got);
		close(fd);
		tk_buf_free(&file);
		tk_buf_free(&mem);
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dump_matches_ptdump),
		cmocka_unit_test(test_dump_to_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
