/* XRay trace: buffers decoded on workers, as neutral events or per-chunk consumers, and
 * records merged across threads by TSC. */
#include <pthread.h>

#include "formats/xray/trace_internal.h"
#include "tracekit/internal/util.h"

/* Jobs in flight on NT workers (the pool's window): each has a slot of its own, job i's
 * at i % window. Two beyond the workers' keep the merging thread fed; each more is one
 * more chunk's profile or held events in memory (at 2 NT + 2, -j 2's profile of the
 * basic-mode log of bench/scaling.sh held six profiles of 67,000 nodes, 18 MB more than
 * at NT + 2), and fresh memory is what -j 2 pays for most here (bench/cold-pages.sh). */
static size_t window(unsigned nt)
{
	return nt > 1 ? (size_t)nt + 2 : 1;
}

/* ---- parallel decode into neutral events ---------------------------------------------------- */

struct pjob {
	struct tk_xray *x;
	struct xr_out *slots;
	size_t nslots;
	struct deliver d;
	struct xr_release_batch rel;
};

static int pjob_work(void *ctx, size_t i)
{
	struct pjob *j = ctx;
	xr_expand(j->x, &j->x->bufs[i], &j->slots[i % j->nslots]);
	return 0;
}

static int pjob_merge(void *ctx, size_t i)
{
	struct pjob *j = ctx;
	struct tk_xray *x = j->x;
	struct xr_out *o = &j->slots[i % j->nslots];
	struct xr_buf b = x->bufs[i];
	int rc;

	for (;;) {
		if ((rc = xr_deliver_buf(&j->d, &b, o)) < 0)
			return rc;
		if (!o->err || x->h.type == TK_XRAY_FDR || o->err_off + 32 >= b.end) {
			xr_release_add(x, &j->rel, x->bufs[i].start, x->bufs[i].end);
			return 0;
		}
		/* rare: a damaged basic record; finish the run here, serially */
		xr_basic_resume(o, &b);
		xr_expand(x, &b, o);
	}
}

/* The buffer-at-a-time decoder: buffers expanded on the workers, delivered (state
 * patched, counted, made events) on the calling thread in order. */
static int decode_buffers(struct tk_xray *x, struct tk_sink sink)
{
	struct tk_event_batch *batch = malloc(sizeof *batch);
	struct pjob j;
	int rc;

	if (!batch)
		return -TK_E_NOMEM;
	tk_event_batch_init(batch, sink);
	memset(&j, 0, sizeof j);
	j.x = x;
	j.d.x = x;
	j.d.batch = batch;
	unsigned nt = x->opts.nthreads ? x->opts.nthreads : 1;
	j.nslots = window(nt);
	j.slots = calloc(j.nslots, sizeof *j.slots);
	if (!j.slots) {
		free(batch);
		return -TK_E_NOMEM;
	}
	xr_stats_reset(x);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = j.nslots };
	rc = tk_pool_run(&po, x->nbufs, pjob_work, pjob_merge, &j);
	xr_release_flush(x, &j.rel);
	if (rc >= 0)
		rc = tk_event_batch_flush(batch);
	xr_stats_finish(x);
	for (size_t i = 0; i < j.nslots; i++)
		xr_out_free(&j.slots[i]);
	free(j.slots);
	free(batch);
	return rc;
}

/* ---- chunks decoded in parallel into per-chunk consumers ------------------------------------ */

struct cjob {
	size_t first, end;         /* buffers */
	struct xr_out o;
	uint8_t *copy;             /* xr_buf_read's */
	size_t copy_cap;
	struct deliver d;
	struct xr_chunk_stats st;
	struct tk_event_batch batch;
	void *consumer;
	int rc;
	struct xr_release_batch rel; /* its input not given back yet: the merge's to do */
};

struct cctx {
	struct tk_xray *x;
	const struct tk_xray_chunk_ops *ops;
	void *ctx;
	size_t *bounds;            /* chunk i = buffers [bounds[i], bounds[i + 1]) */
	struct cjob *slots;
	size_t nslots;
	const struct tk_sink *again; /* where a chunk whose merge asks for its events again
				       (TK_SINK_AGAIN) has them, decoded once more */
	uint64_t *depth;           /* per thread, after the chunks merged so far */
	/* the merged chunks' input, given back in order on the calling thread: a small
	 * chunk's own madvise (a timeline's hold 256 KiB of records; basic mode's span four
	 * times that) flushed both CPUs' TLBs 600 times in a run at -j 2 against 77 at -j 1 */
	struct xr_release_batch rel;
	int skipped;               /* a chunk was left out (TK_CHUNK_SKIP): depths unknown */
	uint8_t *wrapped;
};

/* J set for chunk I, its counts emptied. */
static void cjob_reset(struct cctx *c, struct cjob *j, size_t i)
{
	j->first = c->bounds[i];
	j->end = c->bounds[i + 1];
	memset(&j->d, 0, sizeof j->d);
	j->d.x = c->x;
	j->d.cst = &j->st;
	free(j->st.ts);
	free(j->st.errs);
	free(j->st.clamps);
	memset(&j->st, 0, sizeof j->st);
	j->st.s.first_tsc = UINT64_MAX;
	j->consumer = NULL;
}

