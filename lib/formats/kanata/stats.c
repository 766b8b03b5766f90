/* Pipeline statistics over a Kanata log: counts, cycles and IPC, per stage latency and
 * occupancy, stall (lane 1) cycles, per thread, IPC windows and the slowest instructions.
 * Memory depends on the number of stages, threads, windows and live instructions, not on
 * the file size. */
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/internal.h"

#define HIST_EXACT 1024
#define HIST_BUCKETS (HIST_EXACT + 54 * 64)

struct hist {
	uint64_t count, sum, max;
	uint32_t *bins;             /* HIST_BUCKETS, allocated on first use */
};

struct stats_ctx {
	const struct tk_kanata_stats_opts *o;
	struct tk_kanata_reader *r;
	int err;
	struct hist insn;
	struct hist stage[1024];
	size_t nthreads, cap_threads;
	struct tk_kanata_thread_stats *threads;
	size_t nwin, cap_win;
	uint64_t *win;
	int64_t first_cycle;
	size_t nslow;
	struct tk_kanata_slow *heap;   /* min-heap: root is the least slow kept */
	int64_t last_rid;
	int have_rid;
};

static unsigned bucket(uint64_t v)
{
	if (v < HIST_EXACT)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v), shift = msb - 6;
	return HIST_EXACT + (msb - 10) * 64 + (unsigned)((v >> shift) & 63);
}

static uint64_t bucket_top(unsigned b)
{
	if (b < HIST_EXACT)
		return b;
	unsigned msb = (b - HIST_EXACT) / 64 + 10, sub = (b - HIST_EXACT) % 64, shift = msb - 6;
	return (((uint64_t)(64 + sub) + 1) << shift) - 1;
}

static void hist_add(struct stats_ctx *s, struct hist *h, uint64_t v)
{
	if (!h->bins && !(h->bins = calloc(HIST_BUCKETS, sizeof *h->bins))) {
		s->err = -TK_E_NOMEM;
		return;
	}
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
	h->bins[bucket(v)]++;
}

/* Value at rank ceil(q * count) (nearest-rank percentile). */
static uint64_t hist_pct(const struct hist *h, unsigned q_permille)
{
	if (!h->count)
		return 0;
	uint64_t rank = (h->count * q_permille + 999) / 1000, seen = 0;
	if (!rank)
		rank = 1;
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		seen += h->bins[b];
		if (seen >= rank) {
			uint64_t t = bucket_top(b);
			return t < h->max ? t : h->max;
		}
	}
	return h->max;
}

static void hist_out(const struct hist *h, struct tk_kanata_latency *l)
{
	l->count = h->count;
	l->sum = h->sum;
	l->max = h->max;
	l->p50 = hist_pct(h, 500);
	l->p99 = hist_pct(h, 990);
}

static struct tk_kanata_thread_stats *thread_of(struct stats_ctx *s, int64_t t)
{
	size_t lo = 0, hi = s->nthreads;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->threads[mid].thread < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nthreads && s->threads[lo].thread == t)
		return &s->threads[lo];
	if (s->nthreads == s->cap_threads) {
		size_t cap = s->cap_threads ? s->cap_threads * 2 : 8;
		void *p = realloc(s->threads, cap * sizeof *s->threads);
		if (!p) {
			s->err = -TK_E_NOMEM;
			return NULL;
		}
		s->threads = p;
		s->cap_threads = cap;
	}
	memmove(&s->threads[lo + 1], &s->threads[lo], (s->nthreads - lo) * sizeof *s->threads);
	s->nthreads++;
	memset(&s->threads[lo], 0, sizeof s->threads[lo]);
	s->threads[lo].thread = t;
	return &s->threads[lo];
}

/* Heap order: a is "less slow" than b. */
static int less_slow(const struct tk_kanata_slow *a, const struct tk_kanata_slow *b)
{
	int64_t la = a->end - a->begin, lb = b->end - b->begin;
	if (la != lb)
		return la < lb;
	return a->id > b->id;
}

