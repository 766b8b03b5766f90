/* Given the input (tk_xray_opts.in), the FDR index reads buffer heads and the chunk
 * decoder's workers read buffers with pread, without faulting in the mapping: with every
 * page of the mapping but the first made unreadable, the index is the one made from the
 * mapping (same buffers, threads and chunks) and the chunks' events are the same (custom
 * events' payloads too, though they now point into a worker's copy), on an intact log and
 * on one whose BufferExtents is damaged (there the mapped walk decides, on a readable
 * mapping). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

enum { NEWBUF = 0, NEWCPU = 2, WALL = 4, CUSTOM = 5, EXTENTS = 7, PID = 9 };
#define NBUF 48
#define PAIRS 1000              /* 16 KiB of function records a buffer: heads on other pages */

static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }

static void meta(FILE *f, unsigned kind, const void *body, size_t n)
{
	uint8_t r[16] = { (uint8_t)(kind << 1 | 1) };
	memcpy(r + 1, body, n);
	put(f, r, sizeof r);
}

/* An FDR v5 log of NBUF buffers of 3 threads; buffer BAD (if < NBUF) with an extent past
 * the end of the file. */
static void make_log(FILE *f, unsigned bad)
{
	uint8_t hdr[32] = { 5, 0, 1, 0, 3 };
	uint64_t freq = 2000000000;
	memcpy(hdr + 8, &freq, 8);
	put(f, hdr, sizeof hdr);
	for (unsigned i = 0; i < NBUF; i++) {
		uint64_t size = 4 * 16 + PAIRS * 16 + 16 + 8, wall = 1700000000 + i, tsc = 100000 * (i + 1);
		int32_t tid = 100 + (int32_t)(i % 3), pid = 4242;
		uint16_t cpu = (uint16_t)(i % 2);
		uint8_t b[12];
		if (i == bad)
			size = UINT64_C(0x7fffffffffff0000);
		meta(f, EXTENTS, &size, 8);
		meta(f, NEWBUF, &tid, 4);
		memcpy(b, &wall, 8);
		memset(b + 8, 0, 4);
		meta(f, WALL, b, 12);
		meta(f, PID, &pid, 4);
		memcpy(b, &cpu, 2);
		memcpy(b + 2, &tsc, 8);
		meta(f, NEWCPU, b, 10);
		for (unsigned k = 0; k < PAIRS; k++) {
			uint32_t id = 1 + (i + k) % 7, r[4] = { id << 4, 3, id << 4 | 1u << 1, 5 };
			put(f, r, sizeof r);
		}
		/* last: its event waits in the batch while the next buffer is read */
		int32_t ev[2] = { 8, 1 };
		meta(f, CUSTOM, ev, sizeof ev);
		put(f, i % 2 ? "payload!" : "PAYLOAD?", 8);
	}
}

struct index {
	size_t nthreads, nchunks;
	uint64_t buffers[8], begin[64], end[64];
	struct tk_event ev[NBUF * (2 * PAIRS + 1)];
	char payload[NBUF][8];
	size_t nev, npayload;
};

static int collect(void *ctx, const struct tk_event *ev, size_t n)
{
	struct index *ix = ctx;
	for (size_t i = 0; i < n; i++) {
		assert_true(ix->nev < sizeof ix->ev / sizeof *ix->ev);
		struct tk_event *e = &ix->ev[ix->nev++];
		*e = ev[i];
		if (e->kind == TK_EV_CUSTOM) {
			assert_int_equal(e->count, 8);
			assert_true(ix->npayload < NBUF);
			memcpy(ix->payload[ix->npayload++], e->data, 8);
			e->data = NULL;
		}
	}
	return 0;
}

static int chunk_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	(void)chunk;
	*sink = (struct tk_sink){ collect, ctx };
	*consumer = NULL;
	return 0;
}

static int chunk_merge(void *ctx, size_t chunk, void *consumer)
{
	(void)ctx, (void)chunk, (void)consumer;
	return 0;
}

static void index_of(const uint8_t *data, size_t len, const struct tk_input *in, struct index *ix)
{
	struct tk_xray_opts o = { .sz = sizeof o, .nthreads = 1, .plan_workers = 4, .in = in };
	static const struct tk_xray_chunk_ops ops = { chunk_begin, chunk_merge };
	int err;
	struct tk_xray *x = tk_xray_open(data, len, &o, &err);
	uint32_t thread[64];

	assert_non_null(x);
	memset(ix, 0, sizeof *ix);
	ix->nthreads = tk_xray_thread_count(x);
	assert_true(ix->nthreads <= 8);
	for (size_t t = 0; t < ix->nthreads; t++)
		ix->buffers[t] = tk_xray_thread(x, t)->buffers;
	assert_int_equal(tk_xray_chunks(x, NULL, NULL, NULL, &ix->nchunks), 0);
	assert_true(ix->nchunks <= 64);
	assert_int_equal(tk_xray_chunks(x, ix->begin, ix->end, thread, &ix->nchunks), 0);
	/* one worker: the chunks' events arrive in order */
	assert_int_equal(tk_xray_decode_chunks(x, &ops, ix), 0);
	tk_xray_free(x);
}

static void check(unsigned bad)
{
	char path[] = "/tmp/tk-xray-index-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "wb");
	assert_non_null(f);
	make_log(f, bad);
	assert_int_equal(fclose(f), 0);

	struct tk_input *in;
	const uint8_t *data;
	size_t len;
	static struct index mapped, read;
	long page = sysconf(_SC_PAGESIZE);
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	unlink(path);
	assert_int_equal(tk_input_map(in, &data, &len), 0);
	assert_true(len > (size_t)NBUF * PAIRS * 16);
	index_of(data, len, NULL, &mapped);
	assert_int_equal(mapped.nthreads, 3);
	if (bad >= NBUF) {
		/* only the header's page may be read from the mapping */
		assert_int_equal(mprotect((void *)data, len, PROT_NONE), 0);
		assert_int_equal(mprotect((void *)data, (size_t)page, PROT_READ), 0);
	}
	index_of(data, len, in, &read);
	assert_int_equal(mprotect((void *)data, len, PROT_READ), 0);
	assert_true(mapped.npayload > 0);
	assert_memory_equal(&mapped, &read, sizeof mapped);
	tk_input_free(in);
}

static void test_intact_log_without_the_mapping(void **state)
{
	(void)state;
	check(NBUF);
}

static void test_damaged_log(void **state)
{
	(void)state;
	check(NBUF / 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intact_log_without_the_mapping),
		cmocka_unit_test(test_damaged_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