static void cjob_free(struct cjob *j)
{
	xr_out_free(&j->o);
	free(j->copy);
	free(j->st.ts);
	free(j->st.errs);
	free(j->st.clamps);
}

static int cjob_decode(struct cctx *c, struct cjob *j, struct tk_sink sink);

static int cjob_work(void *ctx, size_t i)
{
	struct cctx *c = ctx;
	struct cjob *j = &c->slots[i % c->nslots];
	struct tk_sink sink = { 0 };
	int rc;

	cjob_reset(c, j, i);
	if ((rc = c->ops->begin(c->ctx, i, &sink, &j->consumer)) < 0 || rc == TK_CHUNK_SKIP)
		return j->rc = rc;
	return j->rc = cjob_decode(c, j, sink);
}

/* J's buffers decoded, their events to SINK. */
static int cjob_decode(struct cctx *c, struct cjob *j, struct tk_sink sink)
{
	struct tk_xray *x = c->x;
	int rc = 0;

	tk_event_batch_init(&j->batch, sink);
	j->d.batch = &j->batch;
	/* FDR: a thread's buffers lie in file order between other threads' ones, given back
	 * in batches (the other threads' buffers between two of them come back from the page
	 * cache when their turn comes): the batch's last spans by the merge (cjob_merge) */
	struct xr_release_batch *rel = &j->rel;
	for (size_t k = j->first; k < j->end && rc >= 0; k++) {
		struct xr_buf b = x->bufs[k];
		if (x->h.type == TK_XRAY_FDR) {
			const uint8_t *p = xr_buf_read(x, &b, &j->copy, &j->copy_cap);
			if (p) {
				uint64_t events = j->st.s.custom_events + j->st.s.typed_events;
				rc = xr_expand_deliver_fdr(&j->d, &b, &j->o, p);
				/* the batch's event payloads point into the copy: pass them on
				 * before the next buffer overwrites it */
				if (rc >= 0 && j->st.s.custom_events + j->st.s.typed_events != events)
					rc = tk_event_batch_flush(&j->batch);
				continue;
			}
			rc = xr_expand_deliver_fdr(&j->d, &b, &j->o, x->p);
			xr_release_add(x, rel, b.start, b.end);
			continue;
		}
		for (;;) {
			xr_expand(x, &b, &j->o);
			if ((rc = xr_deliver_buf(&j->d, &b, &j->o)) < 0)
				break;
			if (!j->o.err || j->o.err_off + 32 >= b.end)
				break;
			xr_basic_resume(&j->o, &b);
		}
		xr_release_add(x, rel, x->bufs[k].start, x->bufs[k].end);
	}
	if (rc >= 0)
		rc = tk_event_batch_flush(&j->batch);
	return rc;
}

/* Chunk I's events once more, straight to the sink C->again, on the calling thread (its
 * counts and messages were taken from the first decoding: a scratch job's are dropped). */
static int cjob_again(struct cctx *c, size_t i)
{
	struct cjob *j = calloc(1, sizeof *j);
	int rc = -TK_E_NOMEM;

	if (j) {
		cjob_reset(c, j, i);
		rc = cjob_decode(c, j, *c->again);
		xr_release_flush(c->x, &j->rel);
		cjob_free(j);
		free(j);
	}
	return rc;
}

static int cjob_merge(void *ctx, size_t i)
{
	struct cctx *c = ctx;
	struct tk_xray *x = c->x;
	struct cjob *j = &c->slots[i % c->nslots];
	struct xr_chunk_stats *cs = &j->st;

	if (j->rc < 0)
		return j->rc;
	if (j->rc == TK_CHUNK_SKIP)
		c->skipped = 1;
	for (size_t e = 0; e < cs->nerrs; e++)
		xr_log_err(x, cs->errs[e].off, cs->errs[e].skip, cs->errs[e].msg);
	x->stats.function_records += cs->s.function_records;
	x->stats.custom_events += cs->s.custom_events;
	x->stats.typed_events += cs->s.typed_events;
	x->stats.call_args += cs->s.call_args;
	x->stats.records += cs->s.records;
	if (cs->s.first_tsc < x->stats.first_tsc)
		x->stats.first_tsc = cs->s.first_tsc;
	if (cs->s.last_tsc > x->stats.last_tsc)
		x->stats.last_tsc = cs->s.last_tsc;
	for (size_t k = 0; k < sizeof x->cpu_seen; k++)
		x->cpu_seen[k] |= cs->cpu_seen[k];
	for (size_t k = 0; k < cs->nts; k++) {
		struct xr_tstat *t = &cs->ts[k];
		struct tk_xray_thread_info *ti = &x->threads[t->thread];
		uint64_t d = c->depth[t->thread];
		ti->records += t->records;
		if (t->records && t->first < ti->first_tsc)
			ti->first_tsc = t->first;
		if (t->last > ti->last_tsc)
			ti->last_tsc = t->last;
		/* the first D clamped exits ended calls begun in earlier chunks */
		if (t->clamped > d && !c->skipped) {
			uint64_t orphans = t->clamped - d;
			ti->orphan_exits += orphans;
			x->stats.orphan_exits += orphans;
			if (!c->wrapped[t->thread]) {
				c->wrapped[t->thread] = 1;
				tk_gap_stats_add(&x->stats.gaps, cs->clamps[t->clamp_first + d], 0);
			}
		}
		c->depth[t->thread] = t->end_depth + (d > t->clamped ? d - t->clamped : 0);
	}
	int rc = c->ops->merge(c->ctx, i, j->consumer);
	if (rc == TK_SINK_AGAIN && c->again)
		rc = cjob_again(c, i);
	for (size_t k = 0; k < j->rel.n; k++)
		xr_release_add(x, &c->rel, j->rel.r[k].start, j->rel.r[k].end);
	j->rel.n = 0;
	j->rel.bytes = 0;
	return rc;
}

