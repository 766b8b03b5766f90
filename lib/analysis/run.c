/* The chunk runner: one tk_prof per chunk (decoded in parallel), merged in order, which
 * stitches call stacks across the seams. A merged chunk's profile is emptied for a later
 * chunk, by the worker that begins it (its tables keep their size: no growing and faulting
 * in again). A chunk whose merge would not give the one-pass profile (tk_prof_seam_exact)
 * is decoded again, its events going to the total directly (or its events, kept while seams
 * were in doubt, replayed). Instruction-flow formats count blocks in their walkers
 * (tk_flow_set_count_mode) instead of sending one event each: the same profile. */
#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/prof_internal.h"
#include "tracekit/detect.h"
#include "tracekit/flow.h"
#include "tracekit/internal/util.h"
#include "tracekit/run.h"
#include "tracekit/symbolize.h"

struct prof_run {
	struct tk_prof **chunks;
	uint8_t *redone;                /* per chunk: decoded again into the total */
	size_t n;
	struct tk_prof *total;
	int direct;                     /* chunks decoded in order on this thread: no partials */
	size_t first, end;              /* the chunks decoded; the others are skipped */
	const struct tk_run_part *part; /* NULL: all chunks merged into the total */
	struct tk_prof **spare;         /* merged profiles, emptied when taken (at most n) */
	size_t nspare;
	size_t merged;                  /* prof_merge calls so far (n: no spare is taken again) */
	pthread_mutex_t lock;           /* of spare: chunks begin and merge on any thread */
	struct tk_event_vec *evs;       /* each chunk's events, for the total in order (NULL:
					   none) */
	int all_evs;                    /* call filters: every chunk's events */
	uint8_t *recorded;              /* per chunk: its events in evs, no profile */
	size_t evs_until, backoff;      /* chunks before evs_until begin recording (lock) */
	struct tk_event_vec *spare_evs; /* emptied vectors (lock): no faulting in again */
	size_t nspare_evs;
	const struct tk_run_tee *tee;   /* each chunk's events also to the caller's sink */
	struct tee *tees;               /* per chunk: the profile's sink and the caller's */
	struct probe *probes;           /* per chunk: a profile that records its events too */
	int doubt;                      /* no seam judged exact since the start or the last
					   one that was not (lock) */
	int no_probes;                  /* TK_PROF_PROBES=0, or tk_source_info.exact_seams */
	int judged;                     /* a seam was judged (lock) */
	size_t bet;                     /* PROBE_BET, or TK_PROF_PROBES=N (tests) */
};

/* A chunk begun while seams are in doubt: its profile, and its events in case its seam
 * is not exact, so that the merge replays them instead of the merging thread decoding
 * the chunk again (a random walk's every seam: the main thread's time). */
struct probe {
	struct tk_prof *prof;
	struct tk_event_vec *evs;
	size_t bet;               /* events after which, with no return that its calls did not
				     make, it stops keeping them (SIZE_MAX: never) */
	int on;
	int given_up;             /* the profile was dropped, the events stay */
	int dropped;              /* the events were dropped: a plain chunk again */
};

/* Before any seam is judged, a probe bets on a program's trace (whose seams are nearly
 * always exact) after this many events without a doubtful return: keeping all of them
 * cost libLLVM's recording 40 MB of page faults for two chunks, for nothing. */
#define PROBE_BET ((size_t)1 << 16)

/* A chunk's events to two sinks: its profile's and the caller's (tk_run_profile_tee). */
struct tee {
	struct tk_sink prof, other;
};

static int tee_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tee *t = ctx;
	int rc = t->prof.events(t->prof.ctx, ev, n);

	return rc < 0 ? rc : t->other.events(t->other.ctx, ev, n);
}

/* Chunk I's event vector, emptied, to the spares (lock held): no faulting in again. */
static void evs_to_spare(struct prof_run *r, size_t i)
{
	r->evs[i].n = 0;
	r->spare_evs[r->nspare_evs++] = r->evs[i];
	r->evs[i] = (struct tk_event_vec){ 0 };
}

static struct tk_seam_counts seams;

