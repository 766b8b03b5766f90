/* Packet statistics of a whole Intel PT stream (tracekit info), chunked at PSBs so that
 * any number of threads gives the same result. */
#include <stdlib.h>

#include "formats/ipt/internal.h"

#define BATCH 512
#define DEFAULT_CHUNK (16u << 20)

struct scan_err {
	uint64_t offset, skipped;
	int err;
};

struct chunk_result {
	struct tk_ipt_stats st;
	struct scan_err *errs;
	size_t nerrs, cap;
	int rc;
};

struct scan_job {
	const uint8_t *buf;
	size_t len;
	uint64_t *starts;
	size_t nchunks;
	struct chunk_result *res;
	struct tk_ipt_stats *total;
	const struct tk_ipt_scan_opts *o;
};

static int add_err(struct chunk_result *r, uint64_t off, int err, uint64_t skipped)
{
	if (r->nerrs == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		struct scan_err *e = realloc(r->errs, cap * sizeof *e);
		if (!e)
			return -TK_E_NOMEM;
		r->errs = e;
		r->cap = cap;
	}
	r->errs[r->nerrs++] = (struct scan_err){ off, skipped, err };
	tk_gap_stats_add(&r->st.gaps, off, skipped);
	return 0;
}

static int scan_chunk(void *ctx, size_t i)
{
	struct scan_job *j = ctx;
	struct chunk_result *r = &j->res[i];
	uint64_t start = j->starts[i];
	uint64_t end = i + 1 < j->nchunks ? j->starts[i + 1] : j->len;
	struct tk_ipt_pkt_opts po = { .sz = sizeof po, .base_offset = start };
	struct tk_ipt_packet *pk = malloc(BATCH * sizeof *pk);
	int err = 0;
	struct tk_ipt_pkt_decoder *d =
		tk_ipt_pkt_decoder_new(j->buf + start, (size_t)(end - start), &po, &err);
	struct tk_ipt_stats *st = &r->st;

	if (!d || !pk) {
		free(pk);
		tk_ipt_pkt_decoder_free(d);
		return r->rc = d ? -TK_E_NOMEM : err;
	}
	tk_ipt_pkt_sync_set(d, start);
	for (;;) {
		int n = tk_ipt_pkt_next_batch(d, pk, BATCH, &err);
		for (int k = 0; k < n; k++) {
			st->count[pk[k].kind]++;
			if (pk[k].kind == TK_IPT_PKT_TSC) {
				uint64_t t = pk[k].tsc.tsc;
				if (!st->have_tsc) {
					st->have_tsc = 1;
					st->tsc_min = st->tsc_max = st->tsc_first = t;
				}
				if (t < st->tsc_min)
					st->tsc_min = t;
				if (t > st->tsc_max)
					st->tsc_max = t;
				st->tsc_last = t;
			}
		}
		st->packets += (uint64_t)n;
		if (err == 0)
			continue;
		if (err == -TK_E_EOF)
			break;
		uint64_t at, skipped;
		int more = tk_ipt_pkt_resync(d, end, &at, &skipped);
		if ((r->rc = add_err(r, at, err, skipped)) < 0 || !more)
			break;
	}
	free(pk);
	tk_ipt_pkt_decoder_free(d);
	return r->rc < 0 ? r->rc : 0;
}

static void merge_stats(struct tk_ipt_stats *into, const struct tk_ipt_stats *from)
{
	into->packets += from->packets;
	for (int k = 0; k < TK_IPT_PKT__COUNT; k++)
		into->count[k] += from->count[k];
	if (from->have_tsc) {
		if (!into->have_tsc) {
			into->have_tsc = 1;
			into->tsc_min = from->tsc_min;
			into->tsc_max = from->tsc_max;
			into->tsc_first = from->tsc_first;
		}
		if (from->tsc_min < into->tsc_min)
			into->tsc_min = from->tsc_min;
		if (from->tsc_max > into->tsc_max)
			into->tsc_max = from->tsc_max;
		into->tsc_last = from->tsc_last;
	}
	tk_gap_stats_merge(&into->gaps, &from->gaps);
}

static int merge_chunk(void *ctx, size_t i)
{
	struct scan_job *j = ctx;
	struct chunk_result *r = &j->res[i];
	int rc = r->rc;

	merge_stats(j->total, &r->st);
	for (size_t e = 0; e < r->nerrs && rc >= 0; e++)
		if (j->o->on_error)
			rc = j->o->on_error(j->o->ctx, r->errs[e].offset, r->errs[e].err,
					    r->errs[e].skipped);
	free(r->errs);
	r->errs = NULL;
	return rc < 0 ? rc : 0;
}

int tk_ipt_scan_parallel(const uint8_t *buf, size_t len, const struct tk_ipt_scan_opts *opts,
			 struct tk_ipt_stats *st)
{
	struct tk_ipt_scan_opts o = { .sz = sizeof o };
	if (opts)
		memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	if (!st || (!buf && len))
		return -TK_E_INVAL;
	memset(st, 0, sizeof *st);
	st->bytes = len;
	st->first_psb = UINT64_MAX;
	if (!len)
		return 0;

	size_t chunk = o.chunk_bytes ? o.chunk_bytes : DEFAULT_CHUNK;
	int64_t n = tk_ipt_split(buf, len, chunk, NULL, 0);
	if (n <= 0) {
		tk_gap_stats_add(&st->gaps, 0, len);
		if (o.on_error)
			return o.on_error(o.ctx, 0, -TK_E_NOSYNC, len) < 0 ? -TK_E_CANCELLED : 0;
		return 0;
	}
	uint64_t *starts = malloc((size_t)n * sizeof *starts);
	struct chunk_result *res = calloc((size_t)n, sizeof *res);
	if (!starts || !res) {
		free(starts);
		free(res);
		return -TK_E_NOMEM;
	}
	tk_ipt_split(buf, len, chunk, starts, (size_t)n);
	st->first_psb = starts[0];
	int rc = 0;
	if (starts[0]) {
		tk_gap_stats_add(&st->gaps, 0, starts[0]);
		if (o.on_error && o.on_error(o.ctx, 0, -TK_E_NOSYNC, starts[0]) < 0)
			rc = -TK_E_CANCELLED;
	}
	if (rc == 0) {
		struct scan_job j = { buf, len, starts, (size_t)n, res, st, &o };
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = o.nthreads };
		rc = tk_pool_run(&po, (size_t)n, scan_chunk, merge_chunk, &j);
	}
	for (int64_t i = 0; i < n; i++)
		free(res[i].errs);
	st->psbs = st->count[TK_IPT_PKT_PSB];
	free(starts);
	free(res);
	return rc < 0 ? rc : 0;
}

int tk_ipt_scan(const uint8_t *buf, size_t len, struct tk_ipt_stats *st,
		tk_ipt_error_fn on_error, void *ctx)
{
	struct tk_ipt_scan_opts o = { .sz = sizeof o, .nthreads = 1, .on_error = on_error,
				      .ctx = ctx };
	return tk_ipt_scan_parallel(buf, len, &o, st);
}
