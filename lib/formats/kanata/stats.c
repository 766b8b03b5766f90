/* Pipeline statistics over a Kanata log: counts, cycles and IPC, per stage latency and
 * occupancy, stall (lane 1) cycles, per thread, IPC windows and the slowest instructions.
 * Memory depends on the number of stages, threads, windows and live instructions, not on
 * the file size. Their parallel parse (chunks parsed before their start is known, rebased
 * and merged in order) also decodes a log at -j N: tk_kanata_decode, each chunk's events
 * made by a decoder of its own (decode.c) instead of statistics. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <sys/mman.h>

#include "formats/kanata/bytes.h"
#include "formats/kanata/internal.h"
#include "tracekit/internal/util.h"

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
	uint64_t windows_dropped;
	uint64_t last_rid_line;
	int cycle_seen;
	/* diagnostics: forwarded, or kept (parallel chunks) until the merge */
	uint64_t suppress_upto;    /* sequential rerun after a parallel attempt: already shown */
	struct kept_diags *keep;
	/* a chunk parsed before its start is known (cycles relative to it): retirements per
	 * cycle, put in windows once the start is known (chunk_rebase) */
	int rel;
	size_t nruns, cap_runs;
	struct ret_run { int64_t cycle; uint64_t n; } *runs;
	struct par *par;
	size_t chunk_i;
	/* a parallel decode's: the chunk's decoder, whose reader R is (R borrowed: the
	 * caller's decoder's, the total's) */
	struct tk_kanata_decoder *dec;
	int r_borrowed;
};

#define KEEP_DIAGS 256
struct kept_diag {
	struct tk_kanata_diag d;
	char msg[256];
};
struct kept_diags {
	size_t n;
	struct kept_diag v[KEEP_DIAGS];
	/* beyond KEEP_DIAGS: only counted by level (the callback still gets each, textless,
	 * so that counts of what it was given equal -j 1's), from this line on */
	uint64_t more[2], more_line;
	/* or, with opts.keep_diags (check lists them all), kept too */
	struct kn_diags all;
};

static size_t kept_count(const struct kept_diags *k)
{
	return k->n + k->all.n;
}

/* The Ith diagnostic of K (TMP: room for one past the first KEEP_DIAGS). */
static const struct tk_kanata_diag *kept_at(const struct kept_diags *k, size_t i,
					    struct tk_kanata_diag *tmp)
{
	if (i < k->n)
		return &k->v[i].d;
	*tmp = kn_diags_at(&k->all, i - k->n);
	return tmp;
}

static void kept_free(struct kept_diags *k)
{
	if (k) {
		kn_diags_free(&k->all);
		free(k);
	}
}

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

