/* Interned names of functions and a call tree aggregated by name. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "tracekit/internal/util.h"
#include "tracekit/symbolize.h"

uint64_t names_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
	return h;
}

int names_init(struct names *nm, struct tk_sym *sym)
{
	memset(nm, 0, sizeof *nm);
	nm->sym = sym;
	return names_intern(nm, "", 0) == 0 ? 0 : -TK_E_NOMEM;
}

void names_may_help(struct names *nm)
{
	nm->may_help = 1;
}

void names_free(struct names *nm)
{
	tk_ahead_stop(nm->ahead);   /* first: it may be populating the spare block */
	free(nm->spare);
	for (char *b = nm->arena, *prev; b; b = prev) {
		memcpy(&prev, b, sizeof prev);
		free(b);
	}
	free(nm->str);
	free(nm->len);
	free(nm->map);
	free(nm->keys.slot);
	free(nm->spaces);
	memset(nm, 0, sizeof *nm);
}

/* Strings are copied into blocks (a longer one gets a block of its own): a Kanata log's
 * timeline interns a label per instruction, nearly all distinct. Blocks double from
 * NAME_BLOCK up to 2 MiB, the larger ones on huge pages (fresh memory: a page fault per
 * 4 KiB costs about 20 us in a VM). */
#define NAME_BLOCK ((size_t)64 << 10)
#define NAME_BLOCK_MAX (((size_t)2 << 20) - sizeof(char *))

static char *name_copy(struct names *nm, const char *s, size_t len)
{
	if (len + 1 > nm->arena_left) {
		size_t block = nm->arena_size ? 2 * nm->arena_size + sizeof(char *) : NAME_BLOCK;
		block = block >= TK_HUGE_FROM ? NAME_BLOCK_MAX : block;   /* (a whole huge page) */
		size_t room = len + 1 > block ? len + 1 : block;
		char *b = NULL;
		if (nm->spare && room == NAME_BLOCK_MAX) {
			b = nm->spare;   /* (populated, or being populated: its contents are kept) */
			nm->spare = NULL;
		}
		if (!b && !(b = tk_malloc_huge(sizeof(char *) + room)))
			return NULL;
		/* the block after this one faulted in while this one fills */
		if (room == NAME_BLOCK_MAX && nm->ahead &&
		    (nm->spare = tk_malloc_huge(sizeof(char *) + NAME_BLOCK_MAX)) != NULL)
			tk_ahead_populate(nm->ahead, nm->spare, sizeof(char *) + NAME_BLOCK_MAX);
		memcpy(b, &nm->arena, sizeof nm->arena);   /* the block before, for names_free */
		nm->arena = b;
		nm->arena_next = b + sizeof(char *);
		nm->arena_left = nm->arena_size = room;
	}
	char *c = nm->arena_next;
	memcpy(c, s, len);
	c[len] = 0;
	nm->arena_next += len + 1;
	nm->arena_left -= len + 1;
	return c;
}

uint32_t names_intern(struct names *nm, const char *s, size_t len)
{
	return names_intern_hashed(nm, s, len, names_hash(s, len));
}

/* The names' map twice as large (the first: 256 slots). Entries move by the hash bits
 * they keep, up to 2^32 slots: a rehash that hashed every string again read a million
 * labels' text, each a cache miss; and with 0 for empty, the table needs no fill. */
static int names_grow(struct names *nm)
{
	size_t size = nm->map ? (nm->mask + 1) * 2 : 256;
	uint64_t *m = nm->ahead ? tk_ahead_take_table(nm->ahead, size * sizeof *m) : NULL;

	if (!m && !(m = tk_calloc_huge(size, sizeof *m)))
		return -1;
	for (size_t i = 0; nm->map && i <= nm->mask; i++) {
		uint64_t e = nm->map[i];
		if (!e)
			continue;
		uint32_t id = (uint32_t)e - 1;
		size_t k = size > ((size_t)1 << 32) ? names_hash(nm->str[id], nm->len[id]) : e >> 32;
		for (k &= size - 1; m[k]; k = (k + 1) & (size - 1))
			;
		m[k] = e;
	}
	if (nm->ahead)
		tk_ahead_free(nm->ahead, nm->map);   /* (its unmapping too, off this thread) */
	else
		free(nm->map);
	nm->map = m;
	nm->mask = size - 1;
	return 0;
}