/* Chunks of about nbufs / (8 * workers) buffers, and of at most MAX_BYTES of records when
 * not 0, cut only where a buffer needs no state from the one before it: their first
 * buffers into BOUNDS (nbufs + 2 of room), then nbufs; returns how many. *LARGEST: the
 * most bytes of records in one chunk. Toward the end they shrink (to a quarter): the
 * workers take chunks as they free up, and one that took a whole-size last chunk kept the
 * others idle for most of it (10-20 ms of XRay's 0.2 s profile at -j 2). Each chunk costs
 * its profile's start and merge, so the rest stay whole (all a quarter: CPU +15 %). */
static size_t chunk_bounds(const struct tk_xray *x, size_t *bounds, uint64_t max_bytes,
			   uint64_t *largest)
{
	unsigned nt = x->opts.plan_workers ? x->opts.plan_workers :
		      x->opts.nthreads ? x->opts.nthreads : 1;
	size_t target = x->nbufs / (8 * (size_t)nt) + 1, nchunks = 0;
	uint64_t bytes = 0;

	if (target < 4)
		target = 4;
	if (nt == 1)
		target = SIZE_MAX;          /* one chunk: nothing to merge */
	bounds[0] = 0;
	*largest = 0;
	size_t least = target / 4 ? target / 4 : 1, want = target;
	for (size_t i = 0; i < x->nbufs; i++) {
		size_t start = bounds[nchunks];
		if (i && (i - start >= want || (max_bytes && bytes >= max_bytes)) &&
		    (x->bufs[i].thread != x->bufs[i - 1].thread || x->bufs[i].self_contained)) {
			bounds[++nchunks] = i;
			bytes = 0;
			/* what is left shared among the workers twice over, down to a quarter */
			size_t guided = (x->nbufs - i) / (2 * (size_t)nt);
			want = guided >= target ? target : guided > least ? guided : least;
		}
		bytes += x->bufs[i].end - x->bufs[i].start;
		if (bytes > *largest)
			*largest = bytes;
	}
	if (x->nbufs)
		bounds[++nchunks] = x->nbufs;
	return nchunks;
}

int tk_xray_chunks(const struct tk_xray *x, uint64_t *begin, uint64_t *end, uint32_t *thread,
		   size_t *n)
{
	size_t *bounds = malloc((x->nbufs + 2) * sizeof *bounds);

	if (!bounds)
		return -TK_E_NOMEM;
	uint64_t largest;

	*n = chunk_bounds(x, bounds, 0, &largest);
	for (size_t i = 0; begin && i < *n; i++) {
		begin[i] = x->bufs[bounds[i]].start;
		end[i] = x->bufs[bounds[i + 1] - 1].end;
		thread[i] = x->bufs[bounds[i]].thread;
	}
	free(bounds);
	return 0;
}

/* The chunks of BOUNDS (NCHUNKS of them; freed here) on the pool (CALLER_WORKS: its
 * tk_pool_opts.caller_works). */
static int run_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx,
		      size_t *bounds, size_t nchunks, const struct tk_sink *again, int caller_works)
{
	struct cctx c;
	unsigned nt = x->opts.nthreads ? x->opts.nthreads : 1;
	int rc = -TK_E_NOMEM;

	memset(&c, 0, sizeof c);
	c.x = x;
	c.ops = ops;
	c.ctx = ctx;
	c.bounds = bounds;
	c.again = again;
	c.nslots = window(nt);
	c.slots = calloc(c.nslots, sizeof *c.slots);
	c.depth = calloc(x->nthreads + 1, sizeof *c.depth);
	c.wrapped = calloc(x->nthreads + 1, 1);
	if (!c.bounds || !c.slots || !c.depth || !c.wrapped)
		goto out;
	xr_stats_reset(x);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = c.nslots,
				   .caller_works = caller_works };
	rc = tk_pool_run(&po, nchunks, cjob_work, cjob_merge, &c);
	xr_release_flush(x, &c.rel);
	xr_stats_finish(x);
out:
	for (size_t i = 0; c.slots && i < c.nslots; i++)
		cjob_free(&c.slots[i]);
	free(c.slots);
	free(c.bounds);
	free(c.depth);
	free(c.wrapped);
	return rc;
}

int xr_decode_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx, int caller_works)
{
	size_t *bounds = malloc((x->nbufs + 2) * sizeof *bounds), n = 0;
	uint64_t largest;

	if (bounds)
		n = chunk_bounds(x, bounds, 0, &largest);
	return run_chunks(x, ops, ctx, bounds, n, NULL, caller_works);
}

