/* Kanata conversions: normalised rewrite, cycle-window cut, Chrome/Perfetto timeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/internal.h"

/* ---- a small id -> value map (live instructions only, so it stays small) --------------- */
struct idmap {
	int64_t *keys;
	int64_t *vals;
	void **ptrs;
	size_t cap, n;
};

static size_t im_slot(const struct idmap *m, int64_t k)
{
	return tk_hash64((uint64_t)k) & (m->cap - 1);
}

static void *im_get(const struct idmap *m, int64_t k, int64_t *val)
{
	if (!m->cap)
		return NULL;
	for (size_t h = im_slot(m, k);; h = (h + 1) & (m->cap - 1)) {
		if (m->keys[h] == INT64_MIN)
			return NULL;
		if (m->keys[h] == k) {
			if (val)
				*val = m->vals[h];
			return m->ptrs[h] ? m->ptrs[h] : (void *)m;  /* non-NULL: found */
		}
	}
}

static int im_put(struct idmap *m, int64_t k, int64_t v, void *p)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct idmap g = { .cap = m->cap ? m->cap * 2 : 256 };
		g.keys = malloc(g.cap * sizeof *g.keys);
		g.vals = malloc(g.cap * sizeof *g.vals);
		g.ptrs = calloc(g.cap, sizeof *g.ptrs);
		if (!g.keys || !g.vals || !g.ptrs) {
			free(g.keys), free(g.vals), free(g.ptrs);
			return -TK_E_NOMEM;
		}
		for (size_t i = 0; i < g.cap; i++)
			g.keys[i] = INT64_MIN;
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i] != INT64_MIN) {
				size_t h = im_slot(&g, m->keys[i]);
				while (g.keys[h] != INT64_MIN)
					h = (h + 1) & (g.cap - 1);
				g.keys[h] = m->keys[i], g.vals[h] = m->vals[i], g.ptrs[h] = m->ptrs[i];
			}
		g.n = m->n;
		free(m->keys), free(m->vals), free(m->ptrs);
		*m = g;
	}
	size_t h = im_slot(m, k);
	while (m->keys[h] != INT64_MIN && m->keys[h] != k)
		h = (h + 1) & (m->cap - 1);
	if (m->keys[h] == INT64_MIN)
		m->n++;
	m->keys[h] = k, m->vals[h] = v, m->ptrs[h] = p;
	return 0;
}

static void im_del(struct idmap *m, int64_t k)
{
	size_t mask = m->cap - 1, h;
	if (!m->cap)
		return;
	for (h = im_slot(m, k); m->keys[h] != k; h = (h + 1) & mask)
		if (m->keys[h] == INT64_MIN)
			return;
	for (size_t j = (h + 1) & mask; m->keys[j] != INT64_MIN; j = (j + 1) & mask) {
		size_t i = im_slot(m, m->keys[j]);
		if ((j > h && (i <= h || i > j)) || (j < h && (i <= h && i > j))) {
			m->keys[h] = m->keys[j], m->vals[h] = m->vals[j], m->ptrs[h] = m->ptrs[j];
			h = j;
		}
	}
	m->keys[h] = INT64_MIN;
	m->ptrs[h] = NULL;
	m->n--;
}

static void im_free(struct idmap *m, int free_ptrs)
{
	if (free_ptrs)
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i] != INT64_MIN)
				free(m->ptrs[i]);
	free(m->keys), free(m->vals), free(m->ptrs);
	memset(m, 0, sizeof *m);
}

static struct tk_kanata_conv_opts conv_opts(const struct tk_kanata_conv_opts *o)
{
	struct tk_kanata_conv_opts c = { .sz = sizeof c, .cycle_from = INT64_MIN, .cycle_to = INT64_MAX };
	if (o)
		memcpy(&c, o, o->sz < sizeof c ? o->sz : sizeof c);
	return c;
}

/* ---- rewrite ---------------------------------------------------------------------------- */
struct rewrite {
	struct tk_buf *out;
	struct tk_kanata_writer *w;
	int err;
};

static int rewrite_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct rewrite *r = ctx;
	if (c->kind == TK_KANATA_HEADER)
		return 0;
	if (!r->w) {
		r->w = tk_kanata_writer_new(r->out, c->kind == TK_KANATA_CYCLE_SET ? c->a : 0, &r->err);
		if (!r->w)
			return r->err;
	}
	int rc = tk_kanata_w_cmd(r->w, c);
	return rc == -TK_E_BAD_STATE ? 0 : rc;  /* the reader already reported it */
}

