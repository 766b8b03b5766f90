/* Partial results as bytes (include/tracekit/partial.h, docs/formats/partial.md): a profile
 * that is not finished, and the partial file that holds one per input with a header saying
 * what it was made from; execution statistics before they are finished. Little-endian
 * fixed-width fields and LEB128 numbers; a loader that checks every count against the
 * bytes left and every index against its table before using it. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/prof_internal.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/partial.h"
#include "tracekit/xtrace.h"

#define PROF_MAGIC "TKPROF\0\1"
#define FILE_MAGIC "TKPART\r\n"

/* ---- bytes out ---------------------------------------------------------------------------- */

struct wbuf {
	uint8_t *p;
	size_t n, cap;
	int err;
};

static void put(struct wbuf *w, const void *v, size_t n)
{
	if (w->err)
		return;
	if (w->n + n > w->cap) {
		size_t c = w->cap ? w->cap : 4096;
		while (c < w->n + n)
			c *= 2;
		uint8_t *q = realloc(w->p, c);
		if (!q) {
			w->err = -TK_E_NOMEM;
			return;
		}
		w->p = q;
		w->cap = c;
	}
	memcpy(w->p + w->n, v, n);
	w->n += n;
}

static void put8(struct wbuf *w, uint8_t v)
{
	put(w, &v, 1);
}

static void put32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	put(w, b, 4);
}

static void put64(struct wbuf *w, uint64_t v)
{
	put32(w, (uint32_t)v);
	put32(w, (uint32_t)(v >> 32));
}

static void putv(struct wbuf *w, uint64_t v);

static void put_str(struct wbuf *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	putv(w, n);
	put(w, s, n);
}

/* LEB128: 7 bits a byte, low first; most fields of a profile are small numbers */
static void putv(struct wbuf *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		b[n++] |= v ? 0x80 : 0;
	} while (v);
	put(w, b, n);
}

/* a signed difference, zigzag: small either way */
static void putz(struct wbuf *w, uint64_t a, uint64_t b)
{
	int64_t d = (int64_t)(a - b);
	putv(w, (uint64_t)d << 1 ^ (uint64_t)(d >> 63));
}

static int finish(struct wbuf *w, uint8_t **data, size_t *len)
{
	if (w->err) {
		free(w->p);
		return w->err;
	}
	*data = w->p;
	*len = w->n;
	return 0;
}

/* ---- bytes in ----------------------------------------------------------------------------- */

struct rbuf {
	const uint8_t *p;
	size_t n, off;
	uint64_t base;            /* offset of p[0] in what the caller gave */
	struct tk_partial_error *e;
};

