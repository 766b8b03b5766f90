/* Intel PT: a trace cut into chunks at PSBs (and at the breaks of a perf session's
 * buffers), decoded on the thread pool, each chunk's events to the consumer's sink; chunks
 * are decoded again on request (a seam the consumer could not join). */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ipt/internal.h"
#include "flow/share.h"
#include "tracekit/ipt_flow.h"

struct run {
	const uint8_t *buf;
	size_t len;
	const struct tk_ipt_flow_opts *o;
	const struct tk_ipt_flow_consumer *c;
	uint64_t *offs;
	size_t nchunks;
	uint64_t part_end;                 /* the last chunk's end (tk_ipt_flow_opts.part_end) */
	/* per chunk: where its part of the trace ends (the next break, or len), and the
	 * reason of the break it starts at (0: none) */
	uint64_t *seg_end;
	uint32_t *brk;
	struct tk_ipt_flow_stats *cst;     /* per chunk */
	pthread_mutex_t lock;
	struct decoder **free_decs;
	size_t nfree;
	struct tk_bshare *share;           /* blocks any decoder of this run decoded (NULL:
					      one thread, or out of memory) */
	struct decoder *redo_dec;          /* decodes chunks again (merges are serial) */
	int err;
};

/* A decoder taken by a thread for one chunk at a time: what it learned of the code
 * (blocks, links, single instructions) serves its next chunks. */
struct decoder {
	struct tk_flow *flow;
	struct ipt_insns insns;
};

static struct decoder *decoder_new(struct run *r, int *err)
{
	struct decoder *d = calloc(1, sizeof *d);

	if (!d) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	if (!(d->flow = tk_flow_new(r->o->image, err))) {
		free(d);
		return NULL;
	}
	if (r->share)
		tk_flow_share_blocks(d->flow, r->share);
	return d;
}

static void decoder_free(struct decoder *d)
{
	if (!d)
		return;
	tk_flow_free(d->flow);
	ipt_insns_free(&d->insns);
	free(d);
}

static struct decoder *take_decoder(struct run *r, int *err)
{
	struct decoder *d = NULL;

	pthread_mutex_lock(&r->lock);
	if (r->nfree)
		d = r->free_decs[--r->nfree];
	pthread_mutex_unlock(&r->lock);
	return d ? d : decoder_new(r, err);
}

static void give_decoder(struct run *r, struct decoder *d)
{
	pthread_mutex_lock(&r->lock);
	r->free_decs[r->nfree++] = d;
	pthread_mutex_unlock(&r->lock);
}

/* Where chunk I ends (the next one's start, or the part's end). */
static uint64_t chunk_end(const struct run *r, size_t i)
{
	return i + 1 < r->nchunks ? r->offs[i + 1] : r->part_end;
}

/* Chunk I with decoder D, its events to SINK, its counts into ST. */
static int decode_one(struct run *r, size_t i, struct decoder *d, struct tk_sink sink,
		      struct tk_ipt_flow_stats *st)
{
	return ipt_decode_range(r->buf, r->seg_end[i], r->offs[i], chunk_end(r, i), r->brk[i],
				r->o, d->flow, &d->insns, sink, st);
}

static int work(void *ctx, size_t i)
{
	struct run *r = ctx;
	struct tk_sink sink = { 0 };
	int rc = 0;
	struct decoder *d = take_decoder(r, &rc);

	if (!d)
		return rc;
	if ((rc = r->c->begin(r->c->ctx, i, d->flow, &sink)) >= 0 && rc != TK_CHUNK_SKIP) {
		rc = decode_one(r, i, d, sink, &r->cst[i]);
		if (rc >= 0 && r->c->end)
			rc = r->c->end(r->c->ctx, i, d->flow);
		if (r->o->sz >= offsetof(struct tk_ipt_flow_opts, release_read) +
				sizeof(r->o->release_read) && r->o->release_read)
			tk_release_pages(r->buf, r->offs[i], chunk_end(r, i));
	}
	give_decoder(r, d);
	if (rc < 0 && r->c->fail)
		r->c->fail(r->c->ctx, i, rc);
	return rc < 0 ? rc : 0;
}