int tk_xray_decode_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx)
{
	return xr_decode_chunks(x, ops, ctx, 0);
}

static int count_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	(void)ctx, (void)chunk, (void)sink, (void)consumer;
	return 0;
}

static int count_merge(void *ctx, size_t chunk, void *consumer)
{
	(void)ctx, (void)chunk, (void)consumer;
	return 0;
}

int tk_xray_walk(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx)
{
	/* counts only (info): the chunk decoder's one pass, no record arrays, on the workers
	 * (the records expanded and delivered in order took 0.38 s of a 153 MB log at any -j;
	 * 0.13 s this way at -j 1) */
	static const struct tk_xray_chunk_ops count = { count_begin, count_merge };
	if (!cb)
		return tk_xray_decode_chunks(x, &count, NULL);
	return xr_walk_records(x, cb, ctx);
}

/* ---- neutral events: chunks held for their turn --------------------------------------------- */

/* With workers, whole chunks are decoded on them into events held (thinned for the sink,
 * payloads copied, and what the sink can do ahead done: tk_sink.prepare) until their
 * turn: the calling thread hands them on (and decodes chunks while the next is not
 * done), where delivering every record itself made it the pace of a timeline at -j 2
 * (1.2x). A chunk holds at most HOLD_BYTES of records
 * (about six times as many bytes of events) and the pool's window a few chunks, so memory
 * does not grow with the log (with 1 MiB, what a timeline's chunks hold ahead took 120 MB
 * and its page faults a tenth of the CPU time); a log whose buffers cannot be cut that
 * small (buffers that need their predecessor's state) is decoded a buffer at a time. */
#define HOLD_BYTES ((uint64_t)1 << 18)

struct hold_run {
	struct tk_sink sink;
	struct tk_event_hold *slots; /* chunk i's in slots[i % nslots]: the pool's window */
	size_t nslots;
};

static int hold_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	struct hold_run *r = ctx;
	struct tk_event_hold *h = &r->slots[chunk % r->nslots];

	h->to = &r->sink;
	h->v.lean = 1;   /* (a chunk can be decoded again: cjob_again) */
	*sink = (struct tk_sink){ tk_event_hold_events, h, NULL };
	*consumer = h;
	return 0;
}

static int hold_merge(void *ctx, size_t chunk, void *consumer)
{
	struct hold_run *r = ctx;

	(void)chunk;
	return tk_event_vec_pass(&((struct tk_event_hold *)consumer)->v, r->sink);
}

/* One thread: the whole log as one chunk whose events go straight to the sink CTX (the
 * chunk decoder's FDR path expands and delivers each buffer in one pass). */
static int direct_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	(void)chunk;
	*sink = *(const struct tk_sink *)ctx;
	*consumer = NULL;
	return 0;
}

static int direct_merge(void *ctx, size_t chunk, void *consumer)
{
	(void)ctx, (void)chunk, (void)consumer;
	return 0;
}

int tk_xray_decode(struct tk_xray *x, struct tk_sink sink)
{
	static const struct tk_xray_chunk_ops ops = { hold_begin, hold_merge };
	static const struct tk_xray_chunk_ops direct = { direct_begin, direct_merge };
	unsigned nt = x->opts.nthreads ? x->opts.nthreads : 1;
	uint64_t largest = 0;
	size_t *bounds = NULL, n = 0;

	if (!(bounds = malloc((x->nbufs + 2) * sizeof *bounds)))
		return -TK_E_NOMEM;
	if (nt <= 1) {
		bounds[0] = 0;
		bounds[1] = x->nbufs;
		return run_chunks(x, &direct, &sink, bounds, x->nbufs ? 1 : 0, NULL, 0);
	}
	uint64_t hold = x->opts.hold_bytes ? x->opts.hold_bytes : HOLD_BYTES;
	n = chunk_bounds(x, bounds, hold, &largest);
	if (n < 2 || largest > 4 * hold) {
		free(bounds);
		return decode_buffers(x, sink);
	}
	struct hold_run r = { sink, calloc(window(nt), sizeof *r.slots), window(nt) };
	if (!r.slots) {
		free(bounds);
		return -TK_E_NOMEM;
	}
	/* a held chunk's job never waits for a merge, and the merges (the sink: a timeline's
	 * chunks formatted at their turn) are heavy: the calling thread decodes chunks between
	 * them, two busy threads at -j 2, not three */
	int rc = run_chunks(x, &ops, &r, bounds, n, &r.sink, 1);
	for (size_t i = 0; i < r.nslots; i++)
		tk_event_vec_free(&r.slots[i].v);
	free(r.slots);
	return rc;
}

/* ---- records merged across threads by TSC --------------------------------------------------- */

/* A thread's next buffer, expanded ahead of the merge (xr_merge_ahead): the merge asks for
 * it as it starts the buffer before, a worker takes it and expands it into O, and the
 * merge swaps O in when it gets there (or takes the ask back and expands the buffer
 * itself). Expanding is a buffer's own work, the same bytes on any thread; delivering
 * (which carries the thread's state) stays on the merge. */
