/* The perf.data reader on damage: a record header that cannot be one (size 0, a type perf
 * does not write, a trace buffer's size past the end) costs that record, not the rest of
 * the file; reading goes on at the next plausible record and says how much it skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tracekit/tracekit.h"

#define NBUF 6          /* trace buffers per queue */
#define BUFLEN 64       /* bytes in each: a PSB+, then the buffer's own bytes */

struct file {
	uint8_t b[8192];
	size_t n;
	size_t auxtrace[2][NBUF];   /* offset of each queue's buffers' records */
	size_t aux[2][NBUF];        /* ... and of the AUX record after each */
};

static void put(struct file *f, const void *p, size_t n)
{
	memcpy(f->b + f->n, p, n);
	f->n += n;
}

static void put_u64(struct file *f, uint64_t v)
{
	put(f, &v, 8);
}

static void header(struct file *f, uint32_t type, uint16_t size)
{
	uint16_t misc = 0;
	put(f, &type, 4);
	put(f, &misc, 2);
	put(f, &size, 2);
}

/* A session of two queues (CPUs 0 and 3), NBUF buffers each in turn, each buffer its own
 * bytes after a PSB+ (queue Q's buffer K: 0x40 + 8 * Q + K). */
static void make(struct file *f)
{
	memset(f, 0, sizeof *f);
	put(f, "PERFILE2", 8);
	put_u64(f, 104);                      /* header size */
	put_u64(f, 0);                        /* attr size, attrs, attrs size */
	put_u64(f, 0);
	put_u64(f, 0);
	put_u64(f, 104);                      /* data */
	put_u64(f, 0);                        /* its size, set at the end */
	f->n = 104;
	header(f, 70, 8 + 8 + 17 * 8);        /* AUXTRACE_INFO: Intel PT, per-CPU buffers */
	uint32_t pt = 1, zero = 0;
	put(f, &pt, 4);
	put(f, &zero, 4);
	for (int i = 0; i < 17; i++)
		put_u64(f, i == 0 ? 8 : i == 9 ? 1 : 0);
	for (int k = 0; k < NBUF; k++)
		for (uint32_t q = 0; q < 2; q++) {
			uint32_t idx = q, tid = 100, cpu = 3 * q;
			f->auxtrace[q][k] = f->n;
			header(f, 71, 48);
			put_u64(f, BUFLEN);
			put_u64(f, (uint64_t)k * BUFLEN);
			put_u64(f, 0);
			put(f, &idx, 4);
			put(f, &tid, 4);
			put(f, &cpu, 4);
			put(f, &zero, 4);
			uint8_t data[BUFLEN];
			for (int i = 0; i < 16; i += 2)
				data[i] = 0x02, data[i + 1] = 0x82;
			data[16] = 0x02, data[17] = 0x23;
			memset(data + 18, 0x40 + 8 * q + k, BUFLEN - 18);
			put(f, data, sizeof data);
			f->aux[q][k] = f->n;
			header(f, 11, 32);            /* AUX: offset, size, flags */
			put_u64(f, (uint64_t)k * BUFLEN);
			put_u64(f, BUFLEN);
			put_u64(f, 0);
		}
	uint64_t len = f->n - 104;
	memcpy(f->b + 48, &len, 8);
}

struct diags {
	unsigned n;
	uint64_t off[8];
	char msg[8][256];
};

static void diag(void *ctx, uint64_t offset, const char *msg)
{
	struct diags *d = ctx;
	if (d->n < 8) {
		d->off[d->n] = offset;
		snprintf(d->msg[d->n], sizeof d->msg[0], "%s", msg);
	}
	d->n++;
}

/* Queue Q holds, in order, the buffers whose bit is set in MASK. */
static void assert_queue(const struct tk_perf_aux *a, uint32_t q, unsigned mask)
{
	size_t at = 0;

	assert_true(q < a->nqueues);
	const struct tk_perf_queue *qu = &a->queues[q];
	assert_int_equal(qu->cpu, 3 * q);
	for (int k = 0; k < NBUF; k++) {
		if (!(mask >> k & 1))
			continue;
		assert_true(at + BUFLEN <= qu->len);
		assert_int_equal(qu->data[at + 16], 0x02);     /* its PSBEND */
		assert_int_equal(qu->data[at + 18], 0x40 + 8 * q + k);
		at += BUFLEN;
	}
	assert_int_equal(qu->len, at);
}