static int drop_count(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		      uint64_t insns)
{
	(void)ctx, (void)start, (void)last, (void)mode, (void)execs, (void)insns;
	return 0;
}

/* Chunk I once more, when the consumer asks (see tk_ipt_flow_consumer.redo): the same
 * packets give the same events. A decoder of its own, whose block counts are dropped,
 * keeps those of the first decoding from counting twice; scratch stats its errors. */
static int redo(struct run *r, size_t i)
{
	struct tk_ipt_flow_stats scratch = { 0 };
	struct tk_sink sink = { 0 };
	int rc = r->c->redo(r->c->ctx, i, NULL, NULL);

	if (rc <= 0)
		return rc;
	if (!r->redo_dec && !(r->redo_dec = decoder_new(r, &rc)))
		return rc;
	if ((rc = r->c->redo(r->c->ctx, i, r->redo_dec->flow, &sink)) >= 0)
		rc = decode_one(r, i, r->redo_dec, sink, &scratch);
	if (rc >= 0)
		rc = tk_flow_take_counts(r->redo_dec->flow, drop_count, NULL);
	return rc;
}

static int merge(void *ctx, size_t i)
{
	struct run *r = ctx;
	struct tk_progress *p = r->o->sz >= offsetof(struct tk_ipt_flow_opts, progress) +
				sizeof(r->o->progress) ? r->o->progress : NULL;
	int rc;

	if (r->c->redo && (rc = redo(r, i)) < 0) {
		if (r->c->fail)   /* (no merge of this chunk: workers waiting for it stop) */
			r->c->fail(r->c->ctx, i, rc);
		return rc;
	}
	if (p)
		tk_progress_set(p, p->done + chunk_end(r, i) - r->offs[i]);
	return r->c->merge ? r->c->merge(r->c->ctx, i) : 0;
}

static int has_breaks(const struct tk_ipt_flow_opts *o)
{
	return o->sz >= offsetof(struct tk_ipt_flow_opts, break_reason) + sizeof(uint32_t) &&
	       o->breaks && o->nbreaks;
}

/* The PSB split's chunk starts OFFS (N of them) with the breaks of O merged in (those
 * before the first chunk, past the end or off a PSB left out), into STARTS and the
 * reasons into BRK (0: no break) when not NULL. Returns how many. */
static size_t merge_breaks(const uint8_t *buf, size_t len, const uint64_t *offs, size_t n,
			   const struct tk_ipt_flow_opts *o, uint64_t *starts, uint32_t *brk)
{
	const uint64_t *b = has_breaks(o) ? o->breaks : NULL;
	size_t nb = b ? o->nbreaks : 0, m = 0, i = 0, k = 0;
	uint64_t last = 0;

	while (i < n || k < nb) {
		size_t psb;
		if (k < nb && (b[k] <= offs[0] || b[k] >= len || (m && b[k] <= last) ||
			       tk_ipt_psb_find(buf, len, (size_t)b[k], &psb) < 0 || psb != b[k])) {
			k++;
			continue;
		}
		int take_break = k < nb && (i == n || b[k] <= offs[i]);
		if (take_break && i < n && b[k] == offs[i])
			i++;
		last = take_break ? b[k++] : offs[i++];
		if (starts)
			starts[m] = last;
		if (brk)
			brk[m] = take_break ? (o->break_reason ? o->break_reason : TK_GAP_OVERFLOW) : 0;
		m++;
	}
	return m;
}