static void heap_down(struct tk_kanata_slow *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && less_slow(&h[l], &h[m]))
			m = l;
		if (r < n && less_slow(&h[r], &h[m]))
			m = r;
		if (m == i)
			return;
		struct tk_kanata_slow t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void slow_offer(struct stats_ctx *s, const struct kn_insn *in, int64_t end)
{
	struct tk_kanata_slow c = { .id = in->id, .sim_id = in->sim_id, .thread = in->thread,
				    .begin = in->begin, .end = end };
	size_t k = s->o->slowest;

	if (s->nslow < k) {
		memcpy(c.label, in->label, in->label_len + 1);
		size_t i = s->nslow++;
		s->heap[i] = c;
		while (i && less_slow(&s->heap[i], &s->heap[(i - 1) / 2])) {
			struct tk_kanata_slow t = s->heap[i];
			s->heap[i] = s->heap[(i - 1) / 2];
			s->heap[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else if (less_slow(&s->heap[0], &c)) {
		memcpy(c.label, in->label, in->label_len + 1);
		s->heap[0] = c;
		heap_down(s->heap, s->nslow, 0);
	}
}

static void on_stage(void *ctx, const struct kn_insn *in, unsigned stage, int64_t start, int64_t end)
{
	struct stats_ctx *s = ctx;
	(void)in;
	hist_add(s, &s->stage[stage], (uint64_t)(end - start));
}

static void on_done(void *ctx, const struct kn_insn *in, int flushed, int64_t rid, int64_t end)
{
	struct stats_ctx *s = ctx;
	struct tk_kanata_thread_stats *t = thread_of(s, in->thread);

	if (t) {
		t->insns++;
		if (flushed)
			t->flushed++;
		else
			t->retired++;
	}
	if (flushed)
		return;
	s->last_rid = rid;
	s->have_rid = 1;
	hist_add(s, &s->insn, (uint64_t)(end - in->begin));
	if (s->o->window) {
		int64_t rel = end - s->first_cycle;
		size_t w = rel > 0 ? (size_t)((uint64_t)rel / s->o->window) : 0;
		if (w >= s->cap_win) {
			size_t cap = s->cap_win ? s->cap_win : 64;
			while (cap <= w)
				cap *= 2;
			uint64_t *p = realloc(s->win, cap * sizeof *p);
			if (!p) {
				s->err = -TK_E_NOMEM;
				return;
			}
			memset(p + s->cap_win, 0, (cap - s->cap_win) * sizeof *p);
			s->win = p;
			s->cap_win = cap;
		}
		s->win[w]++;
		if (w + 1 > s->nwin)
			s->nwin = w + 1;
	}
	if (s->o->slowest)
		slow_offer(s, in, end);
}

/* Thread counts include instructions still in flight. */
static void on_live(void *ctx, const struct kn_insn *in)
{
	struct stats_ctx *s = ctx;
	struct tk_kanata_thread_stats *t = thread_of(s, in->thread);
	if (t)
		t->insns++;
}

static int on_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct stats_ctx *s = ctx;
	if (c->kind == TK_KANATA_CYCLE_SET && s->first_cycle == INT64_MIN)
		s->first_cycle = c->a;
	else if (c->kind == TK_KANATA_CYCLE && s->first_cycle == INT64_MIN)
		s->first_cycle = 0;
	return s->err;
}

static int cmp_slow(const void *a, const void *b)
{
	const struct tk_kanata_slow *x = a, *y = b;
	return less_slow(y, x) ? -1 : less_slow(x, y) ? 1 : 0;
}

static int finish(struct stats_ctx *s, struct tk_kanata_stats *st)
{
	const struct tk_kanata_counts *n = tk_kanata_reader_counts(s->r);
	size_t ns = kn_reader_nstages(s->r);
	int rc = 0;

	st->counts = *n;
	st->cycles = (uint64_t)(n->last_cycle - n->first_cycle);
	st->konata_last_rid = s->have_rid ? (uint64_t)s->last_rid : 0;
	st->konata_last_cycle = (uint64_t)kn_reader_delta_sum(s->r);
	st->have_rid = s->have_rid;
	hist_out(&s->insn, &st->insn_lat);
	kn_reader_live(s->r, on_live, s);

	st->stages = calloc(ns ? ns : 1, sizeof *st->stages);
	if (!st->stages)
		return -TK_E_NOMEM;
	st->nstages = ns;
	for (size_t i = 0; i < ns; i++) {
		const struct kn_name *k = kn_reader_stage(s->r, (unsigned)i);
		const struct kn_name *l = kn_reader_lane(s->r, k->lane);
		struct tk_kanata_stage_stats *o = &st->stages[i];
		memcpy(o->lane, l->name, l->len + 1);
		memcpy(o->stage, k->name, k->len + 1);
		hist_out(&s->stage[i], &o->lat);
		o->occupancy = s->stage[i].sum;
		if (!strcmp(o->lane, "1"))
			st->stall_cycles += o->occupancy;
	}
	st->threads = s->threads;
	st->nthreads = s->nthreads;
	s->threads = NULL;
	st->window_retired = s->win;
	st->nwindows = s->nwin;
	s->win = NULL;
	qsort(s->heap, s->nslow, sizeof *s->heap, cmp_slow);
	st->slow = s->heap;
	st->nslow = s->nslow;
	s->heap = NULL;
	if (s->err)
		rc = s->err;
	return rc;
}

static void ctx_free(struct stats_ctx *s)
{
	free(s->insn.bins);
	for (size_t i = 0; i < 1024; i++)
		free(s->stage[i].bins);
	free(s->threads);
	free(s->win);
	free(s->heap);
	tk_kanata_reader_free(s->r);
	free(s);
}

static void on_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct stats_ctx *s = ctx;
	if (s->o->diag)
		s->o->diag(s->o->ctx, d);
}

static struct stats_ctx *ctx_new(const struct tk_kanata_stats_opts *o, int *err)
{
	struct stats_ctx *s = calloc(1, sizeof *s);
	if (!s) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	s->o = o;
	s->first_cycle = INT64_MIN;
	if (o->slowest) {
		s->heap = calloc(o->slowest > 100000 ? 100000 : o->slowest, sizeof *s->heap);
		if (!s->heap) {
			free(s);
			*err = -TK_E_NOMEM;
			return NULL;
		}
	}
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = on_cmd,
					    .diag = on_diag, .ctx = s };
	s->r = tk_kanata_reader_new(&ro, err);
	if (!s->r) {
		free(s->heap);
		free(s);
		return NULL;
	}
	struct kn_hooks h = { on_stage, on_done, s };
	kn_reader_set_hooks(s->r, &h);
	return s;
}

