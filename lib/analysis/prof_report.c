/* Reading a profile: summary, per-function table with duration statistics, call paths,
 * blocks. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "analysis/prof_internal.h"
#include "tracekit/internal/util.h"

int tk_prof_summary(const struct tk_prof *p, struct tk_prof_summary *s)
{
	*s = p->sum;
	s->orphans = p->final_orphans;
	s->time_first = s->time_last = TK_TIME_NONE;
	for (size_t i = 0; i < p->ntracks; i++) {
		const struct track *t = &p->tracks[i];
		s->orphans += t->norph - t->norph_enable;
		if (t->t_min == UINT64_MAX)
			continue;
		if (s->time_first == TK_TIME_NONE || t->t_min < s->time_first)
			s->time_first = t->t_min;
		if (s->time_last == TK_TIME_NONE || t->t_max > s->time_last)
			s->time_last = t->t_max;
	}
	return 0;
}

/* Depth-first walk over a track tree; ENTER/LEAVE get each node below the root. */
struct dfs {
	uint32_t *stack;
	size_t n, cap;
};

static int dfs_push(struct dfs *d, uint32_t v)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		uint32_t *s = realloc(d->stack, nc * sizeof *s);
		if (!s)
			return -TK_E_NOMEM;
		d->stack = s;
		d->cap = nc;
	}
	d->stack[d->n++] = v;
	return 0;
}

/* ---- the per-node pass: each row's costs, inclusive ones once per recursion ------------ */
/* A depth-first walk of the trees keeps, per function, its frames on the path: a node
 * whose function is on an ancestor already is inside that ancestor's inclusive cost. The
 * walk is random access over every node (the PT random walk: 18.6 M nodes, 1.2 GB), so
 * walkers on NTHREADS threads share it: a walker takes a subtree, counts its ancestors'
 * functions as on the path, and walks it; while another waits for work, it hands over the
 * shallowest subtree still pending on its stack. The sums and the naming of the unknown
 * levels do not depend on which walker saw a node, so every split gives the same rows. */
#define LEAVE 0x80000000u         /* a stack entry that leaves a frame of function (v & ~LEAVE) */
#define NO_FRAME UINT32_MAX       /* leaves a node without a function, or stands for a
				     subtree handed to another walker: nothing to do */
#define WALK_MIN ((size_t)1 << 16)   /* nodes from which walkers run on threads */
#define WALK_CHECK 255            /* nodes between two looks for a waiting walker */
#define MAX_WALKERS 16
#define HAND_COST 8               /* nodes visited per ancestor a receiver walks up */

struct row_cost {
	uint64_t calls, incl_ticks, excl_ticks, incl_insns, excl_insns, cycles, cyc_insns;
};

struct walker {
	struct row_cost *cost;    /* per row: functions, then the tracks' unknown levels */
	uint64_t *hint;           /* per track: the hint of its unknown levels, 0 if none */
	uint8_t *mixed;           /* per track: its unknown levels ran in different functions */
	uint32_t *active;         /* per function: its frames on the path */
	struct dfs d;
	size_t low;               /* d.stack[0, low) holds no subtree to hand over */
	size_t depth;             /* of the subtree's root */
	size_t visited;
	size_t next_hand;         /* visited from which it may hand one over */
	int ran;
};

struct walk {
	const struct tk_prof *p;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint32_t *todo;           /* subtrees no walker has taken */
	size_t ntodo;
	unsigned busy;            /* walkers in a subtree: they may still hand one over */
	unsigned waiting;         /* walkers waiting for one (read without the lock) */
	size_t handed;            /* subtrees handed over */
	int err;
	struct walker *w;
	size_t nw;                /* walkers */
};

static size_t walk_handed;        /* over the process (tests): prof_walk_handed */

size_t prof_walk_handed(void)
{
	return __atomic_load_n(&walk_handed, __ATOMIC_RELAXED);
}

/* Count (DIR 1) or uncount (-1) the functions of R's ancestors as on the path; their
 * number. */
static size_t walk_ancestors(const struct tk_prof *p, uint32_t *active, uint32_t r, uint32_t dir)
{
	size_t n = 0;
	for (uint32_t a = p->nodes[r].parent; a != NONE32; a = p->nodes[a].parent, n++)
		if (p->nodes[a].func != NONE32)
			active[p->nodes[a].func] += dir;
	return n;
}

/* Hand the shallowest subtree pending on W's stack to a waiting walker. Its receiver
 * walks up its ancestors (as many as the leave entries below it plus the depth of W's
 * subtree), twice, at random: W hands the next one only after visiting HAND_COST times as
 * many nodes, so that a deep tree (a long chain: nothing to share) costs little more. */
static void walk_share(struct walk *s, struct walker *w)
{
	while (w->low < w->d.n && (w->d.stack[w->low] & LEAVE))
		w->low++;
	if (w->low == w->d.n || w->visited < w->next_hand)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->waiting > s->ntodo) {
		s->todo[s->ntodo++] = w->d.stack[w->low];
		w->d.stack[w->low] = NO_FRAME;
		w->next_hand = w->visited + HAND_COST * (w->depth + w->low);
		s->handed++;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->lock);
}

static void add_cost(struct row_cost *r, const struct tk_prof *p, const struct node *n, uint32_t v,
		     int rec)
{
	r->calls += n->calls;
	r->excl_ticks += n->excl_ticks;
	r->excl_insns += n->excl_insns;
	if (v < p->ncyc) {
		r->cycles += p->cyc[v].cycles;
		r->cyc_insns += p->cyc[v].insns;
	}
	if (!rec) {
		r->incl_ticks += n->incl_ticks;
		r->incl_insns += n->incl_insns;
	}
}

static int walk_subtree(struct walk *s, struct walker *w, uint32_t r, int shared)
{
	const struct tk_prof *p = s->p;
	int rc = dfs_push(&w->d, r);

	w->depth = walk_ancestors(p, w->active, r, 1);
	while (w->d.n && rc >= 0) {
		uint32_t v = w->d.stack[--w->d.n];
		if (w->low > w->d.n)
			w->low = w->d.n;
		if (v & LEAVE) {
			if (v != NO_FRAME)
				w->active[v & ~LEAVE]--;
			continue;
		}
		const struct node *n = &p->nodes[v];
		uint32_t c = p->links[v].first_child, f = n->func;
		w->visited++;
		if (f != NONE32) {
			add_cost(&w->cost[f], p, n, v, w->active[f] > 0);
		} else if (n->kind != KIND_TRACK) {
			size_t t = 0;
			while (t < p->ntracks && p->tracks[t].id != n->track)
				t++;
			if (t < p->ntracks) {
				add_cost(&w->cost[p->nfuncs + t], p, n, v, 0);
				/* named as the call tree names the level (the function its code
				 * ran in), when every unknown level of the track ran in the same one */
				uint64_t hint = p->links[v].hint;
				if (hint && !w->mixed[t]) {
					w->mixed[t] = w->hint[t] && w->hint[t] != hint;
					w->hint[t] = w->mixed[t] ? 0 : hint;
				}
			}
		}
		if (c != NONE32) {   /* its frame, on its children's path */
			if (f != NONE32)
				w->active[f]++;
			rc = dfs_push(&w->d, f != NONE32 ? f | LEAVE : NO_FRAME);
		}
		for (; c != NONE32 && rc >= 0; c = p->links[c].next_sibling)
			rc = dfs_push(&w->d, c);
		if (shared && !(w->visited & WALK_CHECK) && __atomic_load_n(&s->waiting, __ATOMIC_RELAXED))
			walk_share(s, w);
	}
	walk_ancestors(p, w->active, r, (uint32_t)-1);
	w->d.n = w->low = 0;
	return rc;
}