static int fail(struct rbuf *r, int code, uint64_t off, const char *fmt, ...)
{
	if (r->e && !r->e->code) {
		va_list ap;
		va_start(ap, fmt);
		r->e->code = code;
		r->e->offset = r->base + off;
		vsnprintf(r->e->msg, sizeof r->e->msg, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int failed(const struct rbuf *r)
{
	return r->e && r->e->code;
}

static const uint8_t *take(struct rbuf *r, size_t n, const char *what)
{
	if (failed(r))
		return NULL;
	if (n > r->n - r->off) {
		fail(r, -TK_E_TRUNCATED, r->off, "ends inside %s", what);
		return NULL;
	}
	r->off += n;
	return r->p + r->off - n;
}

static uint8_t get8(struct rbuf *r, const char *what)
{
	const uint8_t *b = take(r, 1, what);
	return b ? b[0] : 0;
}

static uint32_t get32(struct rbuf *r, const char *what)
{
	const uint8_t *b = take(r, 4, what);
	return b ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24 : 0;
}

static uint64_t get64(struct rbuf *r, const char *what)
{
	uint64_t lo = get32(r, what);
	return lo | (uint64_t)get32(r, what) << 32;
}

static uint64_t getv(struct rbuf *r, const char *what)
{
	uint64_t v = 0;
	size_t at = r->off;

	if (failed(r))
		return 0;
	for (unsigned shift = 0; r->off < r->n; shift += 7) {
		uint8_t b = r->p[r->off++];
		if (shift == 63 && b > 1) {
			fail(r, -TK_E_BAD_FORMAT, at, "%s: a number of more than 64 bits", what);
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		if (shift == 63)
			break;
	}
	fail(r, r->off < r->n ? -TK_E_BAD_FORMAT : -TK_E_TRUNCATED, at, "ends inside %s", what);
	return 0;
}

/* B plus a zigzag difference (putz) */
static uint64_t getz(struct rbuf *r, uint64_t b, const char *what)
{
	uint64_t z = getv(r, what);
	return b + ((z >> 1) ^ (0 - (z & 1)));
}

/* A count of records of at least SIZE bytes each: no more than the bytes left hold (so a
 * hostile count cannot make the reader allocate more than the input's size). */
static uint32_t get_count(struct rbuf *r, size_t size, const char *what)
{
	size_t at = r->off;
	uint64_t n = getv(r, what);
	if (!failed(r) && (n > UINT32_MAX || n * size > r->n - r->off)) {
		fail(r, -TK_E_BAD_FORMAT, at, "%llu %s do not fit in the %zu bytes left",
		     (unsigned long long)n, what, r->n - r->off);
		return 0;
	}
	return (uint32_t)n;
}

/* The same of a fixed-width u32 count (the execution statistics' blocks). */
static uint32_t get_count32(struct rbuf *r, size_t size, const char *what)
{
	size_t at = r->off;
	uint32_t n = get32(r, what);
	if (!failed(r) && (uint64_t)n * size > r->n - r->off) {
		fail(r, -TK_E_BAD_FORMAT, at, "%u %s do not fit in the %zu bytes left", n, what,
		     r->n - r->off);
		return 0;
	}
	return n;
}

/* An index: where NONE32 may be, written plus one (0: none) */
static void put_index(struct wbuf *w, uint32_t i, int allow_none)
{
	putv(w, allow_none ? (uint32_t)(i + 1) : i);
}

/* An index below N (or NONE32 where ALLOW_NONE). */
static uint32_t get_index(struct rbuf *r, size_t n, int allow_none, const char *what)
{
	size_t at = r->off;
	uint64_t i = getv(r, what);
	if (allow_none && !failed(r)) {
		if (!i)
			return NONE32;
		i--;
	}
	if (!failed(r) && i >= n) {
		fail(r, -TK_E_BAD_FORMAT, at, "%s %llu out of range (%zu)", what,
		     (unsigned long long)i, n);
		return allow_none ? NONE32 : 0;
	}
	return (uint32_t)i;
}

/* ---- a profile ---------------------------------------------------------------------------- */

/* (the profile's entries, not a track's own) */
static uint64_t entries_hash(const struct tk_prof *p)
{
	size_t n;
	const uint64_t *e = tk_prof_entries(p, &n);
	uint64_t h = n;
	for (size_t i = 0; i < n; i++)
		h = tk_hash64(h ^ e[i]);
	return h;
}

static void put_track(struct wbuf *w, const struct track *t)
{
	const uint64_t v[] = { t->id, t->root, t->insns, t->t_last, t->t_first, t->t_min, t->t_max,
			       t->base_node };
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		putv(w, v[i]);
	put_index(w, t->hint_node, 1);
	putv(w, t->level_i_start);
	putv(w, t->level_t_start);
	putv(w, t->base_child_ticks);
	putv(w, t->base_child_insns);
	put8(w, (uint8_t)t->gapped);
	put_index(w, t->gap_level_node, 1);
	putv(w, t->gap_insns);
	putv(w, t->gap_time);
	putv(w, t->gap_child_ticks);
	putv(w, t->gap_child_insns);
	put8(w, t->flow);
	put8(w, t->head_pending);
	putv(w, t->head_entry);
	putv(w, t->head_time);
	put8(w, t->untimed);
	putv(w, t->off_at);
	put8(w, t->off_known);
	putv(w, t->nunmatched);
	size_t nu = t->nunmatched < UNMATCHED_KEPT ? t->nunmatched : UNMATCHED_KEPT;
	for (size_t i = 0; i < nu; i++)
		putv(w, t->unmatched[i]);
	putv(w, t->depth);
	for (size_t i = 0; i < t->depth; i++) {
		const struct frame *f = &t->st[i];
		putv(w, f->node);
		put8(w, f->timed);
		put8(w, f->tail);
		putv(w, f->ret);
		putv(w, f->t_enter);
		putv(w, f->i_enter);
		putv(w, f->child_ticks);
		putv(w, f->child_insns);
	}
	putv(w, t->norph_enable);
	putv(w, t->norph);
	for (size_t i = 0; i < t->norph; i++) {
		const struct orphan *o = &t->orph[i];
		putv(w, o->what);
		putv(w, o->keykind);
		putv(w, o->key);
		putv(w, o->time);
		putv(w, o->insns);
		putv(w, o->child_ticks);
		putv(w, o->child_insns);
		putv(w, o->level_node);
	}
}

/* the fewest bytes a record can take (a byte a field): what a count is checked against */
#define FRAME_MIN 8
#define ORPHAN_MIN 8
#define NODE_MIN 11
#define TRACK_MIN 30
#define FUNC_MIN 4
#define BLOCK_MIN 4
#define RUN_MIN 2
/* a run of equal durations holds at most this many: a few bytes never stand for more
 * than a bounded number of durations (memory), and long runs cost a byte or two more */
#define RUN_MAX 256

/* The duration log as each function's durations, sorted and in runs of equal values
 * (what the statistics read of it is each function's set of durations, not their order):
 * per function, the count of runs, then each run's difference from the run before and
 * its length less one. */
static int put_durations(struct wbuf *w, const struct tk_prof *p)
{
	struct dval *v;
	size_t m;
	int rc = prof_duration_values(p, NULL, &v, &m);

	for (size_t f = 0, i = 0; rc == 0 && f < p->nfuncs; f++) {
		size_t e = i, runs = 0;
		for (; e < m && v[e].func == f; e++)
			runs += (v[e].count + RUN_MAX - 1) / RUN_MAX;
		putv(w, runs);
		for (uint64_t prev = 0; i < e; i++)
			for (uint64_t left = v[i].count; left;) {
				uint64_t len = left < RUN_MAX ? left : RUN_MAX;
				putv(w, v[i].ticks - prev);
				putv(w, len - 1);
				prev = v[i].ticks;
				left -= len;
			}
	}
	free(v);
	return rc;
}

int tk_prof_save(const struct tk_prof *p, uint8_t **data, size_t *len)
{
	struct wbuf w = { 0 };
	int rc;

	if (!p || !data || !len)
		return -TK_E_INVAL;
	if (p->finished)
		return -TK_E_BAD_STATE;
	if (p->nomem)
		return -TK_E_NOMEM;
	put(&w, PROF_MAGIC, 8);
	putv(&w, p->opts.flags);
	putv(&w, p->opts.clock.ticks_per_second);
	putv(&w, p->eset ? p->eset->n : 0);
	put64(&w, entries_hash(p));
	putv(&w, p->serial);
	putv(&w, p->final_orphans);
	const struct tk_prof_summary *s = &p->sum;
	const uint64_t sums[] = { s->events, s->blocks, s->insns, s->calls, s->returns, s->orphans,
				  s->unmatched, s->truncated, s->open_at_end, s->unwound, s->gaps,
				  s->time_first, s->time_last };
	for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
		putv(&w, sums[i]);
	/* functions in their order (a merge may have made them in another than their nodes') */
	putv(&w, p->nfuncs);
	for (size_t i = 0; i < p->nfuncs; i++) {
		putv(&w, p->funcs[i].key);
		putv(&w, p->funcs[i].kind);
		putv(&w, p->funcs[i].track);
		putv(&w, p->funcs[i].zeros);
	}
	/* nodes in creation order: a parent before its children, so that making them again
	 * in this order gives the same indexes and the same sibling lists; a key as its
	 * difference from its parent's (a callee is near its caller), a parent as how many
	 * nodes back it is (0: none) */
	putv(&w, p->nnodes);
	for (size_t i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		int root = n->parent == NONE32;
		putz(&w, n->key, root ? 0 : p->nodes[n->parent].key);
		putv(&w, n->kind);
		putv(&w, root ? 0 : i - n->parent);
		putv(&w, n->track);
		putv(&w, n->calls);
		putv(&w, n->incl_ticks);
		putv(&w, n->excl_ticks);
		putv(&w, n->incl_insns);
		putv(&w, n->excl_insns);
		putv(&w, p->links[i].hint);
		put8(&w, n->seam);
	}
	/* the nodes with cycles (Intel PT CYC): index (from the one before), cycles, insns */
	size_t ncyc = 0;
	for (size_t i = 0; i < p->ncyc; i++)
		ncyc += p->cyc[i].cycles || p->cyc[i].insns;
	putv(&w, ncyc);
	for (size_t i = 0, last = 0; i < p->ncyc; i++) {
		if (!p->cyc[i].cycles && !p->cyc[i].insns)
			continue;
		putv(&w, i - last);
		putv(&w, p->cyc[i].cycles);
		putv(&w, p->cyc[i].insns);
		last = i;
	}
	if ((rc = put_durations(&w, p)) < 0) {
		free(w.p);
		return rc;
	}
	/* blocks, with what the block cache has not yet added to them */
	putv(&w, p->nblocks);
	for (size_t i = 0; i < p->nblocks; i++) {
		const struct block *b = &p->blocks[i];
		const struct block_slot *c = &p->block_cache[block_slot(b->start)];
		int cached = c->execs && c->index == i;
		putv(&w, b->start);
		putz(&w, b->end, b->start);
		putv(&w, b->execs + (cached ? c->execs : 0));
		putv(&w, b->insns + (cached ? c->insns : 0));
	}
	putv(&w, p->ntracks);
	for (size_t i = 0; i < p->ntracks; i++)
		put_track(&w, &p->tracks[i]);
	return finish(&w, data, len);
}

static int get_track_state(struct rbuf *r, struct tk_prof *p, struct track *t)
{
	size_t nn = p->nnodes;

	memset(t, 0, sizeof *t);
	t->id = (uint32_t)getv(r, "a track");
	t->root = get_index(r, nn, 0, "track root node");
	if (!failed(r) && p->nodes[t->root].kind != KIND_TRACK)
		return fail(r, -TK_E_BAD_FORMAT, r->off - 1, "track root %u is not a track's node", t->root);
	t->insns = getv(r, "a track");
	t->t_last = getv(r, "a track");
	t->t_first = getv(r, "a track");
	t->t_min = getv(r, "a track");
	t->t_max = getv(r, "a track");
	t->base_node = get_index(r, nn, 0, "track base node");
	t->hint_node = get_index(r, nn, 1, "track hint node");
	t->level_i_start = getv(r, "a track");
	t->level_t_start = getv(r, "a track");
	t->base_child_ticks = getv(r, "a track");
	t->base_child_insns = getv(r, "a track");
	t->gapped = get8(r, "a track") != 0;
	t->gap_level_node = get_index(r, nn, 1, "track gap node");
	if (t->gapped && t->gap_level_node == NONE32)
		return fail(r, -TK_E_BAD_FORMAT, r->off - 1, "a gapped track without its gap's level");
	t->gap_insns = getv(r, "a track");
	t->gap_time = getv(r, "a track");
	t->gap_child_ticks = getv(r, "a track");
	t->gap_child_insns = getv(r, "a track");
	t->flow = get8(r, "a track");
	if (t->flow > FLOW_OTHER)
		return fail(r, -TK_E_BAD_FORMAT, r->off - 1, "track flow state %u unknown", t->flow);
	t->head_pending = get8(r, "a track") != 0;
	t->head_entry = getv(r, "a track");
	t->head_time = getv(r, "a track");
	t->untimed = get8(r, "a track") != 0;
	t->off_at = getv(r, "a track");
	t->off_known = get8(r, "a track") != 0;
	uint64_t nu = getv(r, "a track");
	t->nunmatched = (size_t)nu;
	for (size_t i = 0; i < (nu < UNMATCHED_KEPT ? nu : UNMATCHED_KEPT); i++)
		t->unmatched[i] = getv(r, "unmatched returns");
	uint32_t depth = get_count(r, FRAME_MIN, "frames");
	if (failed(r))
		return r->e->code;
	if (depth && !(t->st = malloc(depth * sizeof *t->st)))
		return -TK_E_NOMEM;
	t->cap = t->depth = depth;
	for (size_t i = 0; i < depth; i++) {
		struct frame *f = &t->st[i];
		f->node = get_index(r, nn, 0, "frame node");
		f->timed = get8(r, "a frame") != 0;
		f->tail = get8(r, "a frame") != 0;
		f->outside = 0;   /* partials are not made with a time window */
		f->ret = getv(r, "a frame");
		f->t_enter = getv(r, "a frame");
		f->i_enter = getv(r, "a frame");
		f->child_ticks = getv(r, "a frame");
		f->child_insns = getv(r, "a frame");
	}
	t->norph_enable = (size_t)getv(r, "a track");
	uint32_t norph = get_count(r, ORPHAN_MIN, "orphans");
	if (failed(r))
		return r->e->code;
	if (norph && !(t->orph = malloc(norph * sizeof *t->orph)))
		return -TK_E_NOMEM;
	t->corph = t->norph = norph;
	for (size_t i = 0; i < norph; i++) {
		struct orphan *o = &t->orph[i];
		size_t at = r->off;
		o->what = (uint32_t)getv(r, "an orphan");
		if (!failed(r) && (o->what < ORPH_EXIT || o->what > ORPH_ENABLE))
			return fail(r, -TK_E_BAD_FORMAT, at, "orphan kind %u unknown", o->what);
		o->keykind = (uint32_t)getv(r, "an orphan");
		o->key = getv(r, "an orphan");
		o->time = getv(r, "an orphan");
		o->insns = getv(r, "an orphan");
		o->child_ticks = getv(r, "an orphan");
		o->child_insns = getv(r, "an orphan");
		o->level_node = get_index(r, nn, 0, "orphan level node");
	}
	return failed(r) ? r->e->code : 0;
}

static struct tk_prof *load(const struct tk_prof *like, struct rbuf *r)
{
	int err = 0;
	struct tk_prof *p = tk_prof_new_like(like, &err);
	const uint8_t *m;

	if (!p) {
		fail(r, err, 0, "out of memory");
		return NULL;
	}
	if ((m = take(r, 8, "the profile's magic")) && memcmp(m, PROF_MAGIC, 8) != 0)
		fail(r, -TK_E_BAD_FORMAT, 0, "not a tracekit profile (magic)");
	uint64_t flags = getv(r, "the profile's header");
	uint64_t tps = getv(r, "the profile's header");
	uint64_t nentries = getv(r, "the profile's header");
	uint64_t eh = get64(r, "the profile's header");
	if (!failed(r) && (flags != p->opts.flags || tps != p->opts.clock.ticks_per_second))
		fail(r, -TK_E_BAD_FORMAT, 8, "made with other profile options (flags %#llx, clock "
		     "%llu ticks/s)", (unsigned long long)flags, (unsigned long long)tps);
	size_t here = p->eset ? p->eset->n : 0;
	if (!failed(r) && (nentries != here || eh != entries_hash(p)))
		fail(r, -TK_E_BAD_FORMAT, 8, "made with other function entries (%llu, here %zu): "
		     "other symbols or --elf", (unsigned long long)nentries, here);
	p->serial = getv(r, "the profile's header");
	p->final_orphans = getv(r, "the profile's header");
	struct tk_prof_summary *s = &p->sum;
	uint64_t *sums[] = { &s->events, &s->blocks, &s->insns, &s->calls, &s->returns, &s->orphans,
			     &s->unmatched, &s->truncated, &s->open_at_end, &s->unwound, &s->gaps,
			     &s->time_first, &s->time_last };
	for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
		*sums[i] = getv(r, "the profile's summary");

	uint32_t nf = get_count(r, FUNC_MIN, "functions");
	for (size_t i = 0; i < nf && !failed(r); i++) {
		size_t at = r->off;
		uint64_t key = getv(r, "a function");
		uint64_t kind = getv(r, "a function");
		uint64_t track = getv(r, "a function");
		uint64_t zeros = getv(r, "a function");
		if (failed(r))
			break;
		if (kind != TK_PROF_KEY_ADDR && kind != TK_PROF_KEY_ID) {
			fail(r, -TK_E_BAD_FORMAT, at, "function kind %llu unknown", (unsigned long long)kind);
			break;
		}
		uint32_t fi = prof_get_func(p, (uint32_t)track, key, (uint32_t)kind);
		if (fi == NONE32)
			fail(r, -TK_E_NOMEM, at, "out of memory");
		else if (fi != i)
			fail(r, -TK_E_BAD_FORMAT, at, "function %zu repeats function %u", i, fi);
		else
			p->funcs[fi].zeros = zeros;
	}
	uint32_t nn = get_count(r, NODE_MIN, "nodes");
	for (size_t i = 0; i < nn && !failed(r); i++) {
		size_t at = r->off;
		uint64_t kz = getv(r, "a node");
		uint64_t kind = getv(r, "a node");
		uint64_t back = getv(r, "a node");
		uint64_t track = getv(r, "a node");
		if (failed(r))
			break;
		/* a parent comes first: the tree has no cycles, whatever the bytes say */
		uint32_t parent = back && back <= i ? (uint32_t)(i - back) : NONE32;
		if (kind > KIND_TRACK || back > i || (parent == NONE32) != (kind == KIND_TRACK)) {
			fail(r, -TK_E_BAD_FORMAT, at, "node %zu: kind %llu, parent %llu back not "
			     "possible", i, (unsigned long long)kind, (unsigned long long)back);
			break;
		}
		uint64_t key = (parent == NONE32 ? 0 : p->nodes[parent].key) + ((kz >> 1) ^ (0 - (kz & 1)));
		uint32_t k = get_child(p, parent, key, (uint32_t)kind, (uint32_t)track);
		if (k == NONE32) {
			fail(r, -TK_E_NOMEM, at, "out of memory");
			break;
		}
		if (k != i) {
			fail(r, -TK_E_BAD_FORMAT, at, "node %zu repeats node %u", i, k);
			break;
		}
		struct node *n = &p->nodes[k];
		n->calls = getv(r, "a node");
		n->incl_ticks = getv(r, "a node");
		n->excl_ticks = getv(r, "a node");
		n->incl_insns = getv(r, "a node");
		n->excl_insns = getv(r, "a node");
		p->links[k].hint = getv(r, "a node");
		n->seam = get8(r, "a node") != 0;
	}
	if (!failed(r) && p->nfuncs != nf)
		fail(r, -TK_E_BAD_FORMAT, r->off, "the nodes name %zu functions, not %u", p->nfuncs, nf);
	uint32_t nc = get_count(r, 3, "nodes with cycles");
	for (size_t k = 0, i = 0; k < nc && !failed(r); k++) {
		size_t at = r->off;
		uint64_t d = getv(r, "cycles"), cyc = getv(r, "cycles"), ins = getv(r, "cycles");
		if (failed(r))
			break;
		if ((k && !d) || d >= nn - i) {
			fail(r, -TK_E_BAD_FORMAT, at, "cycles of node %llu more than %zu: no such node",
			     (unsigned long long)d, i);
			break;
		}
		i += d;
		if (prof_add_cycles(p, (uint32_t)i, cyc, ins) < 0)
			fail(r, -TK_E_NOMEM, at, "out of memory");
	}
	/* each function's durations: runs of equal values, ascending */
	for (uint32_t f = 0; f < nf && !failed(r); f++) {
		uint32_t runs = get_count(r, RUN_MIN, "runs of durations");
		uint64_t ticks = 0;
		for (uint32_t k = 0; k < runs && !failed(r); k++) {
			size_t at = r->off;
			uint64_t d = getv(r, "a run of durations"), len = getv(r, "a run of durations");
			if (failed(r))
				break;
			if ((!k && !d) || ticks + d < ticks || len >= RUN_MAX) {
				fail(r, -TK_E_BAD_FORMAT, at, "a run of %llu durations of %llu ticks more "
				     "not possible", (unsigned long long)len + 1, (unsigned long long)d);
				break;
			}
			ticks += d;
			if (prof_add_run(p, f, ticks, len + 1) < 0)
				fail(r, -TK_E_NOMEM, at, "out of memory");
		}
	}
	uint32_t nb = get_count(r, BLOCK_MIN, "blocks");
	for (size_t i = 0; i < nb && !failed(r); i++) {
		size_t at = r->off;
		uint64_t start = getv(r, "a block"), end = getz(r, start, "a block");
		uint64_t execs = getv(r, "a block"), insns = getv(r, "a block");
		struct block *b;
		if (failed(r))
			break;
		if (!(b = prof_get_block(p, start, end))) {
			fail(r, -TK_E_NOMEM, at, "out of memory");
			break;
		}
		if (b != &p->blocks[i]) {
			fail(r, -TK_E_BAD_FORMAT, at, "block %zu repeats an earlier one", i);
			break;
		}
		b->execs = execs;
		b->insns = insns;
	}
	uint32_t nt = get_count(r, TRACK_MIN, "tracks");
	if (!failed(r) && nt && prof_grow((void **)&p->tracks, &p->ctracks, nt, sizeof *p->tracks) < 0)
		fail(r, -TK_E_NOMEM, r->off, "out of memory");
	for (size_t i = 0; i < nt && !failed(r); i++) {
		size_t at = r->off;
		int rc = get_track_state(r, p, &p->tracks[i]);
		p->ntracks++;     /* freed with the profile, even half read */
		if (rc < 0)
			fail(r, rc, at, "out of memory");
		for (size_t k = 0; k < i && !failed(r); k++)
			if (p->tracks[k].id == p->tracks[i].id)
				fail(r, -TK_E_BAD_FORMAT, at, "track %u twice", p->tracks[i].id);
	}
	s->tracks = (uint32_t)p->ntracks;
	if (!failed(r) && r->off != r->n)
		fail(r, -TK_E_BAD_FORMAT, r->off, "%zu bytes after the profile", r->n - r->off);
	if (failed(r)) {
		tk_prof_free(p);
		return NULL;
	}
	return p;
}

struct tk_prof *tk_prof_load(const struct tk_prof *like, const uint8_t *data, size_t len,
			     struct tk_partial_error *e)
{
	struct tk_partial_error scratch;
	struct rbuf r = { data, len, 0, 0, e ? e : &scratch };

	memset(r.e, 0, sizeof *r.e);
	if (!like || (!data && len)) {
		fail(&r, -TK_E_INVAL, 0, "invalid argument");
		return NULL;
	}
	return load(like, &r);
}

/* ---- partial files ------------------------------------------------------------------------ */

#define HASH_SPAN ((uint64_t)1 << 20)

/* FNV-1a over N bytes, continuing from H. */
static uint64_t fnv(uint64_t h, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static int hash_span(int fd, uint64_t off, uint64_t n, uint64_t *h)
{
	uint8_t buf[65536];

	while (n) {
		ssize_t k = pread(fd, buf, n < sizeof buf ? (size_t)n : sizeof buf, (off_t)off);
		if (k <= 0)
			return -TK_E_IO;
		*h = fnv(*h, buf, (size_t)k);
		off += (uint64_t)k;
		n -= (uint64_t)k;
	}
	return 0;
}

int tk_partial_is(const uint8_t *data, size_t len)
{
	return len >= 8 && !memcmp(data, FILE_MAGIC, 8);
}

uint32_t tk_partial_shard_of(uint64_t at, uint64_t size, uint64_t total, uint32_t n)
{
	unsigned __int128 mid = (unsigned __int128)(at + size / 2) * n;
	uint64_t k = total ? (uint64_t)(mid / total) : 0;

	return (uint32_t)(k < n ? k : n - 1) + 1;
}

void tk_partial_shard_range(const uint64_t *sizes, size_t n, uint32_t shard, uint32_t nshards,
			    uint32_t *first, uint32_t *count)
{
	uint64_t total = 0, at = 0;

	for (size_t i = 0; i < n; i++)
		total += sizes[i];
	*first = *count = 0;
	for (size_t i = 0; i < n; i++) {
		if (tk_partial_shard_of(at, sizes[i], total, nshards) == shard) {
			*first = *count ? *first : (uint32_t)i;
			++*count;
		}
		at += sizes[i];
	}
}

int tk_partial_hash(const char *path, uint64_t *hash, uint64_t *size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -TK_E_IO;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -TK_E_IO;
	}
	uint64_t n = (uint64_t)st.st_size, h = 0xcbf29ce484222325ULL ^ n;
	uint64_t head = n < HASH_SPAN ? n : HASH_SPAN;
	rc = hash_span(fd, 0, head, &h);
	if (rc == 0 && n > HASH_SPAN)
		rc = hash_span(fd, n - HASH_SPAN, HASH_SPAN, &h);
	close(fd);
	*hash = h;
	*size = n;
	return rc;
}

int tk_partial_write(const struct tk_partial *p, uint8_t **data, size_t *len)
{
	struct wbuf w = { 0 };

	if (!p || !data || !len || (p->ninputs && !p->inputs))
		return -TK_E_INVAL;
	put(&w, FILE_MAGIC, 8);
	put32(&w, TK_PARTIAL_VERSION);
	put32(&w, p->command);
	put_str(&w, p->options);
	put32(&w, p->shard);
	put32(&w, p->nshards);
	putv(&w, p->ninputs);
	for (size_t i = 0; i < p->ninputs; i++) {
		const struct tk_partial_input *in = &p->inputs[i];
		put_str(&w, in->name);
		put64(&w, in->size);
		put64(&w, in->hash);
		put32(&w, in->nchunks);
		put32(&w, in->first);
		put32(&w, in->count);
		putv(&w, in->nparts);
		for (size_t k = 0; k < in->nparts; k++) {
			put32(&w, in->parts[k].chunk);
			put64(&w, in->parts[k].len);
			put(&w, in->parts[k].data, in->parts[k].len);
		}
		putv(&w, in->lost.gaps.count);
		putv(&w, in->lost.gaps.bytes_skipped);
		for (uint64_t k = 0; k < in->lost.gaps.count && k < TK_GAP_FIRST_OFFSETS; k++)
			put64(&w, in->lost.gaps.first_offsets[k]);
		putv(&w, in->lost.insns);
		putv(&w, in->lost.unmatched);
	}
	put32(&w, p->status);
	putv(&w, p->nmessages);
	for (size_t i = 0; i < p->nmessages; i++) {
		const struct tk_partial_message *m = &p->messages[i];
		if (m->input >= p->ninputs) {
			free(w.p);
			return -TK_E_INVAL;
		}
		putv(&w, m->input);
		putv(&w, m->level);
		put64(&w, m->offset);
		put_str(&w, m->text);
	}
	return finish(&w, data, len);
}

static const char *get_str(struct rbuf *r, const char *what)
{
	uint32_t n = get_count(r, 1, what);
	const uint8_t *b = take(r, n, what);
	if (!b)
		return NULL;
	if (memchr(b, 0, n)) {
		fail(r, -TK_E_BAD_FORMAT, (size_t)(b - r->p), "%s holds a NUL byte", what);
		return NULL;
	}
	char *s = malloc(n + 1);
	if (!s) {
		fail(r, -TK_E_NOMEM, r->off, "out of memory");
		return NULL;
	}
	memcpy(s, b, n);
	s[n] = 0;
	return s;
}

void tk_partial_clear(struct tk_partial *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->inputs && i < p->ninputs; i++) {
		free((char *)p->inputs[i].name);
		free(p->inputs[i].parts);
	}
	free(p->inputs);
	for (size_t i = 0; p->messages && i < p->nmessages; i++)
		free((char *)p->messages[i].text);
	free(p->messages);
	free((char *)p->options);
	memset(p, 0, sizeof *p);
}

int tk_partial_read(struct tk_partial *p, const uint8_t *data, size_t len, struct tk_partial_error *e)
{
	struct tk_partial_error scratch;
	struct rbuf r = { data, len, 0, 0, e ? e : &scratch };
	const uint8_t *m;

	memset(r.e, 0, sizeof *r.e);
	if (!p || (!data && len))
		return fail(&r, -TK_E_INVAL, 0, "invalid argument");
	memset(p, 0, sizeof *p);
	if ((m = take(&r, 8, "the magic")) && memcmp(m, FILE_MAGIC, 8) != 0)
		return fail(&r, -TK_E_BAD_FORMAT, 0, "not a tracekit partial result (magic)");
	p->version = get32(&r, "the header");
	if (!failed(&r) && p->version != TK_PARTIAL_VERSION)
		return fail(&r, -TK_E_UNSUPPORTED, 8, "partial format version %u (this tracekit "
			    "reads version %u)", p->version, TK_PARTIAL_VERSION);
	p->command = get32(&r, "the header");
	p->options = get_str(&r, "the options");
	p->shard = get32(&r, "the header");
	p->nshards = get32(&r, "the header");
	if (!failed(&r) && (!p->nshards || !p->shard || p->shard > p->nshards))
		fail(&r, -TK_E_BAD_FORMAT, r.off - 8, "shard %u of %u", p->shard, p->nshards);
	uint32_t n = get_count(&r, 30, "inputs");
	if (!failed(&r) && !(p->inputs = calloc(n ? n : 1, sizeof *p->inputs)))
		fail(&r, -TK_E_NOMEM, r.off, "out of memory");
	for (size_t i = 0; i < n && !failed(&r); i++) {
		struct tk_partial_input *in = &p->inputs[i];
		size_t at = r.off;
		in->name = get_str(&r, "an input's name");
		p->ninputs++;
		in->size = get64(&r, "an input");
		in->hash = get64(&r, "an input");
		in->nchunks = get32(&r, "an input");
		in->first = get32(&r, "an input");
		in->count = get32(&r, "an input");
		if (!failed(&r) && (in->first > in->nchunks || in->count > in->nchunks - in->first))
			fail(&r, -TK_E_BAD_FORMAT, at, "input %zu: chunks %u+%u of %u", i, in->first,
			     in->count, in->nchunks);
		uint32_t np = get_count(&r, 12, "results");
		if (!failed(&r) && !(in->parts = calloc(np ? np : 1, sizeof *in->parts)))
			fail(&r, -TK_E_NOMEM, r.off, "out of memory");
		for (size_t k = 0; k < np && !failed(&r); k++) {
			struct tk_partial_part *pt = &in->parts[k];
			size_t pat = r.off;
			pt->chunk = get32(&r, "a result");
			uint64_t sl = get64(&r, "a result");
			/* the chunks' results in order, inside the range; then the rest */
			if (!failed(&r) && ((k && in->parts[k - 1].chunk == TK_PARTIAL_REST) ||
			    (pt->chunk != TK_PARTIAL_REST &&
			     (pt->chunk < in->first || pt->chunk - in->first >= in->count ||
			      (k && in->parts[k - 1].chunk >= pt->chunk)))))
				fail(&r, -TK_E_BAD_FORMAT, pat, "input %zu: a result of chunk %u out of "
				     "place (chunks %u+%u)", i, pt->chunk, in->first, in->count);
			if (!failed(&r) && sl > r.n - r.off)
				fail(&r, -TK_E_TRUNCATED, r.off - 8, "ends inside a result of input "
				     "%zu (%llu bytes)", i, (unsigned long long)sl);
			pt->data = take(&r, (size_t)sl, "a result");
			pt->len = (size_t)sl;
			in->nparts++;
		}
		in->lost.gaps.count = getv(&r, "an input's losses");
		in->lost.gaps.bytes_skipped = getv(&r, "an input's losses");
		for (uint64_t k = 0; k < in->lost.gaps.count && k < TK_GAP_FIRST_OFFSETS; k++)
			in->lost.gaps.first_offsets[k] = get64(&r, "an input's losses");
		in->lost.insns = getv(&r, "an input's losses");
		in->lost.unmatched = getv(&r, "an input's losses");
	}
	p->status = get32(&r, "the shard's status");
	if (!failed(&r) && p->status > 255)
		fail(&r, -TK_E_BAD_FORMAT, r.off - 4, "exit status %u", p->status);
	uint32_t nm = get_count(&r, 11, "messages");
	if (!failed(&r) && !(p->messages = calloc(nm ? nm : 1, sizeof *p->messages)))
		fail(&r, -TK_E_NOMEM, r.off, "out of memory");
	for (size_t i = 0; i < nm && !failed(&r); i++) {
		struct tk_partial_message *msg = &p->messages[i];
		msg->input = get_index(&r, p->ninputs, 0, "a message's input");
		uint64_t level = getv(&r, "a message");
		if (!failed(&r) && level > TK_LOG_DEBUG)
			fail(&r, -TK_E_BAD_FORMAT, r.off - 1, "message level %llu unknown",
			     (unsigned long long)level);
		msg->level = (uint32_t)level;
		msg->offset = get64(&r, "a message");
		msg->text = get_str(&r, "a message");
		p->nmessages += msg->text != NULL;
	}
	if (!failed(&r) && r.off != r.n)
		fail(&r, -TK_E_BAD_FORMAT, r.off, "%zu bytes after the messages", r.n - r.off);
	if (failed(&r)) {
		tk_partial_clear(p);
		return r.e->code;
	}
	return 0;
}

/* ---- execution statistics (Intel PT, perf.data, branch traces) --------------------------- */

/* version 2: each block names its image (a process's code) */
#define EXEC_MAGIC "TKEXEC\0\2"
#define EXEC_BLOCK_BYTES 36

static void put_flow(struct wbuf *w, const struct tk_ipt_flow_stats *f)
{
	const uint64_t v[] = { f->insns, f->blocks, f->events, f->errors, f->overflows, f->chunks,
			       f->gaps.count, f->gaps.bytes_skipped };

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		put64(w, v[i]);
	for (size_t i = 0; i < TK_GAP_FIRST_OFFSETS; i++)
		put64(w, f->gaps.first_offsets[i]);
}

static int collect_block(void *ctx, const struct tk_ipt_exec_block *b)
{
	struct tk_ipt_exec_block **at = ctx;

	*(*at)++ = *b;
	return 0;
}

static int block_order(const void *a, const void *b)
{
	const struct tk_ipt_exec_block *x = a, *y = b;

	if (x->image != y->image)
		return x->image < y->image ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->last != y->last)
		return x->last < y->last ? -1 : 1;
	return (x->mode > y->mode) - (x->mode < y->mode);
}

int tk_partial_exec_save(const struct tk_ipt_exec *x, uint8_t **data, size_t *len)
{
	const struct tk_ipt_exec_stats *s = tk_ipt_exec_counts(x);
	size_t n = tk_ipt_exec_nblocks(x);
	struct tk_ipt_exec_block *v = malloc((n ? n : 1) * sizeof *v), *at = v;
	struct wbuf w = { 0 };

	if (!v)
		return -TK_E_NOMEM;
	tk_ipt_exec_blocks(x, collect_block, &at);
	/* by address, so that the same statistics are the same bytes (the table's order
	 * depends on the order blocks came in) */
	qsort(v, n, sizeof *v, block_order);
	put(&w, EXEC_MAGIC, 8);
	put_flow(&w, &s->flow);
	put64(&w, s->cond_taken);
	put64(&w, s->cond_not_taken);
	put64(&w, s->enables);
	put64(&w, s->disables);
	put64(&w, s->async_disables);
	put64(&w, s->interrupts);
	put32(&w, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		put64(&w, v[i].start);
		put64(&w, v[i].last);
		put64(&w, v[i].execs);
		put32(&w, v[i].ninsn);
		put32(&w, v[i].mode);
		put32(&w, v[i].image);
	}
	free(v);
	return finish(&w, data, len);
}

int tk_partial_exec_load(struct tk_ipt_exec *into, const uint8_t *data, size_t len,
			 struct tk_partial_error *e)
{
	struct tk_partial_error scratch;
	struct rbuf r = { data, len, 0, 0, e ? e : &scratch };
	struct tk_ipt_exec_stats s;
	struct tk_ipt_exec_block *v = NULL;
	const uint8_t *magic;
	uint32_t n;
	int rc = 0;

	memset(r.e, 0, sizeof *r.e);
	memset(&s, 0, sizeof s);
	if (!into || (!data && len))
		return fail(&r, -TK_E_INVAL, 0, "invalid argument");
	if ((magic = take(&r, 8, "the magic")) && memcmp(magic, EXEC_MAGIC, 8) != 0)
		return fail(&r, -TK_E_BAD_FORMAT, 0, "not execution statistics");
	uint64_t *f[] = { &s.flow.insns, &s.flow.blocks, &s.flow.events, &s.flow.errors,
			  &s.flow.overflows, &s.flow.chunks, &s.flow.gaps.count,
			  &s.flow.gaps.bytes_skipped };
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		*f[i] = get64(&r, "the decoding counts");
	for (size_t i = 0; i < TK_GAP_FIRST_OFFSETS; i++)
		s.flow.gaps.first_offsets[i] = get64(&r, "the gap offsets");
	uint64_t *c[] = { &s.cond_taken, &s.cond_not_taken, &s.enables, &s.disables,
			  &s.async_disables, &s.interrupts };
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		*c[i] = get64(&r, "the event counts");
	n = get_count32(&r, EXEC_BLOCK_BYTES, "blocks");
	if (!failed(&r) && !(v = malloc((n ? n : 1) * sizeof *v)))
		return fail(&r, -TK_E_NOMEM, r.off, "out of memory");
	for (uint32_t i = 0; i < n && !failed(&r); i++) {
		size_t at = r.off;

		v[i].start = get64(&r, "a block");
		v[i].last = get64(&r, "a block");
		v[i].execs = get64(&r, "a block");
		v[i].ninsn = get32(&r, "a block");
		v[i].mode = get32(&r, "a block");
		v[i].image = get32(&r, "a block");
		/* each instruction is at least a byte: a count that does not fit is damage */
		if (!failed(&r) && (v[i].mode > 2 || v[i].last < v[i].start ||
				    v[i].ninsn - 1 > v[i].last - v[i].start || !v[i].ninsn))
			fail(&r, -TK_E_BAD_FORMAT, at, "block %u: %u instructions from 0x%llx to "
			     "0x%llx in mode %u", i, v[i].ninsn, (unsigned long long)v[i].start,
			     (unsigned long long)v[i].last, v[i].mode);
		/* the images are the session's processes, numbered alike in every shard */
		else if (!failed(&r) && v[i].image >= tk_ipt_exec_nimages(into))
			fail(&r, -TK_E_BAD_FORMAT, at, "block %u: in image %u, of %zu (made from "
			     "another session?)", i, v[i].image, tk_ipt_exec_nimages(into));
	}
	if (!failed(&r) && r.off != r.n)
		fail(&r, -TK_E_BAD_FORMAT, r.off, "%zu bytes after the blocks", r.n - r.off);
	/* nothing is added unless all of it reads */
	for (uint32_t i = 0; i < n && !failed(&r) && rc >= 0; i++)
		rc = tk_ipt_exec_add_block(into, &v[i]);
	if (!failed(&r) && rc >= 0)
		tk_ipt_exec_add_counts(into, &s);
	free(v);
	return failed(&r) ? r.e->code : rc;
}

/* ---- xtrace statistics ----------------------------------------------------------------- */

#define XTST_MAGIC "TKXTST\0\1"

/* Every count of S, in one order (the file's). */
static size_t xtst_counts(struct tk_xtrace_stats *s, uint64_t **v)
{
	size_t n = 0;

	for (int i = 0; i < TK_XT__COUNT; i++)
		v[n++] = &s->items[i];
	v[n++] = &s->bytes;
	for (int i = 0; i < 4; i++)
		v[n++] = &s->insns[i];
	for (int i = 0; i < TK_A64__COUNT; i++)
		v[n++] = &s->cls[i];
	uint64_t *one[] = { &s->cond_taken, &s->cond_not_taken, &s->el_switches, &s->loads,
			    &s->stores, &s->load_bytes, &s->store_bytes, &s->time_first,
			    &s->time_last, &s->pc_unknown };
	for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
		v[n++] = one[i];
	for (int i = 0; i < 16; i++)
		v[n++] = &s->mem_size[i];
	for (int i = 0; i <= TK_XT_MAX_SYSCALL; i++)
		v[n++] = &s->syscalls[i];
	return n;
}
#define XTST_MAX_COUNTS (TK_XT__COUNT + TK_A64__COUNT + 32 + TK_XT_MAX_SYSCALL + 1)

int tk_partial_xtrace_stats_save(const struct tk_xtrace_stats *s, uint8_t **data, size_t *len)
{
	uint64_t *v[XTST_MAX_COUNTS], *lines;
	size_t n = xtst_counts((struct tk_xtrace_stats *)s, v), nl;
	struct wbuf w = { 0 };
	int first, last, rc = 0;

	put(&w, XTST_MAGIC, 8);
	putv(&w, n);
	for (size_t i = 0; i < n; i++)
		putv(&w, *v[i]);
	tk_xtrace_stats_els(s, &first, &last);
	putv(&w, (uint64_t)(first + 1));
	putv(&w, (uint64_t)(last + 1));
	for (int data_lines = 0; data_lines < 2 && rc == 0; data_lines++) {
		if ((rc = tk_xtrace_stats_lines(s, data_lines, &lines, &nl)) < 0)
			break;
		putv(&w, nl);
		for (size_t i = 0; i < nl; i++)   /* ascending: differences */
			putv(&w, i ? lines[i] - lines[i - 1] : lines[0]);
		free(lines);
	}
	if (rc < 0) {
		free(w.p);
		return rc;
	}
	return finish(&w, data, len);
}

int tk_partial_xtrace_stats_load(struct tk_xtrace_stats *s, const uint8_t *data, size_t len,
				 struct tk_partial_error *e)
{
	struct tk_partial_error scratch;
	struct rbuf r = { data, len, 0, 0, e ? e : &scratch };
	uint64_t *v[XTST_MAX_COUNTS];
	const uint8_t *magic;
	int rc = 0;

	memset(r.e, 0, sizeof *r.e);
	if (!s || (!data && len))
		return fail(&r, -TK_E_INVAL, 0, "invalid argument");
	if ((magic = take(&r, 8, "the magic")) && memcmp(magic, XTST_MAGIC, 8) != 0)
		return fail(&r, -TK_E_BAD_FORMAT, 0, "not xtrace statistics");
	size_t n = xtst_counts(s, v), at = r.off;
	uint64_t got = getv(&r, "the count of counts");
	if (!failed(&r) && got != n)
		fail(&r, -TK_E_BAD_FORMAT, at, "%llu counts, expected %zu (another version)",
		     (unsigned long long)got, n);
	for (size_t i = 0; i < n && !failed(&r); i++)
		*v[i] = getv(&r, "the counts");
	at = r.off;
	uint64_t first = getv(&r, "the exception levels"), last = getv(&r, "the exception levels");
	if (!failed(&r) && (first > 4 || last > 4 || (first == 0) != (last == 0)))
		fail(&r, -TK_E_BAD_FORMAT, at, "exception levels %lld and %lld",
		     (long long)first - 1, (long long)last - 1);
	tk_xtrace_stats_set_els(s, (int)first - 1, (int)last - 1);
	for (int data_lines = 0; data_lines < 2 && !failed(&r) && rc == 0; data_lines++) {
		uint32_t nl = get_count(&r, 1, "footprint lines");
		uint64_t line = 0;

		for (uint32_t i = 0; i < nl && !failed(&r) && rc == 0; i++) {
			at = r.off;
			uint64_t d = getv(&r, "a footprint line");
			/* strictly ascending and short of the top (a set holds x + 1) */
			if (!failed(&r) && ((i && !d) || d >= UINT64_MAX - line))
				fail(&r, -TK_E_BAD_FORMAT, at, "footprint line %u out of order", i);
			line += d;
			if (!failed(&r))
				rc = tk_xtrace_stats_add_line(s, data_lines, line);
		}
	}
	if (!failed(&r) && rc == 0 && r.off != r.n)
		fail(&r, -TK_E_BAD_FORMAT, r.off, "%zu bytes after the footprint", r.n - r.off);
	return failed(&r) ? r.e->code : rc;
}

/* ---- counts (a branch trace's decode --stat: each thread's) ---------------------------- */

#define COUNTS_MAGIC "TKCNTS\0\1"

int tk_partial_counts_save(const uint64_t *v, size_t n, uint8_t **data, size_t *len)
{
	struct wbuf w = { 0 };

	if (!data || !len || (!v && n))
		return -TK_E_INVAL;
	put(&w, COUNTS_MAGIC, 8);
	putv(&w, n);
	for (size_t i = 0; i < n; i++)
		putv(&w, v[i]);
	return finish(&w, data, len);
}

int tk_partial_counts_load(uint64_t **v, size_t *n, const uint8_t *data, size_t len,
			   struct tk_partial_error *e)
{
	struct tk_partial_error scratch;
	struct rbuf r = { data, len, 0, 0, e ? e : &scratch };
	const uint8_t *magic;

	memset(r.e, 0, sizeof *r.e);
	if (!v || !n || (!data && len))
		return fail(&r, -TK_E_INVAL, 0, "invalid argument");
	*v = NULL;
	*n = 0;
	if ((magic = take(&r, 8, "the magic")) && memcmp(magic, COUNTS_MAGIC, 8) != 0)
		return fail(&r, -TK_E_BAD_FORMAT, 0, "not counts");
	uint32_t k = get_count(&r, 1, "counts");
	if (!failed(&r) && !(*v = malloc((k ? k : 1) * sizeof **v)))
		return fail(&r, -TK_E_NOMEM, 0, "out of memory");
	for (uint32_t i = 0; i < k && !failed(&r); i++)
		(*v)[i] = getv(&r, "the counts");
	if (!failed(&r) && r.off != r.n)
		fail(&r, -TK_E_BAD_FORMAT, r.off, "%zu bytes after the counts", r.n - r.off);
	if (failed(&r)) {
		free(*v);
		*v = NULL;
		return r.e->code;
	}
	*n = k;
	return 0;
}