/* tk_ipt_split(BUF, LEN, CHUNK, OFFSETS, MAX), reading through O's input where it can. */
static int64_t split(const struct tk_ipt_flow_opts *o, const uint8_t *buf, size_t len,
		     size_t chunk, uint64_t *offsets, size_t max)
{
	const struct tk_input *in = o->sz >= offsetof(struct tk_ipt_flow_opts, in_offset) +
					      sizeof o->in_offset ? o->in : NULL;

	return ipt_split_read(in, in ? o->in_offset : 0, buf, len, chunk, offsets, max);
}

int64_t tk_ipt_flow_chunks_room(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *o)
{
	size_t bound = ipt_split_max(len, o->chunk_bytes ? o->chunk_bytes : TK_IPT_FLOW_CHUNK) +
		       (has_breaks(o) ? o->nbreaks : 0);

	return bound <= IPT_ROOM_BOUND_MAX ? (int64_t)bound : tk_ipt_flow_chunks(buf, len, o, NULL, 0);
}

int64_t tk_ipt_flow_chunks(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *o,
			   uint64_t *starts, size_t n)
{
	size_t chunk = o->chunk_bytes ? o->chunk_bytes : TK_IPT_FLOW_CHUNK;
	int64_t k = split(o, buf, len, chunk, NULL, 0);
	uint64_t *offs;

	if (k <= 0)
		return k;
	if (!has_breaks(o)) {
		if (starts && n < (size_t)k)
			return -TK_E_INVAL;
		if (starts)
			split(o, buf, len, chunk, starts, (size_t)k);
		return k;
	}
	if (!(offs = malloc((size_t)k * sizeof(*offs))))
		return -TK_E_NOMEM;
	split(o, buf, len, chunk, offs, (size_t)k);
	size_t m = merge_breaks(buf, len, offs, (size_t)k, o, NULL, NULL);
	if (starts && n >= m)
		merge_breaks(buf, len, offs, (size_t)k, o, starts, NULL);
	free(offs);
	return starts && n < m ? -TK_E_INVAL : (int64_t)m;
}

void ipt_segment_ends(const struct tk_ipt_flow_opts *o, const uint64_t *starts, size_t n,
		      size_t len, uint64_t *ends)
{
	const uint64_t *b = has_breaks(o) ? o->breaks : NULL;
	size_t k = b ? o->nbreaks : 0;
	uint64_t end = len;

	/* a start past the first that equals a break is one: merge_breaks keeps every break
	 * that is a PSB's start past the first chunk's, in order, and no other */
	for (size_t j = n; j-- > 0;) {
		ends[j] = end;
		while (k && b[k - 1] > starts[j])
			k--;
		if (j && k && b[k - 1] == starts[j])
			end = starts[j];
	}
}

/* The breaks become chunk starts too (merged into r->offs), and each chunk learns where
 * its part of the trace ends. */
static int add_breaks(struct run *r)
{
	size_t n = merge_breaks(r->buf, r->len, r->offs, r->nchunks, r->o, NULL, NULL);
	uint64_t *offs = malloc(n * sizeof(*offs));
	uint32_t *brk = malloc(n * sizeof(*brk));

	if (!offs || !brk || !(r->seg_end = malloc(n * sizeof(*r->seg_end)))) {
		free(offs);
		free(brk);
		return -TK_E_NOMEM;
	}
	merge_breaks(r->buf, r->len, r->offs, r->nchunks, r->o, offs, brk);
	/* (the re-encoder reads each chunk's PSB+ with the same ends) */
	ipt_segment_ends(r->o, offs, n, r->len, r->seg_end);
	free(r->offs);
	r->offs = offs;
	r->brk = brk;
	r->nchunks = n;
	return 0;
}

void tk_ipt_flow_stats_add(struct tk_ipt_flow_stats *to, const struct tk_ipt_flow_stats *from)
{
	to->insns += from->insns;
	to->blocks += from->blocks;
	to->events += from->events;
	to->errors += from->errors;
	to->overflows += from->overflows;
	to->chunks += from->chunks;
	tk_gap_stats_merge(&to->gaps, &from->gaps);
}