/* Maps from this many bytes on are made by the helper (started then: a small run's
 * names never start it). */
#define NAMES_AHEAD_FROM ((size_t)1 << 20)

/* The helper asked for the next map once this one is 7/16 full (names_grow takes it at
 * half: asked earlier, it would often be made in vain at the end); zeroing a 16 MiB map
 * cost the interning thread 0.1 s when its pages were cold. */
static void names_ahead(struct names *nm)
{
	size_t slots = nm->mask + 1;
	if (!nm->may_help || 2 * slots * sizeof *nm->map < NAMES_AHEAD_FROM ||
	    nm->n + 1 != slots / 16 * 7)
		return;
	if (!nm->ahead && !(nm->ahead = tk_ahead_start())) {
		nm->may_help = 0;
		return;
	}
	tk_ahead_table(nm->ahead, 2 * slots * sizeof *nm->map);
}

uint32_t names_intern_hashed(struct names *nm, const char *s, size_t len, uint64_t h)
{
	if (((nm->n + 1) * 2 > nm->mask + 1 || !nm->map) && names_grow(nm) < 0)
		return UINT32_MAX;
	/* a probe compares the slot's hash bits first: the string is a miss away */
	size_t k = h & nm->mask;
	for (; nm->map[k]; k = (k + 1) & nm->mask) {
		uint32_t id = (uint32_t)nm->map[k] - 1;
		if (nm->map[k] >> 32 == (uint32_t)h && nm->len[id] == len && !memcmp(nm->str[id], s, len))
			return id;
	}
	if (len >= UINT32_MAX || nm->n >= UINT32_MAX - 1)
		return UINT32_MAX;
	if (nm->n == nm->cap) {
		size_t nc = nm->cap ? nm->cap * 2 : 256;
		char **ns = tk_realloc_huge(nm->str, nm->n * sizeof *ns, nc * sizeof *ns);
		if (!ns)
			return UINT32_MAX;
		nm->str = ns;
		uint32_t *nl = tk_realloc_huge(nm->len, nm->n * sizeof *nl, nc * sizeof *nl);
		if (!nl)
			return UINT32_MAX;
		nm->len = nl;
		nm->cap = nc;
	}
	names_ahead(nm);
	char *c = name_copy(nm, s, len);
	if (!c)
		return UINT32_MAX;
	nm->str[nm->n] = c;
	nm->len[nm->n] = (uint32_t)len;
	nm->map[k] = (uint64_t)(uint32_t)h << 32 | (nm->n + 1);
	return (uint32_t)nm->n++;
}

static const char *frame_name(struct tk_sym *sym, uint64_t key, uint32_t kind, char *buf, size_t n)
{
	switch (kind) {
	case TK_PROF_KEY_ID:
		if (sym)
			return tk_sym_func_name(sym, key, buf, n);
		snprintf(buf, n, "#%llu", (unsigned long long)key);
		return buf;
	case TK_PROF_KEY_ADDR:
		if (sym)
			return tk_sym_addr_name(sym, key, 0, buf, n);
		snprintf(buf, n, "0x%llx", (unsigned long long)key);
		return buf;
	default: {
		/* the function that was running when the trace (or a gap) left the stack unknown */
		struct tk_sym_info si;
		if (key && sym && tk_sym_lookup(sym, key, &si) == 0 && si.func) {
			snprintf(buf, n, "%s", si.func);
			return buf;
		}
		return "[unknown]";
	}
	}
}

/* KIND's high bits: which symbols named it (0: nm->sym, N: spaces[N - 1]); a key not
 * named yet (names_frame looks the others up itself). */