/* Walker K: subtrees until none is left and no walker can hand one over. */
static int walk_job(void *ctx, size_t k)
{
	struct walk *s = ctx;
	struct walker *w = &s->w[k];
	const struct tk_prof *p = s->p;
	int shared = s->nw > 1, rc;

	w->ran = 1;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->ntodo && s->busy && !s->err) {
			__atomic_add_fetch(&s->waiting, 1, __ATOMIC_RELAXED);
			pthread_cond_wait(&s->cv, &s->lock);
			__atomic_sub_fetch(&s->waiting, 1, __ATOMIC_RELAXED);
		}
		if (!s->ntodo || s->err)
			break;
		uint32_t r = s->todo[--s->ntodo];
		s->busy++;
		pthread_mutex_unlock(&s->lock);
		rc = 0;
		if (!w->cost) {
			w->cost = calloc(p->nfuncs + p->ntracks + 1, sizeof *w->cost);
			w->hint = calloc(p->ntracks + 1, sizeof *w->hint);
			w->mixed = calloc(p->ntracks + 1, 1);
			w->active = calloc(p->nfuncs + 1, sizeof *w->active);
			if (!w->cost || !w->hint || !w->mixed || !w->active)
				rc = -TK_E_NOMEM;
		}
		if (rc == 0)
			rc = walk_subtree(s, w, r, shared);
		pthread_mutex_lock(&s->lock);
		s->busy--;
		if (rc < 0 && !s->err)
			s->err = rc;
		if (!s->busy || s->err)
			pthread_cond_broadcast(&s->cv);   /* nothing more will come */
	}
	rc = s->err;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* NW walkers over the trees whose roots are ROOTS[0, N). */
static int walk_run(struct walk *s, size_t nw, const uint32_t *roots, size_t n)
{
	memcpy(s->todo, roots, n * sizeof *roots);
	s->ntodo = n;
	s->nw = nw;
	for (size_t k = 0; k < nw; k++)
		s->w[k].ran = 0;
	if (nw > 1) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = (unsigned)nw, .window = nw };
		tk_pool_run(&po, nw, walk_job, NULL, s);
	}
	if (!s->w[0].ran && !s->err)   /* one walker, or no thread could start */
		walk_job(s, 0);
	return s->err;
}

/* The trees that no track holds (only in a crafted partial: the walk from the tracks'
 * ROOTS[0, N) missed nodes), walked by one walker. */
static int walk_rest(struct walk *s, const uint32_t *roots, size_t n)
{
	const struct tk_prof *p = s->p;
	uint32_t *rest = NULL;
	size_t nrest = 0, cap = 0;
	int rc = 0;

	for (size_t i = 0; i < p->nnodes && rc == 0; i++) {
		uint32_t v = (uint32_t)i;
		if (p->nodes[i].parent != NONE32 || bsearch(&v, roots, n, sizeof v, cmp_u32))
			continue;
		if ((rc = prof_grow((void **)&rest, &cap, nrest + 1, sizeof *rest)) == 0)
			rest[nrest++] = v;
	}
	for (size_t i = 0; i < nrest && rc == 0; i++)
		rc = walk_run(s, 1, rest + i, 1);
	free(rest);
	return rc;
}

/* ROWS (functions, then each track's unknown levels) summed over every node. */
static int sum_rows(const struct tk_prof *p, struct tk_prof_func *rows)
{
	size_t nw = p->opts.nthreads ? p->opts.nthreads : 1, nr = p->nfuncs + p->ntracks;
	if (nw > MAX_WALKERS)
		nw = MAX_WALKERS;
	/* a walker's own rows are worth it when it walks many more nodes */
	while (nw > 1 && (p->nnodes < WALK_MIN || p->nnodes / nw < 4 * nr))
		nw--;
	struct walker w[MAX_WALKERS];
	struct walk s = { .p = p, .w = w };
	/* the tracks' roots, sorted and distinct */
	uint32_t *roots = malloc((p->ntracks + 1) * sizeof *roots);
	uint8_t *mixed = calloc(p->ntracks + 1, 1);
	size_t n = 0;
	int rc = -TK_E_NOMEM;

	memset(w, 0, sizeof w);
	s.todo = malloc((p->ntracks + MAX_WALKERS + 1) * sizeof *s.todo);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cv, NULL);
	if (!roots || !mixed || !s.todo)
		goto out;
	for (size_t t = 0; t < p->ntracks; t++)
		roots[t] = p->tracks[t].root;
	qsort(roots, p->ntracks, sizeof *roots, cmp_u32);
	for (size_t t = 0; t < p->ntracks; t++)
		if (!n || roots[n - 1] != roots[t])
			roots[n++] = roots[t];
	rc = walk_run(&s, nw, roots, n);
	size_t visited = 0;
	for (size_t k = 0; k < nw; k++)
		visited += w[k].visited;
	if (rc == 0 && visited < p->nnodes)
		rc = walk_rest(&s, roots, n);
	for (size_t k = 0; rc == 0 && k < nw; k++) {
		if (!w[k].cost)
			continue;
		for (size_t i = 0; i < nr; i++) {
			struct tk_prof_func *r = &rows[i];
			const struct row_cost *c = &w[k].cost[i];
			r->calls += c->calls;
			r->incl_ticks += c->incl_ticks;
			r->excl_ticks += c->excl_ticks;
			r->incl_insns += c->incl_insns;
			r->excl_insns += c->excl_insns;
			r->cycles += c->cycles;
			r->cyc_insns += c->cyc_insns;
		}
		/* the walkers' hints as one walker would have met them */
		for (size_t t = 0; t < p->ntracks; t++) {
			struct tk_prof_func *r = &rows[p->nfuncs + t];
			uint64_t hint = w[k].hint[t];
			if (w[k].mixed[t])
				mixed[t] = 1;
			else if (hint && !mixed[t])
				mixed[t] = r->key && r->key != hint;
			if (mixed[t])
				r->key = 0;
			else if (hint)
				r->key = hint;
		}
	}
	__atomic_add_fetch(&walk_handed, s.handed, __ATOMIC_RELAXED);
out:
	for (size_t k = 0; k < nw; k++) {
		free(w[k].cost);
		free(w[k].hint);
		free(w[k].mixed);
		free(w[k].active);
		free(w[k].d.stack);
	}
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cv);
	free(s.todo);
	free(roots);
	free(mixed);
	return rc;
}

/* Durations are gathered per function (or per group of functions folded together) into
 * 32-bit slots; groups with a duration of DUR_BIG ticks or more get 64-bit slots. Half the
 * memory and bandwidth for the common case. */
struct dur_place {
	uint32_t *big;            /* per function: its radix group (NONE32: it has slots) */
	size_t *off;              /* per function: first slot in a32 or a64 */
	uint8_t *wide;            /* per function: its group uses a64 */
	uint32_t *a32;
	uint64_t *a64;
};

/* The counting pass also builds the histogram of the high 16 bits of the durations (with
 * min, max and sum) of each function that may be in a radix group: all of them when there
 * are few, else those with RADIX_MIN calls or more (a function has no more durations than
 * calls), at most SPEC_HISTS over the parts. The histogram selection below would otherwise
 * need a pass of its own for them. The tables are allocated zeroed and touched only where
 * durations fall. */
#define SPEC_FUNCS 64
#define SPEC_HISTS 128

struct spec {
	const uint32_t *slot;     /* per function: its histogram's index, NONE32 for none */
	uint32_t *hist;           /* histogram h at h << 16 (tk_map_zeroed) */
	size_t hist_bytes;
	uint64_t *sum;
	uint32_t *min, *max;
};