enum { AHEAD_NONE, AHEAD_ASKED, AHEAD_TAKEN, AHEAD_READY };

struct ahead_slot {
	struct xr_out o;
	size_t buf;                /* the buffer asked for */
	int state;                 /* AHEAD_*, under xr_ahead.lock */
	int queued;                /* in xr_ahead.queue (once at most) */
};

struct xr_ahead {
	const struct tk_xray *x;
	pthread_mutex_t lock;
	pthread_cond_t ready;      /* a taken slot became ready */
	struct ahead_slot *slots;  /* one per stream */
	size_t *queue;             /* streams asked for, oldest first: a ring of ns */
	size_t ns, head, len;
};

struct stream {
	struct tk_xray *x;
	size_t next_buf, end_buf;  /* this thread's buffers */
	struct xr_buf cur;
	int cur_open;
	struct xr_out o;
	size_t pos;
	struct deliver d;          /* carries this thread's state */
	uint32_t rank;
	int done;                  /* no records left */
	int lazy;                  /* its first buffer not expanded yet: it waits for its
				    * bound (the lowest TSC in it) to come first */
	struct xr_ahead *ahead;    /* not NULL: its next buffer expanded ahead (slot ai) */
	size_t ai;
};

/* Stream S's buffer S->next_buf asked for (S->ahead). */
static void ahead_ask(struct stream *s)
{
	struct xr_ahead *a = s->ahead;
	struct ahead_slot *sl = &a->slots[s->ai];

	pthread_mutex_lock(&a->lock);
	sl->buf = s->next_buf;
	sl->state = AHEAD_ASKED;
	if (!sl->queued) {
		a->queue[(a->head + a->len++) % a->ns] = s->ai;
		sl->queued = 1;
	}
	pthread_mutex_unlock(&a->lock);
}

/* Stream S's current buffer (asked for before) into S->o, expanded: 1; or 0, the ask
 * taken back, nobody having started it. */
static int ahead_take(struct stream *s)
{
	struct xr_ahead *a = s->ahead;
	struct ahead_slot *sl = &a->slots[s->ai];
	int got = 0;

	pthread_mutex_lock(&a->lock);
	while (sl->state == AHEAD_TAKEN)
		pthread_cond_wait(&a->ready, &a->lock);
	if (sl->state == AHEAD_READY) {
		struct xr_out t = s->o;   /* (the old arrays: the slot's room for the next) */
		s->o = sl->o;
		sl->o = t;
		got = 1;
	}
	sl->state = AHEAD_NONE;
	pthread_mutex_unlock(&a->lock);
	return got;
}

/* Collects the delivered (patched) records of one buffer in place. */
static int stream_keep(void *ctx, const struct tk_xray_rec *r)
{
	(void)ctx, (void)r;
	return 0;
}

static int cmp_rec_tsc(const void *a, const void *b)
{
	const struct xr_rec *l = a, *r = b;
	if (l->r.tsc != r->r.tsc)
		return l->r.tsc < r->r.tsc ? -1 : 1;
	return l->r.offset < r->r.offset ? -1 : l->r.offset > r->r.offset;
}

/* Records whose TSCs go backwards inside a buffer (custom events before version 5 carry
 * their own absolute TSC) are put in order within the buffer, as llvm-xray's stable sort
 * by TSC would place them. */
static void sort_buffer(struct xr_out *o)
{
	for (size_t i = 1; i < o->n; i++) {
		if (o->recs[i].r.tsc < o->recs[i - 1].r.tsc) {
			qsort(o->recs, o->n, sizeof *o->recs, cmp_rec_tsc);
			return;
		}
	}
}

/* A thread done: its arrays given back (a log of thousands of short-lived threads would
 * otherwise keep a buffer's worth of expanded records for each). */
static void stream_end(struct stream *s)
{
	xr_out_free(&s->o);
	if (s->ahead) {   /* (nothing is asked for past a thread's last buffer: the slot is idle) */
		pthread_mutex_lock(&s->ahead->lock);
		xr_out_free(&s->ahead->slots[s->ai].o);
		pthread_mutex_unlock(&s->ahead->lock);
	}
}

/* Make s->o hold at least one undelivered record (the input of buffers moved past given
 * back through REL); 0 when the thread is done. */
static int stream_fill(struct xr_release_batch *rel, struct stream *s)
{
	struct tk_xray *x = s->x;
	int rc;

	while (s->pos >= s->o.n) {
		int ready = 0;   /* the buffer came expanded (ahead_take) */
		if (s->cur_open && s->o.err && x->h.type != TK_XRAY_FDR &&
		    s->o.err_off + 32 < s->cur.end) {
			xr_basic_resume(&s->o, &s->cur);
		} else {
			/* the buffer moved past: its input pages given back (its records,
			 * which point into them, are done with: custom events' data) */
			if (s->cur_open) {
				const struct xr_buf *b = &x->bufs[s->next_buf - 1];
				xr_release_add(x, rel, b->start, b->end);
			}
			if (s->next_buf >= s->end_buf) {
				stream_end(s);
				return 0;
			}
			s->cur = x->bufs[s->next_buf++];
			s->cur_open = 1;
			ready = s->ahead && ahead_take(s);
			if (s->ahead && s->next_buf < s->end_buf)
				ahead_ask(s);
		}
		if (!ready)
			xr_expand(x, &s->cur, &s->o);
		s->pos = 0;
		if ((rc = xr_deliver_buf(&s->d, &s->cur, &s->o)) < 0)
			return rc;
		sort_buffer(&s->o);
	}
	return 1;
}