struct keyname *keymap_slot(struct keymap *m, uint64_t key, uint32_t kind)
{
	if (m->n * 2 + 2 > m->mask + 1 || !m->slot) {
		size_t size = m->slot ? (m->mask + 1) * 2 : 256;
		struct keyname *ns = malloc(size * sizeof *ns);
		if (!ns)
			return NULL;
		for (size_t i = 0; i < size; i++)
			ns[i].id = UINT32_MAX;
		for (size_t i = 0; m->slot && i <= m->mask; i++) {
			if (m->slot[i].id == UINT32_MAX)
				continue;
			size_t k = tk_hash64(m->slot[i].key ^ m->slot[i].kind) & (size - 1);
			while (ns[k].id != UINT32_MAX)
				k = (k + 1) & (size - 1);
			ns[k] = m->slot[i];
		}
		free(m->slot);
		m->slot = ns;
		m->mask = size - 1;
	}
	size_t k = tk_hash64(key ^ kind) & m->mask;
	while (m->slot[k].id != UINT32_MAX && !(m->slot[k].key == key && m->slot[k].kind == kind))
		k = (k + 1) & m->mask;
	return &m->slot[k];
}

static uint32_t frame_id_new(struct names *nm, struct tk_sym *sym, uint64_t key, uint32_t kind)
{
	struct keyname *slot = keymap_slot(&nm->keys, key, kind);
	if (!slot)
		return UINT32_MAX;
	if (slot->id != UINT32_MAX)
		return slot->id;
	char buf[512];
	const char *s = frame_name(sym, key, kind & 0xff, buf, sizeof buf);
	uint32_t id = names_intern(nm, s, strlen(s));
	if (id == UINT32_MAX)
		return id;
	*slot = (struct keyname){ key, kind, id };
	nm->keys.n++;
	return id;
}

static uint32_t frame_id(struct names *nm, struct tk_sym *sym, uint32_t space, uint64_t key,
			 uint32_t kind)
{
	uint32_t id = names_key_find(nm, key, kind | space << 8);
	return id != UINT32_MAX ? id : frame_id_new(nm, sym, key, kind | space << 8);
}

uint32_t names_frame_new(struct names *nm, uint64_t key, uint32_t kind)
{
	return frame_id_new(nm, nm->sym, key, kind);
}

uint32_t names_frame_in(struct names *nm, struct tk_sym *sym, uint64_t key, uint32_t kind)
{
	size_t i = 0;

	if (sym == nm->sym)
		return names_frame(nm, key, kind);
	while (i < nm->nspaces && nm->spaces[i] != sym)
		i++;
	if (i == nm->nspaces) {
		struct tk_sym **sp = realloc(nm->spaces, (i + 1) * sizeof *sp);
		if (!sp || i >= 0xffffff)
			return UINT32_MAX;
		nm->spaces = sp;
		nm->spaces[nm->nspaces++] = sym;
	}
	return frame_id(nm, sym, (uint32_t)i + 1, key, kind);
}

/* ---- call tree by name ----------------------------------------------------------------- */

static uint32_t agg_child(struct agg *a, uint32_t parent, uint32_t name)
{
	if ((a->nn + 1) * 2 > a->mask + 1 || !a->map) {
		size_t size = a->map ? (a->mask + 1) * 2 : 1024;
		uint32_t *m = malloc(size * sizeof *m);
		if (!m)
			return UINT32_MAX;
		memset(m, 0xff, size * sizeof *m);
		for (size_t i = 1; i < a->nn; i++) {
			size_t k = tk_hash64((uint64_t)a->n[i].parent << 32 | a->n[i].name) & (size - 1);
			while (m[k] != UINT32_MAX)
				k = (k + 1) & (size - 1);
			m[k] = (uint32_t)i;
		}
		free(a->map);
		a->map = m;
		a->mask = size - 1;
	}
	size_t k = tk_hash64((uint64_t)parent << 32 | name) & a->mask;
	for (; a->map[k] != UINT32_MAX; k = (k + 1) & a->mask) {
		const struct agg_node *n = &a->n[a->map[k]];
		if (n->parent == parent && n->name == name)
			return a->map[k];
	}
	if (a->nn == a->cap) {
		size_t nc = a->cap * 2;
		struct agg_node *nn = realloc(a->n, nc * sizeof *nn);
		if (!nn)
			return UINT32_MAX;
		a->n = nn;
		a->cap = nc;
	}
	uint32_t i = (uint32_t)a->nn++;
	a->n[i] = (struct agg_node){ .name = name, .parent = parent, .first_child = UINT32_MAX,
				     .next_sibling = a->n[parent].first_child };
	a->n[parent].first_child = i;
	a->map[k] = i;
	return i;
}