static void slow_offer_entry(struct stats_ctx *s, const struct tk_kanata_slow *c)
{
	if (s->nslow < s->o->slowest) {
		size_t i = s->nslow++;
		s->heap[i] = *c;
		while (i && less_slow(&s->heap[i], &s->heap[(i - 1) / 2])) {
			struct tk_kanata_slow t = s->heap[i];
			s->heap[i] = s->heap[(i - 1) / 2];
			s->heap[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else if (less_slow(&s->heap[0], c)) {
		s->heap[0] = *c;
		heap_down(s->heap, s->nslow, 0);
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

/* N retirements at cycle END into their IPC window. */
static void win_add(struct stats_ctx *s, int64_t end, uint64_t n)
{
	int64_t rel = end - s->first_cycle;
	uint64_t wi = rel > 0 ? (uint64_t)rel / s->o->window : 0;
	if (wi >= ((uint64_t)1 << 24)) {
		s->windows_dropped += n;  /* keep memory bounded on absurd cycle counts */
		return;
	}
	size_t w = (size_t)wi;
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
	s->win[w] += n;
	if (w + 1 > s->nwin)
		s->nwin = w + 1;
}

/* A relative chunk: one more retirement at (relative) cycle END; cycles only grow. */
static void run_add(struct stats_ctx *s, int64_t end)
{
	if (s->nruns && s->runs[s->nruns - 1].cycle == end) {
		s->runs[s->nruns - 1].n++;
		return;
	}
	if (s->nruns == s->cap_runs) {
		size_t cap = s->cap_runs ? s->cap_runs * 2 : 1024;
		void *p = realloc(s->runs, cap * sizeof *s->runs);
		if (!p) {
			s->err = -TK_E_NOMEM;
			return;
		}
		s->runs = p;
		s->cap_runs = cap;
	}
	s->runs[s->nruns++] = (struct ret_run){ end, 1 };
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
	s->last_rid_line = kn_reader_cur_line(s->r);
	s->have_rid = 1;
	hist_add(s, &s->insn, (uint64_t)(end - in->begin));
	if (s->o->window) {
		if (s->rel)
			run_add(s, end);
		else
			win_add(s, end, 1);
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
	/* the same rule as the reader's first_cycle: a C= before any C */
	if (!s->cycle_seen && (c->kind == TK_KANATA_CYCLE_SET || c->kind == TK_KANATA_CYCLE)) {
		s->cycle_seen = 1;
		if (c->kind == TK_KANATA_CYCLE_SET)
			s->first_cycle = c->a;
	}
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
	if (s->nslow)
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
	free(s->runs);
	free(s->heap);
	if (!s->r_borrowed)
		tk_kanata_reader_free(s->r);
	tk_kanata_decoder_free(s->dec);
	free(s);
}

static void on_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct stats_ctx *s = ctx;
	if (s->keep) {
		if (s->keep->n == KEEP_DIAGS && s->o->keep_diags) {
			if (kn_diags_add(&s->keep->all, d) < 0)
				s->err = -TK_E_NOMEM;
		} else if (s->keep->n == KEEP_DIAGS && d->level <= TK_LOG_WARN) {
			s->keep->more_line = s->keep->more[0] + s->keep->more[1] ? s->keep->more_line : d->line;
			s->keep->more[d->level]++;
		} else if (s->keep->n < KEEP_DIAGS) {
			struct kept_diag *k = &s->keep->v[s->keep->n++];
			k->d = *d;
			snprintf(k->msg, sizeof k->msg, "%s", d->msg);
			k->d.msg = k->msg;
		}
		return;
	}
	if (d->line <= s->suppress_upto)
		return;
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
	if (!o->counts_only)
		kn_reader_set_hooks(s->r, &h);
	return s;
}

/* A parallel decode's context (no statistics): a chunk's, with a decoder of its own, or
 * the total's, on the reader of the caller's decoder G. */
static struct stats_ctx *ctx_decoding(const struct tk_kanata_stats_opts *o,
				      struct tk_kanata_decoder *g, int *err)
{
	struct stats_ctx *s = calloc(1, sizeof *s);

	if (!s) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	s->o = o;
	if (!g && !(s->dec = kn_decoder_chunk_new(err))) {
		free(s);
		return NULL;
	}
	s->r = kn_decoder_reader(g ? g : s->dec);
	s->r_borrowed = 1;
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

/* ---- parallel: chunks parsed before their start is known, rebased, merged in order ------- */
static size_t chunk_bytes = (size_t)8 << 20;
#define CHUNK_BYTES chunk_bytes

/* Tests split small inputs into many chunks. */
void kn_stats_set_chunk_bytes(size_t n);
void kn_stats_set_chunk_bytes(size_t n)
{
	chunk_bytes = n ? n : (size_t)8 << 20;
}

/* Where the chunk that starts at POS ends: the first line seam CHUNK_BYTES on (the source's
 * plan and the parallel statistics cut the same chunks). */
size_t kn_line_seam(const char *data, size_t len, size_t pos)
{
	return kn_line_seam_by(data, len, pos, CHUNK_BYTES);
}

size_t kn_line_seam_by(const char *data, size_t len, size_t pos, size_t bytes)
{
	size_t end = bytes < len - pos ? pos + bytes : len;
	if (end < len) {
		const char *nl = memchr(data + end, '\n', len - end);
		end = nl ? (size_t)(nl - data) + 1 : len;
	}
	return end;
}

/* As kn_line_seam_by where DATA is IN's file mapped whole (IN NULL: it is not): the line
 * end found in a few bytes read with pread, not in the mapping. The planning runs on the
 * calling thread before any chunk is parsed, and a mapped page's first touch costs 60-130
 * us on this project's VMs (report -j 2: 5-10 ms of a 15 ms serial part for 145 seams),
 * a pread of 512 bytes 3 us; the chunk's parse faults the page in anyway, in parallel. */
size_t kn_line_seam_in(const struct tk_input *in, const char *data, size_t len, size_t pos,
		       size_t bytes)
{
	size_t end = bytes < len - pos ? pos + bytes : len;
	if (in && end < len) {
		char b[512];
		long got = tk_input_pread(in, b, len - end < sizeof b ? len - end : sizeof b, end);
		const char *nl = got > 0 ? memchr(b, '\n', (size_t)got) : NULL;
		if (nl)
			return end + (size_t)(nl - b) + 1;
	}
	return kn_line_seam_by(data, len, pos, bytes);
}

struct chunk {
	size_t start, len;
	uint64_t lines;              /* newlines in the chunk */
	/* its effect on the cycle, once parsed (or scanned, before a shard's first chunk):
	 * f(x) = max(x + add, floor), or the concrete end0 (abs_end) */
	int64_t add, floor, end0;
	int has_floor, abs_end;
	int scanned;                 /* a decode's chunk: the above from a scan in its own job,
				      * before its parse (scan_ahead), not from the parse */
	int64_t delta;               /* ... the sum of C deltas before it, as the scans say */
	int first_op;                /* scanned: 0 none, 1 C, 2 C= */
	int64_t first_set;
	int64_t start_cycle;
	uint64_t line_base;
	struct stats_ctx *s;
	struct kept_diags *diags;
	int err;
	int late;                    /* parsed before its start was known (under P->lock):
				      * a later job may rebase it before its merge (catch_up) */
	int keep_events;             /* a decoding chunk parsed again at its merge: its events
				      * kept for the sink (take_begin) */
	char *buf;                   /* a read stream's: the chunk's bytes until parsed */
	size_t cap;                  /* ... its size */
	int last;                    /* ... the stream's last chunk */
};

/* A merged chunk's diagnostics, held while a stream is read (par.stream). */
struct held_diags {
	struct kept_diags *diags, *replay;   /* (either may be NULL: none) */
	uint64_t upto;                       /* the lines delivered once they are */
};

struct par {
	const char *data;
	size_t len;
	struct chunk *ch;
	size_t n;
	size_t first, count;         /* the chunks this run parses: all, or a shard's */
	struct tk_buf *save;         /* a shard: the chunks as bytes instead of merged */
	struct tk_kanata_stats_opts *o;
	struct stats_ctx *g;
	struct kept_diags replay;
	int64_t first_cycle;
	int fallback;
	struct tk_input *in;         /* the file mapped at DATA (NULL: a buffer, or a pipe's
				      * bytes): mapped pages read may be dropped */
	/* chunk I's start (cycle, line) follows from the effects of chunks 0..I-1: a worker
	 * parses its chunk with cycles and lines relative to its start (one pass over the
	 * file), publishes its effect, and rebases the chunk once its start is known; only a
	 * line that needs the absolute cycle (C=) waits for it */
	pthread_mutex_t lock;
	pthread_cond_t started;
	unsigned char *prefixed;     /* per chunk: its effect is known */
	int failed;                  /* a chunk's parse failed: nobody waits for starts */
	size_t nstarts;              /* chunks 0..nstarts-1 have their start */
	int64_t cur;                 /* the start cycle of chunk nstarts (nstarts < n) */
	uint64_t line;
	uint64_t delivered_upto;
	uint16_t lane_map[1024], stage_map[1024];
	/* a parallel decode (tk_kanata_decode): the chunks' events into this decoder's sink,
	 * the statistics not made; MERGED chunks are in it */
	struct tk_kanata_decoder *dec;
	size_t merged;
	struct tk_event_vec spare_ev[64];   /* emptied chunks' event memory, under LOCK */
	size_t nspare_ev;
	struct kn_ids spare_ids[64];        /* merged chunks' lists of ids, under LOCK */
	size_t nspare_ids;
	int pooled;                  /* in par_run: LOCK is live */
	/* the names merged so far, under LOCK: a chunk's decoder begins with them */
	struct kn_name seed_lanes[KN_MAX_NAMES], seed_stages[KN_MAX_NAMES];
	unsigned nseed_lanes, nseed_stages;
	/* a compressed file read in turn by the chunks' jobs (stats_streamed): the job of
	 * chunk I reads its bytes once chunk I - 1 has its own, then parses them while the
	 * next job reads; N counts the chunks read so far */
	struct tk_input *stream;
	size_t bytes;                /* the chunks' size */
	size_t turn;                 /* the chunk whose bytes are read next (LOCK; STARTED is
				      * signalled as it moves) */
	char *carry;                 /* bytes read past the last chunk's end */
	size_t ncarry, capcarry;
	char *sbuf[8];               /* parsed chunks' buffers, for the next ones (LOCK) */
	size_t sbuf_cap[8], nsbuf;
	uint64_t read_pos;           /* the decompressed offset of the next chunk */
	int read_end;                /* the stream was read to its end, no cut (LOCK) */
	/* a cut would be told (logged) where the reading in order meets it, before the
	 * diagnostics of the lines read with it: those of merged chunks are held until the
	 * stream has ended whole (a cut: the statistics read again in order) */
	struct held_diags *held;
	size_t nheld, capheld;
};

/* Give a file mapping's pages back once a chunk is done, so resident memory stays bounded.
 * Only for file-backed mappings: on anonymous memory this would zero the data. */
static void drop_pages(const struct par *P, const char *p, size_t n)
{
	if (!P->in)
		return;
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, b = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/* A C line's delta V (>= 0) added to chunk C's effect on the cycle. */
static inline void prefix_add(struct chunk *c, int64_t v, int64_t *cur, int *seen)
{
	if (!c->first_op)
		c->first_op = 1;
	*cur += v;
	c->add += v;
	if (c->has_floor)
		c->floor += v;
	*seen = 1;
}

/* One C / C= line at P (ending at LE) of chunk I: its effect on the cycle. */
static void prefix_line(struct chunk *c, size_t i, const char *p, const char *le, int64_t *cur, int *seen)
{
	int64_t v;
	if (le - p <= 1)
		return;
	if (p[1] == '=') {
		if (kn_parse_i64(p + 2 + (le - p > 2 && p[2] == '\t'), le, &v) == 0) {
			if (!c->first_op)
				c->first_op = 2, c->first_set = v;
			if (i == 0) {
				if (!*seen || v >= *cur)
					*cur = v;
			} else if (!c->has_floor || v > c->floor) {
				c->floor = c->has_floor && c->floor > v ? c->floor : v;
				c->has_floor = 1;
			}
			*seen = 1;
		}
	} else if (p[1] == '\t' || p[1] == ' ') {
		if (kn_parse_i64(p + 2, le, &v) == 0 && v >= 0)
			prefix_add(c, v, cur, seen);
	}
}

static void prefix_c_at(struct chunk *c, size_t i, const char *b, const char *q, const char *e,
			int64_t *cur, int *seen)
{
	if (q > b && q[-1] != '\n')
		return;        /* a 'C' inside a line */
	/* the usual line, "C<tab>DIGITS<newline>", read without a search for its end (a
	 * memchr per C line was a third of the scan) */
	if (e - q > 3 && q[1] == '\t') {
		const char *p = q + 2, *lim = e - q > 17 ? q + 17 : e;
		uint64_t x = 0;
		while (p < lim && (unsigned)(*p - '0') < 10)
			x = x * 10 + (uint64_t)(*p++ - '0');
		if (p > q + 2 && p < lim && *p == '\n' && x <= KN_NUM_MAX) {
			prefix_add(c, (int64_t)x, cur, seen);
			return;
		}
	}
	const char *nl = memchr(q, '\n', (size_t)(e - q));
	prefix_line(c, i, q, nl ? nl : e, cur, seen);
}

/* The chunk's newlines and its effect on the cycle (only C / C= lines matter), in one pass
 * at memory speed: this pass runs before the parallel parse, so its cost limits the
 * speed-up of -j N. 16 bytes at a time: newlines are summed in byte counters, and the
 * rare 'C' (labels are mostly lower-case disassembly) is checked for a line start. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The 32-byte form of prefix_work's loop: the scan is what -j N does more than -j 1, so its
 * speed is the parallel path's extra CPU. Returns the bytes done (a multiple of 32). */
__attribute__((target("avx2"))) static size_t prefix_avx2(struct chunk *c, size_t i, const char *b,
							   const char *e, uint64_t *lines,
							   int64_t *cur, int *seen)
{
	const __m256i vnl = _mm256_set1_epi8('\n'), vc = _mm256_set1_epi8('C');
	const __m256i zero = _mm256_setzero_si256();
	size_t n = (size_t)(e - b), k = 0;
	unsigned after_nl = 1;   /* the chunk begins a line */

	while (k + 32 <= n) {
		__m256i acc = zero;
		size_t stop = k + 32 * 255 < n ? k + 32 * 255 : n;   /* byte counters hold 255 */
		for (; k + 32 <= stop; k += 32) {
			__m256i x = _mm256_loadu_si256((const __m256i *)(b + k));
			__m256i nl = _mm256_cmpeq_epi8(x, vnl);
			acc = _mm256_sub_epi8(acc, nl);
			/* only a C that begins a line (most are inside labels) */
			unsigned nlm = (unsigned)_mm256_movemask_epi8(nl);
			unsigned m = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, vc)) &
				     (nlm << 1 | after_nl);
			after_nl = nlm >> 31;
			while (m) {
				prefix_c_at(c, i, b, b + k + (unsigned)__builtin_ctz(m), e, cur, seen);
				m &= m - 1;
			}
		}
		__m256i sad = _mm256_sad_epu8(acc, zero);
		*lines += (uint64_t)_mm256_extract_epi64(sad, 0) + (uint64_t)_mm256_extract_epi64(sad, 1) +
			  (uint64_t)_mm256_extract_epi64(sad, 2) + (uint64_t)_mm256_extract_epi64(sad, 3);
	}
	return k;
}

static int have_avx2(void)
{
	static int usable = -1;
	int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);

	if (u < 0) {
		__builtin_cpu_init();
		u = __builtin_cpu_supports("avx2") ? 1 : 0;
		__atomic_store_n(&usable, u, __ATOMIC_RELAXED);
	}
	return u;
}
#define PREFIX_AVX2 1
#endif

/* Chunk I's lines and effect on the cycle, from its bytes at B (I: only 0 or not matters). */
static void prefix_scan(struct chunk *c, size_t i, const char *b)
{
	const char *e = b + c->len;
	size_t n = c->len, k = 0;
	uint64_t lines = 0;
	int64_t cur = 0;
	int seen = 0;

	c->add = 0;
	c->has_floor = 0;
#ifdef PREFIX_AVX2
	if (have_avx2())
		k = prefix_avx2(c, i, b, e, &lines, &cur, &seen);
#endif
#ifdef __SSE2__
	const __m128i vnl = _mm_set1_epi8('\n'), vc = _mm_set1_epi8('C'), zero = _mm_setzero_si128();
	while (k + 16 <= n) {
		__m128i acc = zero;
		size_t stop = k + 16 * 255 < n ? k + 16 * 255 : n;   /* byte counters hold 255 */
		for (; k + 16 <= stop; k += 16) {
			__m128i x = _mm_loadu_si128((const __m128i *)(b + k));
			acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(x, vnl));
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vc));
			while (m) {
				prefix_c_at(c, i, b, b + k + (unsigned)__builtin_ctz(m), e, &cur, &seen);
				m &= m - 1;
			}
		}
		__m128i sad = _mm_sad_epu8(acc, zero);
		lines += (uint64_t)_mm_cvtsi128_si32(sad) + (uint64_t)_mm_extract_epi16(sad, 4);
	}
#endif
	for (; k < n; k++) {
		if (b[k] == '\n')
			lines++;
		else if (b[k] == 'C')
			prefix_c_at(c, i, b, b + k, e, &cur, &seen);
	}
	c->lines = lines;
	c->end0 = cur;
	c->abs_end = i == 0;
}

static int prefix_work(void *ctx, size_t i)
{
	struct par *P = ctx;
	prefix_scan(&P->ch[i], i, P->data + P->ch[i].start);
	return 0;
}

/* The cycle after chunk C, from the cycle CUR before it. */
static int64_t chunk_after(const struct chunk *c, int64_t cur)
{
	if (c->abs_end)
		return c->end0;
	return c->has_floor && c->floor > cur + c->add ? c->floor : cur + c->add;
}

void kn_prefix_scan(const char *b, size_t n, int first, struct kn_prefix *pf)
{
	struct chunk c = { .len = n };

	prefix_scan(&c, first ? 0 : 1, b);
	*pf = (struct kn_prefix){ c.lines, c.add, c.floor, c.end0, c.has_floor, c.abs_end, c.first_op };
}

int64_t kn_prefix_after(const struct kn_prefix *pf, int64_t cur)
{
	struct chunk c = { .add = pf->add, .floor = pf->floor, .end0 = pf->end0,
			   .has_floor = pf->has_floor, .abs_end = pf->abs_end };
	return chunk_after(&c, cur);
}

#define FALLBACK 1

/* Chunk I's prefix is known: give every chunk whose predecessors are all known its start.
 * Under P->lock. */
static void advance(struct par *P);
static void advance_starts(struct par *P, size_t i)
{
	P->prefixed[i] = 1;
	advance(P);
}

/* (also when a stream's chunk is read: its start may be known already) */
static void advance(struct par *P)
{
	while (P->nstarts < P->n && P->prefixed[P->nstarts - 1]) {
		struct chunk *c = &P->ch[P->nstarts - 1];
		if (c->scanned && c->delta > INT64_MAX - c->add) {
			P->fallback = FALLBACK;   /* (its callers tell the waiting jobs) */
			return;
		}
		P->ch[P->nstarts].delta = c->scanned ? c->delta + c->add : 0;
		P->line += c->lines;
		P->cur = chunk_after(c, P->cur);
		P->ch[P->nstarts].start_cycle = P->cur;
		P->ch[P->nstarts].line_base = P->line;
		P->nstarts++;
	}
}

static struct stats_ctx *ctx_new(const struct tk_kanata_stats_opts *o, int *err);
static void ctx_free(struct stats_ctx *s);

/* Under P->lock: wait until chunk I's start is known; 0, or cancelled. */
static int wait_start(struct par *P, size_t i)
{
	while (P->nstarts <= i && !P->failed && !P->fallback)
		pthread_cond_wait(&P->started, &P->lock);
	return P->failed || P->fallback ? -TK_E_CANCELLED : 0;
}

/* A relative chunk whose start is now known: its cycles and lines made absolute, its
 * retirements put in windows (on a worker, or at the merge). */
static int chunk_rebase(struct par *P, struct chunk *c)
{
	struct stats_ctx *s = c->s;
	struct kn_state st;

	kn_reader_state(s->r, &st);
	if (c->start_cycle > 0 && st.cycle > KN_NUM_MAX - c->start_cycle) {
		/* -j 1 would have skipped a C beyond the limit somewhere in it */
		pthread_mutex_lock(&P->lock);
		P->fallback = FALLBACK;
		pthread_cond_broadcast(&P->started);
		pthread_mutex_unlock(&P->lock);
		return -TK_E_CANCELLED;
	}
	kn_reader_rebase(s->r, c->start_cycle, c->line_base);
	s->rel = 0;
	s->first_cycle = P->first_cycle;
	for (size_t k = 0; k < s->nruns; k++)
		win_add(s, s->runs[k].cycle + c->start_cycle, s->runs[k].n);
	s->nruns = 0;
	for (size_t k = 0; k < s->nslow; k++) {
		s->heap[k].begin += c->start_cycle;
		s->heap[k].end += c->start_cycle;
	}
	for (size_t k = 0; c->diags && k < c->diags->n; k++)
		c->diags->v[k].d.line += c->line_base;
	for (size_t k = 0; c->diags && k < c->diags->all.n; k++)
		c->diags->all.v[k].d.line += c->line_base;
	if (c->diags && c->diags->more[0] + c->diags->more[1])
		c->diags->more_line += c->line_base;
	s->last_rid_line += s->have_rid ? c->line_base : 0;
	return s->err;
}

/* The reader met a line that needs its chunk's absolute cycle. */
static int on_resolve(void *ctx)
{
	struct stats_ctx *s = ctx;
	struct par *P = s->par;

	pthread_mutex_lock(&P->lock);
	int rc = wait_start(P, s->chunk_i);
	pthread_mutex_unlock(&P->lock);
	return rc < 0 ? rc : chunk_rebase(P, &P->ch[s->chunk_i]);
}

/* Chunk C into reader R: from the mapping, its pages given back once read, as -j 1 reads
 * the file (where a fault-around of 16 pages costs 1-2 us, the mapping beats reading each
 * chunk with pread into a buffer, whose copy was 5 % of `report -j 2`: docs/PERFORMANCE.md,
 * session 75), or from the buffer its bytes were read into (a compressed log). */
static void chunk_buf_give(struct par *P, struct chunk *c);

static int feed_chunk(struct par *P, struct chunk *c, struct tk_kanata_reader *r)
{
	int rc;

	if (c->buf) {
		rc = tk_kanata_reader_feed(r, c->buf, c->len, 0);
		if (!P->dec)   /* (a decode keeps the bytes until the merge: decode_streamed) */
			chunk_buf_give(P, c);
		return rc;
	}
	rc = tk_kanata_reader_feed(r, P->data + c->start, c->len, 0);
	drop_pages(P, P->data + c->start, c->len);
	return rc;
}

/* Chunk I parsed: from its start if known (the run's first chunk), else relative to it. */
static int parse_chunk(struct par *P, struct chunk *c, size_t i)
{
	int rc;

	c->s = P->dec ? ctx_decoding(P->o, NULL, &rc) : ctx_new(P->o, &rc);
	/* (a decoding chunk's diagnostics go to its decoder: its gaps) */
	c->diags = P->dec ? NULL : calloc(1, sizeof *c->diags);
	if (!c->s || (!P->dec && !c->diags))
		return c->s ? -TK_E_NOMEM : rc;
	pthread_mutex_lock(&P->lock);   /* (parse_chunk runs in par_run only) */
	if (P->nspare_ids)
		kn_reader_swap_ids(c->s->r, &P->spare_ids[--P->nspare_ids]);
	if (c->s->dec) {
		if (P->nspare_ev)
			kn_decoder_swap_held(c->s->dec, &P->spare_ev[--P->nspare_ev]);
		kn_reader_seed_names(c->s->r, P->seed_lanes, P->nseed_lanes, P->seed_stages,
				     P->nseed_stages);
	}
	pthread_mutex_unlock(&P->lock);
	/* a fresh decoder's room for the chunk's events made at once (an event for every 4
	 * bytes of log, more than logs make; past that it grows): on huge pages only what
	 * they fill is faulted in, where doubling from 4,096 events copied 15 MB into fresh
	 * pages for each of the first chunks */
	/* (the first chunk's events kept: a sink that has seen nothing yet refuses it, and
	 * parsing it again would cost more) */
	int keep = c->keep_events || i == 0;
	if (c->s->dec && (rc = kn_decoder_reserve(c->s->dec, P->dec, c->len / 4, keep)) < 0)
		return rc;
	struct stats_ctx *s = c->s;
	s->keep = c->diags;
	if (i == P->first || c->scanned) {
		/* chunk 0 finds the first cycle itself; a shard's first chunk has it scanned */
		s->cycle_seen = i > 0;
		s->first_cycle = i > 0 ? P->first_cycle : 0;
		kn_reader_chunk_begin(s->r, i == 0, c->start_cycle, c->line_base, c->start);
		if (c->scanned) {
			kn_reader_chunk_delta_sum(s->r, c->delta);
			kn_decoder_chunk_begin(P->dec, s->dec, P->first_cycle, keep);
		}
	} else {
		s->cycle_seen = 1;
		s->rel = 1;
		s->par = P;
		s->chunk_i = i;
		kn_reader_chunk_begin(s->r, 0, 0, 0, c->start);
		kn_reader_set_relative(s->r, on_resolve, s);
	}
	rc = feed_chunk(P, c, s->r);
	/* (a decode's stream may end in a cut: its last chunk's last line is cut short, as
	 * the reading in order says it) */
	if (rc >= 0 && P->stream && c->last && tk_input_cut_found(P->stream))
		kn_reader_cut_short(s->r);
	if (!c->scanned)   /* (a scanned chunk's are the later chunks' now: P->lock) */
		c->lines = kn_reader_lines(s->r) - (s->rel ? 0 : c->line_base);
	if (rc >= 0 && (P->stream ? c->last : i + 1 == P->n))
		rc = tk_kanata_reader_feed(s->r, NULL, 0, 1);
	if (s->dec) {
		kn_decoder_chunk_parsed(s->dec);   /* (another thread may settle or merge it) */
		if (rc >= 0)
			rc = kn_decoder_error(s->dec);
	}
	if (rc < 0)
		return rc;
	struct kn_state st;
	kn_reader_state(s->r, &st);
	if (s->dec && i == 0) {   /* (the statistics' on_cmd, by the reader's same rule) */
		s->cycle_seen = st.seen_cycle;
		s->first_cycle = tk_kanata_reader_counts(s->r)->first_cycle;
	}
	if (!c->scanned) {
		c->abs_end = !s->rel;
		c->end0 = c->add = st.cycle;
		c->has_floor = 0;
	}
	return 0;
}

/* Chunk C parsed, its start known: a relative chunk's cycles made absolute (the
 * statistics'), a decoding chunk's last events prepared. */
static int chunk_settle(struct par *P, struct chunk *c)
{
	int rc = c->s->rel ? chunk_rebase(P, c) : 0;
	if (rc >= 0 && c->s->dec)
		kn_decoder_chunk_done(c->s->dec);
	return rc;
}

/* After chunk I's job: the chunks after it parsed before their start was known, and
 * known now, settled here rather than on the calling thread at their merge. (Their merge
 * comes after I's, which waits for this job; a chunk is claimed under the lock.) */
static int catch_up(struct par *P, size_t i)
{
	for (;;) {
		size_t j;
		pthread_mutex_lock(&P->lock);
		for (j = i + 1; j < P->nstarts && !P->ch[j].late; j++)
			;
		int stop = j >= P->nstarts || P->failed || P->fallback;
		if (!stop)
			P->ch[j].late = 0;
		pthread_mutex_unlock(&P->lock);
		if (stop)
			return 0;
		int rc = chunk_settle(P, &P->ch[j]);
		if (rc < 0)
			return rc;
	}
}

/* A decode's chunk I scanned for its lines and effect on the cycle before its parse, then
 * its start awaited (the scans of the chunks before it, each the first thing its job does).
 * Parsed from its start, a chunk makes its events as times and the sink prepares them in
 * blocks while they are in the cache; parsed before its start is known, it held them and
 * read them back from the L3 (report -j 2: 3.5 % of the samples). A scan that is wrong
 * about a chunk's end (a C the parse skips) is found at the next chunk's merge, which then
 * reads on in order. */
static int scan_ahead(struct par *P, struct chunk *c, size_t i)
{
	prefix_scan(c, i, c->buf ? c->buf : P->data + c->start);
	pthread_mutex_lock(&P->lock);
	c->scanned = 1;
	if (i == 0) {   /* (as par_run takes a shard's from chunk 0's scan) */
		P->first_cycle = c->first_op == 2 ? c->first_set : 0;
		if (!c->first_op)
			P->fallback = FALLBACK;
	}
	advance_starts(P, i);
	pthread_cond_broadcast(&P->started);
	int rc = wait_start(P, i);
	pthread_mutex_unlock(&P->lock);
	return rc;
}

static int parse_work(void *ctx, size_t i)
{
	struct par *P = ctx;
	struct chunk *c = &P->ch[i];
	int rc = P->dec && !P->save ? scan_ahead(P, c, i) : 0, known;

	if (rc >= 0)
		rc = parse_chunk(P, c, i);
	pthread_mutex_lock(&P->lock);
	if (rc >= 0 && i == 0 && c->scanned) {
		/* the later chunks' times count from the scan's first cycle */
		if (!c->s->cycle_seen || P->first_cycle != c->s->first_cycle)
			P->fallback = FALLBACK, rc = -TK_E_CANCELLED;
	} else if (rc >= 0 && i == 0) {
		/* the file's first cycle comes from its first C or C= line; a first chunk without
		 * one (megabytes without a cycle) is rare enough to read the file in order */
		P->first_cycle = c->s->first_cycle;
		if (!c->s->cycle_seen)
			P->fallback = FALLBACK, rc = -TK_E_CANCELLED;
	}
	if (rc >= 0)
		advance_starts(P, i);
	else if (!P->fallback)
		P->failed = 1;
	known = P->nstarts > i;
	pthread_cond_broadcast(&P->started);
	pthread_mutex_unlock(&P->lock);
	/* rebased here if the start is known already, else by a later job or at the merge */
	if (rc >= 0 && known)
		rc = chunk_settle(P, c);
	else if (rc >= 0) {
		pthread_mutex_lock(&P->lock);
		c->late = 1;
		pthread_mutex_unlock(&P->lock);
	}
	if (rc >= 0)
		rc = catch_up(P, i);
	return rc;
}

static void hist_merge(struct stats_ctx *g, struct hist *into, const struct hist *from)
{
	if (!from->count)
		return;
	if (!into->bins && !(into->bins = calloc(HIST_BUCKETS, sizeof *into->bins))) {
		g->err = -TK_E_NOMEM;
		return;
	}
	into->count += from->count;
	into->sum += from->sum;
	if (from->max > into->max)
		into->max = from->max;
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		into->bins[b] += from->bins[b];
}

static void deliver_sorted(struct par *P, const struct kept_diags *a, const struct kept_diags *b)
{
	size_t i = 0, j = 0, na = kept_count(a), nb = kept_count(b);
	struct tk_kanata_diag ta, tb;
	while (i < na || j < nb) {
		const struct tk_kanata_diag *da = i < na ? kept_at(a, i, &ta) : NULL;
		const struct tk_kanata_diag *db = j < nb ? kept_at(b, j, &tb) : NULL;
		const struct tk_kanata_diag *d;
		if (!db || (da && da->line <= db->line))
			d = da, i++;
		else
			d = db, j++;
		if (P->o->diag)
			P->o->diag(P->o->ctx, d);
	}
	for (int lvl = TK_LOG_ERROR; lvl <= TK_LOG_WARN; lvl++)
		for (const struct kept_diags *k = a; k; k = k == a ? b : NULL)
			for (uint64_t n = 0; P->o->diag && n < k->more[lvl]; n++) {
				struct tk_kanata_diag d = { .level = (enum tk_log_level)lvl,
							    .line = k->more_line,
							    .msg = "(not kept: over 256 in one parallel chunk)" };
				P->o->diag(P->o->ctx, &d);
			}
}

static const struct kept_diags no_diags;

/* The diagnostics held while a stream was read, delivered in order. */
static void flush_held(struct par *P)
{
	for (size_t k = 0; k < P->nheld; k++) {
		struct held_diags *h = &P->held[k];
		deliver_sorted(P, h->diags ? h->diags : &no_diags, h->replay ? h->replay : &no_diags);
		P->delivered_upto = h->upto;
		kept_free(h->diags);
		kept_free(h->replay);
	}
	P->nheld = 0;
}

/* Merged chunk C's diagnostics (its own and the replayed commands'): delivered, or held
 * while a stream is read that may still be cut (par.held). */
static int deliver_or_hold(struct par *P, struct chunk *c)
{
	uint64_t upto = c->line_base + c->lines;
	int hold = 0;

	if (P->stream) {
		pthread_mutex_lock(&P->lock);
		hold = !P->read_end;
		pthread_mutex_unlock(&P->lock);
		if (!hold)
			flush_held(P);
	}
	if (!hold) {
		deliver_sorted(P, c->diags, &P->replay);
		P->delivered_upto = upto;
		return 0;
	}
	struct held_diags h = { NULL, NULL, upto };
	if (kept_count(c->diags) || c->diags->more[0] + c->diags->more[1]) {
		h.diags = c->diags;
		c->diags = NULL;
	}
	if (kept_count(&P->replay) || P->replay.more[0] + P->replay.more[1]) {
		if (!(h.replay = malloc(sizeof *h.replay)))
			return -TK_E_NOMEM;
		*h.replay = P->replay;
		memset(&P->replay, 0, sizeof P->replay);
	}
	if (!h.diags && !h.replay)
		return 0;   /* (nothing to show: its lines need no holding) */
	if (P->nheld == P->capheld) {
		size_t cap = P->capheld ? 2 * P->capheld : 16;
		void *v = realloc(P->held, cap * sizeof *P->held);
		if (!v) {
			kept_free(h.diags);
			kept_free(h.replay);
			return -TK_E_NOMEM;
		}
		P->held = v;
		P->capheld = cap;
	}
	P->held[P->nheld++] = h;
	return 0;
}

/* The merged chunk reader CR's list of ids kept for a chunk to come. */
static void spare_ids(struct par *P, struct tk_kanata_reader *cr)
{
	if (!P->pooled)
		return;
	pthread_mutex_lock(&P->lock);
	if (P->nspare_ids < sizeof P->spare_ids / sizeof P->spare_ids[0])
		kn_reader_swap_ids(cr, &P->spare_ids[P->nspare_ids++]);
	pthread_mutex_unlock(&P->lock);
}

/* Decoding chunk I before its merge: its last events prepared, and where it kept none of
 * them but the merge needs them after all (kn_decoder_take_begin: a report refuses a
 * chunk while it has seen too few instructions, or names would be numbered anew), parsed
 * again here, keeping them. */
static int take_begin(struct par *P, struct chunk *c, size_t i)
{
	kn_decoder_chunk_done(c->s->dec);   /* (if its worker did not) */
	int rc = kn_decoder_take_begin(P->dec, c->s->dec);
	if (rc <= 0)
		return rc;
	ctx_free(c->s);
	c->s = NULL;
	c->keep_events = 1;
	rc = parse_chunk(P, c, i);
	c->keep_events = 0;
	if (rc >= 0)
		kn_decoder_chunk_done(c->s->dec);
	return rc;
}

/* Chunk I (C: its parse, made here or loaded from a shard's bytes) into the total. */
static int merge_one(struct par *P, struct chunk *c, size_t i)
{
	struct stats_ctx *g = P->g, *s = c->s;
	struct tk_kanata_reader *cr = s->r;
	struct kn_state st;
	size_t n;
	int rc;

	if (s->err)   /* (no memory for a diagnostic after the chunk's last command) */
		return s->err;
	if (i == 0) {
		g->first_cycle = s->first_cycle;
		/* parsed on the pool, parse_work set it already (under P->lock, where workers
		 * read it): stored again, the same value was a data race all the same */
		if (P->first_cycle != s->first_cycle)
			P->first_cycle = s->first_cycle;
	}
	/* the previous chunk must have ended in the state this one assumed */
	kn_reader_state(g->r, &st);
	if (i > 0 && (st.cycle != c->start_cycle || !st.seen_header || !st.seen_cycle || !st.seen_any))
		return P->fallback = FALLBACK, -TK_E_CANCELLED;
	/* ... and a scanned one its sum of C deltas and lines (the scan does not know that the
	 * reader skips a C taking the sum past the limit) */
	if (i > 0 && c->scanned && (kn_reader_delta_sum(g->r) != c->delta ||
				    kn_reader_lines(g->r) != c->line_base))
		return P->fallback = FALLBACK, -TK_E_CANCELLED;
	if (kn_reader_seen_any(g->r, cr))
		return P->fallback = FALLBACK, -TK_E_CANCELLED;  /* id reused across chunks */
	if (kn_reader_nstages(cr) >= 1024)
		return P->fallback = FALLBACK, -TK_E_CANCELLED;
	if (P->dec && (rc = take_begin(P, c, i)) < 0)
		return rc;
	s = c->s;
	cr = s->r;
	kn_reader_merge_names(g->r, cr, P->lane_map, P->stage_map);
	if (P->dec) {
		/* the events, the replayed commands' among them, then the chunk's instructions
		 * still in flight */
		if ((rc = kn_decoder_merge(P->dec, s->dec, P->lane_map, P->stage_map)) < 0 ||
		    (rc = kn_reader_adopt(g->r, cr, P->lane_map, P->stage_map)) < 0)
			return rc;
		kn_reader_add_counts(g->r, cr, c->line_base, c->start, c->scanned ? c->delta : 0);
		P->merged = i + 1;
		if (c->buf)
			chunk_buf_give(P, c);
		pthread_mutex_lock(&P->lock);
		if (P->nspare_ev < sizeof P->spare_ev / sizeof P->spare_ev[0])
			kn_decoder_swap_held(s->dec, &P->spare_ev[P->nspare_ev++]);
		for (; P->nseed_lanes < kn_reader_nlanes(g->r); P->nseed_lanes++)
			P->seed_lanes[P->nseed_lanes] = *kn_reader_lane(g->r, P->nseed_lanes);
		for (; P->nseed_stages < kn_reader_nstages(g->r); P->nseed_stages++)
			P->seed_stages[P->nseed_stages] = *kn_reader_stage(g->r, P->nseed_stages);
		pthread_mutex_unlock(&P->lock);
		spare_ids(P, cr);
		ctx_free(s);
		kept_free(c->diags);
		c->s = NULL;
		c->diags = NULL;
		return 0;
	}

	P->replay.n = P->replay.all.n = P->replay.all.ntext = 0;
	g->keep = &P->replay;
	const struct kn_frag *f = kn_reader_frags(cr, &n);
	for (size_t k = 0; k < n; k++)
		if ((rc = kn_reader_replay(g->r, &f[k], P->lane_map, cr)) < 0)
			return rc;
	g->keep = NULL;
	if ((rc = kn_reader_adopt(g->r, cr, P->lane_map, P->stage_map)) < 0)
		return rc;

	/* statistics of the chunk's own instructions */
	for (size_t k = 0; k < kn_reader_nstages(cr); k++)
		hist_merge(g, &g->stage[P->stage_map[k]], &s->stage[k]);
	hist_merge(g, &g->insn, &s->insn);
	for (size_t k = 0; k < s->nthreads; k++) {
		struct tk_kanata_thread_stats *t = thread_of(g, s->threads[k].thread);
		if (t) {
			t->insns += s->threads[k].insns;
			t->retired += s->threads[k].retired;
			t->flushed += s->threads[k].flushed;
		}
	}
	if (s->nwin) {
		if (s->nwin > g->cap_win) {
			uint64_t *p = realloc(g->win, s->nwin * sizeof *p);
			if (!p)
				return -TK_E_NOMEM;
			memset(p + g->cap_win, 0, (s->nwin - g->cap_win) * sizeof *p);
			g->win = p;
			g->cap_win = s->nwin;
		}
		for (size_t k = 0; k < s->nwin; k++)
			g->win[k] += s->win[k];
		if (s->nwin > g->nwin)
			g->nwin = s->nwin;
	}
	g->windows_dropped += s->windows_dropped;
	for (size_t k = 0; k < s->nslow; k++)
		slow_offer_entry(g, &s->heap[k]);
	if (s->have_rid && (!g->have_rid || s->last_rid_line > g->last_rid_line)) {
		g->last_rid = s->last_rid;
		g->last_rid_line = s->last_rid_line;
		g->have_rid = 1;
	}
	kn_reader_add_counts(g->r, cr, c->line_base, c->start, 0);
	if ((rc = deliver_or_hold(P, c)) < 0)
		return rc;
	spare_ids(P, cr);
	ctx_free(s);
	kept_free(c->diags);
	c->s = NULL;
	c->diags = NULL;
	return g->err;
}

static int chunk_save(struct par *P, const struct chunk *c, size_t i);

/* ---- a compressed file's chunks read in turn ------------------------------------------ */

#define STREAM_STEP ((size_t)64 << 10)
#define PAR_DONE 1000   /* (a merge past the stream's last chunk stops the pool: -PAR_DONE) */

/* WANT more bytes of the stream onto *B (*N of them, room for *CAP, grown): how many it
 * gave (0 at its end), or an error. */
static long stream_more(struct par *P, char **b, size_t *n, size_t *cap, size_t want)
{
	if (*cap - *n < want) {
		size_t nc = *cap ? *cap : want;
		while (nc - *n < want)
			nc *= 2;
		char *nb = realloc(*b, nc);
		if (!nb)
			return -TK_E_NOMEM;
		*b = nb;
		*cap = nc;
	}
	long got = tk_input_read(P->stream, *b + *n, want);
	if (got > 0)
		*n += (size_t)got;
	return got;
}

/* A buffer for a stream's chunk (*CAP bytes): a spare one (its pages faulted in already:
 * fresh 8 MB ones cost -j 2 a fifth more system time than -j 1), or a new one, on huge
 * pages (on small ones, `stats -j 2` of a gzipped log faulted 6,000 times to -j 1's 1,000). */
static char *chunk_buf_take(struct par *P, size_t *cap)
{
	char *b = NULL;

	pthread_mutex_lock(&P->lock);
	if (P->nsbuf) {
		b = P->sbuf[--P->nsbuf];
		*cap = P->sbuf_cap[P->nsbuf];
	}
	pthread_mutex_unlock(&P->lock);
	if (!b && (b = tk_malloc_huge(P->bytes + 2 * STREAM_STEP)))
		*cap = P->bytes + 2 * STREAM_STEP;
	return b;
}

/* Chunk C's buffer, parsed, to the spares. */
static void chunk_buf_give(struct par *P, struct chunk *c)
{
	pthread_mutex_lock(&P->lock);
	if (P->nsbuf < sizeof P->sbuf / sizeof P->sbuf[0]) {
		P->sbuf[P->nsbuf] = c->buf;
		P->sbuf_cap[P->nsbuf++] = c->cap;
		c->buf = NULL;
	}
	pthread_mutex_unlock(&P->lock);
	free(c->buf);
	c->buf = NULL;
}

/* Chunk I's bytes off the stream, its turn come: to the end of the first line past
 * P->bytes, as kn_line_seam_by cuts a file, the bytes after it kept (P->carry) for the
 * next chunk. 1 when read, 0 when the stream had ended before it, or an error. */
static int stream_chunk(struct par *P, size_t i)
{
	size_t n = P->ncarry, cap = 0;
	char *b = chunk_buf_take(P, &cap);
	long got = 1;

	if (!b)
		return -TK_E_NOMEM;
	if (n)   /* (a carry is STREAM_STEP at most) */
		memcpy(b, P->carry, n);
	P->ncarry = 0;
	while (n < P->bytes && (got = stream_more(P, &b, &n, &cap, P->bytes - n)) > 0)
		;
	size_t end = n, from = n < P->bytes ? n : P->bytes;
	while (got > 0) {   /* (the stream may go on) */
		const char *nl = memchr(b + from, '\n', n - from);
		if (nl) {
			end = (size_t)(nl - b) + 1;
			break;
		}
		from = n;
		got = stream_more(P, &b, &n, &cap, STREAM_STEP);
		end = n;
	}
	if (got >= 0 && end < n) {
		size_t k = n - end;   /* (at most what the last read gave) */
		char *nb = k > P->capcarry ? realloc(P->carry, k) : P->carry;
		if (!nb) {
			got = -TK_E_NOMEM;
		} else {
			P->carry = nb;
			P->capcarry = k > P->capcarry ? k : P->capcarry;
			memcpy(P->carry, b + end, P->ncarry = k);
		}
	} else if (got > 0) {   /* whether anything follows: the last chunk ends the log */
		got = stream_more(P, &P->carry, &P->ncarry, &P->capcarry, STREAM_STEP);
	}
	struct chunk *c = &P->ch[i];
	c->buf = b;
	c->cap = cap;
	if (got < 0 || !end) {
		chunk_buf_give(P, c);
		return got < 0 ? (int)got : 0;
	}
	c->start = P->read_pos;
	c->len = end;
	c->last = !P->ncarry;
	P->read_pos += end;
	return 1;
}

/* Job I of a stream: its chunk read in turn (none past the stream's end), then parsed. */
static int stream_job(struct par *P, size_t i)
{
	pthread_mutex_lock(&P->lock);
	while (P->turn != i && !P->failed && !P->fallback)
		pthread_cond_wait(&P->started, &P->lock);
	int stop = P->failed || P->fallback, over = P->read_end;
	pthread_mutex_unlock(&P->lock);
	int rc = stop ? -TK_E_CANCELLED : over ? 0 : stream_chunk(P, i);

	pthread_mutex_lock(&P->lock);
	if (rc > 0) {
		P->n = i + 1;
		advance(P);
	}
	if (rc >= 0 && tk_input_cut_found(P->stream) && !P->dec) {
		/* a cut: the statistics are read again in order, which tells it in its place
		 * (a decode tells no line's diagnostics as it goes: its last chunk ends there) */
		P->fallback = FALLBACK;
		rc = -TK_E_CANCELLED;
	} else if (rc == 0 || (rc > 0 && P->ch[i].last)) {
		P->read_end = 1;
	} else if (rc < 0 && !P->fallback) {
		P->failed = 1;
	}
	if (P->turn < i + 1)
		P->turn = i + 1;
	pthread_cond_broadcast(&P->started);
	pthread_mutex_unlock(&P->lock);
	return rc > 0 ? parse_work(P, i) : rc;
}

/* The pool's jobs are the chunks from P->first on. */
static int parse_job(void *ctx, size_t k)
{
	struct par *P = ctx;
	return P->stream ? stream_job(P, k) : parse_work(P, P->first + k);
}

static int merge_job(void *ctx, size_t k)
{
	struct par *P = ctx;
	size_t i = P->first + k;
	struct chunk *c = &P->ch[i];

	if (P->stream) {
		pthread_mutex_lock(&P->lock);
		int past = i >= P->n;   /* (its job found the stream ended) */
		pthread_mutex_unlock(&P->lock);
		if (past)
			return -PAR_DONE;
	}
	int rc = c->s && c->s->rel ? chunk_rebase(P, c) : 0;

	if (rc >= 0)
		rc = P->save ? chunk_save(P, c, i) : merge_one(P, c, i);

	if (P->o->progress && !P->stream)   /* (a stream's reads show the file's progress) */
		tk_progress_set(P->o->progress, c->start + c->len);

	if (P->save) {
		ctx_free(c->s);
		kept_free(c->diags);
		c->s = NULL;
		c->diags = NULL;
	}
	return rc;
}

static int prefix_job(void *ctx, size_t i)
{
	struct par *P = ctx;
	prefix_work(P, i);
	drop_pages(P, P->data + P->ch[i].start, P->ch[i].len);
	return 0;
}

static void par_free(struct par *P)
{
	if (!P)
		return;
	for (size_t i = 0; i < P->n; i++) {
		if (P->ch[i].s)
			ctx_free(P->ch[i].s);
		kept_free(P->ch[i].diags);
		free(P->ch[i].buf);
	}
	for (size_t k = 0; k < P->nheld; k++) {
		kept_free(P->held[k].diags);
		kept_free(P->held[k].replay);
	}
	free(P->held);
	free(P->carry);
	for (size_t k = 0; k < P->nsbuf; k++)
		free(P->sbuf[k]);
	if (P->g)
		ctx_free(P->g);
	kn_diags_free(&P->replay.all);
	for (size_t i = 0; i < P->nspare_ev; i++)
		tk_event_vec_free(&P->spare_ev[i]);
	for (size_t i = 0; i < P->nspare_ids; i++)
		free(P->spare_ids[i].v);
	free(P->prefixed);
	free(P->ch);
	free(P);
}

/* A run of at most NMAX chunks and the total that merges them. */
static struct par *par_alloc(size_t nmax, struct tk_kanata_stats_opts *o,
			     struct tk_kanata_decoder *dec, int *rc)
{
	struct par *P = calloc(1, sizeof *P);

	if (!P || !(P->ch = calloc(nmax, sizeof *P->ch)) || !(P->prefixed = calloc(nmax, 1))) {
		par_free(P);
		*rc = -TK_E_NOMEM;
		return NULL;
	}
	P->o = o;
	P->nstarts = 1;
	P->dec = dec;
	if (!(P->g = dec ? ctx_decoding(o, dec, rc) : ctx_new(o, rc))) {
		par_free(P);
		return NULL;
	}
	P->g->cycle_seen = 1;
	return P;
}

/* The chunks of DATA at line seams every BYTES (0: the default) and the total that merges
 * them. */
static struct par *par_new(const char *data, size_t len, struct tk_input *in, size_t bytes,
			   struct tk_kanata_stats_opts *o, struct tk_kanata_decoder *dec, int *rc)
{
	bytes = bytes ? bytes : CHUNK_BYTES;
	struct par *P = par_alloc(len / bytes + 2, o, dec, rc);

	if (!P)
		return NULL;
	P->data = data;
	P->len = len;
	P->in = in && !tk_input_is_pipe(in) ? in : NULL;   /* (a pipe's bytes: anonymous memory) */
	for (size_t pos = 0; pos < len;) {
		size_t end = kn_line_seam_in(in, data, len, pos, bytes);
		P->ch[P->n].start = pos;
		P->ch[P->n].len = end - pos;
		P->n++;
		pos = end;
	}
	P->count = P->n;
	return P;
}

/* Parse chunks [P->first, P->first + P->count) in parallel, each merged (or saved) in order;
 * the chunks before them only scanned for their cycle and line counts. */
static int par_run(struct par *P)
{
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = P->o->jobs };
	int rc = 0;

	pthread_mutex_init(&P->lock, NULL);
	pthread_cond_init(&P->started, NULL);
	P->pooled = 1;
	if (P->first)
		rc = tk_pool_run(&po, P->first, prefix_job, NULL, P);
	for (size_t i = 0; rc >= 0 && i < P->first; i++)
		advance_starts(P, i);
	if (rc >= 0 && P->first) {
		/* the first cycle as chunk 0 sets it (its first C or C= line) */
		const struct chunk *c0 = &P->ch[0];
		P->first_cycle = c0->first_op == 2 ? c0->first_set : 0;
		if (!c0->first_op)
			P->fallback = FALLBACK, rc = -TK_E_CANCELLED;
	}
	/* (a chunk waits only for the starts of the chunks before it, never for a merge: the
	 * calling thread may parse too, one thread fewer on the cores) */
	po.caller_works = 1;
	if (rc >= 0)
		rc = tk_pool_run(&po, P->count, parse_job, merge_job, P);
	if (rc == -PAR_DONE)
		rc = 0;
	P->pooled = 0;
	pthread_mutex_destroy(&P->lock);
	pthread_cond_destroy(&P->started);
	return rc;
}