static void seam_count(uint64_t *c)
{
	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

void tk_seam_counts(struct tk_seam_counts *c)
{
	c->exact = __atomic_load_n(&seams.exact, __ATOMIC_RELAXED);
	c->replayed = __atomic_load_n(&seams.replayed, __ATOMIC_RELAXED);
	c->given_up = __atomic_load_n(&seams.given_up, __ATOMIC_RELAXED);
	c->decoded_again = __atomic_load_n(&seams.decoded_again, __ATOMIC_RELAXED);
	c->grafted = __atomic_load_n(&seams.grafted, __ATOMIC_RELAXED);
	c->made = __atomic_load_n(&seams.made, __ATOMIC_RELAXED);
}

static int probe_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct probe *pr = ctx;
	int rc = pr->dropped ? 0 : tk_event_vec_add(pr->evs, ev, n);

	if (rc < 0 || pr->given_up)
		return rc;
	if ((rc = tk_prof_events(pr->prof, ev, n)) < 0)
		return rc;
	int doubt = prof_seam_doubt(pr->prof);
	if (doubt == 2) {
		pr->given_up = 1;   /* its seam cannot be exact: no more time on its profile */
	} else if (!doubt && !pr->dropped && pr->evs->n >= pr->bet) {
		pr->dropped = 1;
		pr->evs->n = 0;
	}
	return 0;
}

/* Blocks are counted by the walker, not sent one event each (the same profile). */
static int count_blocks(struct prof_run *r, struct tk_flow *flow)
{
	size_t nentries;
	const uint64_t *entries = tk_prof_entries(r->total, &nentries);

	/* a time window or call filter needs each block's time and stack: blocks come as
	 * events */
	int on = !(r->total->opts.flags & (TK_PROF_WINDOW | TK_PROF_FILTER));

	return flow ? tk_flow_set_count_mode(flow, on, entries, nentries) : 0;
}

static int prof_sink(struct prof_run *r, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	int err;

	if (i >= r->n)
		return -TK_E_INTERNAL;
	if (i < r->first || i >= r->end)
		return TK_CHUNK_SKIP;
	if (r->direct) {
		*sink = tk_prof_sink(r->total);
		return count_blocks(r, flow);
	}
	pthread_mutex_lock(&r->lock);
	r->recorded[i] = r->all_evs || i < r->evs_until;
	/* (the first chunk's seam is always exact; parts that keep their chunks' profiles
	 * judge no seams) */
	int probe = !r->recorded[i] && r->doubt && !r->no_probes && i > r->first &&
		    !(r->part && r->part->keep);
	size_t bet = r->judged ? SIZE_MAX : r->bet;
	r->chunks[i] = r->recorded[i] || !r->nspare ? NULL : r->spare[--r->nspare];
	if ((r->recorded[i] || probe) && r->nspare_evs)
		r->evs[i] = r->spare_evs[--r->nspare_evs];
	pthread_mutex_unlock(&r->lock);
	if (r->recorded[i]) {
		*sink = (struct tk_sink){ tk_event_vec_add, &r->evs[i] };
		return count_blocks(r, flow);
	}
	if (r->chunks[i])
		tk_prof_reset(r->chunks[i]);   /* a spare: emptied here, on the worker */
	else if (!(r->chunks[i] = tk_prof_new_like(r->total, &err)))
		return err;
	if ((err = count_blocks(r, flow)) < 0)
		return err;
	*sink = tk_prof_sink(r->chunks[i]);
	if (probe) {
		r->probes[i] = (struct probe){ r->chunks[i], &r->evs[i], bet, 1, 0, 0 };
		*sink = (struct tk_sink){ probe_events, &r->probes[i] };
	}
	return 0;
}

static int prof_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct prof_run *r = ctx;
	int rc = prof_sink(r, i, flow, sink);

	if (rc != 0 || !r->tee)
		return rc;
	struct tk_sink other = { NULL, NULL };

	if ((rc = r->tee->begin(r->tee->ctx, i, &other)) < 0)
		return rc;
	r->tees[i] = (struct tee){ *sink, other };
	*sink = (struct tk_sink){ tee_events, &r->tees[i] };
	return 0;
}