int tk_ipt_flow_decode(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *o,
		       const struct tk_ipt_flow_consumer *caller, struct tk_ipt_flow_stats *st)
{
	struct tk_ipt_flow_consumer whole = { 0 };   /* an older caller's: its later members 0 */
	const struct tk_ipt_flow_consumer *c = &whole;
	struct run r = { .buf = buf, .len = len, .o = o, .c = c };
	size_t chunk = o && o->chunk_bytes ? o->chunk_bytes : TK_IPT_FLOW_CHUNK;
	unsigned nthreads;
	int64_t n;
	int rc;

	if (!caller || caller->sz < offsetof(struct tk_ipt_flow_consumer, ctx) + sizeof caller->ctx)
		return -TK_E_INVAL;
	memcpy(&whole, caller, caller->sz < sizeof whole ? caller->sz : sizeof whole);
	whole.sz = sizeof whole;
	if (!o || !o->image || !c->begin || !st || (!buf && len))
		return -TK_E_INVAL;
	memset(st, 0, sizeof(*st));
	nthreads = o->nthreads ? o->nthreads : tk_cpu_count();
	/* room for every start: one scan (a branch trace's timeline plans a part at a time on
	 * the calling thread) */
	const struct tk_input *in = o->sz >= offsetof(struct tk_ipt_flow_opts, in_offset) +
					      sizeof o->in_offset ? o->in : NULL;
	if ((n = ipt_split_starts(in, in ? o->in_offset : 0, buf, len, chunk, nthreads,
				   c->caller_decodes, &r.offs)) < 0)
		return (int)n;
	if (n == 0) {
		free(r.offs);
		if (len)
			tk_gap_stats_add(&st->gaps, 0, len);
		return 0;
	}
	r.nchunks = (size_t)n;
	if (r.offs[0])
		tk_gap_stats_add(&st->gaps, 0, r.offs[0]);
	if ((rc = add_breaks(&r)) < 0)
		goto out;
	r.part_end = len;
	if (o->sz >= offsetof(struct tk_ipt_flow_opts, part_end) + sizeof(size_t) &&
	    o->part_end && o->part_end < len && r.offs[0] < o->part_end) {
		/* the chunks of this part only: the rest is the next part's */
		while (r.offs[r.nchunks - 1] >= o->part_end)
			r.nchunks--;
		r.part_end = o->part_end;
	}
	r.cst = calloc(r.nchunks, sizeof(*r.cst));
	r.free_decs = calloc(nthreads + 2 + r.nchunks, sizeof(*r.free_decs));
	if (!r.cst || !r.free_decs) {
		rc = -TK_E_NOMEM;
		goto out;
	}
	pthread_mutex_init(&r.lock, NULL);
	/* each thread's decoder decoded every block its chunks ran (libLLVM's profile: Zydis
	 * twice -j 1's at -j 2, four times at -j 8); with more than one, they share them */
	if (nthreads > 1 && r.nchunks > 1)
		r.share = tk_bshare_new();
	struct tk_pool_opts po = { .sz = sizeof(po), .nthreads = nthreads,
				   .caller_works = c->caller_decodes };

	rc = tk_pool_run(&po, r.nchunks, work, merge, &r);
	pthread_mutex_destroy(&r.lock);
	for (size_t i = 0; i < r.nchunks; i++) {
		tk_ipt_flow_stats_add(st, &r.cst[i]);
	}
	st->chunks = r.nchunks;
out:
	for (size_t i = 0; r.free_decs && i < r.nfree; i++) {
		if (rc >= 0 && c->done)
			rc = c->done(c->ctx, r.free_decs[i]->flow);
		decoder_free(r.free_decs[i]);
	}
	free(r.free_decs);
	decoder_free(r.redo_dec);
	tk_bshare_free(r.share);
	free(r.offs);
	free(r.cst);
	free(r.seg_end);
	free(r.brk);
	return rc;
}