/* The total after its last chunk: the statistics, or P->fallback. */
static int par_finish(struct par *P, struct tk_kanata_stats *st)
{
	kn_reader_finish(P->g->r);
	if (tk_kanata_reader_counts(P->g->r)->first_cycle != P->first_cycle) {
		P->fallback = FALLBACK;
		return 0;
	}
	return finish(P->g, st);
}

static int stats_parallel(const char *data, size_t len, struct tk_input *in,
			  struct tk_kanata_stats_opts *o, struct tk_kanata_stats *st, int *fell_back,
			  uint64_t *delivered)
{
	int rc;
	struct par *P = par_new(data, len, in, o->chunk_bytes, o, NULL, &rc);

	if (!P)
		return rc;
	if ((rc = par_run(P)) >= 0)
		rc = par_finish(P, st);
	*fell_back = P->fallback;
	*delivered = P->delivered_upto;
	if (P->fallback)
		rc = 0;
	par_free(P);
	return rc;
}

static int stats_in_order(const struct tk_kanata_stats_opts *o, struct tk_input *in,
			  const char *data, size_t len, uint64_t delivered, struct tk_kanata_stats *st);

/* The most chunks a compressed file of RAW bytes can hold, or 0 when too many to plan for:
 * deflate gives at most 1032 bytes a byte, zstd 32768 (a block of one byte's repeats). */