/* Groups of many durations (all below DUR_BIG) are not copied: their order statistics
 * come from two counting passes over the duration log, one histogram of the high 16 bits
 * and one of the low 16 bits inside the buckets that hold the wanted ranks. Linear, no
 * copy of the largest functions' durations, and exact (the same values as any selection).
 * Groups share each pass in batches of at most RADIX_GROUPS (3 histograms of 256 KiB each
 * per group and part, allocated lazily: only the pages where durations fall are touched).
 * The batches do not depend on the number of parts: each is a pass over the whole log, and
 * smaller batches for more parts made -j 2 read the log once more than -j 1 (libLLVM's 45
 * groups: 3 passes instead of 2). */
#define RADIX_MIN ((size_t)1 << 16)
#define RADIX_GROUPS 32

struct radix_group {
	size_t row;               /* its row in the result */
	uint64_t n, sum;          /* n: with the zeros */
	uint64_t zeros;           /* durations of 0 ticks, not in the log (func.zeros) */
	uint32_t min, max;
	uint64_t rank[3];         /* n/2, floor(n*0.9), floor(n*0.99) */
	uint32_t hi[3];           /* the high half of each, after the first pass */
	uint64_t below[3];        /* durations in lower buckets */
	uint32_t value[3];
};

/* ---- passes over the duration log, in parts (on threads when the log is large) --------- */

#define PAR_MIN ((size_t)1 << 16)  /* entries per thread, at least */
#define MAX_PARTS 16

enum { SCAN_COUNT, SCAN_HIGH, SCAN_LOW };

/* One part of the log and what a pass over it gathers. */
struct scan {
	const struct tk_prof *p;
	size_t c0, j0, c1, j1;    /* entries from chunk c0 index j0 to chunk c1 index j1 */
	int mode;                 /* SCAN_* */
	size_t *cnt;              /* COUNT: per function, its durations here */
	size_t *nbig;             /* COUNT: per function, its entries here that stand for big[] */
	struct spec sp;           /* COUNT: histograms (hist is NULL without) */
	/* HIGH and LOW: radix groups g0..g0+nb */
	const struct dur_place *dp;
	const struct radix_group *g;
	uint32_t g0, nb;
	uint32_t *hist;           /* this part's histograms (3 * batch << 16; tk_map_zeroed) */
	size_t hist_bytes;
	uint64_t gsum[RADIX_GROUPS];
	uint32_t gmin[RADIX_GROUPS], gmax[RADIX_GROUPS];
	/* LOW: also put the other functions' durations into their slots */
	int place;
	size_t *pos;              /* per function: its next slot */
	size_t *bigi;             /* per function: its next big[] value */
	int done;                 /* this pass ran over the part */
};

#define INLINE static inline __attribute__((always_inline))

/* M: the chunk's function index map or NULL (a constant in each caller, so each loop is
 * compiled without the lookup when there is none). */
INLINE void count_seg(struct scan *s, const uint64_t *v, size_t lo, size_t hi, const uint32_t *m,
		      int spec)
{
	size_t *cnt = s->cnt, *nbig = s->nbig;
	for (size_t j = lo; j < hi; j++) {
		uint32_t f = (uint32_t)(v[j] >> 32), d = (uint32_t)v[j];
		if (m)
			f = m[f];
		cnt[f]++;
		if (__builtin_expect(d == DUR_BIG, 0))
			nbig[f]++;
		uint32_t h;
		if (spec && (h = s->sp.slot[f]) != NONE32) {
			s->sp.hist[(size_t)h << 16 | d >> 16]++;
			s->sp.sum[h] += d;
			s->sp.min[h] = d < s->sp.min[h] ? d : s->sp.min[h];
			s->sp.max[h] = d > s->sp.max[h] ? d : s->sp.max[h];
		}
	}
}

INLINE void high_seg(struct scan *s, const uint64_t *v, size_t lo, size_t hi, const uint32_t *m)
{
	const uint32_t *big = s->dp->big, g0 = s->g0, nb = s->nb;
	uint32_t *hist = s->hist;
	for (size_t j = lo; j < hi; j++) {
		uint32_t f = (uint32_t)(v[j] >> 32), d = (uint32_t)v[j];
		if (m)
			f = m[f];
		uint32_t i = big[f] - g0;
		if (i >= nb)
			continue;
		hist[(size_t)i << 16 | d >> 16]++;
		s->gsum[i] += d;
		s->gmin[i] = d < s->gmin[i] ? d : s->gmin[i];
		s->gmax[i] = d > s->gmax[i] ? d : s->gmax[i];
	}
}

INLINE void low_seg(struct scan *s, const uint64_t *v, size_t lo, size_t hi, const uint32_t *m)
{
	const struct dur_place *dp = s->dp;
	const uint32_t *big = dp->big, g0 = s->g0, nb = s->nb;
	const struct radix_group *g = s->g;
	const struct func *funcs = s->p->funcs;
	uint32_t *hist = s->hist;
	size_t *pos = s->pos, *bigi = s->bigi;
	for (size_t j = lo; j < hi; j++) {
		uint32_t f = (uint32_t)(v[j] >> 32), d = (uint32_t)v[j];
		if (m)
			f = m[f];
		uint32_t i = big[f] - g0;
		if (i < nb) {
			const struct radix_group *r = &g[g0 + i];
			for (uint32_t w = 0, h = d >> 16; w < 3; w++) {
				if (h == r->hi[w]) {
					hist[((size_t)(w * nb + i)) << 16 | (d & 0xffff)]++;
					break;
				}
			}
			continue;
		}
		if (!s->place || big[f] != NONE32)
			continue;
		if (!dp->wide[f]) {
			dp->a32[pos[f]++] = d;
			continue;
		}
		uint64_t d64 = d;
		if (d == DUR_BIG && bigi[f] < funcs[f].nbig)
			d64 = funcs[f].big[bigi[f]++];
		dp->a64[pos[f]++] = d64;
	}
}

static int scan_part(void *ctx, size_t index)
{
	struct scan *s = (struct scan *)ctx + index;
	const struct tk_prof *p = s->p;
	s->done = 1;
	for (size_t c = s->c0; c <= s->c1 && c < p->ndlog; c++) {
		size_t lo = c == s->c0 ? s->j0 : 0, hi = c == s->c1 ? s->j1 : dlog_len(p, c);
		const uint64_t *v = p->dlog[c].v;
		const uint32_t *m = p->dlog[c].map;
		switch (s->mode) {
		case SCAN_COUNT:
			if (s->sp.hist)
				m ? count_seg(s, v, lo, hi, m, 1) : count_seg(s, v, lo, hi, NULL, 1);
			else
				m ? count_seg(s, v, lo, hi, m, 0) : count_seg(s, v, lo, hi, NULL, 0);
			break;
		case SCAN_HIGH:
			m ? high_seg(s, v, lo, hi, m) : high_seg(s, v, lo, hi, NULL);
			break;
		default:
			m ? low_seg(s, v, lo, hi, m) : low_seg(s, v, lo, hi, NULL);
			break;
		}
		if (p->dlog[c].spilled && lo == 0)
			dlog_release(&p->dlog[c], hi);   /* read: back to the file */
	}
	return 0;
}

static int run_scans(struct scan *s, size_t np, int mode)
{
	for (size_t t = 0; t < np; t++) {
		s[t].mode = mode;
		s[t].done = 0;
	}
	if (np > 1) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = (unsigned)np, .window = np };
		tk_pool_run(&po, np, scan_part, NULL, s);
	}
	/* one part, or no threads could start: here */
	for (size_t t = 0; t < np; t++)
		if (!s[t].done)
			scan_part(s, t);
	return 0;
}

/* Cut the log into parts of equal size: one per thread (at most NTHREADS), while each
 * gets at least PAR_MIN entries. */
