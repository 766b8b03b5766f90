/* Fuzz the Kanata reader, statistics and writer: nothing may crash, whatever the writer
 * produces from the accepted commands must read back without errors, and the parallel
 * statistics (small chunks, every diagnostic kept or not: check -j N and stats -j N) count
 * the diagnostics -j 1 does, and dump -j N (small chunks) prints what -j 1 prints. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/tracekit.h"

struct rw {
	struct tk_buf out;
	struct tk_kanata_writer *w;
};

static int to_writer(void *ctx, const struct tk_kanata_cmd *c)
{
	struct rw *r = ctx;
	int err;
	if (c->kind == TK_KANATA_HEADER)
		return 0;
	if (!r->w && !(r->w = tk_kanata_writer_new(&r->out, c->kind == TK_KANATA_CYCLE_SET ? c->a : 0, &err)))
		return err;
	tk_kanata_w_cmd(r->w, c);
	return 0;
}

int kn_stats_buf_parallel(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			  struct tk_kanata_stats *st, int *fell_back);
void kn_stats_set_chunk_bytes(size_t n);
static void count_diag(void *ctx, const struct tk_kanata_diag *d);
int kn_dump_buf(const char *p, size_t len, const struct tk_kanata_dump_opts *opts, struct tk_buf *out,
		struct tk_kanata_counts *n);

/* dump -j 2 in chunks of 40 to 295 bytes = dump -j 1: text, counts and diagnostics */
static void dump_both(const uint8_t *data, size_t size)
{
	struct tk_buf one, two;
	struct tk_kanata_counts n1, n2;
	uint64_t d1 = 0, d2 = 0;
	struct tk_kanata_dump_opts o = { .sz = sizeof o, .jobs = 1, .diag = count_diag, .ctx = &d1,
					 .no_offset = size > 2 && (data[2] & 1) };

	if (tk_buf_init(&one, -1, 4096) < 0 || tk_buf_init(&two, -1, 4096) < 0)
		abort();
	int rc1 = kn_dump_buf((const char *)data, size, &o, &one, &n1);
	o.jobs = 2;
	o.ctx = &d2;
	o.chunk_bytes = 40 + (size > 1 ? data[1] : 0);
	int rc2 = kn_dump_buf((const char *)data, size, &o, &two, &n2);
	if (rc1 >= 0 && rc2 >= 0 &&
	    (one.len != two.len || memcmp(one.data, two.data, one.len) || d1 != d2 ||
	     n1.errors != n2.errors || n1.warnings != n2.warnings || n1.lines != n2.lines ||
	     n1.commands != n2.commands))
		abort();   /* -j N printed or counted otherwise than -j 1 */
	tk_buf_free(&one);
	tk_buf_free(&two);
}

static void count_diag(void *ctx, const struct tk_kanata_diag *d)
{
	(void)d;
	++*(uint64_t *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_kanata_stats st, par;
	uint64_t given = 0, given_par = 0;
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .window = 3, .slowest = 2,
					   .diag = count_diag, .ctx = &given };
	int err, fell = 0;

	int rc = tk_kanata_stats_buf((const char *)data, size, &so, &st);
	size_t chunk = 64 + (size ? data[0] : 0);
	if (size >= 2 * chunk) {   /* (as tk_kanata_stats_compute: two chunks at least) */
		struct tk_kanata_stats_opts po = so;
		po.jobs = 2;
		po.ctx = &given_par;
		po.keep_diags = data[1] & 1;
		kn_stats_set_chunk_bytes(chunk);
		int prc = kn_stats_buf_parallel((const char *)data, size, &po, &par, &fell);
		kn_stats_set_chunk_bytes(0);
		if (rc >= 0 && prc >= 0 && !fell &&
		    (par.counts.errors != st.counts.errors || par.counts.warnings != st.counts.warnings ||
		     given_par != given))
			abort();   /* -j N saw other violations than -j 1 */
		tk_kanata_stats_free(&par);
	}
	tk_kanata_stats_free(&st);
	dump_both(data, size);

	/* split feeding with a tiny line limit exercises the carry and long-line paths */
	struct rw r = { 0 };
	tk_buf_init(&r.out, -1, 1024);
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .max_line = 64,
					    .cmd = to_writer, .ctx = &r };
	struct tk_kanata_reader *rd = tk_kanata_reader_new(&ro, &err);
	if (rd) {
		size_t half = size / 2;
		tk_kanata_reader_feed(rd, (const char *)data, half, 0);
		tk_kanata_reader_feed(rd, (const char *)data + half, size - half, 1);
		tk_kanata_reader_free(rd);
	}
	tk_kanata_writer_free(r.w);
	if (r.out.len) {
		struct tk_kanata_reader_opts ro2 = { .sz = sizeof ro2, .semantic = 1, .max_line = 1 << 20 };
		struct tk_kanata_reader *back = tk_kanata_reader_new(&ro2, &err);
		if (back) {
			tk_kanata_reader_feed(back, r.out.data, r.out.len, 1);
			if (tk_kanata_reader_counts(back)->errors)
				abort();  /* the writer wrote something its own reader rejects */
			tk_kanata_reader_free(back);
		}
	}
	tk_buf_free(&r.out);
	return 0;
}