static size_t stream_chunks_max(const struct tk_input *in, size_t bytes)
{
	uint64_t raw = tk_input_file_size(in);
	uint64_t ratio = tk_input_compression(in) == TK_COMP_GZIP ? 1032 : 32768;
	uint64_t most = raw > UINT64_MAX / ratio ? UINT64_MAX : raw * ratio / bytes + 2;
	return most > ((uint64_t)1 << 24) ? 0 : (size_t)most + 2;
}

/* Whether IN is a compressed regular file worth reading in chunks in turn on JOBS threads
 * (stats_streamed): one of at least a chunk's size compressed. */
static int stream_worth(struct tk_input *in, unsigned jobs, size_t bytes)
{
	bytes = bytes ? bytes : CHUNK_BYTES;
	return jobs > 1 && tk_input_compression(in) != TK_COMP_NONE && !tk_input_is_pipe(in) &&
	       tk_input_file_size(in) >= bytes && stream_chunks_max(in, bytes);
}

/* The chunks of the compressed file IN (stream_worth) read off its stream in turn by their
 * jobs and parsed at once (into DEC's sink when not NULL), the cut a read finds held:
 * the run, its fallback set where the stream was not read to its end (nothing
 * decompressed, or more chunks than planned for), or NULL (*RC, the hold let go). */