static size_t split_log(const struct tk_prof *p, unsigned nthreads, struct scan *s)
{
	size_t total = 0, np = nthreads ? nthreads : 1;
	for (size_t c = 0; c < p->ndlog; c++)
		total += dlog_len(p, c);
	if (np > MAX_PARTS)
		np = MAX_PARTS;
	while (np > 1 && total / np < PAR_MIN)
		np--;
	size_t c = 0, j = 0, done = 0;   /* (c, j) is entry number DONE */
	for (size_t t = 0; t < np; t++) {
		size_t end = total / np * (t + 1) + (t + 1 == np ? total % np : 0);
		s[t].p = p;
		s[t].c0 = c;
		s[t].j0 = j;
		while (c < p->ndlog && done + (dlog_len(p, c) - j) <= end) {
			done += dlog_len(p, c) - j;
			c++;
			j = 0;
		}
		if (c < p->ndlog) {
			j += end - done;
			done = end;
		}
		s[t].c1 = c;
		s[t].j1 = j;
	}
	return np;
}

/* Add the histogram words [LO, HI] of FROM into TO and clear them in FROM. Only the words
 * where durations can fall, and only those written: the histograms are allocated lazily,
 * and a page no duration reached is never touched (each touch of an untouched page is a
 * page fault, and these sums run on the calling thread: docs/PERFORMANCE.md, "Parallel
 * scaling on other shapes"). */
static void add_range(uint32_t *to, uint32_t *from, uint32_t lo, uint32_t hi)
{
	for (size_t b = lo; b <= hi; b++) {
		if (from[b]) {
			to[b] += from[b];
			from[b] = 0;
		}
	}
}

/* Clear words [LO, HI] of H, writing only those that are not 0 already. */
static void clear_range(uint32_t *h, uint32_t lo, uint32_t hi)
{
	for (size_t b = lo; b <= hi; b++)
		if (h[b])
			h[b] = 0;
}

/* The low halves a duration of group R in high bucket HB can have: [*LO, *HI]. */
static void low_range(const struct radix_group *r, uint32_t hb, uint32_t *lo, uint32_t *hi)
{
	*lo = hb == r->min >> 16 ? r->min & 0xffff : 0;
	*hi = hb == r->max >> 16 ? r->max & 0xffff : 0xffff;
}

/* select_T(A, N, K): permute A[0..N) so that A[K] is the K-th smallest, with nothing larger
 * before it and nothing smaller after it (what std::nth_element guarantees, so the values
 * picked are the same as llvm-xray's). Quickselect with a median-of-three pivot and Hoare's
 * partition (runs of equal durations split evenly); after too many poor splits the rest
 * is heap-sorted, which bounds the worst case at O(n log n). */
#define DEFINE_SELECT(T)								\
static void sift_##T(T *a, size_t n, size_t i)						\
{											\
	T v = a[i];									\
	for (size_t c; (c = 2 * i + 1) < n; i = c) {					\
		if (c + 1 < n && a[c + 1] > a[c])					\
			c++;								\
		if (a[c] <= v)								\
			break;								\
		a[i] = a[c];								\
	}										\
	a[i] = v;									\
}											\
											\
static void heapsort_##T(T *a, size_t n)						\
{											\
	for (size_t i = n / 2; i-- > 0;)						\
		sift_##T(a, n, i);							\
	while (n > 1) {									\
		T t = a[0];								\
		a[0] = a[--n];								\
		a[n] = t;								\
		sift_##T(a, n, 0);							\
	}										\
}											\
											\
static void select_##T(T *a, size_t n, size_t k)					\
{											\
	size_t lo = 0, hi = n - 1;	/* inclusive */					\
	unsigned budget = 16;								\
											\
	for (size_t m = n; m > 1; m >>= 1)						\
		budget += 2;								\
	while (hi > lo) {								\
		if (hi - lo < 16 || !budget--) {					\
			heapsort_##T(a + lo, hi - lo + 1);				\
			return;								\
		}									\
		size_t mid = lo + (hi - lo) / 2, i = lo, j = hi;			\
		T t;									\
		/* a[lo] <= a[mid] <= a[hi]: the ends stop the scans below */		\
		if (a[mid] < a[lo])							\
			t = a[mid], a[mid] = a[lo], a[lo] = t;				\
		if (a[hi] < a[lo])							\
			t = a[hi], a[hi] = a[lo], a[lo] = t;				\
		if (a[hi] < a[mid])							\
			t = a[hi], a[hi] = a[mid], a[mid] = t;				\
		T pv = a[mid];								\
		for (;;) {								\
			do								\
				i++;							\
			while (a[i] < pv);						\
			do								\
				j--;							\
			while (a[j] > pv);						\
			if (i >= j)							\
				break;							\
			t = a[i], a[i] = a[j], a[j] = t;				\
		}									\
		/* a[lo..j] <= pv <= a[i..hi], and i is j (then a[i] is pv) or j + 1 */	\
		if (i == j && k == i)							\
			return;								\
		if (k <= j)								\
			hi = j;								\
		else									\
			lo = i;								\
	}										\
}

DEFINE_SELECT(uint32_t)
DEFINE_SELECT(uint64_t)

/* min/median/p90/p99/max as llvm-xray account computes them (index n/2, floor(n*0.9), ...)
 * of the N durations in D and ZEROS more of 0 ticks (the smallest: rank k is 0 below
 * ZEROS, else rank k - ZEROS of D): each percentile is selected in the part above the
 * previous one. */
#define DEFINE_DUR_STATS(T)								\
static uint64_t dur_rank_##T(T *d, size_t n, uint64_t zeros, uint64_t k, size_t *lo)	\
{											\
	if (k < zeros)									\
		return 0;								\
	size_t r = (size_t)(k - zeros);							\
	select_##T(d + *lo, n - *lo, r - *lo);						\
	*lo = r;									\
	return d[r];									\
}											\
											\
static void dur_stats_##T(struct tk_prof_func *f, T *d, size_t n, uint64_t zeros)	\
{											\
	uint64_t total = n + zeros;							\
	f->ndur = total;								\
	if (!total)									\
		return;									\
	uint64_t k50 = total / 2, k90 = (uint64_t)((double)total * 0.9);		\
	uint64_t k99 = (uint64_t)((double)total * 0.99);				\
	T lo = n ? d[0] : 0, hi = lo;							\
	uint64_t s = 0;									\
	for (size_t i = 0; i < n; i++) {						\
		lo = d[i] < lo ? d[i] : lo;						\
		hi = d[i] > hi ? d[i] : hi;						\
		s += d[i];								\
	}										\
	f->dur_min = zeros ? 0 : lo;							\
	f->dur_max = hi;								\
	f->dur_sum = s;									\
	size_t done = 0;   /* d[done, n) holds the ranks from the last one selected up */	\
	f->dur_median = dur_rank_##T(d, n, zeros, k50, &done);				\
	f->dur_p90 = dur_rank_##T(d, n, zeros, k90, &done);				\
	f->dur_p99 = dur_rank_##T(d, n, zeros, k99, &done);				\
}

DEFINE_DUR_STATS(uint32_t)
DEFINE_DUR_STATS(uint64_t)

/* The statistics of function group G: WIDE says which slots hold its durations. */
static void dur_stats(struct tk_prof_func *f, const struct dur_place *dp, int wide, size_t first,
		      size_t n, uint64_t zeros)
{
	if (wide)
		dur_stats_uint64_t(f, dp->a64 + first, n, zeros);
	else
		dur_stats_uint32_t(f, dp->a32 + first, n, zeros);
}

/* The statistics of the functions not in radix groups, one job each, run on the pool in
 * parts of about equal durations: on the calling thread they were a third of its work
 * on libLLVM (selections in 11.6 M durations of 6,400 functions), serial at any -j. Each
 * job selects in its own slots and writes its own row. */
struct dur_job {
	struct tk_prof_func *row;
	size_t first, n;
	uint64_t zeros;
	int wide;
};