/* The order of the merged records: by TSC; equal TSCs as llvm-xray's stable sort keeps
 * them (its pre-sort order: file order in basic mode, its thread map's order in FDR mode).
 * Called only on equal TSCs (rare), of two streams with records. */
static int stream_tie_less(const struct stream *a, const struct stream *b)
{
	if (a->rank != b->rank)
		return a->rank < b->rank;
	return a->o.recs[a->pos].r.offset < b->o.recs[b->pos].r.offset;
}

/* The records of every thread merged by TSC, one at a time (xr_merge_next), by a
 * tournament: each node of a complete binary tree over the slots holds the slot whose
 * record comes first below it, so a record taken is replaced by replaying the comparisons
 * on its slot's path to the root, log2(slots) of them, each one a conditional move.
 * The threads' records interleave nearly one by one (1.2 records per turn in
 * bench/scaling.sh's FDR log), and a heap's sifting, whose path depends on the comparisons,
 * mispredicted about every other of them: 10 ns per record, a fifth of the YAML's merging
 * thread.
 *
 * A slot holds a thread that has begun and not ended. An FDR thread waits, not expanded,
 * in a list by the lowest TSC of its first buffer (its bound), and takes a free slot when
 * that bound comes first (on a tie with a slot's record, before it: its real key may be
 * higher); a thread done frees its slot. So the tree is as large as the most threads that
 * run at once: with a slot for each of a log's 2,340 short-lived threads, every record
 * cost 12 comparisons where 2 or 3 do, and 60 % of the merging thread's time. */
#define NO_STREAM UINT32_MAX
struct xr_merge {
	struct tk_xray *x;
	size_t ns;
	struct stream *s;
	size_t leaves;             /* slots, a power of two */
	uint32_t *win;             /* node k's first slot (k in 1..2 leaves - 1; leaf i at
				      leaves + i holds i) */
	uint64_t *tsc;             /* each slot's next record's TSC; UINT64_MAX when free */
	uint32_t *in;              /* each slot's stream, or NO_STREAM */
	uint32_t *free_slots;      /* free slots, a stack (leaves of them room) */
	size_t nfree;
	struct waiting {
		uint64_t bound;
		uint32_t t;
	} *waiting;                /* the threads not begun, by bound (then stream index) */
	size_t nwaiting, next_waiting;
	struct stream *taken;      /* the stream whose record went out last: refilled next */
	size_t taken_slot;         /* ... and its slot */
	struct xr_release_batch rel;
	struct xr_ahead *ahead;    /* xr_merge_ahead's, or NULL */
};

/* Which of slots A and B has the first record; free slots last. */
static inline uint32_t first_of(const struct xr_merge *m, uint32_t a, uint32_t b)
{
	uint64_t ta = m->tsc[a], tb = m->tsc[b];
	if (__builtin_expect(ta == tb, 0)) {
		uint32_t sa = m->in[a], sb = m->in[b];
		if (sa == NO_STREAM || sb == NO_STREAM)
			return sa == NO_STREAM && sb != NO_STREAM ? b : a;
		return stream_tie_less(&m->s[sa], &m->s[sb]) ? a : b;
	}
	return tb < ta ? b : a;
}

/* Slot I's key changed: the nodes on its path to the root decided again. */
static inline void replay(struct xr_merge *m, size_t i)
{
	for (size_t k = (m->leaves + i) / 2; k; k /= 2)
		m->win[k] = first_of(m, m->win[2 * k], m->win[2 * k + 1]);
}

/* Slot I's key after its stream S's fill (RC: stream_fill's); a stream done frees it. */
static void set_key(struct xr_merge *m, size_t i, struct stream *s, int rc)
{
	s->done = rc <= 0;
	m->tsc[i] = s->done ? UINT64_MAX : s->o.recs[s->pos].r.tsc;
	if (s->done) {
		m->in[i] = NO_STREAM;
		m->free_slots[m->nfree++] = (uint32_t)i;
	}
}

/* Twice the slots (all decided again); 0 or -TK_E_NOMEM. */
static int grow_slots(struct xr_merge *m)
{
	size_t n = m->leaves ? 2 * m->leaves : 1;
	uint32_t *win = realloc(m->win, 2 * n * sizeof *win);
	if (win)
		m->win = win;
	uint64_t *tsc = realloc(m->tsc, n * sizeof *tsc);
	if (tsc)
		m->tsc = tsc;
	uint32_t *in = realloc(m->in, n * sizeof *in);
	if (in)
		m->in = in;
	uint32_t *fr = realloc(m->free_slots, n * sizeof *fr);
	if (fr)
		m->free_slots = fr;
	if (!win || !tsc || !in || !fr)
		return -TK_E_NOMEM;
	for (size_t i = m->leaves; i < n; i++) {
		m->tsc[i] = UINT64_MAX;
		m->in[i] = NO_STREAM;
	}
	for (size_t i = n; i-- > m->leaves;)   /* (the lowest free slot taken first) */
		m->free_slots[m->nfree++] = (uint32_t)i;
	m->leaves = n;
	for (size_t i = 0; i < n; i++)
		m->win[n + i] = (uint32_t)i;
	for (size_t k = n - 1; k; k--)
		m->win[k] = first_of(m, m->win[2 * k], m->win[2 * k + 1]);
	return 0;
}