static struct par *stream_run(struct tk_input *in, struct tk_kanata_stats_opts *o,
			      struct tk_kanata_decoder *dec, size_t bytes, int *rc)
{
	tk_input_read_ahead(in, 0);   /* (the jobs decompress) */
	tk_input_hold_cut(in, 1);
	struct par *P = par_alloc(stream_chunks_max(in, bytes), o, dec, rc);
	if (!P) {
		tk_input_hold_cut(in, 0);
		return NULL;
	}
	P->stream = in;
	P->bytes = bytes;
	P->count = stream_chunks_max(in, bytes) - 2;
	*rc = par_run(P);
	if (*rc >= 0 && !P->fallback && (!P->n || !P->read_end))
		P->fallback = FALLBACK;
	return P;
}

/* The statistics of a compressed file, its chunks read off the stream in turn by their
 * jobs and parsed at once: the decompression in order takes a fraction of each job (a
 * third of the parse's time with ISA-L), not a thread that the parse waits for. What
 * breaks the split, or a cut, reads the file again in order. */
static int stats_streamed(struct tk_input *in, struct tk_kanata_stats_opts *o,
			  struct tk_kanata_stats *st)
{
	size_t bytes = o->chunk_bytes ? o->chunk_bytes : CHUNK_BYTES;
	int rc;
	struct par *P = stream_run(in, o, NULL, bytes, &rc);