static void test_intact(void **state)
{
	(void)state;
	static struct file f;
	struct tk_perf_aux a;
	struct diags d = { 0 };

	make(&f);
	assert_int_equal(tk_perf_aux_read(f.b, f.n, &a, diag, &d), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(a.nqueues, 2);
	assert_queue(&a, 0, 0x3f);
	assert_queue(&a, 1, 0x3f);
	tk_perf_aux_free(&a);
}

/* Queue 1's buffer 3: its header's size 0, or its type one perf does not write. The
 * buffer is lost (the next record found is the AUX after it); all else is read. */
static void test_bad_header(void **state)
{
	(void)state;
	static struct file f;
	struct tk_perf_aux a;

	for (int how = 0; how < 2; how++) {
		struct diags d = { 0 };
		char want[128];

		make(&f);
		size_t at = f.auxtrace[1][3];
		if (how == 0)
			memset(f.b + at + 6, 0, 2);
		else
			memcpy(f.b + at, "\xff\x7f\x00\x00", 4);
		assert_int_equal(tk_perf_aux_read(f.b, f.n, &a, diag, &d), 1);
		assert_int_equal(d.n, 2);      /* the header, and the trace lost in queue 1 */
		assert_int_equal(d.off[0], at);
		snprintf(want, sizeof want, ": %zu bytes skipped to the next record, at offset 0x%zx",
			 f.aux[1][3] - at, f.aux[1][3]);
		assert_non_null(strstr(d.msg[0], want));
		assert_queue(&a, 0, 0x3f);
		assert_queue(&a, 1, 0x37);
		assert_int_equal(a.queues[1].holes, 1);
		assert_int_equal(a.queues[1].nbreaks, 1);
		tk_perf_aux_free(&a);

		/* the summary (no copy) reads the same */
		struct diags d2 = { 0 };
		assert_int_equal(tk_perf_aux_scan(f.b, f.n, &a, diag, &d2), 1);
		assert_int_equal(a.queues[0].len, NBUF * BUFLEN);
		assert_int_equal(a.queues[1].len, (NBUF - 1) * BUFLEN);
		tk_perf_aux_free(&a);
	}
}

/* A trace buffer whose size runs past the end of the data: cut at the next record, which
 * is read, and the rest with it. */
static void test_bad_buffer_size(void **state)
{
	(void)state;
	static struct file f;
	struct tk_perf_aux a;
	struct diags d = { 0 };

	make(&f);
	uint64_t huge = 1 << 20;
	memcpy(f.b + f.auxtrace[0][2] + 8, &huge, 8);
	assert_int_equal(tk_perf_aux_read(f.b, f.n, &a, diag, &d), 1);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.off[0], f.auxtrace[0][2]);
	assert_non_null(strstr(d.msg[0], "cut at the next record"));
	assert_queue(&a, 0, 0x3f);
	assert_queue(&a, 1, 0x3f);
	tk_perf_aux_free(&a);
}

/* Nothing plausible after the damage: the rest is named unreadable, with its size. */
static void test_nothing_after(void **state)
{
	(void)state;
	static struct file f;
	struct tk_perf_aux a;
	struct diags d = { 0 };
	char want[96];

	make(&f);
	size_t at = f.auxtrace[0][5];
	memset(f.b + at, 0xee, f.n - at);
	assert_int_equal(tk_perf_aux_read(f.b, f.n, &a, diag, &d), 1);
	assert_int_equal(d.n, 1);
	snprintf(want, sizeof want, "the rest of the data (%zu bytes) is unreadable", f.n - at);
	assert_non_null(strstr(d.msg[0], want));
	assert_queue(&a, 0, 0x1f);
	assert_queue(&a, 1, 0x1f);
	tk_perf_aux_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intact),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_bad_buffer_size),
		cmocka_unit_test(test_nothing_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