static struct tk_kanata_stats_opts clamp_opts(const struct tk_kanata_stats_opts *o)
{
	struct tk_kanata_stats_opts c = { .sz = sizeof c };
	if (o)
		memcpy(&c, o, o->sz < sizeof c ? o->sz : sizeof c);
	if (c.slowest > 100000)
		c.slowest = 100000;
	return c;
}

int tk_kanata_stats_compute(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
			    struct tk_kanata_stats *st)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	int rc;

	memset(st, 0, sizeof *st);
	struct stats_ctx *s = ctx_new(&o, &rc);
	if (!s)
		return rc;
	rc = tk_kanata_reader_run(s->r, in);
	if (rc >= 0)
		rc = finish(s, st);
	ctx_free(s);
	return rc;
}

int tk_kanata_stats_buf(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			struct tk_kanata_stats *st)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	int rc;

	memset(st, 0, sizeof *st);
	struct stats_ctx *s = ctx_new(&o, &rc);
	if (!s)
		return rc;
	rc = tk_kanata_reader_feed(s->r, p, n, 1);
	if (rc >= 0)
		rc = finish(s, st);
	ctx_free(s);
	return rc;
}

void tk_kanata_stats_free(struct tk_kanata_stats *st)
{
	free(st->stages);
	free(st->threads);
	free(st->window_retired);
	free(st->slow);
	memset(st, 0, sizeof *st);
}
