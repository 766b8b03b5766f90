/* Stop-gap function profile for XRay events, in the manner of `llvm-xray account` and
 * `llvm-xray stack`, until the shared analysis layer (tk_prof_*) lands; it consumes the
 * neutral events, so switching over changes no decoder code.
 *
 * Exits pair with the innermost open enter of the same function on the thread's stack;
 * frames above it (functions whose exits are missing) are closed at the same time, as
 * llvm-xray account does with sibling-call deduction. Exits with no matching enter are
 * counted as orphans. Percentiles use llvm-xray's positions: size/2, floor(size*0.9),
 * floor(size*0.99) of the sorted latencies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/xray/internal.h"
#include "tracekit/xray_prof.h"

struct fent {
	uint64_t key;              /* (thread + 1) << 32 | id, or id when merged */
	int32_t id;
	uint32_t thread;           /* UINT32_MAX when merged */
	uint64_t *lat;
	size_t n, cap;
	uint64_t sum;
};

struct frame {
	int32_t id;
	uint64_t enter;
	uint64_t child;            /* inclusive time of finished callees */
	uint32_t node;             /* call-path node */
};

struct tstack {
	struct frame *f;
	size_t n, cap;
};

struct pnode {
	uint32_t parent;
	int32_t id;
	uint64_t self, calls;
};

struct tk_xray_prof {
	int per_thread;
	struct fent *ents;
	size_t nents, capents;     /* hash table, open addressing */
	struct tstack *stacks;
	size_t nstacks;
	struct pnode *nodes;       /* node 0 = root */
	size_t nnodes, capnodes;
	uint32_t *nhash;           /* (parent, id) -> node */
	size_t nhash_cap;
	uint64_t orphans;
	int err;
};

struct tk_xray_prof *tk_xray_prof_new(int per_thread)
{
	struct tk_xray_prof *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->per_thread = per_thread;
	p->capents = 256;
	p->ents = calloc(p->capents, sizeof *p->ents);
	p->capnodes = 256;
	p->nodes = calloc(p->capnodes, sizeof *p->nodes);
	p->nhash_cap = 512;
	p->nhash = calloc(p->nhash_cap, sizeof *p->nhash);
	if (!p->ents || !p->nodes || !p->nhash) {
		tk_xray_prof_free(p);
		return NULL;
	}
	p->nnodes = 1;
	return p;
}

void tk_xray_prof_free(struct tk_xray_prof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->capents; i++)
		free(p->ents[i].lat);
	for (size_t i = 0; i < p->nstacks; i++)
		free(p->stacks[i].f);
	free(p->ents);
	free(p->stacks);
	free(p->nodes);
	free(p->nhash);
	free(p);
}

uint64_t tk_xray_prof_orphans(const struct tk_xray_prof *p) { return p->orphans; }

static struct fent *fent_get(struct tk_xray_prof *p, uint32_t thread, int32_t id)
{
	uint64_t key = p->per_thread ? ((uint64_t)thread + 1) << 32 | (uint32_t)id : (uint32_t)id;
	if ((p->nents + 1) * 2 > p->capents) {
		size_t cap = p->capents * 2;
		struct fent *t = calloc(cap, sizeof *t);
		if (!t)
			return NULL;
		for (size_t i = 0; i < p->capents; i++) {
			if (!p->ents[i].key)
				continue;
			size_t j = tk_hash64(p->ents[i].key) & (cap - 1);
			while (t[j].key)
				j = (j + 1) & (cap - 1);
			t[j] = p->ents[i];
		}
		free(p->ents);
		p->ents = t;
		p->capents = cap;
	}
	size_t j = tk_hash64(key) & (p->capents - 1);
	while (p->ents[j].key && p->ents[j].key != key)
		j = (j + 1) & (p->capents - 1);
	struct fent *e = &p->ents[j];
	if (!e->key) {
		e->key = key;
		e->id = id;
		e->thread = p->per_thread ? thread : UINT32_MAX;
		p->nents++;
	}
	return e;
}

static uint32_t node_get(struct tk_xray_prof *p, uint32_t parent, int32_t id)
{
	uint64_t key = (uint64_t)parent << 32 | (uint32_t)id;
	if ((p->nnodes + 1) * 2 > p->nhash_cap) {
		size_t cap = p->nhash_cap * 2;
		uint32_t *t = calloc(cap, sizeof *t);
		if (!t)
			return 0;
		for (size_t i = 1; i < p->nnodes; i++) {
			uint64_t k = (uint64_t)p->nodes[i].parent << 32 | (uint32_t)p->nodes[i].id;
			size_t j = tk_hash64(k) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = (uint32_t)i;
		}
		free(p->nhash);
		p->nhash = t;
		p->nhash_cap = cap;
	}
	size_t j = tk_hash64(key) & (p->nhash_cap - 1);
	while (p->nhash[j]) {
		struct pnode *nd = &p->nodes[p->nhash[j]];
		if (nd->parent == parent && nd->id == id)
			return p->nhash[j];
		j = (j + 1) & (p->nhash_cap - 1);
	}
	if (p->nnodes == p->capnodes) {
		size_t cap = p->capnodes * 2;
		void *t = realloc(p->nodes, cap * sizeof *p->nodes);
		if (!t)
			return 0;
		p->nodes = t;
		p->capnodes = cap;
	}
	struct pnode *nd = &p->nodes[p->nnodes];
	nd->parent = parent;
	nd->id = id;
	nd->self = nd->calls = 0;
	p->nhash[j] = (uint32_t)p->nnodes;
	return (uint32_t)p->nnodes++;
}