#define DUR_PARTS_PER_THREAD 4   /* a large function's part does not hold the others up */

struct dur_jobs {
	const struct dur_place *dp;
	const struct dur_job *v;
	size_t cut[MAX_PARTS * DUR_PARTS_PER_THREAD + 1];   /* part k: jobs [cut[k], cut[k + 1]) */
};

static int dur_part(void *ctx, size_t k)
{
	const struct dur_jobs *d = ctx;
	for (size_t i = d->cut[k]; i < d->cut[k + 1]; i++) {
		const struct dur_job *j = &d->v[i];
		dur_stats(j->row, d->dp, j->wide, j->first, j->n, j->zeros);
	}
	return 0;
}

static void run_dur_jobs(const struct tk_prof *p, const struct dur_place *dp,
			 const struct dur_job *v, size_t n)
{
	struct dur_jobs d = { .dp = dp, .v = v };
	size_t total = 0, np = p->opts.nthreads ? p->opts.nthreads : 1;
	for (size_t i = 0; i < n; i++)
		total += v[i].n;
	if (np > MAX_PARTS)
		np = MAX_PARTS;
	np = total / PAR_MIN < np ? total / PAR_MIN : np;
	size_t nparts = np > 1 ? np * DUR_PARTS_PER_THREAD : 1;
	/* part k ends at the first job that reaches (k + 1) / nparts of the durations */
	size_t i = 0, done = 0;
	for (size_t k = 0; k < nparts; k++) {
		d.cut[k] = i;
		while (i < n && (k + 1 == nparts || done < total / nparts * (k + 1)))
			done += v[i++].n;
	}
	d.cut[nparts] = n;
	if (nparts > 1) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = (unsigned)np, .window = nparts };
		if (tk_pool_run(&po, nparts, dur_part, NULL, &d) == 0)
			return;
	}
	dur_part(&(struct dur_jobs){ .dp = dp, .v = v, .cut = { 0, n } }, 0);
}

/* One batch's groups, merged and selected per group on the pool: the parts' histograms
 * summed into the first part's, each group's pages apart from the others', so the groups
 * need no lock. On the calling thread these sums were a third of a branch trace's serial
 * time at -j 2 (reading and zeroing up to 3 x 256 KiB per group and part). */
struct radix_merge {
	struct scan *s;
	size_t np;
	const uint32_t *big;
	struct radix_group *g;
	uint32_t g0, nb;
	int spec;                 /* pass 1's histograms are the counting pass's */
	int low;                  /* pass 2 (else pass 1) */
};

/* Group I after pass 1: the parts' high halves summed (and min, max, sum), the buckets of
 * the three ranks found, the histogram cleared for pass 2. */
static void radix_high(const struct radix_merge *m, uint32_t i)
{
	struct scan *s = m->s;
	const struct tk_prof *p = s[0].p;
	struct radix_group *r = &m->g[m->g0 + i];
	uint32_t *h = s[0].hist + ((size_t)i << 16);

	if (m->spec) {
		const uint32_t *slot = s[0].sp.slot;
		for (size_t f = 0; f < p->nfuncs; f++) {
			if (m->big[f] != m->g0 + i)
				continue;
			size_t k = slot[f];
			for (size_t t = 0; t < m->np; t++) {
				const struct spec *sp = &s[t].sp;
				if (sp->min[k] <= sp->max[k])
					add_range(h, sp->hist + (k << 16), sp->min[k] >> 16, sp->max[k] >> 16);
				r->sum += sp->sum[k];
				r->min = sp->min[k] < r->min ? sp->min[k] : r->min;
				r->max = sp->max[k] > r->max ? sp->max[k] : r->max;
			}
		}
	} else {
		for (size_t t = 0; t < m->np; t++) {
			if (t && s[t].gmin[i] <= s[t].gmax[i])
				add_range(h, s[t].hist + ((size_t)i << 16), s[t].gmin[i] >> 16,
					  s[t].gmax[i] >> 16);
			r->sum += s[t].gsum[i];
			r->min = s[t].gmin[i] < r->min ? s[t].gmin[i] : r->min;
			r->max = s[t].gmax[i] > r->max ? s[t].gmax[i] : r->max;
		}
	}
	uint64_t cum = 0;
	int want = 0;
	if (r->zeros)
		r->min = 0;
	/* no duration below MIN or above MAX: the buckets between are all there are */
	for (uint32_t b = r->min >> 16; b <= r->max >> 16 && want < 3; b++) {
		uint64_t in_b = h[b] + (b ? 0 : r->zeros);
		while (want < 3 && r->rank[want] < cum + in_b) {
			r->hi[want] = b;
			r->below[want] = cum;
			want++;
		}
		cum += in_b;
	}
	if (r->min <= r->max)
		clear_range(h, r->min >> 16, r->max >> 16);
}

/* Group I after pass 2: the parts' low halves summed inside the wanted buckets (up to
 * three, in three histograms: the first pass's memory, zeroed, and two more after it),
 * the three values, the histograms cleared for the next batch. */
static void radix_low(const struct radix_merge *m, uint32_t i)
{
	struct scan *s = m->s;
	uint32_t *hist = s[0].hist;
	struct radix_group *r = &m->g[m->g0 + i];
	uint32_t lo, hi, nb = m->nb;

	for (int w = 0; w < 3; w++) {
		size_t at = (size_t)(w * nb + i) << 16;
		low_range(r, r->hi[w], &lo, &hi);
		for (size_t t = 1; t < m->np && (!w || r->hi[w - 1] != r->hi[w]); t++)
			add_range(hist + at, s[t].hist + at, lo, hi);
	}
	for (int w = 0; w < 3; w++) {
		int slot = w;     /* the first rank with the same bucket counted it */
		while (slot > 0 && r->hi[slot - 1] == r->hi[w])
			slot--;
		const uint32_t *h = hist + ((size_t)(slot * nb + i) << 16);
		uint64_t cum = r->below[w] + (r->hi[w] ? 0 : r->zeros);   /* at 0 */
		low_range(r, r->hi[w], &lo, &hi);   /* none below LO */
		while (cum + h[lo] <= r->rank[w])
			cum += h[lo++];
		r->value[w] = r->hi[w] << 16 | lo;
	}
	for (int w = 0; w < 3; w++) {   /* cleared for the next batch */
		low_range(r, r->hi[w], &lo, &hi);
		if (!w || r->hi[w - 1] != r->hi[w])
			clear_range(hist + ((size_t)(w * nb + i) << 16), lo, hi);
	}
}

static int radix_group_job(void *ctx, size_t i)
{
	const struct radix_merge *m = ctx;

	if (m->low)
		radix_low(m, (uint32_t)i);
	else
		radix_high(m, (uint32_t)i);
	return 0;
}

/* Every group of the batch through pass 1's or pass 2's merge: on the parts' threads when
 * there are several parts, else here. */
static void radix_merge_groups(struct radix_merge *m, int low)
{
	m->low = low;
	if (m->np > 1 && m->nb > 1) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = (unsigned)m->np };
		if (tk_pool_run(&po, m->nb, radix_group_job, NULL, m) == 0)
			return;
	}
	for (uint32_t i = 0; i < m->nb; i++)
		radix_group_job(m, i);
}