/* Chunks after a seam that was not exact record their events (for the total in order,
 * as one pass) instead of making a profile that would be decoded again: at first a few,
 * twice as many after each seam that fails again (a random walk's deep stacks: every
 * seam), and again profiles in parallel once one is exact (a longjmp now and then). */
#define EVS_BACKOFF 4

/* Before chunk I merges: a return in it that may end calls of the chunks before (longjmp
 * past the seam) makes its events go to the total itself, as in one pass. */
static int prof_redo(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct prof_run *r = ctx;
	int err;

	if (r->direct || (i < r->n && (r->recorded[i] || i < r->first || i >= r->end)) ||
	    (r->part && r->part->keep))
		return 0;
	if (i >= r->n || !r->chunks[i])
		return -TK_E_INTERNAL;
	if (!sink) {
		struct probe *pr = &r->probes[i];
		int exact = !pr->given_up && tk_prof_seam_exact(r->total, r->chunks[i]);
		pthread_mutex_lock(&r->lock);
		if (i > r->first) {   /* the first chunk's seam is always exact: it tells nothing */
			r->doubt = !exact;
			r->judged = 1;
		}
		if (exact) {
			r->backoff = EVS_BACKOFF;
		} else {
			if (r->evs_until < i + 1 + r->backoff)
				r->evs_until = i + 1 + r->backoff;
			if (r->backoff < r->n)
				r->backoff *= 2;
		}
		if (pr->on) {
			/* the merge takes the profile, or replays the events (if it kept them:
			 * else the chunk is decoded again, as a plain one) */
			if (!exact && !pr->dropped) {
				r->recorded[i] = 1;
				r->spare[r->nspare++] = r->chunks[i];
				r->chunks[i] = NULL;
			} else {
				evs_to_spare(r, i);
			}
			pr->on = 0;
		}
		pthread_mutex_unlock(&r->lock);
		seam_count(exact ? &seams.exact :
			   r->recorded[i] ? &seams.replayed : &seams.decoded_again);
		if (r->recorded[i] && pr->given_up)
			seam_count(&seams.given_up);
		return !exact && !r->recorded[i];
	}
	if ((err = count_blocks(r, flow)) < 0)
		return err;
	r->redone[i] = 1;
	*sink = tk_prof_sink(r->total);
	return 1;
}

/* A walker's block counts on their way to the total, added a batch at a time. */
struct block_batch {
	struct tk_prof *total;
	size_t n;
	struct tk_prof_block_count v[256];
};

static int add_block(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		     uint64_t insns)
{
	struct block_batch *b = ctx;

	(void)mode;
	b->v[b->n++] = (struct tk_prof_block_count){ start, last, execs, insns };
	if (b->n < sizeof b->v / sizeof b->v[0])
		return 0;
	b->n = 0;
	return tk_prof_add_blocks(b->total, b->v, sizeof b->v / sizeof b->v[0]);
}

static int drop_block(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		      uint64_t insns)
{
	(void)ctx, (void)start, (void)last, (void)mode, (void)execs, (void)insns;
	return 0;
}

/* All chunks merged: the block counts each walker gathered go into the total (they add up
 * in any order, so one table per walker instead of one per chunk). */
static int prof_done(void *ctx, struct tk_flow *flow)
{
	struct prof_run *r = ctx;

	if (r->part && r->part->no_blocks)
		return tk_flow_take_counts(flow, drop_block, NULL);
	/* once every chunk is merged, the spare chunk profiles go first: the total's block
	 * table grows into their pages (fresh ones cost the serial part more than the
	 * adding). Not before: a perf.data session's next stream takes them (done comes at
	 * the end of each stream). */
	for (; r->merged >= r->n && r->nspare; r->nspare--)
		tk_prof_free(r->spare[r->nspare - 1]);
	struct block_batch b = { .total = r->total };
	int rc = tk_flow_take_counts(flow, add_block, &b);
	return rc < 0 ? rc : tk_prof_add_blocks(r->total, b.v, b.n);
}