static int record_latency(struct tk_xray_prof *p, uint32_t thread, int32_t id, uint64_t lat)
{
	struct fent *e = fent_get(p, thread, id);
	if (!e)
		return -TK_E_NOMEM;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		void *t = realloc(e->lat, cap * sizeof *e->lat);
		if (!t)
			return -TK_E_NOMEM;
		e->lat = t;
		e->cap = cap;
	}
	e->lat[e->n++] = lat;
	e->sum += lat;
	return 0;
}

static struct tstack *stack_of(struct tk_xray_prof *p, uint32_t track)
{
	if (track >= p->nstacks) {
		size_t n = track + 1;
		void *t = realloc(p->stacks, n * sizeof *p->stacks);
		if (!t)
			return NULL;
		p->stacks = t;
		memset(p->stacks + p->nstacks, 0, (n - p->nstacks) * sizeof *p->stacks);
		p->nstacks = n;
	}
	return &p->stacks[track];
}

static uint64_t tdiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

static int prof_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_xray_prof *p = ctx;
	int rc;

	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		if (e->kind != TK_EV_FUNC_ENTER && e->kind != TK_EV_FUNC_EXIT &&
		    e->kind != TK_EV_FUNC_TAIL_EXIT)
			continue;
		struct tstack *s = stack_of(p, e->track);
		if (!s)
			return -TK_E_NOMEM;
		int32_t id = (int32_t)e->addr;
		if (e->kind == TK_EV_FUNC_ENTER) {
			if (s->n == s->cap) {
				size_t cap = s->cap ? s->cap * 2 : 64;
				void *t = realloc(s->f, cap * sizeof *s->f);
				if (!t)
					return -TK_E_NOMEM;
				s->f = t;
				s->cap = cap;
			}
			uint32_t parent = s->n ? s->f[s->n - 1].node : 0;
			uint32_t node = node_get(p, parent, id);
			if (!node)
				return -TK_E_NOMEM;
			s->f[s->n++] = (struct frame){ id, e->time, 0, node };
			continue;
		}
		size_t k = s->n;
		while (k && s->f[k - 1].id != id)
			k--;
		if (!k) {
			p->orphans++;
			continue;
		}
		/* close frames k-1 .. top, innermost first */
		while (s->n >= k) {
			struct frame *f = &s->f[s->n - 1];
			uint64_t incl = tdiff(f->enter, e->time);
			if ((rc = record_latency(p, e->track, f->id, incl)) < 0)
				return rc;
			struct pnode *nd = &p->nodes[f->node];
			nd->self += incl > f->child ? incl - f->child : 0;
			nd->calls++;
			s->n--;
			if (s->n)
				s->f[s->n - 1].child += incl;
		}
	}
	return 0;
}

struct tk_sink tk_xray_prof_sink(struct tk_xray_prof *p)
{
	return (struct tk_sink){ prof_events, p };
}

/* ---- report ---------------------------------------------------------------------------------- */

struct row {
	int32_t id;
	uint32_t thread;
	uint64_t count, min, med, p90, p99, max, sum;
};

static int sort_key;   /* qsort has no context argument; set just before sorting */