static void radix_batch(struct scan *s, size_t np, const uint32_t *big, struct radix_group *g,
			uint32_t g0, uint32_t nb, int place)
{
	const struct tk_prof *p = s[0].p;
	const uint32_t *slot = s[0].sp.hist ? s[0].sp.slot : NULL;
	int spec = slot != NULL;

	for (size_t t = 0; t < np; t++) {
		s[t].g = g;
		s[t].g0 = g0;
		s[t].nb = nb;
		s[t].place = place;
	}
	/* pass 1: high halves, and min/max/sum; from the counting pass's histograms if it
	 * made them for every function of the batch */
	for (size_t f = 0; spec && f < p->nfuncs; f++)
		if (big[f] - g0 < nb && slot[f] == NONE32)
			spec = 0;
	if (!spec && nb) {
		for (size_t t = 0; t < np; t++) {
			memset(s[t].gsum, 0, sizeof s[t].gsum);
			memset(s[t].gmin, 0xff, sizeof s[t].gmin);
			memset(s[t].gmax, 0, sizeof s[t].gmax);
		}
		run_scans(s, np, SCAN_HIGH);
	}
	struct radix_merge m = { s, np, big, g, g0, nb, spec, 0 };
	radix_merge_groups(&m, 0);
	/* pass 2: low halves inside the wanted buckets; and, with PLACE, the other functions'
	 * durations into their slots */
	run_scans(s, np, SCAN_LOW);
	radix_merge_groups(&m, 1);
}

/* The statistics of the radix groups (in G), and with PLACE every other function's
 * durations in its slots (in the first pass 2, or a pass of its own without groups). */
static int radix_stats(struct scan *s, size_t np, const uint32_t *big, struct radix_group *g,
		       uint32_t ng, int place)
{
	/* as few batches as RADIX_GROUPS allows, the groups spread evenly over them */
	uint32_t nbatch = (ng + RADIX_GROUPS - 1) / RADIX_GROUPS;
	uint32_t per = nbatch ? (ng + nbatch - 1) / nbatch : 0;
	if (!ng) {
		for (size_t t = 0; t < np; t++) {
			s[t].g0 = s[t].nb = 0;     /* no group: places only */
			s[t].place = 1;
		}
		if (place)
			run_scans(s, np, SCAN_LOW);
		return 0;
	}
	/* megabytes each, of which the passes touch only the pages where durations fall
	 * (add_range): mapped, so not cleared here (calloc cleared 16 parts' 25 MiB each on
	 * the calling thread at -j 64) */
	for (size_t t = 0; t < np; t++) {
		s[t].hist_bytes = ((size_t)3 * per << 16) * sizeof *s[t].hist;
		s[t].hist = tk_map_zeroed(s[t].hist_bytes);
		if (!s[t].hist)
			return -TK_E_NOMEM;   /* the caller frees them */
		(void)madvise(s[t].hist, s[t].hist_bytes, MADV_HUGEPAGE);
	}
	for (uint32_t i = 0; i < ng; i++) {
		struct radix_group *r = &g[i];
		r->min = UINT32_MAX;
		r->rank[0] = r->n / 2;
		r->rank[1] = (uint64_t)((double)r->n * 0.9);
		r->rank[2] = (uint64_t)((double)r->n * 0.99);
	}
	for (uint32_t g0 = 0; g0 < ng; g0 += per) {
		uint32_t nb = ng - g0 < per ? ng - g0 : per;
		radix_batch(s, np, big, g, g0, nb, place && !g0);
	}
	return 0;
}

static void radix_rows(const struct radix_group *g, uint32_t ng, struct tk_prof_func *rows)
{
	for (uint32_t i = 0; i < ng; i++) {
		struct tk_prof_func *f = &rows[g[i].row];
		f->ndur = g[i].n;
		f->dur_min = g[i].min;
		f->dur_max = g[i].max;
		f->dur_sum = g[i].sum;
		f->dur_median = g[i].value[0];
		f->dur_p90 = g[i].value[1];
		f->dur_p99 = g[i].value[2];
	}
}

static int cmp_func_key(const void *a, const void *b)
{
	const struct tk_prof_func *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->track < y->track ? -1 : x->track > y->track;
}

/* TRACK's group (tk_prof_track_group), 0 if none. */
static uint32_t track_group(const struct tk_prof *p, uint32_t track)
{
	for (size_t i = 0; i < p->ntgroups; i++)
		if (p->tgroups[i].track == track)
			return p->tgroups[i].group;
	return 0;
}

/* Rows whose track holds their origin, by function and then group (GRP: each origin's). */
static int cmp_func_group(const void *a, const void *b, void *grp)
{
	const struct tk_prof_func *x = a, *y = b;
	const uint32_t *g = grp;
	if (x->kind != y->kind || x->key != y->key || g[x->track] == g[y->track])
		return cmp_func_key(a, b);
	return g[x->track] < g[y->track] ? -1 : 1;
}

/* ROWS to fold over tracks: each row's track becomes its origin (its index), the rows
 * sorted by function, then group; *GRP (malloc'd): each origin's group, then its track. */
static int sort_origins(const struct tk_prof *p, struct tk_prof_func *rows, size_t nrows, uint32_t **grp)
{
	uint32_t *g = malloc((2 * nrows + 1) * sizeof *g);
	if (!g)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < nrows; i++) {
		g[i] = track_group(p, rows[i].track);
		g[nrows + i] = rows[i].track;
		rows[i].track = (uint32_t)i;
	}
	qsort_r(rows, nrows, sizeof *rows, cmp_func_group, g);
	*grp = g;
	return 0;
}

static int same_row(const struct tk_prof_func *x, const struct tk_prof_func *y, const uint32_t *grp)
{
	return x->kind == y->kind && x->key == y->key && grp[x->track] == grp[y->track];
}

/* The rows from I on of the same function over the tracks of one group (ROWS and GRP from
 * sort_origins, of NROWS rows): their costs added up in *ACC (track 0, or one of the
 * group's); returns the end of the group. */
static size_t fold_group(const struct tk_prof_func *rows, size_t i, size_t nrows, const uint32_t *grp,
			 struct tk_prof_func *acc)
{
	size_t j = i;
	*acc = rows[i];
	acc->calls = acc->incl_ticks = acc->excl_ticks = acc->incl_insns = acc->excl_insns = 0;
	acc->cycles = acc->cyc_insns = 0;
	acc->track = grp[rows[i].track] ? grp[nrows + rows[i].track] : 0;
	for (; j < nrows && same_row(&rows[i], &rows[j], grp); j++) {
		acc->calls += rows[j].calls;
		acc->cycles += rows[j].cycles;
		acc->cyc_insns += rows[j].cyc_insns;
		acc->incl_ticks += rows[j].incl_ticks;
		acc->excl_ticks += rows[j].excl_ticks;
		acc->incl_insns += rows[j].incl_insns;
		acc->excl_insns += rows[j].excl_insns;
	}
	return j;
}

/* The duration statistics of a profile that holds runs (merged from partial results):
 * each row's distinct values with their counts, zeros among them, ranked as dur_stats
 * ranks a row's durations, without expanding a run into its durations. Folds the rows
 * over tracks unless PER_THREAD. */