struct agg_walk {
	struct agg *a;
	uint32_t *path;           /* agg node per depth */
	size_t cap;
	int err;
};

static int agg_visit(void *ctx, const struct tk_prof_frame *fr, size_t depth,
		     const struct tk_prof_path_stats *st)
{
	struct agg_walk *w = ctx;
	struct agg *a = w->a;
	if (depth + 1 > w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		while (nc < depth + 1)
			nc *= 2;
		uint32_t *np = realloc(w->path, nc * sizeof *np);
		if (!np)
			return -TK_E_NOMEM;
		w->path = np;
		w->cap = nc;
	}
	/* parents are visited before children: path[0..depth-1) is valid for this path */
	uint32_t parent = 0;
	if (a->tracks) {
		char buf[64];
		int n = snprintf(buf, sizeof buf, "%.40s %u", a->tracks, out_track_id(a->o, st->track));
		uint32_t nm = names_intern(a->names, buf, (size_t)n);
		parent = nm == UINT32_MAX ? UINT32_MAX : agg_child(a, 0, nm);
		if (parent == UINT32_MAX)
			return -TK_E_NOMEM;
	}
	if (depth > 1)
		parent = w->path[depth - 2];
	/* a thread's frames named from its process's symbols (the last track's kept) */
	if (a->by_proc && (!a->proc_known || st->track != a->proc_track)) {
		uint32_t pid;
		char comm[32];
		a->proc_known = 1;
		a->proc_track = st->track;
		if (out_track_process(a->o, st->track, &pid, comm, sizeof comm, &a->proc_sym) < 0)
			a->proc_sym = a->names->sym;
	}
	uint32_t name = a->by_proc ? names_frame_in(a->names, a->proc_sym, fr[depth - 1].key,
						   fr[depth - 1].kind)
				  : names_frame(a->names, fr[depth - 1].key, fr[depth - 1].kind);
	if (name == UINT32_MAX)
		return -TK_E_NOMEM;
	uint32_t v = agg_child(a, parent, name);
	if (v == UINT32_MAX)
		return -TK_E_NOMEM;
	w->path[depth - 1] = v;
	struct agg_node *n = &a->n[v];
	n->calls += st->calls;
	n->incl_ticks += st->incl_ticks;
	n->excl_ticks += st->excl_ticks;
	n->incl_insns += st->incl_insns;
	n->excl_insns += st->excl_insns;
	return 0;
}

const char *out_track_label(const struct tk_out_opts *o)
{
	if (!o->threads)
		return NULL;
	if (o->sz >= offsetof(struct tk_out_opts, track_label) + sizeof(o->track_label) &&
	    o->track_label)
		return o->track_label;
	return "thread";
}

uint32_t out_track_id(const struct tk_out_opts *o, uint32_t track)
{
	if (o->sz >= offsetof(struct tk_out_opts, track_ctx) + sizeof(o->track_ctx) && o->track_id)
		return o->track_id(o->track_ctx, track);
	return track;
}

int out_track_process(const struct tk_out_opts *o, uint32_t track, uint32_t *pid, char *comm,
		      size_t n, struct tk_sym **sym)
{
	if (o->sz < offsetof(struct tk_out_opts, track_process) +
				   sizeof(o->track_process) || !o->track_process)
		return -1;
	*sym = NULL;
	if (o->track_process(o->track_ctx, track, pid, comm, n, sym) < 0)
		return -1;
	if (!*sym)
		*sym = o->sym;
	return 0;
}