static int prof_merge(void *ctx, size_t i)
{
	struct prof_run *r = ctx;
	int rc;

	r->merged++;   /* (merges run one at a time) */

	if (r->tee && i < r->n && r->tees[i].other.events) {
		rc = r->tee->merge(r->tee->ctx, i, r->tees[i].other.ctx);
		r->tees[i].other.events = NULL;
		if (rc < 0)
			return rc;
	}
	if (r->direct || i < r->first || i >= r->end)
		return 0;
	if (r->recorded[i]) {
		struct tk_event_vec *v = &r->evs[i];
		rc = v->n ? tk_prof_events(r->total, v->ev, v->n) : 0;
		pthread_mutex_lock(&r->lock);
		evs_to_spare(r, i);
		pthread_mutex_unlock(&r->lock);
		return rc;
	}
	/* its durations move into the total, not copied; the chunk becomes a spare, emptied by
	 * the worker that takes it next (not here: merges run one at a time, in order) */
	if (r->part && r->part->keep)
		rc = r->part->keep(r->part->ctx, i, r->chunks[i]);
	else if (r->redone[i])
		rc = 0;
	else {
		size_t before = r->total->nnodes;
		__atomic_add_fetch(&seams.grafted, r->chunks[i]->nnodes, __ATOMIC_RELAXED);
		rc = tk_prof_merge_take(r->total, r->chunks[i]);
		__atomic_add_fetch(&seams.made, r->total->nnodes - before, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&r->lock);
	r->spare[r->nspare++] = r->chunks[i];
	pthread_mutex_unlock(&r->lock);
	r->chunks[i] = NULL;
	return rc;
}

static int run_profile(struct tk_source *s, struct tk_prof *total, const struct tk_run_part *part,
		       const struct tk_run_tee *tee)
{
	/* One thread decodes the chunks in order: their events go straight to the total.
	 * Chunk profiles would only add merges, and where a seam is not exact a second
	 * decoding of the chunk (every seam of a random walk's deep stacks: twice the work).
	 * A part keeps its chunks' profiles for the merge of the shards. */
	struct prof_run r = { .total = total, .lock = PTHREAD_MUTEX_INITIALIZER,
			      .direct = tk_source_info(s)->sequential ||
					(tk_source_threads(s) == 1 && !part),
			      .tee = tee };
	struct tk_chunk *plan;
	int rc = tk_source_plan(s, &plan, &r.n);

	if (rc < 0)
		return rc;
	free(plan);
	r.end = r.n;
	if (part) {
		if (part->sz < sizeof *part || part->first > r.n || part->count > r.n - part->first)
			return -TK_E_INVAL;
		r.first = part->first;
		r.end = part->first + part->count;
		r.part = part;
		/* kept profiles are saved, not finished: their durations counted as they end */
		if (part->keep)
			prof_count_durations(total);
	}
	r.chunks = calloc(r.n ? r.n : 1, sizeof(*r.chunks));
	r.spare = calloc(r.n ? r.n : 1, sizeof(*r.spare));
	r.redone = calloc(r.n ? r.n : 1, 1);
	r.tees = tee ? calloc(r.n ? r.n : 1, sizeof *r.tees) : NULL;
	r.recorded = calloc(r.n ? r.n : 1, 1);
	r.evs = calloc(r.n ? r.n : 1, sizeof *r.evs);
	r.spare_evs = calloc(r.n ? r.n : 1, sizeof *r.spare_evs);
	r.probes = calloc(r.n ? r.n : 1, sizeof *r.probes);
	/* TK_PROF_PROBES (tests): 0, no chunk keeps its events in doubt (every seam that is
	 * not exact is decoded again); N, the first probes bet after N events */
	const char *probes = getenv("TK_PROF_PROBES");
	unsigned long long bet = probes ? strtoull(probes, NULL, 10) : PROBE_BET;
	r.no_probes = bet == 0 || tk_source_info(s)->exact_seams;
	r.bet = (size_t)bet;
	r.doubt = 1;
	r.backoff = EVS_BACKOFF;
	/* call filters decide on the whole stack: no chunk profiles, the events in order */
	r.all_evs = !r.direct && (total->opts.flags & TK_PROF_FILTER);
	if (r.all_evs && part)
		rc = -TK_E_UNSUPPORTED;
	/* the calling thread decodes chunks while the one it merges next is not ready (no
	 * chunk waits for a merge): where merges are heavy, as a random walk's call tree of
	 * 18 M nodes built beside the helper's tables, -j 2 ran 5 % faster with it */
	struct tk_chunk_consumer c = { sizeof c, prof_begin, prof_merge, prof_redo, prof_done, &r, 1 };

	if (rc >= 0)
		rc = r.chunks && r.spare && r.redone && r.recorded && r.evs && r.spare_evs &&
		     r.probes && (!tee || r.tees) ? tk_source_run(s, &c) : -TK_E_NOMEM;
	for (size_t i = 0; r.evs && i < r.n; i++)
		free(r.evs[i].ev);
	free(r.evs);
	for (size_t i = 0; i < r.nspare_evs; i++)
		free(r.spare_evs[i].ev);
	free(r.spare_evs);
	free(r.probes);
	free(r.recorded);
	for (size_t i = 0; r.tees && i < r.n; i++)   /* begun, not merged: the run stopped */
		if (r.tees[i].other.events)
			tee->drop(tee->ctx, r.tees[i].other.ctx);
	free(r.tees);
	for (size_t i = 0; r.chunks && i < r.n; i++)
		tk_prof_free(r.chunks[i]);
	for (size_t i = 0; i < r.nspare; i++)
		tk_prof_free(r.spare[i]);
	free(r.chunks);
	free(r.spare);
	free(r.redone);
	return rc;
}

int tk_run_profile_part(struct tk_source *s, struct tk_prof *total, const struct tk_run_part *part)
{
	return run_profile(s, total, part, NULL);
}

int tk_run_profile(struct tk_source *s, struct tk_prof *total)
{
	return run_profile(s, total, NULL, NULL);
}

int tk_run_profile_tee(struct tk_source *s, struct tk_prof *total, const struct tk_run_tee *tee)
{
	if (!tee || tee->sz < sizeof *tee || !tee->begin || !tee->merge || !tee->drop)
		return -TK_E_INVAL;
	return run_profile(s, total, NULL, tee);
}

/* ---- call filters: function names to tk_prof_match bits ---------------------------------- */

struct name_match {
	struct tk_sym *sym;
	size_t n;
	regex_t *re;              /* a regex per pattern; NULL ones match by name */
	const char **pat;
	uint8_t *bits;            /* enum tk_prof_match */
	char buf[1024];
};

/* A pattern holding one of these is a regular expression (uftrace's rule). */
static int is_regex(const char *pat)
{
	return strpbrk(pat, ".[]()*+?{}|^$\\") != NULL;
}

static void name_match_free(void *ctx)
{
	struct name_match *m = ctx;

	for (size_t i = 0; i < m->n; i++)
		if (m->pat[i] && is_regex(m->pat[i]))
			regfree(&m->re[i]);
	free(m->re);
	free(m->pat);
	free(m->bits);
	free(m);
}

static int name_match_add(struct name_match *m, const char *const *pats, size_t n, uint8_t bits)
{
	for (size_t i = 0; i < n; i++, m->n++) {
		m->pat[m->n] = pats[i];
		m->bits[m->n] = bits;
		if (is_regex(pats[i]) && regcomp(&m->re[m->n], pats[i], REG_EXTENDED | REG_NOSUB)) {
			m->pat[m->n] = NULL;
			return -TK_E_INVAL;
		}
	}
	return 0;
}

static int name_match(void *ctx, uint64_t key, uint32_t kind)
{
	struct name_match *m = ctx;
	const char *name = kind == TK_PROF_KEY_ID ?
		tk_sym_func_name(m->sym, key, m->buf, sizeof m->buf) :
		tk_sym_addr_name(m->sym, key, 0, m->buf, sizeof m->buf);
	int bits = 0;

	for (size_t i = 0; i < m->n; i++)
		if (is_regex(m->pat[i]) ? !regexec(&m->re[i], name, 0, NULL, 0) : !strcmp(name, m->pat[i]))
			bits |= m->bits[i];
	return bits;
}

int tk_run_filter_calls(const struct tk_run_filter *f)
{
	struct tk_run_filter fl = { 0 };

	if (f)
		memcpy(&fl, f, f->sz < sizeof fl ? f->sz : sizeof fl);
	return fl.nfocus || fl.nexclude || fl.max_depth || fl.min_ns || fl.min_insns;
}

/* F's call filters into PO. */
static int call_filters(struct tk_prof_opts *po, const struct tk_run_filter *f, struct tk_sym *sym)
{
	if (!tk_run_filter_calls(f))
		return 0;
	po->flags |= TK_PROF_FILTER | (f->nfocus ? TK_PROF_FOCUS : 0);
	po->max_depth = f->max_depth;
	po->min_insns = f->min_insns;
	if (f->min_ns) {
		uint64_t hz = po->clock.ticks_per_second;
		if (!hz)
			return -TK_E_UNSUPPORTED;
		/* rounded up: a call of fewer ticks is shorter than MIN_NS */
		unsigned __int128 t = (unsigned __int128)f->min_ns * hz + 999999999u;
		po->min_ticks = (uint64_t)(t / 1000000000u);
	}
	size_t n = f->nfocus + f->nexclude;
	if (!n)
		return 0;
	struct name_match *m = calloc(1, sizeof *m);
	if (!m || !(m->re = calloc(n, sizeof *m->re)) || !(m->pat = calloc(n, sizeof *m->pat)) ||
	    !(m->bits = calloc(n, 1))) {
		if (m)
			name_match_free(m);
		return -TK_E_NOMEM;
	}
	m->sym = sym;
	int rc = name_match_add(m, f->focus, f->nfocus, TK_PROF_MATCH_FOCUS);
	if (rc >= 0)
		rc = name_match_add(m, f->exclude, f->nexclude, TK_PROF_MATCH_EXCLUDE);
	if (rc < 0) {
		name_match_free(m);
		return rc;
	}
	po->match = name_match;
	po->match_ctx = m;
	po->match_free = name_match_free;
	return 0;
}

/* A session of several processes: each thread's function entries are its own process's
 * (two non-PIE programs have other functions at the same addresses), as its names are. */
static int track_entries(struct tk_source *s, struct tk_prof *p)
{
	struct tk_chunk *ch = NULL;
	uint32_t *seen = NULL;
	struct tk_sym **procs = NULL;   /* one a process: its index + 1 is its group */
	size_t n = 0, nseen = 0, nprocs = 0;
	int rc;

	if (tk_source_info(s)->format != TK_FMT_PERF)
		return 0;
	if ((rc = tk_source_plan(s, &ch, &n)) < 0)
		return rc;
	if (n && (!(seen = malloc(n * sizeof *seen)) || !(procs = malloc(n * sizeof *procs))))
		rc = -TK_E_NOMEM;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		size_t k = 0;
		while (k < nseen && seen[k] != ch[i].track)
			k++;
		if (k < nseen)
			continue;
		seen[nseen++] = ch[i].track;
		uint32_t pid;
		char comm[32];
		struct tk_sym *sym;
		uint64_t *e = NULL;
		size_t ne = 0;
		if (tk_source_track_process(s, ch[i].track, &pid, comm, sizeof comm, &sym) < 0 ||
		    !sym || tk_sym_entries(sym, &e, &ne) < 0)
			continue;   /* the profile's entries (all processes' code) */
		rc = tk_prof_track_entries(p, ch[i].track, e, ne);
		free(e);
		/* and its functions' rows the process's, also when merged over threads */
		size_t g = 0;
		while (g < nprocs && procs[g] != sym)
			g++;
		if (g == nprocs)
			procs[nprocs++] = sym;
		if (rc >= 0)
			rc = tk_prof_track_group(p, ch[i].track, (uint32_t)g + 1);
	}
	free(seen);
	free(procs);
	free(ch);
	return rc < 0 ? rc : 0;
}