static int cmp_row(const void *a, const void *b)
{
	const struct row *l = a, *r = b;
	uint64_t x = 0, y = 0;
	switch (sort_key) {
	case 1: x = l->count; y = r->count; break;
	case 2: x = l->min; y = r->min; break;
	case 3: x = l->med; y = r->med; break;
	case 4: x = l->p90; y = r->p90; break;
	case 5: x = l->p99; y = r->p99; break;
	case 6: x = l->max; y = r->max; break;
	case 7: x = l->sum; y = r->sum; break;
	}
	if (x != y)
		return x > y ? -1 : 1;   /* largest first */
	if (l->thread != r->thread)
		return l->thread < r->thread ? -1 : 1;
	return l->id < r->id ? -1 : l->id > r->id;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int tk_xray_prof_sort_key(const char *name)
{
	static const char *const keys[] = { "funcid", "count", "min", "med", "90p", "99p", "max",
					     "sum" };
	if (!name)
		return 0;
	for (int i = 0; i < 8; i++)
		if (!strcmp(name, keys[i]))
			return i;
	if (!strcmp(name, "median"))
		return 3;
	if (!strcmp(name, "id") || !strcmp(name, "func"))
		return 0;
	if (!strcmp(name, "total") || !strcmp(name, "time"))
		return 7;
	return -1;
}

static void put_secs(struct tk_buf *b, uint64_t ticks, uint64_t freq, int width)
{
	char tmp[48];
	double s = freq ? (double)ticks / (double)freq : (double)ticks;
	/* CSV in llvm-xray account's notation (%e), the table with fixed decimals */
	int n = width ? snprintf(tmp, sizeof tmp, "%*.6f", width, s)
		      : snprintf(tmp, sizeof tmp, "%e", s);
	tk_buf_put(b, tmp, (size_t)n);
}

static void put_name(struct tk_buf *b, const struct tk_xray_map *map, int32_t id)
{
	const char *nm = tk_xray_map_name(map, id);
	if (nm) {
		tk_buf_puts(b, nm);
	} else {
		tk_buf_putc(b, '#');
		tk_buf_i64(b, id);
	}
}

int tk_xray_prof_write(struct tk_xray_prof *p, const struct tk_xray *x,
		       const struct tk_xray_map *map, const struct tk_xray_prof_opts *o,
		       struct tk_buf *out)
{
	struct row *rows = calloc(p->nents ? p->nents : 1, sizeof *rows);
	size_t nr = 0;
	uint64_t freq = tk_xray_header(x)->cycle_frequency;

	if (!rows)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < p->capents; i++) {
		struct fent *e = &p->ents[i];
		if (!e->key || !e->n)
			continue;
		qsort(e->lat, e->n, sizeof *e->lat, cmp_u64);
		struct row *r = &rows[nr++];
		r->id = e->id;
		r->thread = e->thread;
		r->count = e->n;
		r->min = e->lat[0];
		r->max = e->lat[e->n - 1];
		r->med = e->lat[e->n / 2];
		r->p90 = e->lat[(size_t)floor((double)e->n * 0.9)];
		r->p99 = e->lat[(size_t)floor((double)e->n * 0.99)];
		r->sum = e->sum;
	}
	sort_key = o->sort_key;
	qsort(rows, nr, sizeof *rows, cmp_row);
	if (o->csv)
		tk_buf_puts(out, p->per_thread ? "thread,funcid,count,min,median,90%ile,99%ile,max,sum,function\n"
					       : "funcid,count,min,median,90%ile,99%ile,max,sum,function\n");
	else
		tk_buf_printf(out, "Functions with latencies: %zu\n%s   funcid      count [      min,       med,       90p,       99p,       max]       sum  function\n",
			      nr, p->per_thread ? "   thread" : "");
	for (size_t i = 0; i < nr && (!o->top || i < o->top); i++) {
		struct row *r = &rows[i];
		uint64_t v[6] = { r->min, r->med, r->p90, r->p99, r->max, r->sum };
		if (o->csv) {
			if (p->per_thread)
				tk_buf_printf(out, "%u,", x ? tk_xray_thread(x, r->thread)->tid : r->thread);
			tk_buf_printf(out, "%d,%llu", r->id, (unsigned long long)r->count);
			for (int k = 0; k < 6; k++) {
				tk_buf_putc(out, ',');
				put_secs(out, v[k], freq, 0);
			}
			tk_buf_putc(out, ',');
			put_name(out, map, r->id);
			tk_buf_putc(out, '\n');
			continue;
		}
		if (p->per_thread)
			tk_buf_printf(out, "%9u", x ? tk_xray_thread(x, r->thread)->tid : r->thread);
		tk_buf_printf(out, "%9d %10llu [", r->id, (unsigned long long)r->count);
		for (int k = 0; k < 5; k++) {
			put_secs(out, v[k], freq, 9);
			if (k < 4)
				tk_buf_putc(out, ',');
		}
		tk_buf_puts(out, "] ");
		put_secs(out, v[5], freq, 9);
		tk_buf_puts(out, "  ");
		put_name(out, map, r->id);
		tk_buf_putc(out, '\n');
	}
	free(rows);
	return out->err;
}

static void put_path(struct tk_buf *b, const struct tk_xray_prof *p, const struct tk_xray_map *map,
		     uint32_t node)
{
	if (!node)
		return;
	if (p->nodes[node].parent) {
		put_path(b, p, map, p->nodes[node].parent);
		tk_buf_putc(b, ';');
	}
	put_name(b, map, p->nodes[node].id);
}

/* Folded stacks (flame graph input): "a;b;c exclusive-ticks", one line per call path. */
int tk_xray_prof_write_folded(struct tk_xray_prof *p, const struct tk_xray_map *map,
			      struct tk_buf *out)
{
	for (size_t i = 1; i < p->nnodes; i++) {
		if (!p->nodes[i].calls)
			continue;
		put_path(out, p, map, (uint32_t)i);
		tk_buf_putc(out, ' ');
		tk_buf_u64(out, p->nodes[i].self);
		tk_buf_putc(out, '\n');
	}
	return out->err;
}