/* Stream T filled (RC: stream_fill's): into a free slot, if it has records. */
static int begin_stream(struct xr_merge *m, size_t t, int rc)
{
	if (rc <= 0) {
		m->s[t].done = 1;
		return rc;
	}
	if (!m->nfree && grow_slots(m) < 0)
		return -TK_E_NOMEM;
	size_t i = m->free_slots[--m->nfree];
	m->in[i] = (uint32_t)t;
	set_key(m, i, &m->s[t], rc);
	replay(m, i);
	return 0;
}

/* The lowest TSC of stream S's first buffer, expanded into SCRATCH and its input given
 * back through REL: 1, or 0 where the stream is to be filled now (basic mode, whose runs
 * may stop at a damaged record and resume; no records). A thread's first buffer inherits
 * no state, so these are the TSCs its delivery gives. Expanding every thread's first
 * buffer at the start held them all at once: 1.4 GB for a log of 2,340 threads. */
static int stream_bound(struct tk_xray *x, struct stream *s, struct xr_out *scratch,
			struct xr_release_batch *rel, uint64_t *tsc)
{
	if (x->h.type != TK_XRAY_FDR || s->next_buf >= s->end_buf)
		return 0;
	const struct xr_buf *b = &x->bufs[s->next_buf];
	xr_expand(x, b, scratch);
	if (scratch->nomem || !scratch->n)
		return 0;
	*tsc = UINT64_MAX;
	for (size_t i = 0; i < scratch->n; i++)
		if (scratch->recs[i].r.tsc < *tsc)
			*tsc = scratch->recs[i].r.tsc;
	xr_release_add(x, rel, b->start, b->end);
	return 1;
}

/* The bounds of the threads [t * BOUNDS_JOB, ...) found on a pool's worker: 1 in has[t]
 * where there is one (stream_bound). The merging thread found them one by one before
 * its first record: a tenth of its work at -j 2 on a log of 2,340 threads. */
#define BOUNDS_JOB 64
struct bounds_run {
	struct tk_xray *x;
	struct stream *s;
	size_t ns;
	uint64_t *bound;
	uint8_t *has;
};

static int bounds_work(void *ctx, size_t j)
{
	struct bounds_run *b = ctx;
	struct xr_out scratch = { 0 };
	struct xr_release_batch rel = { 0 };

	for (size_t t = j * BOUNDS_JOB; t < b->ns && t < (j + 1) * BOUNDS_JOB; t++)
		b->has[t] = (uint8_t)stream_bound(b->x, &b->s[t], &scratch, &rel, &b->bound[t]);
	xr_release_flush(b->x, &rel);
	xr_out_free(&scratch);
	return 0;
}

struct xr_merge *xr_merge_new(struct tk_xray *x, unsigned nthreads, int *err)
{
	struct xr_merge *m = calloc(1, sizeof *m);
	size_t ns = x->nthreads;
	int rc = 0;

	if (!m || !(m->s = calloc(ns ? ns : 1, sizeof *m->s)) ||
	    !(m->waiting = calloc(ns ? ns : 1, sizeof *m->waiting)) || grow_slots(m) < 0) {
		if (m) {
			free(m->s);
			free(m->waiting);
			free(m->win);
			free(m->tsc);
			free(m->in);
			free(m->free_slots);
		}
		free(m);
		*err = -TK_E_NOMEM;
		return NULL;
	}
	m->x = x;
	m->ns = ns;
	xr_stats_reset(x);
	/* bufs are sorted thread-major: find each thread's range */
	for (size_t i = 0, t = 0; t < ns; t++) {
		struct stream *st = &m->s[t];
		st->x = x;
		st->rank = x->rank ? x->rank[t] : 0;
		st->d.x = x;
		st->d.cb = stream_keep;
		st->next_buf = i;
		while (i < x->nbufs && x->bufs[i].thread == t)
			i++;
		st->end_buf = i;
	}
	struct bounds_run b = { x, m->s, ns, NULL, NULL };
	if (nthreads > 1 && ns > BOUNDS_JOB && x->h.type == TK_XRAY_FDR &&
	    (b.bound = malloc(ns * sizeof *b.bound)) && (b.has = malloc(ns))) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nthreads, .caller_works = 1 };
		rc = tk_pool_run(&po, (ns + BOUNDS_JOB - 1) / BOUNDS_JOB, bounds_work, NULL, &b);
	}
	struct xr_out scratch = { 0 };
	for (size_t t = 0; t < ns && rc >= 0; t++) {
		struct waiting *w = &m->waiting[m->nwaiting];
		int has = b.has ? b.has[t] : stream_bound(x, &m->s[t], &scratch, &m->rel, &w->bound);
		if (b.has)
			w->bound = b.bound[t];
		if (has) {
			m->s[t].lazy = 1;
			w->t = (uint32_t)t;
			m->nwaiting++;
		} else {
			rc = begin_stream(m, t, stream_fill(&m->rel, &m->s[t]));
		}
	}
	xr_out_free(&scratch);
	free(b.bound);
	free(b.has);
	if (rc >= 0 && tk_sort_by_u64(m->waiting, m->nwaiting, sizeof *m->waiting,
				      offsetof(struct waiting, bound)) < 0)
		rc = -TK_E_NOMEM;
	*err = rc < 0 ? rc : 0;
	return m;   /* (after an error too: for xr_merge_free; the caller goes no further) */
}