struct tk_prof *tk_run_prof_new(struct tk_source *s, int *err)
{
	return tk_run_prof_new_filtered(s, NULL, err);
}

/* A profile of F's filters for a trace with SYM's functions, CLOCK, more FLAGS. */
static struct tk_prof *prof_new(const struct tk_run_filter *f, struct tk_sym *sym,
				struct tk_trace_clock clock, unsigned flags, unsigned nthreads, int *err)
{
	struct tk_prof_opts po = { .sz = sizeof po, .clock = clock, .flags = flags,
				   .nthreads = nthreads };
	struct tk_run_filter fl = { 0 };
	uint64_t *entries = NULL;
	size_t n = 0;

	if (f)
		memcpy(&fl, f, f->sz < sizeof fl ? f->sz : sizeof fl);
	if (fl.time) {
		po.flags |= TK_PROF_WINDOW;
		po.window_begin = fl.time_begin;
		po.window_end = fl.time_end;
	}
	int rc = call_filters(&po, &fl, sym);
	if (rc < 0) {
		if (err)
			*err = rc;
		return NULL;
	}
	po.calls = fl.calls;
	if (tk_sym_entries(sym, &entries, &n) == 0) {
		po.entries = entries;
		po.nentries = n;
	}
	struct tk_prof *p = tk_prof_new(&po, err);
	free(entries);
	if (!p && po.match_free)
		po.match_free(po.match_ctx);
	return p;
}