int agg_build(struct agg *a, const struct tk_prof *p, struct names *nm,
	      const struct tk_out_opts *o)
{
	memset(a, 0, sizeof *a);
	a->names = nm;
	a->tracks = o ? out_track_label(o) : NULL;
	a->by_proc = o && (o->threads || tk_prof_grouped(p));
	a->o = o;
	a->sparse = (tk_prof_flags(p) & TK_PROF_SPARSE_TIME) != 0;
	a->cap = 1024;
	a->n = malloc(a->cap * sizeof *a->n);
	if (!a->n)
		return -TK_E_NOMEM;
	a->n[0] = (struct agg_node){ .parent = UINT32_MAX, .first_child = UINT32_MAX,
				     .next_sibling = UINT32_MAX };
	a->nn = 1;
	struct agg_walk w = { .a = a };
	int rc = tk_prof_walk_paths(p, agg_visit, &w);
	free(w.path);
	if (rc < 0)
		return rc;
	/* the root's totals: sum of its children */
	for (uint32_t c = a->n[0].first_child; c != UINT32_MAX; c = a->n[c].next_sibling) {
		a->n[0].incl_ticks += a->n[c].incl_ticks;
		a->n[0].incl_insns += a->n[c].incl_insns;
	}
	return 0;
}

void agg_free(struct agg *a)
{
	free(a->n);
	free(a->map);
	memset(a, 0, sizeof *a);
}

void out_csv_quoted(struct tk_buf *b, const char *s)
{
	tk_buf_putc(b, '"');
	for (; *s; s++) {
		if (*s == '"')
			tk_buf_putc(b, '"');
		tk_buf_putc(b, *s);
	}
	tk_buf_putc(b, '"');
}

enum tk_out_metric out_metric(const struct tk_prof *p, enum tk_out_metric m)
{
	struct tk_prof_summary s;
	if (m != TK_OUT_M_AUTO)
		return m;
	tk_prof_summary(p, &s);
	if (s.insns)
		return TK_OUT_M_INSNS;
	if (s.time_first != TK_TIME_NONE && s.time_last > s.time_first)
		return TK_OUT_M_TICKS;
	return TK_OUT_M_CALLS;
}

uint64_t agg_self(const struct agg_node *n, enum tk_out_metric m)
{
	switch (m) {
	case TK_OUT_M_INSNS: return n->excl_insns;
	case TK_OUT_M_TICKS: return n->excl_ticks;
	default: return n->calls;
	}
}

uint64_t agg_total(const struct agg_node *n, enum tk_out_metric m)
{
	switch (m) {
	case TK_OUT_M_INSNS: return n->incl_insns;
	case TK_OUT_M_TICKS: return n->incl_ticks;
	default: return n->calls;
	}
}

struct sort_ctx {
	const struct agg *a;
	enum tk_out_metric m;
};

static int cmp_child(const void *x, const void *y, void *ctx)
{
	const struct sort_ctx *sc = ctx;
	const struct agg_node *a = &sc->a->n[*(const uint32_t *)x], *b = &sc->a->n[*(const uint32_t *)y];
	uint64_t va = agg_total(a, sc->m), vb = agg_total(b, sc->m);
	if (va != vb)
		return va > vb ? -1 : 1;
	return strcmp(names_str(sc->a->names, a->name), names_str(sc->a->names, b->name));
}

int agg_children(const struct agg *a, uint32_t v, enum tk_out_metric m, uint32_t **out, size_t *n)
{
	size_t k = 0;
	for (uint32_t c = a->n[v].first_child; c != UINT32_MAX; c = a->n[c].next_sibling)
		k++;
	*out = malloc((k + 1) * sizeof **out);
	*n = 0;
	if (!*out)
		return -TK_E_NOMEM;
	k = 0;
	for (uint32_t c = a->n[v].first_child; c != UINT32_MAX; c = a->n[c].next_sibling)
		(*out)[k++] = c;
	struct sort_ctx sc = { a, m };
	qsort_r(*out, k, sizeof **out, cmp_child, &sc);
	*n = k;
	return 0;
}