int xr_merge_next(struct xr_merge *m, const struct tk_xray_rec **r)
{
	struct stream *s = m->taken;
	int rc;

	if (s) {
		size_t i = m->taken_slot;
		rc = s->pos < s->o.n ? 1 : stream_fill(&m->rel, s);
		m->taken = NULL;
		if (rc < 0)
			return rc;
		set_key(m, i, s, rc);
		replay(m, i);
	}
	/* a thread waiting comes first by its bound: expanded now, and placed by its records */
	while (m->next_waiting < m->nwaiting &&
	       m->waiting[m->next_waiting].bound <= m->tsc[m->win[1]]) {
		size_t t = m->waiting[m->next_waiting++].t;
		m->s[t].lazy = 0;
		if ((rc = begin_stream(m, t, stream_fill(&m->rel, &m->s[t]))) < 0)
			return rc;
	}
	uint32_t w = m->win[1];
	if (m->in[w] == NO_STREAM)
		return 0;
	s = &m->s[m->in[w]];
	*r = &s->o.recs[s->pos++].r;
	m->taken = s;
	m->taken_slot = w;
	return 1;
}

int xr_merge_ahead(struct xr_merge *m)
{
	struct xr_ahead *a;

	if (m->ahead || m->x->h.type != TK_XRAY_FDR || !m->ns)
		return 0;
	if (!(a = calloc(1, sizeof *a)))
		return -TK_E_NOMEM;
	if (!(a->slots = calloc(m->ns, sizeof *a->slots)) ||
	    !(a->queue = calloc(m->ns, sizeof *a->queue)) || pthread_mutex_init(&a->lock, NULL))
		goto fail;
	if (pthread_cond_init(&a->ready, NULL)) {
		pthread_mutex_destroy(&a->lock);
		goto fail;
	}
	a->x = m->x;
	a->ns = m->ns;
	m->ahead = a;
	for (size_t t = 0; t < m->ns; t++) {
		struct stream *s = &m->s[t];
		s->ahead = a;
		s->ai = t;
		if (!s->done && !s->lazy && s->next_buf < s->end_buf)
			ahead_ask(s);   /* (a thread not expanded yet asks once it is) */
	}
	return 0;
fail:
	free(a->queue);
	free(a->slots);
	free(a);
	return -TK_E_NOMEM;
}

void xr_merge_work_ahead(struct xr_merge *m)
{
	struct xr_ahead *a = m->ahead;
	struct ahead_slot *sl = NULL;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	while (a->len && !sl) {
		struct ahead_slot *q = &a->slots[a->queue[a->head]];
		a->head = (a->head + 1) % a->ns;
		a->len--;
		q->queued = 0;
		if (q->state == AHEAD_ASKED) {
			q->state = AHEAD_TAKEN;
			sl = q;
		}
	}
	pthread_mutex_unlock(&a->lock);
	if (!sl)
		return;
	xr_expand(a->x, &a->x->bufs[sl->buf], &sl->o);
	pthread_mutex_lock(&a->lock);
	sl->state = AHEAD_READY;
	pthread_cond_broadcast(&a->ready);
	pthread_mutex_unlock(&a->lock);
}

void xr_merge_free(struct xr_merge *m)
{
	if (!m)
		return;
	xr_stats_finish(m->x);
	for (size_t t = 0; t < m->ns; t++)
		xr_out_free(&m->s[t].o);
	if (m->ahead) {
		for (size_t t = 0; t < m->ns; t++)
			xr_out_free(&m->ahead->slots[t].o);
		pthread_cond_destroy(&m->ahead->ready);
		pthread_mutex_destroy(&m->ahead->lock);
		free(m->ahead->slots);
		free(m->ahead->queue);
		free(m->ahead);
	}
	xr_release_flush(m->x, &m->rel);
	free(m->s);
	free(m->win);
	free(m->tsc);
	free(m->in);
	free(m->free_slots);
	free(m->waiting);
	free(m);
}

int tk_xray_walk_sorted(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx)
{
	const struct tk_xray_rec *r;
	int rc;
	struct xr_merge *m = xr_merge_new(x, 1, &rc);

	if (!m)
		return rc;
	while (rc >= 0 && (rc = xr_merge_next(m, &r)) > 0)
		rc = cb(ctx, r);
	xr_merge_free(m);
	return rc < 0 ? rc : 0;
}
