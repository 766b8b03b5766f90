/* Fuzz the Kanata reader, statistics and writer: nothing may crash, whatever the writer
 * produces from the accepted commands must read back without errors, and the parallel
 * statistics (small chunks, every diagnostic kept or not: check -j N and stats -j N) count
 * the diagnostics -j 1 does, dump -j N (small chunks) prints what -j 1 prints, the
 * decoder in chunks gives the events of -j 1, and the statistics and the decoder's events
 * of the input gzipped (whole or cut short), its chunks read off the stream in turn, are
 * -j 1's. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_file.h"
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

static void quiet_log(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx, (void)level, (void)msg;
}
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

int kn_decode_buf_parallel(struct tk_kanata_decoder *d, const char *p, size_t n, unsigned jobs,
			   size_t bytes);

/* Every field of the events, label text included. */
static int ev_text(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_buf *b = ctx;
	for (size_t i = 0; i < n; i++) {
		tk_buf_put(b, &ev[i], offsetof(struct tk_event, arg));
		tk_buf_put(b, &ev[i].track, sizeof ev[i].track + sizeof ev[i].kind + sizeof ev[i].flags);
		if (ev[i].kind == TK_EV_TYPED)
			tk_buf_put(b, ev[i].data, ev[i].count);
		else
			tk_buf_put(b, &ev[i].arg, sizeof ev[i].arg);
	}
	return 0;
}

/* The decoder's events, counts and gaps from chunks of 40 to 295 bytes on 2 threads: those
 * of a decoding in order. */
static void decode_both(const uint8_t *data, size_t size)
{
	struct tk_buf b[2];
	struct tk_kanata_decoder *d[2];
	size_t chunk = 40 + (size > 1 ? data[1] : 0);
	int err, rc[2];

	if (size < 2 * chunk)
		return;
	for (int k = 0; k < 2; k++) {
		if (tk_buf_init(&b[k], -1, 4096) < 0 ||
		    !(d[k] = tk_kanata_decoder_new((struct tk_sink){ ev_text, &b[k] }, &err)))
			abort();
	}
	rc[0] = tk_kanata_decode_bytes(d[0], (const char *)data, size, 1);
	rc[1] = kn_decode_buf_parallel(d[1], (const char *)data, size, 2, chunk);
	const struct tk_kanata_counts *c0 = tk_kanata_decoder_counts(d[0]), *c1 = tk_kanata_decoder_counts(d[1]);
	const struct tk_gap_stats *g0 = tk_kanata_decoder_gaps(d[0]), *g1 = tk_kanata_decoder_gaps(d[1]);
	if (rc[0] >= 0 && rc[1] >= 0 &&
	    (b[0].len != b[1].len || memcmp(b[0].data, b[1].data, b[0].len) ||
	     memcmp(g0, g1, sizeof *g0) || c0->lines != c1->lines || c0->insns != c1->insns ||
	     c0->errors != c1->errors || c0->in_flight != c1->in_flight ||
	     c0->last_cycle != c1->last_cycle))
		abort();   /* -j N decoded otherwise than -j 1 */
	for (int k = 0; k < 2; k++) {
		tk_kanata_decoder_free(d[k]);
		tk_buf_free(&b[k]);
	}
}

/* DATA gzipped (its first KEEP bytes of that, when CUT) in a file; the statistics read
 * from it at -j 1 and at -j 2 in chunks of CHUNK bytes (read off the stream in turn) must
 * agree (exit, counts, diagnostics given), and so must the decoder's events, gaps and
 * counts. */
static void stats_gzipped(const uint8_t *data, size_t size, size_t chunk, int cut)
{
	size_t cap = size + size / 8 + 256, n;
	uint8_t *z = malloc(cap);
	z_stream zs;

	memset(&zs, 0, sizeof zs);
	if (!z || deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)size;
	zs.next_out = z;
	zs.avail_out = (uInt)cap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		abort();
	n = cap - zs.avail_out;
	deflateEnd(&zs);
	if (cut)
		n = n * 3 / 4;

	char path[64];
	int fd = fuzz_file(z, n, path, sizeof path);
	struct tk_kanata_stats st[2];
	uint64_t given[2] = { 0, 0 };
	int rc[2];
	for (int k = 0; fd >= 0 && k < 2; k++) {
		struct tk_kanata_stats_opts o = { .sz = sizeof o, .window = 3, .slowest = 2,
						  .diag = count_diag, .ctx = &given[k],
						  .jobs = k ? 2 : 1, .chunk_bytes = chunk };
		struct tk_input *in;
		memset(&st[k], 0, sizeof st[k]);
		rc[k] = tk_input_open(&in, path, NULL);
		if (rc[k] >= 0) {
			rc[k] = tk_kanata_stats_compute(in, &o, &st[k]);
			tk_input_free(in);
		}
	}
	/* the decoder's events too: chunks read in turn, the last one ending at a cut */
	struct tk_buf ev[2];
	int drc[2];
	for (int k = 0; fd >= 0 && k < 2; k++) {
		struct tk_kanata_decoder *d;
		struct tk_input *in;
		int err;
		if (tk_buf_init(&ev[k], -1, 4096) < 0 ||
		    !(d = tk_kanata_decoder_new((struct tk_sink){ ev_text, &ev[k] }, &err)))
			abort();
		tk_kanata_decoder_set_jobs(d, k ? 2 : 1, chunk, NULL);
		drc[k] = tk_input_open(&in, path, NULL);
		if (drc[k] >= 0) {
			drc[k] = tk_kanata_decode(d, in);
			tk_input_free(in);
		}
		const struct tk_gap_stats *g = tk_kanata_decoder_gaps(d);
		tk_buf_put(&ev[k], g, sizeof *g);
		const struct tk_kanata_counts *n = tk_kanata_decoder_counts(d);
		uint64_t v[] = { n->lines, n->insns, n->errors, n->in_flight, (uint64_t)n->last_cycle };
		tk_buf_put(&ev[k], v, sizeof v);
		tk_kanata_decoder_free(d);
	}
	if (fd >= 0) {
		if (drc[0] != drc[1] || ev[0].len != ev[1].len || memcmp(ev[0].data, ev[1].data, ev[0].len))
			abort();   /* the decoder's chunks read in turn gave otherwise than -j 1 */
		tk_buf_free(&ev[0]);
		tk_buf_free(&ev[1]);
		if (rc[0] != rc[1] || given[0] != given[1] ||
		    (rc[0] >= 0 && (st[0].counts.errors != st[1].counts.errors ||
				    st[0].counts.warnings != st[1].counts.warnings ||
				    st[0].counts.lines != st[1].counts.lines ||
				    st[0].counts.insns != st[1].counts.insns)))
			abort();   /* the chunks read in turn saw otherwise than -j 1 */
		tk_kanata_stats_free(&st[0]);
		tk_kanata_stats_free(&st[1]);
		close(fd);
	}
	free(z);
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
		tk_set_log(quiet_log, NULL);   /* (the cut's message) */
		stats_gzipped(data, size, chunk / 4, data[1] & 2);
		tk_set_log(NULL, NULL);
	}
	tk_kanata_stats_free(&st);
	dump_both(data, size);
	decode_both(data, size);

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