static int runs_stats(const struct tk_prof *p, int per_thread, struct tk_prof_func *rows, size_t *nrows)
{
	uint32_t *row_of = malloc((p->nfuncs + 1) * sizeof *row_of);
	uint64_t *zeros = calloc(*nrows + 1, sizeof *zeros);
	uint32_t *grp = NULL;
	struct dval *v = NULL;
	size_t n = 0;

	if (!row_of || !zeros || (!per_thread && sort_origins(p, rows, *nrows, &grp) < 0)) {
		free(row_of);
		free(zeros);
		return -TK_E_NOMEM;
	}
	for (uint32_t i = 0; i < p->nfuncs; i++)
		row_of[i] = i;
	if (!per_thread) {
		size_t w = 0;
		for (size_t i = 0; i < *nrows; w++) {
			struct tk_prof_func acc;
			for (size_t j = fold_group(rows, i, *nrows, grp, &acc); i < j; i++)
				if (rows[i].track < p->nfuncs)
					row_of[rows[i].track] = (uint32_t)w;
			rows[w] = acc;
		}
		*nrows = w;
		free(grp);
	}
	for (uint32_t f = 0; f < p->nfuncs; f++)
		zeros[row_of[f]] += p->funcs[f].zeros;
	int rc = prof_duration_values(p, row_of, &v, &n);
	/* each row's values ascending, its zeros (the smallest) before them */
	for (size_t r = 0, i = 0; rc == 0 && r < *nrows; r++) {
		struct tk_prof_func *f = &rows[r];
		size_t j = i;
		uint64_t total = zeros[r];
		for (; j < n && v[j].func == r; j++)
			total += v[j].count;
		f->ndur = total;
		if (!total)
			continue;
		const uint64_t k[3] = { total / 2, (uint64_t)((double)total * 0.9),
					(uint64_t)((double)total * 0.99) };
		uint64_t *at[3] = { &f->dur_median, &f->dur_p90, &f->dur_p99 };
		uint64_t cum = zeros[r];
		size_t w = 0;
		for (; w < 3 && k[w] < cum; w++)
			*at[w] = 0;
		f->dur_min = zeros[r] ? 0 : v[i].ticks;
		f->dur_max = j > i ? v[j - 1].ticks : 0;
		f->dur_sum = 0;
		for (; i < j; i++) {
			f->dur_sum += v[i].ticks * v[i].count;
			cum += v[i].count;
			for (; w < 3 && k[w] < cum; w++)
				*at[w] = v[i].ticks;
		}
	}
	free(v);
	free(row_of);
	free(zeros);
	return rc;
}

/* The rows worth showing of ROWS[0, NROWS) to *OUT: drop the unknown rows that saw
 * nothing, and in a time window every such row (the calls that ran outside it, kept for
 * their stacks; the same with call filters). */
static int keep_rows(const struct tk_prof *p, struct tk_prof_func *rows, size_t nrows,
		     struct tk_prof_func **out, size_t *nout)
{
	size_t w = 0;
	const int window = (p->opts.flags & (TK_PROF_WINDOW | TK_PROF_FILTER)) != 0;
	for (size_t i = 0; i < nrows; i++)
		if ((rows[i].kind != TK_PROF_KEY_UNKNOWN && !window) || rows[i].incl_insns ||
		    rows[i].incl_ticks || (window && rows[i].calls))
			rows[w++] = rows[i];
	*out = rows;
	*nout = w;
	return 0;
}

/* Free the report's scratch V: on P's helper thread when it has one, as the main thread
 * goes on alone to write the report (unmapping the histograms and placed durations there
 * took it 5-10 ms of a libLLVM profile). */
static void scratch_free(const struct tk_prof *p, void *v)
{
	if (p->ahead && v)
		tk_ahead_free(p->ahead, v);
	else
		free(v);
}

static void scratch_unmap(const struct tk_prof *p, void *v, size_t bytes)
{
	if (p->ahead && v)
		tk_ahead_unmap(p->ahead, v, bytes);
	else
		tk_unmap(v, bytes);
}

int tk_prof_funcs(const struct tk_prof *p, int per_thread, struct tk_prof_func **out, size_t *nout)
{
	/* one row per func (per track), plus one per track for the unknown levels */
	size_t nrows = p->nfuncs + p->ntracks;
	struct tk_prof_func *rows = calloc(nrows + 1, sizeof *rows);

	*out = NULL;
	*nout = 0;
	if (!rows)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < p->nfuncs; i++) {
		rows[i].key = p->funcs[i].key;
		rows[i].kind = p->funcs[i].kind;
		rows[i].track = p->funcs[i].track;
	}
	for (size_t i = 0; i < p->ntracks; i++) {
		struct tk_prof_func *r = &rows[p->nfuncs + i];
		r->kind = TK_PROF_KEY_UNKNOWN;
		r->track = p->tracks[i].id;
	}
	int src = sum_rows(p, rows);
	if (src < 0) {
		free(rows);
		return src;
	}
	if (p->ndruns) {
		int rc = runs_stats(p, per_thread, rows, &nrows);
		if (rc < 0) {
			free(rows);
			return rc;
		}
		return keep_rows(p, rows, nrows, out, nout);
	}

	/* durations: counted per function, then placed so that the rows that fold together
	 * (one function over tracks) have theirs side by side */
	struct dur_place dp = { 0 };
	struct scan s[MAX_PARTS];
	memset(s, 0, sizeof s);
	size_t np = split_log(p, p->opts.nthreads, s);
	const size_t nf1 = p->nfuncs + 1;
	struct radix_group *rg = calloc(nf1, sizeof *rg);
	uint32_t nrg = 0;
	size_t *cnt = calloc(nf1, sizeof *cnt);
	size_t *part_arrays = calloc(4 * nf1 * np, sizeof *part_arrays);
	uint32_t *spec_slot = malloc(nf1 * sizeof *spec_slot);
	uint32_t nspec = 0;
	uint32_t *grp = NULL;   /* merged rows: each origin's group, then its track */
	struct dur_job *jobs = NULL;
	size_t njobs = 0;
	int rc = -TK_E_NOMEM;
	dp.off = calloc(nf1, sizeof *dp.off);
	dp.wide = calloc(nf1, 1);
	dp.big = malloc(nf1 * sizeof *dp.big);
	if (!cnt || !part_arrays || !dp.off || !dp.wide || !dp.big || !rg || !spec_slot)
		goto out;
	for (size_t i = 0; i < p->nfuncs; i++) {
		int want = p->nfuncs <= SPEC_FUNCS ||
			   (rows[i].calls >= RADIX_MIN && (nspec + 1) * np <= SPEC_HISTS);
		spec_slot[i] = want ? nspec++ : NONE32;
	}
	if (!p->ndlog)
		nspec = 0;
	for (size_t t = 0; t < np; t++) {
		s[t].cnt = part_arrays + 4 * nf1 * t;
		s[t].nbig = s[t].cnt + nf1;
		s[t].pos = s[t].cnt + 2 * nf1;
		s[t].bigi = s[t].cnt + 3 * nf1;
		s[t].dp = &dp;
	}
	memset(dp.big, 0xff, nf1 * sizeof *dp.big);
	for (size_t t = 0; nspec && t < np; t++) {
		struct spec *sp = &s[t].sp;
		sp->slot = spec_slot;
		sp->hist_bytes = ((size_t)nspec << 16) * sizeof *sp->hist;
		sp->hist = tk_map_zeroed(sp->hist_bytes);
		sp->sum = calloc(nspec, sizeof *sp->sum);
		sp->min = malloc(nspec * sizeof *sp->min);
		sp->max = calloc(nspec, sizeof *sp->max);
		if (!sp->hist || !sp->sum || !sp->min || !sp->max)
			goto out;
		memset(sp->min, 0xff, nspec * sizeof *sp->min);
	}
	if ((rc = run_scans(s, np, SCAN_COUNT)) < 0)
		goto out;
	rc = -TK_E_NOMEM;
	/* each part's first slot and big[] value of every function follow the parts before */
	for (size_t t = 0; t < np; t++) {
		for (size_t i = 0; i < p->nfuncs; i++) {
			s[t].pos[i] = cnt[i];
			s[t].bigi[i] = t ? s[t - 1].bigi[i] + s[t - 1].nbig[i] : 0;
			cnt[i] += s[t].cnt[i];
		}
	}
	size_t n32 = 0, n64 = 0;
	if (per_thread) {
		for (size_t i = 0; i < p->nfuncs; i++) {
			dp.wide[i] = p->funcs[i].nbig > 0;
			if (!dp.wide[i] && cnt[i] >= RADIX_MIN) {
				rg[nrg].row = i;
				rg[nrg].zeros = p->funcs[i].zeros;
				rg[nrg].n = cnt[i] + rg[nrg].zeros;
				dp.big[i] = nrg++;
				continue;
			}
			size_t *o = dp.wide[i] ? &n64 : &n32;
			dp.off[i] = *o;
			*o += cnt[i];
		}
	} else {
		/* fold rows of the same function over the tracks of one group; remember each
		 * row's func index */
		if (sort_origins(p, rows, nrows, &grp) < 0)
			goto out;
		for (size_t i = 0; i < nrows;) {
			size_t j = i, n = 0;
			uint64_t zeros = 0;
			int wide = 0;
			for (; j < nrows && same_row(&rows[i], &rows[j], grp); j++) {
				if (rows[j].track < p->nfuncs && p->funcs[rows[j].track].nbig)
					wide = 1;
				if (rows[j].track < p->nfuncs) {
					n += cnt[rows[j].track];
					zeros += p->funcs[rows[j].track].zeros;
				}
			}
			int radix = !wide && n >= RADIX_MIN;
			if (radix) {
				rg[nrg].n = n + zeros;
				rg[nrg].zeros = zeros;
			}
			size_t *o = wide ? &n64 : &n32;
			for (; i < j; i++) {
				uint32_t origin = rows[i].track;
				if (origin < p->nfuncs && radix) {
					dp.big[origin] = nrg;
				} else if (origin < p->nfuncs) {
					dp.wide[origin] = (uint8_t)wide;
					dp.off[origin] = *o;
					*o += cnt[origin];
				}
			}
			nrg += (uint32_t)radix;
		}
	}
	for (size_t t = 0; t < np; t++)
		for (size_t i = 0; i < p->nfuncs; i++)
			s[t].pos[i] += dp.off[i];
	/* on huge pages: libLLVM's 60 MB of durations were 15,000 small pages faulted in by
	 * the scans that place them */
	dp.a32 = tk_malloc_huge((n32 + 1) * sizeof *dp.a32);
	dp.a64 = tk_malloc_huge((n64 + 1) * sizeof *dp.a64);
	if (!dp.a32 || !dp.a64)
		goto out;
	/* the radix groups' statistics, and every other function's durations in its slots */
	if ((rc = radix_stats(s, np, dp.big, rg, nrg, n32 + n64 > 0)) < 0)
		goto out;
	rc = -TK_E_NOMEM;
	if (!(jobs = malloc((nrows + 1) * sizeof *jobs)))
		goto out;
	if (per_thread) {
		for (size_t i = 0; i < p->nfuncs; i++)
			if (dp.big[i] == NONE32)
				jobs[njobs++] = (struct dur_job){ &rows[i], dp.off[i], cnt[i],
								  p->funcs[i].zeros, dp.wide[i] };
	} else {
		size_t w = 0;
		for (size_t i = 0; i < nrows;) {
			size_t nd = 0, first = SIZE_MAX;
			uint64_t zeros = 0;
			int wide = 0;
			uint32_t radix = NONE32;
			struct tk_prof_func acc;
			for (size_t j = fold_group(rows, i, nrows, grp, &acc); i < j; i++) {
				uint32_t origin = rows[i].track;
				if (origin < p->nfuncs && dp.big[origin] != NONE32) {
					radix = dp.big[origin];
				} else if (origin < p->nfuncs) {
					if (first == SIZE_MAX)
						first = dp.off[origin];
					wide = dp.wide[origin];
					nd += cnt[origin];
					zeros += p->funcs[origin].zeros;
				}
			}
			if (radix != NONE32)
				rg[radix].row = w;   /* filled in by radix_rows */
			else
				jobs[njobs++] = (struct dur_job){ &rows[w], first == SIZE_MAX ? 0 : first,
								  nd, zeros, wide };
			rows[w++] = acc;   /* at or before the rows still to fold */
		}
		nrows = w;
	}
	run_dur_jobs(p, &dp, jobs, njobs);
	radix_rows(rg, nrg, rows);
	rc = 0;