	if (!P)
		return rc;
	/* (a fallback: read in order, the reading in order saying why) */
	if (rc >= 0 && !P->fallback) {
		flush_held(P);
		rc = par_finish(P, st);
	}
	int fell_back = P->fallback;
	uint64_t delivered = P->delivered_upto;
	par_free(P);
	tk_input_hold_cut(in, 0);
	if (!fell_back)
		return rc;
	tk_kanata_stats_free(st);
	memset(st, 0, sizeof *st);
	if ((rc = tk_input_rewind(in)) < 0)
		return rc;
	return stats_in_order(o, in, NULL, 0, delivered, st);
}

/* The statistics of the whole input read in order (DATA, or IN when DATA is NULL), the
 * diagnostics of lines up to DELIVERED not shown again. */
static int stats_in_order(const struct tk_kanata_stats_opts *o, struct tk_input *in,
			  const char *data, size_t len, uint64_t delivered, struct tk_kanata_stats *st)
{
	int rc;
	struct stats_ctx *s = ctx_new(o, &rc);

	if (!s)
		return rc;
	s->suppress_upto = delivered;
	rc = data ? tk_kanata_reader_feed(s->r, data, len, 1) : tk_kanata_reader_run(s->r, in);
	if (rc >= 0)
		rc = finish(s, st);
	ctx_free(s);
	return rc;
}

/* Whether IN is worth parsing in chunks of BYTES (0: the statistics' size) on JOBS
 * threads: a plain file of two chunks or more. */
static int parallel_worth(struct tk_input *in, unsigned jobs, size_t bytes)
{
	return jobs > 1 && tk_input_compression(in) == TK_COMP_NONE &&
	       tk_input_file_size(in) >= 2 * (bytes ? bytes : CHUNK_BYTES);
}

/* The log DATA[0..LEN) (the mapping of IN, or a buffer when IN is NULL) decoded in
 * chunks into D's sink. */
static int decode_parallel(struct tk_kanata_decoder *d, const char *data, size_t len,
			   struct tk_input *in, unsigned jobs, size_t bytes,
			   struct tk_progress *progress)
{
	struct tk_kanata_stats_opts o = { .sz = sizeof o, .jobs = jobs, .chunk_bytes = bytes,
					  .progress = progress };
	int rc;
	struct par *P = par_new(data, len, in, bytes, &o, d, &rc);

	if (!P)
		return rc;
	rc = par_run(P);
	if (P->fallback) {
		/* the log breaks an assumption of the split from chunk MERGED on (an id reused
		 * across chunks, an unusual C=): the rest read in order */
		size_t at = P->merged < P->n ? P->ch[P->merged].start : len;
		rc = kn_decoder_feed(d, data + at, len - at, 1);
	} else if (rc >= 0) {
		kn_reader_finish(kn_decoder_reader(d));
		rc = kn_decoder_finish(d);
	}
	par_free(P);
	return rc;
}

/* The log IN, a compressed regular file (stream_worth), decoded in chunks read off its
 * stream in turn by their jobs (as stats_streamed reads them) into D's sink. A cut ends the
 * last chunk, told after the chunks merged (a decode tells no line's diagnostics as it goes,
 * and the command's summary follows). What breaks the split goes on in order from the chunk
 * that broke it: the chunks read since are kept until their merge, the rest of the stream
 * read after them. */