int tk_kanata_rewrite(struct tk_input *in, struct tk_buf *out, const struct tk_kanata_conv_opts *o)
{
	struct tk_kanata_conv_opts co = conv_opts(o);
	struct rewrite rw = { .out = out };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = rewrite_cmd,
					    .diag = co.diag, .ctx = &rw, .diag_ctx = co.ctx };
	int rc;
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &rc);

	if (!r)
		return rc;
	rc = tk_kanata_reader_run(r, in);
	if (rc >= 0 && !rw.w && !(rw.w = tk_kanata_writer_new(out, 0, &rc)))
		goto out;
out:
	tk_kanata_writer_free(rw.w);
	tk_kanata_reader_free(r);
	return rc;
}

/* ---- cut a cycle window ----------------------------------------------------------------- */
struct cut {
	struct tk_kanata_conv_opts o;
	struct tk_kanata_reader *r;
	struct tk_buf *out;
	struct tk_kanata_writer *w;
	struct idmap labels;     /* before the window: id -> saved "L" lines (struct tk_buf *) */
	struct idmap ids;        /* in the window: original id -> new id */
	int64_t next_id;
	int64_t prev_cycle;
	int started, based;      /* based: the window moved to the first cycle (from_first) */
	int err;
};

/* A + B, held within int64_t. */
static int64_t add_sat(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static void cut_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct cut *c = ctx;
	if (c->o.diag)
		c->o.diag(c->o.ctx, d);
}

/* An instruction alive when the window opens: I, its labels, its open stages. */
static void cut_snapshot_one(void *ctx, const struct kn_insn *in)
{
	struct cut *c = ctx;
	struct tk_buf *lb = im_get(&c->labels, in->id, NULL);
	int64_t nid = c->next_id++;
	int rc;

	if (c->err)
		return;
	if ((rc = im_put(&c->ids, in->id, nid, NULL)) < 0 ||
	    (rc = tk_kanata_w_insn(c->w, nid, in->sim_id, in->thread)) < 0) {
		c->err = rc;
		return;
	}
	if (lb && (void *)lb != (void *)&c->labels) {
		/* saved as: type '\t' text '\n' ... */
		const char *p = lb->data, *e = lb->data + lb->len;
		while (p < e) {
			const char *tab = memchr(p, '\t', (size_t)(e - p));
			const char *nl = memchr(tab, '\n', (size_t)(e - tab));
			int64_t type = 0;
			kn_parse_i64(p, tab, &type);
			struct tk_kanata_cmd l = { .kind = TK_KANATA_LABEL, .id = nid, .a = type,
						   .text = tab + 1, .text_len = (size_t)(nl - tab - 1) };
			if ((rc = tk_kanata_w_cmd(c->w, &l)) < 0 && rc != -TK_E_BAD_STATE)
				c->err = rc;
			p = nl + 1;
		}
	}
	/* open stages, oldest first */
	for (unsigned i = 0; i < in->nopen; i++) {
		const struct kn_name *st = kn_reader_stage(c->r, in->open[i].stage);
		const struct kn_name *ln = kn_reader_lane(c->r, st->lane);
		if ((rc = tk_kanata_w_stage(c->w, nid, ln->name, st->name)) < 0 && rc != -TK_E_BAD_STATE)
			c->err = rc;
	}
}

static void cut_drop_label(struct cut *c, int64_t id)
{
	struct tk_buf *lb = im_get(&c->labels, id, NULL);
	if (lb && (void *)lb != (void *)&c->labels) {
		tk_buf_free(lb);
		free(lb);
	}
	im_del(&c->labels, id);
}

static void cut_labels_free(struct cut *c)
{
	for (size_t i = 0; i < c->labels.cap; i++)
		if (c->labels.keys[i] != INT64_MIN && c->labels.ptrs[i])
			tk_buf_free(c->labels.ptrs[i]);
	im_free(&c->labels, 1);
}

static int cut_start(struct cut *c, int64_t at)
{
	c->w = tk_kanata_writer_new(c->out, at, &c->err);
	if (!c->w)
		return c->err;
	c->started = 1;
	kn_reader_live(c->r, cut_snapshot_one, c);
	cut_labels_free(c);
	return c->err;
}