out:
	for (size_t t = 0; t < np; t++) {
		scratch_unmap(p, s[t].sp.hist, s[t].sp.hist_bytes);
		free(s[t].sp.sum);
		free(s[t].sp.min);
		free(s[t].sp.max);
		scratch_unmap(p, s[t].hist, s[t].hist_bytes);
	}
	free(part_arrays);
	free(spec_slot);
	free(rg);
	free(dp.big);
	scratch_free(p, dp.a32);
	scratch_free(p, dp.a64);
	free(cnt);
	free(dp.off);
	free(dp.wide);
	free(grp);
	free(jobs);
	if (rc < 0) {
		free(rows);
		return rc;
	}
	return keep_rows(p, rows, nrows, out, nout);
}

int tk_prof_walk_paths(const struct tk_prof *p, tk_prof_path_fn fn, void *ctx)
{
	struct tk_prof_frame *frames = NULL;
	size_t cap = 0;
	struct dfs d = { 0 };
	int rc = 0;

	for (size_t ti = 0; ti < p->ntracks && rc >= 0; ti++) {
		const struct track *t = &p->tracks[ti];
		/* stack entries: (node, depth) pairs. Preorder keeps frames[0, depth - 1) the
		 * node's ancestors, so each path costs one frame, not its whole depth. */
		for (uint32_t c = p->links[t->root].first_child; c != NONE32 && rc >= 0; c = p->links[c].next_sibling)
			if ((rc = dfs_push(&d, c)) >= 0)
				rc = dfs_push(&d, 1);
		while (d.n && rc >= 0) {
			size_t depth = d.stack[--d.n];
			uint32_t v = d.stack[--d.n];
			if (depth > cap) {
				size_t nc = cap ? cap * 2 : 64;
				while (nc < depth)
					nc *= 2;
				struct tk_prof_frame *f = realloc(frames, nc * sizeof *f);
				if (!f) {
					rc = -TK_E_NOMEM;
					break;
				}
				frames = f;
				cap = nc;
			}
			const struct node *n = &p->nodes[v];
			frames[depth - 1].kind = n->kind;
			frames[depth - 1].key = n->kind == TK_PROF_KEY_UNKNOWN ? p->links[v].hint : n->key;
			struct tk_prof_path_stats st = {
				.track = n->track, .calls = n->calls,
				.incl_ticks = n->incl_ticks, .excl_ticks = n->excl_ticks,
				.incl_insns = n->incl_insns, .excl_insns = n->excl_insns,
			};
			/* a path that ran only outside the time window (or what the call
			 * filters keep) is not the window's */
			if (!(p->opts.flags & (TK_PROF_WINDOW | TK_PROF_FILTER)) || st.calls || st.incl_ticks || st.incl_insns)
				rc = fn(ctx, frames, depth, &st);
			for (uint32_t c = p->links[v].first_child; c != NONE32 && rc >= 0; c = p->links[c].next_sibling)
				if ((rc = dfs_push(&d, c)) >= 0)
					rc = dfs_push(&d, (uint32_t)depth + 1);
		}
	}
	free(d.stack);
	free(frames);
	return rc < 0 ? rc : 0;
}

int tk_prof_blocks(const struct tk_prof *p, struct tk_prof_block **out, size_t *n)
{
	*out = malloc((p->nblocks + 1) * sizeof **out);
	*n = 0;
	if (!*out)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < p->nblocks; i++)
		(*out)[i] = (struct tk_prof_block){ p->blocks[i].start, p->blocks[i].end,
						    p->blocks[i].execs, p->blocks[i].insns };
	/* counts still in the block cache (none after tk_prof_finish) */
	for (size_t i = 0; i < BLOCK_CACHE; i++) {
		const struct block_slot *c = &p->block_cache[i];
		if (c->execs) {
			(*out)[c->index].execs += c->execs;
			(*out)[c->index].insns += c->insns;
		}
	}
	*n = p->nblocks;
	return 0;
}

int tk_prof_has_cycles(const struct tk_prof *p)
{
	return p->ncyc != 0;
}