static int decode_streamed(struct tk_kanata_decoder *d, struct tk_input *in, unsigned jobs,
			   size_t bytes, struct tk_progress *progress)
{
	struct tk_kanata_stats_opts o = { .sz = sizeof o, .jobs = jobs, .chunk_bytes = bytes,
					  .progress = progress };
	int rc;
	struct par *P = stream_run(in, &o, d, bytes, &rc);

	if (!P)
		return rc;
	if (P->fallback && !P->merged) {
		tk_input_hold_cut(in, 0);
		if ((rc = tk_input_rewind(in)) >= 0)
			rc = kn_decoder_read(d, in);
	} else if (P->fallback) {
		rc = 0;
		for (size_t i = P->merged; i < P->n && rc >= 0; i++)
			rc = kn_decoder_feed(d, P->ch[i].buf, P->ch[i].len, 0);
		if (rc >= 0 && P->ncarry)
			rc = kn_decoder_feed(d, P->carry, P->ncarry, 0);
		tk_input_hold_cut(in, 0);
		if (rc >= 0)
			rc = kn_decoder_read(d, in);
	} else if (rc >= 0) {
		tk_input_tell_cut(in);
		kn_reader_finish(kn_decoder_reader(d));
		rc = kn_decoder_finish(d);
	}
	tk_input_hold_cut(in, 0);
	par_free(P);
	return rc;
}

/* The log IN (a plain file: parallel_worth) decoded in chunks into D's sink. */
static int decode_file_parallel(struct tk_kanata_decoder *d, struct tk_input *in, unsigned jobs,
				size_t bytes, struct tk_progress *progress)
{
	const uint8_t *data;
	size_t len;
	int rc = tk_input_map(in, &data, &len);

	return rc < 0 ? rc : decode_parallel(d, (const char *)data, len, in, jobs, bytes, progress);
}

int tk_kanata_decode(struct tk_kanata_decoder *d, struct tk_input *in)
{
	struct tk_progress *progress;
	size_t bytes;
	unsigned jobs = kn_decoder_jobs(d, &bytes, &progress);

	if (parallel_worth(in, jobs, bytes))
		return decode_file_parallel(d, in, jobs, bytes, progress);
	if (stream_worth(in, jobs, bytes))
		return decode_streamed(d, in, jobs, bytes, progress);
	return kn_decoder_read(d, in);
}

/* The same over a buffer (the fuzzer: -j N must give the events of -j 1). */
int kn_decode_buf_parallel(struct tk_kanata_decoder *d, const char *p, size_t n, unsigned jobs,
			   size_t bytes);
int kn_decode_buf_parallel(struct tk_kanata_decoder *d, const char *p, size_t n, unsigned jobs,
			   size_t bytes)
{
	return decode_parallel(d, p, n, NULL, jobs, bytes, NULL);
}

int tk_kanata_stats_compute(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
			    struct tk_kanata_stats *st)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	uint64_t delivered = 0;
	int rc;

	memset(st, 0, sizeof *st);
	if (parallel_worth(in, o.jobs, o.chunk_bytes)) {
		const uint8_t *data;
		size_t len;
		int fell_back = 0;
		if ((rc = tk_input_map(in, &data, &len)) < 0)
			return rc;
		rc = stats_parallel((const char *)data, len, in, &o, st, &fell_back, &delivered);
		if (rc < 0 || !fell_back)
			return rc;
		/* the file breaks an assumption of the split (an id reused across chunks, an
		 * unusual C=): read it again in order; diagnostics already shown are not repeated */
		tk_kanata_stats_free(st);
		return stats_in_order(&o, in, (const char *)data, len, delivered, st);
	}
	if (stream_worth(in, o.jobs, o.chunk_bytes))
		return stats_streamed(in, &o, st);
	return stats_in_order(&o, in, NULL, 0, 0, st);
}

/* Parallel statistics over a buffer (tests: -j N must equal -j 1 whatever the split). */
int kn_stats_buf_parallel(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			  struct tk_kanata_stats *st, int *fell_back);
int kn_stats_buf_parallel(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			  struct tk_kanata_stats *st, int *fell_back)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	uint64_t delivered;
	memset(st, 0, sizeof *st);
	return stats_parallel(p, n, NULL, &o, st, fell_back, &delivered);
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

/* ---- shards: a shard's parsed chunks as bytes, merged in another process ------------------ */
#define PART_MAGIC "TKKNST\0\1"
#define PART_IN_ORDER 1       /* flags: the merge reads the input in order */

static void hist_save(struct tk_buf *w, const struct hist *h)
{
	size_t nz = 0;
	unsigned prev = 0;

	kn_putv(w, h->count);
	kn_putv(w, h->sum);
	kn_putv(w, h->max);
	if (!h->count)
		return;
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		nz += h->bins[b] != 0;
	kn_putv(w, nz);
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		if (h->bins[b]) {
			kn_putv(w, b - prev);
			kn_putv(w, h->bins[b]);
			prev = b;
		}
}

static void hist_load(struct kn_in *b, struct hist *h)
{
	uint64_t total = 0;
	unsigned at = 0;

	h->count = kn_getv(b, "histogram");
	h->sum = kn_getv(b, "histogram");
	h->max = kn_getv(b, "histogram");
	if (!h->count || b->err)
		return;
	size_t nz = kn_get_count(b, 2, HIST_BUCKETS, "histogram");
	if (!b->err && !(h->bins = calloc(HIST_BUCKETS, sizeof *h->bins))) {
		b->err = -TK_E_NOMEM;
		return;
	}
	for (size_t i = 0; i < nz && !b->err; i++) {
		uint64_t d = kn_getv(b, "histogram"), c = kn_getv(b, "histogram");
		if ((i && !d) || d >= HIST_BUCKETS - at || !c || c > UINT32_MAX) {
			kn_bad(b, "histogram bins out of order or empty");
			return;
		}
		at += (unsigned)d;
		h->bins[at] = (uint32_t)c;
		total += c;
	}
	if (!b->err && total != h->count)
		kn_bad(b, "histogram bins do not add up to its count");
}

/* Chunk I as bytes: where it is, its start, its statistics, its reader's state, its kept
 * diagnostics (the fields merge_one reads). */
static int chunk_save(struct par *P, const struct chunk *c, size_t i)
{
	struct tk_buf *w = P->save;
	const struct stats_ctx *s = c->s;
	const uint64_t v[] = { i, c->start, c->len, c->lines, c->line_base };

	for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
		kn_putv(w, v[k]);
	kn_putz(w, c->start_cycle);
	kn_putz(w, s->first_cycle);
	kn_reader_chunk_save(s->r, w);
	hist_save(w, &s->insn);
	for (size_t k = 0; k < kn_reader_nstages(s->r); k++)
		hist_save(w, &s->stage[k]);
	kn_putv(w, s->nthreads);
	for (size_t k = 0; k < s->nthreads; k++) {
		kn_putz(w, s->threads[k].thread);
		kn_putv(w, s->threads[k].insns);
		kn_putv(w, s->threads[k].retired);
		kn_putv(w, s->threads[k].flushed);
	}
	size_t w0 = 0;
	while (w0 < s->nwin && !s->win[w0])
		w0++;
	kn_putv(w, w0);
	kn_putv(w, s->nwin - w0);
	for (size_t k = w0; k < s->nwin; k++)
		kn_putv(w, s->win[k]);
	kn_putv(w, s->windows_dropped);
	kn_putv(w, s->nslow);
	for (size_t k = 0; k < s->nslow; k++) {
		const struct tk_kanata_slow *x = &s->heap[k];
		const int64_t z[] = { x->id, x->sim_id, x->thread, x->begin, x->end };
		for (size_t j = 0; j < 5; j++)
			kn_putz(w, z[j]);
		kn_put_str(w, x->label, strlen(x->label));
	}
	kn_putv(w, (uint64_t)s->have_rid);
	kn_putz(w, s->last_rid);
	kn_putv(w, s->last_rid_line);
	kn_putv(w, c->diags->n);
	for (size_t k = 0; k < c->diags->n; k++) {
		const struct tk_kanata_diag *d = &c->diags->v[k].d;
		kn_putv(w, (uint64_t)d->level);
		kn_putv(w, (uint64_t)d->code);
		kn_putv(w, d->line);
		kn_putv(w, d->offset);
		kn_put_str(w, d->msg, strlen(d->msg));
	}
	kn_putv(w, c->diags->more[0]);
	kn_putv(w, c->diags->more[1]);
	kn_putv(w, c->diags->more_line);
	return w->err;
}

struct tk_kanata_stats_merge {
	struct tk_kanata_stats_opts o;
	struct tk_input *in;
	struct par *P;
	size_t nchunks;               /* the plan's (SIZE_MAX: none seen yet) */
	size_t next;                  /* the chunk expected next */
	uint64_t next_start, next_line;
	int in_order;
};