static int cut_cmd(void *ctx, const struct tk_kanata_cmd *k)
{
	struct cut *c = ctx;
	int64_t nid, prod;
	int rc = 0;

	if (k->kind == TK_KANATA_HEADER)
		return 0;
	if (c->o.from_first && !c->based) {   /* the first command's cycle: the log's first */
		c->based = 1;
		if (c->o.cycle_from != INT64_MIN)
			c->o.cycle_from = add_sat(c->o.cycle_from, k->cycle);
		if (c->o.cycle_to != INT64_MAX)
			c->o.cycle_to = add_sat(c->o.cycle_to, k->cycle);
	}
	if (k->cycle >= c->o.cycle_to)
		return -TK_E_CANCELLED;  /* past the window: done */
	if (!c->started) {
		if (k->cycle < c->o.cycle_from) {
			/* before the window: remember labels of live instructions */
			if (k->kind == TK_KANATA_LABEL) {
				struct tk_buf *lb = im_get(&c->labels, k->id, NULL);
				if (!lb || (void *)lb == (void *)&c->labels) {
					if (!(lb = calloc(1, sizeof *lb)) || tk_buf_init(lb, -1, 64) < 0 ||
					    im_put(&c->labels, k->id, 0, lb) < 0)
						return -TK_E_NOMEM;
				}
				tk_buf_i64(lb, k->a);
				tk_buf_putc(lb, '\t');
				tk_buf_put(lb, k->text, k->text_len);
				tk_buf_putc(lb, '\n');
				if (lb->err)
					return lb->err;
			} else if (k->kind == TK_KANATA_RETIRE) {
				cut_drop_label(c, k->id);
			}
			c->prev_cycle = k->cycle;
			return 0;
		}
		int64_t at = c->prev_cycle < c->o.cycle_from && c->o.cycle_from != INT64_MIN ?
			c->o.cycle_from : k->cycle;
		if (at > k->cycle)
			at = k->cycle;
		if ((rc = cut_start(c, at)) < 0)
			return rc;
	}
	if ((rc = tk_kanata_w_cycle_to(c->w, k->cycle)) < 0)
		return rc;
	switch (k->kind) {
	case TK_KANATA_HEADER:
	case TK_KANATA_CYCLE_SET:
	case TK_KANATA_CYCLE:
		return 0;
	case TK_KANATA_INSN:
		nid = c->next_id++;
		if ((rc = im_put(&c->ids, k->id, nid, NULL)) < 0)
			return rc;
		break;
	case TK_KANATA_DEP:
		if (!im_get(&c->ids, k->id, &nid) || !im_get(&c->ids, k->a, &prod))
			return 0;  /* producer before the window: no arrow */
		rc = tk_kanata_w_dep(c->w, nid, prod, (int)k->b);
		return rc == -TK_E_BAD_STATE ? 0 : rc;
	default:
		if (!im_get(&c->ids, k->id, &nid))
			return 0;
		break;
	}
	struct tk_kanata_cmd m = *k;
	m.id = nid;
	rc = tk_kanata_w_cmd(c->w, &m);
	return rc == -TK_E_BAD_STATE ? 0 : rc;
}

int tk_kanata_cut(struct tk_input *in, struct tk_buf *out, const struct tk_kanata_conv_opts *o)
{
	struct cut *c = calloc(1, sizeof *c);
	int rc;

	if (!c)
		return -TK_E_NOMEM;
	c->o = conv_opts(o);
	c->out = out;
	c->prev_cycle = INT64_MIN;
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = cut_cmd,
					    .diag = cut_diag, .ctx = c };
	if (!(c->r = tk_kanata_reader_new(&ro, &rc))) {
		free(c);
		return rc;
	}
	rc = tk_kanata_reader_run(c->r, in);
	if (rc == -TK_E_CANCELLED)
		rc = 0;
	if (rc >= 0 && !c->started)
		rc = cut_start(c, c->o.cycle_from == INT64_MIN ? 0 : c->o.cycle_from);
	if (rc >= 0 && c->err)
		rc = c->err;
	tk_kanata_writer_free(c->w);
	cut_labels_free(c);
	im_free(&c->ids, 0);
	tk_kanata_reader_free(c->r);
	free(c);
	return rc;
}