struct tk_prof *tk_run_prof_new_filtered(struct tk_source *s, const struct tk_run_filter *f,
					 int *err)
{
	const struct tk_source_info *si = tk_source_info(s);
	struct tk_sym *sym = tk_source_symbols(s, err);

	if (!sym)
		return NULL;
	/* the workers also for the duration statistics (the same result for any count) */
	struct tk_prof *p = prof_new(f, sym, si->clock, si->sparse_time ? TK_PROF_SPARSE_TIME : 0,
				     s ? tk_source_threads(s) : 0, err);
	int rc;

	if (p && (rc = track_entries(s, p)) < 0) {
		tk_prof_free(p);
		if (err)
			*err = rc;
		return NULL;
	}
	return p;
}

struct tk_prof *tk_run_filter_prof(const struct tk_run_filter *f, struct tk_sym *sym,
				   struct tk_trace_clock clock, int *err)
{
	struct tk_run_filter fl = { 0 };

	if (f)
		memcpy(&fl, f, f->sz < sizeof fl ? f->sz : sizeof fl);
	fl.time = 0;
	fl.sz = sizeof fl;
	return prof_new(&fl, sym, clock, 0, 0, err);
}

/* ---- events in input order -------------------------------------------------------------- */

struct ev_run {
	struct tk_sink sink;
	int direct;
	struct tk_event_hold *chunks;   /* each chunk's events until its turn */
	size_t n;
};