/* The next chunk from B into C (its statistics and reader made here). */
static int chunk_load(struct tk_kanata_stats_merge *m, struct kn_in *b, struct chunk *c)
{
	uint64_t v[5];
	int rc;

	for (size_t k = 0; k < 5; k++)
		v[k] = kn_getv(b, "chunk");
	c->start_cycle = kn_getz(b, "chunk");
	int64_t first_cycle = kn_getz(b, "chunk");
	if (b->err)
		return b->err;
	if (v[0] != m->next || v[1] != m->next_start || !v[2] || v[2] > m->P->len - v[1] ||
	    v[3] > v[2] || v[4] != m->next_line) {
		kn_bad(b, "chunk out of order or not of this input");
		return b->err;
	}
	c->start = v[1];
	c->len = v[2];
	c->lines = v[3];
	c->line_base = v[4];
	if (!(c->s = ctx_new(&m->o, &rc)))
		return rc;
	if (!(c->diags = calloc(1, sizeof *c->diags)))
		return -TK_E_NOMEM;
	struct stats_ctx *s = c->s;
	s->keep = c->diags;
	s->cycle_seen = 1;
	s->first_cycle = first_cycle;
	kn_reader_chunk_begin(s->r, v[0] == 0, c->start_cycle, c->line_base, c->start);
	if ((rc = kn_reader_chunk_load(s->r, b, c->lines + 1)) < 0)
		return rc;
	hist_load(b, &s->insn);
	for (size_t k = 0; k < kn_reader_nstages(s->r) && !b->err; k++)
		hist_load(b, &s->stage[k]);
	size_t nt = kn_get_count(b, 4, c->lines + 1, "threads");
	if (nt && !b->err && !(s->threads = calloc(nt, sizeof *s->threads)))
		return -TK_E_NOMEM;
	for (size_t k = 0; k < nt && !b->err; k++) {
		struct tk_kanata_thread_stats *t = &s->threads[s->nthreads++];
		t->thread = kn_getz(b, "threads");
		t->insns = kn_getv(b, "threads");
		t->retired = kn_getv(b, "threads");
		t->flushed = kn_getv(b, "threads");
		if (k && t->thread <= t[-1].thread)
			kn_bad(b, "threads out of order");
	}
	s->cap_threads = s->nthreads;
	uint64_t w0 = kn_getv(b, "windows");
	size_t nw = kn_get_count(b, 1, (size_t)1 << 24, "windows");
	if (!b->err && w0 > ((uint64_t)1 << 24) - nw)
		kn_bad(b, "windows beyond the limit");
	if (nw && !b->err && !(s->win = calloc(w0 + nw, sizeof *s->win)))
		return -TK_E_NOMEM;
	for (size_t k = 0; k < nw && !b->err; k++)
		s->win[w0 + k] = kn_getv(b, "windows");
	s->nwin = s->cap_win = nw ? w0 + nw : 0;
	s->windows_dropped = kn_getv(b, "windows");
	size_t ns = kn_get_count(b, 6, m->o.slowest, "slowest instructions");
	for (size_t k = 0; k < ns && !b->err; k++) {
		struct tk_kanata_slow *x = &s->heap[s->nslow++];
		int64_t *z[] = { &x->id, &x->sim_id, &x->thread, &x->begin, &x->end };
		for (size_t j = 0; j < 5; j++)
			*z[j] = kn_getz(b, "slowest instructions");
		/* a latency (end - begin) every reader of the heap can compute */
		if (!b->err && (x->end < x->begin || (uint64_t)x->end - (uint64_t)x->begin > INT64_MAX))
			kn_bad(b, "slowest instruction ending before it began");
		kn_get_str(b, x->label, sizeof x->label, "slowest instructions");
	}
	s->have_rid = kn_getv(b, "last retire") != 0;
	s->last_rid = kn_getz(b, "last retire");
	s->last_rid_line = kn_getv(b, "last retire");
	size_t nd = kn_get_count(b, 5, KEEP_DIAGS, "diagnostics");
	for (size_t k = 0; k < nd && !b->err; k++) {
		struct kept_diag *d = &c->diags->v[c->diags->n++];
		uint64_t level = kn_getv(b, "diagnostics"), code = kn_getv(b, "diagnostics");
		if (level > TK_LOG_WARN || !code || code > TK_KANATA_D_IN_FLIGHT)
			kn_bad(b, "diagnostic of no level or kind");
		d->d.level = (enum tk_log_level)level;
		d->d.code = (enum tk_kanata_diag_code)code;
		d->d.line = kn_getv(b, "diagnostics");
		d->d.offset = kn_getv(b, "diagnostics");
		kn_get_str(b, d->msg, sizeof d->msg, "diagnostics");
		d->d.msg = d->msg;
	}
	for (int k = 0; k < 2; k++)
		if ((c->diags->more[k] = kn_getv(b, "diagnostics")) > 4 * (c->lines + 1))
			kn_bad(b, "more diagnostics than the chunk's lines give");
	c->diags->more_line = kn_getv(b, "diagnostics");
	m->next++;
	m->next_start = c->start + c->len;
	m->next_line = c->line_base + c->lines;
	return b->err;
}

static int part_bytes(struct tk_buf *w, uint8_t **data, size_t *len)
{
	if (w->err) {
		free(w->data);
		return w->err;
	}
	*data = (uint8_t *)w->data;
	*len = w->len;
	return 0;
}

static void part_head(struct tk_buf *w, const struct tk_kanata_stats_opts *o)
{
	tk_buf_put(w, PART_MAGIC, 8);
	kn_putv(w, o->window);
	kn_putv(w, o->slowest);
}

int tk_kanata_stats_chunks(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
			   uint64_t **sizes, size_t *n)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	size_t bytes = o.chunk_bytes ? o.chunk_bytes : CHUNK_BYTES, len, cap;
	const uint8_t *data;
	int rc;

	*sizes = NULL;
	*n = 0;
	if (tk_input_compression(in) != TK_COMP_NONE)
		return 0;
	if ((rc = tk_input_map(in, &data, &len)) < 0)
		return rc;
	cap = len / bytes + 1;
	if (!(*sizes = calloc(cap, sizeof **sizes)))
		return -TK_E_NOMEM;
	for (size_t pos = 0; pos < len;) {
		size_t end = kn_line_seam_in(in, (const char *)data, len, pos, bytes);
		(*sizes)[(*n)++] = end - pos;
		pos = end;
	}
	return 0;
}

int tk_kanata_stats_shard(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
			  size_t first, size_t count, uint8_t **data, size_t *len)
{
	struct tk_kanata_stats_opts o = clamp_opts(opts);
	o.keep_diags = 0;   /* (a shard's bytes hold KEEP_DIAGS a chunk, then counts) */
	struct tk_buf w = { .fd = -1 }, chunks = { .fd = -1 };
	const uint8_t *p;
	size_t n;
	int rc;

	*data = NULL;
	*len = 0;
	part_head(&w, &o);
	if (tk_input_compression(in) != TK_COMP_NONE) {
		kn_putv(&w, 0);
		kn_putv(&w, PART_IN_ORDER);
		kn_putv(&w, 0);
		return part_bytes(&w, data, len);
	}
	struct par *P = (rc = tk_input_map(in, &p, &n)) < 0 ? NULL :
			par_new((const char *)p, n, in, o.chunk_bytes, &o, NULL, &rc);
	if (!P) {
		free(w.data);
		return rc;
	}
	if (first > P->n || count > P->n - first) {
		rc = -TK_E_INVAL;
	} else {
		P->first = first;
		P->count = count;
		P->save = &chunks;
		rc = par_run(P);
	}
	if (rc >= 0 || P->fallback) {
		/* a log that one process reads in order (its first chunk sets no cycle) */
		int in_order = P->fallback || !P->n;
		kn_putv(&w, P->n);
		kn_putv(&w, in_order ? PART_IN_ORDER : 0);
		kn_putv(&w, in_order ? 0 : count);
		if (!in_order && chunks.len)
			tk_buf_put(&w, chunks.data, chunks.len);
		w.err = w.err ? w.err : chunks.err;
		rc = part_bytes(&w, data, len);
	} else {
		free(w.data);
	}
	free(chunks.data);
	par_free(P);
	return rc;
}

struct tk_kanata_stats_merge *tk_kanata_stats_merge_new(const struct tk_kanata_stats_opts *opts,
							struct tk_input *in, int *err)
{
	struct tk_kanata_stats_merge *m = calloc(1, sizeof *m);

	if (!m || !(m->P = calloc(1, sizeof *m->P))) {
		free(m);
		*err = -TK_E_NOMEM;
		return NULL;
	}
	m->o = clamp_opts(opts);
	m->o.keep_diags = 0;
	m->in = in;
	m->nchunks = SIZE_MAX;
	m->P->o = &m->o;
	m->P->len = tk_input_file_size(in);
	if (!(m->P->g = ctx_new(&m->o, err))) {
		tk_kanata_stats_merge_free(m);
		return NULL;
	}
	m->P->g->cycle_seen = 1;
	return m;
}

int tk_kanata_stats_merge_add(struct tk_kanata_stats_merge *m, const uint8_t *data, size_t len,
			      uint64_t *err_at, char *msg, size_t msg_cap)
{
	struct kn_in b = { .p = data, .n = len, .at = 8 };
	struct par *P = m->P;
	int rc = 0;

	if (len < 8 || memcmp(data, PART_MAGIC, 8)) {
		b.at = 0;
		kn_bad(&b, "not Kanata statistics of this version");
	}
	uint64_t window = kn_getv(&b, "options"), slowest = kn_getv(&b, "options");
	if (!b.err && m->nchunks == SIZE_MAX && slowest <= 100000) {
		/* the shards' options decide: the merge's total takes them from the first */
		m->o.window = window;
		m->o.slowest = slowest;
		ctx_free(P->g);
		if (!(P->g = ctx_new(&m->o, &rc)))
			return rc;
		P->g->cycle_seen = 1;
	}
	if (!b.err && (window != m->o.window || slowest != m->o.slowest))
		kn_bad(&b, "made with other --window or --slowest values than the first");
	uint64_t nchunks = kn_getv(&b, "plan"), flags = kn_getv(&b, "plan");
	if (!b.err && ((m->nchunks != SIZE_MAX && nchunks != m->nchunks) || flags > PART_IN_ORDER ||
		       nchunks > P->len))
		kn_bad(&b, "another plan of the input");
	m->nchunks = (size_t)nchunks;
	m->in_order |= (int)flags;
	size_t count = kn_get_count(&b, 7, (size_t)nchunks, "chunks");
	for (size_t k = 0; k < count && !b.err && rc >= 0; k++) {
		struct chunk c = { 0 };
		size_t i = m->next;
		if ((rc = chunk_load(m, &b, &c)) >= 0 && !m->in_order && !P->fallback &&
		    (rc = merge_one(P, &c, i)) < 0 && P->fallback)
			rc = 0;   /* read in order at the end */
		if (c.s)
			ctx_free(c.s);
		kept_free(c.diags);
	}
	if (!b.err && rc >= 0 && b.at != b.n)
		kn_bad(&b, "bytes after the last chunk");
	if (b.err == -TK_E_BAD_FORMAT) {
		*err_at = b.err_at;
		snprintf(msg, msg_cap, "%s", b.msg);
	}
	return b.err ? b.err : rc;
}

int tk_kanata_stats_merge_end(struct tk_kanata_stats_merge *m, struct tk_kanata_stats *st)
{
	struct par *P = m->P;
	int rc;

	memset(st, 0, sizeof *st);
	if (!m->in_order && !P->fallback) {
		if (m->next != m->nchunks)
			return -TK_E_TRUNCATED;
		if ((rc = par_finish(P, st)) < 0 || !P->fallback)
			return rc;
		tk_kanata_stats_free(st);
	}
	return stats_in_order(&m->o, m->in, NULL, 0, P->delivered_upto, st);
}

uint64_t tk_kanata_stats_merge_window(const struct tk_kanata_stats_merge *m)
{
	return m->o.window;
}

void tk_kanata_stats_merge_free(struct tk_kanata_stats_merge *m)
{
	if (!m)
		return;
	par_free(m->P);
	free(m);
}