static int ev_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ev_run *r = ctx;

	(void)flow;
	if (r->direct) {
		*sink = r->sink;
		return 0;
	}
	if (i >= r->n)
		return -TK_E_INTERNAL;
	r->chunks[i].to = &r->sink;
	sink->events = tk_event_hold_events;
	sink->ctx = &r->chunks[i];
	return 0;
}

static int ev_merge(void *ctx, size_t i)
{
	struct ev_run *r = ctx;

	return r->direct ? 0 : tk_event_vec_flush(&r->chunks[i].v, r->sink);
}

int tk_run_events(struct tk_source *s, struct tk_sink sink)
{
	struct ev_run r = { .sink = sink, .direct = tk_source_info(s)->sequential ||
						     tk_source_threads(s) <= 1 };
	struct tk_chunk *plan;
	int rc = tk_source_plan(s, &plan, &r.n);

	if (rc < 0)
		return rc;
	free(plan);
	if (!(r.chunks = calloc(r.n ? r.n : 1, sizeof *r.chunks)))
		return -TK_E_NOMEM;
	/* (a chunk's events wait in its hold, never for a merge) */
	struct tk_chunk_consumer c = { sizeof c, ev_begin, ev_merge, NULL, NULL, &r, 1 };

	rc = tk_source_run(s, &c);
	for (size_t i = 0; i < r.n; i++)
		tk_event_vec_free(&r.chunks[i].v);
	free(r.chunks);
	return rc;
}
