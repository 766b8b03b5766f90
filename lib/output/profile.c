/* Profile reports: text table, CSV, JSON, folded stacks, call tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"

enum tk_out_kind tk_out_kind_by_name(const char *name)
{
	static const struct { const char *name; enum tk_out_kind k; } kinds[] = {
		{ "text", TK_OUT_TEXT }, { "json", TK_OUT_JSON }, { "csv", TK_OUT_CSV },
		{ "folded", TK_OUT_FOLDED }, { "pprof", TK_OUT_PPROF }, { "source", TK_OUT_SOURCE },
		{ "calltree", TK_OUT_CALLTREE }, { "lines", TK_OUT_LINES }, { "blocks", TK_OUT_BLOCKS },
	};
	for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(name, kinds[i].name))
			return kinds[i].k;
	return 0;
}

int out_count_sort(const char *s, enum count_sort *k)
{
	static const struct { const char *n; enum count_sort k; } keys[] = {
		{ "insns", CS_INSNS }, { "self-insns", CS_INSNS }, { "incl", CS_INSNS },
		{ "excl", CS_INSNS }, { "self", CS_INSNS },
		{ "execs", CS_EXECS }, { "calls", CS_EXECS }, { "count", CS_EXECS },
		{ "name", CS_PLACE }, { "line", CS_PLACE }, { "addr", CS_PLACE },
	};
	*k = CS_INSNS;
	if (!s)
		return 0;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(s, keys[i].n)) {
			*k = keys[i].k;
			return 0;
		}
	tk_log(TK_LOG_ERROR, "sort key '%s' does not apply to lines or blocks (insns, execs, name)", s);
	return -TK_E_INVAL;
}

/* ---- the function table ------------------------------------------------------------------ */

struct row {
	struct tk_prof_func f;
	const char *name;
};

enum sort_key { S_CALLS, S_INCL, S_EXCL, S_INSNS, S_SELF_INSNS, S_NAME, S_MAX, S_MEDIAN, S_P99 };

static int parse_sort(const char *s, enum tk_out_metric m, enum sort_key *k)
{
	static const struct { const char *n; enum sort_key k; } keys[] = {
		{ "calls", S_CALLS }, { "count", S_CALLS }, { "incl", S_INCL }, { "sum", S_INCL },
		{ "excl", S_EXCL }, { "self", S_EXCL }, { "insns", S_INSNS },
		{ "self-insns", S_SELF_INSNS }, { "name", S_NAME }, { "func", S_NAME },
		{ "max", S_MAX }, { "med", S_MEDIAN }, { "median", S_MEDIAN }, { "p99", S_P99 },
	};
	if (!s) {
		*k = m == TK_OUT_M_INSNS ? S_SELF_INSNS : m == TK_OUT_M_TICKS ? S_EXCL : S_CALLS;
		return 0;
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(s, keys[i].n)) {
			*k = keys[i].k;
			return 0;
		}
	tk_log(TK_LOG_ERROR, "unknown sort key '%s' (calls, incl, excl, insns, self-insns, name, max, median, p99)", s);
	return -TK_E_INVAL;
}

static uint64_t sort_value(const struct row *r, enum sort_key k)
{
	switch (k) {
	case S_CALLS: return r->f.calls;
	case S_INCL: return r->f.incl_ticks;
	case S_EXCL: return r->f.excl_ticks;
	case S_INSNS: return r->f.incl_insns;
	case S_SELF_INSNS: return r->f.excl_insns;
	case S_MAX: return r->f.dur_max;
	case S_MEDIAN: return r->f.dur_median;
	case S_P99: return r->f.dur_p99;
	default: return 0;
	}
}

static int cmp_rows(const void *x, const void *y, void *ctx)
{
	const struct row *a = x, *b = y;
	enum sort_key k = *(enum sort_key *)ctx;
	if (k != S_NAME) {
		uint64_t va = sort_value(a, k), vb = sort_value(b, k);
		if (va != vb)
			return va > vb ? -1 : 1;
	}
	int c = strcmp(a->name, b->name);
	if (c)
		return c;
	return a->f.track < b->f.track ? -1 : a->f.track > b->f.track;
}

/* Rows named and sorted; *n limited by --top. */
static int make_rows(const struct tk_prof *p, const struct tk_out_opts *o, struct names *nm,
		     enum tk_out_metric m, struct row **out, size_t *n)
{
	struct tk_prof_func *f;
	size_t nf;
	enum sort_key key;
	int rc = parse_sort(o->sort, m, &key);
	if (rc < 0)
		return rc;
	if ((rc = tk_prof_funcs(p, o->threads, &f, &nf)) < 0)
		return rc;
	struct row *r = malloc((nf + 1) * sizeof *r);
	if (!r) {
		free(f);
		return -TK_E_NOMEM;
	}
	for (size_t i = 0; i < nf; i++) {
		r[i].f = f[i];
		uint32_t id = names_frame(nm, f[i].kind == TK_PROF_KEY_UNKNOWN ? 0 : f[i].key, f[i].kind);
		r[i].name = id == UINT32_MAX ? "?" : names_str(nm, id);
	}
	free(f);
	qsort_r(r, nf, sizeof *r, cmp_rows, &key);
	if (o->top && nf > o->top)
		nf = o->top;
	*out = r;
	*n = nf;
	return 0;
}

/* Ticks as microseconds when the clock is known, else raw ticks. */
static void put_time(struct tk_buf *b, uint64_t ticks, uint64_t tps)
{
	if (!tps) {
		tk_buf_u64(b, ticks);
		return;
	}
	unsigned __int128 ns = (unsigned __int128)ticks * 1000000000u / tps;
	tk_buf_fixed(b, (int64_t)ns, 3);
}

/* Right-aligned in WIDTH columns, and apart from the column before even when wider (raw
 * ticks of long traces are). */
static void pad_u64(struct tk_buf *b, uint64_t v, int width)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
	for (int i = n < width ? n : width - 1; i < width; i++)
		tk_buf_putc(b, ' ');
	tk_buf_put(b, tmp, (size_t)n);
}

static void pad_time(struct tk_buf *b, uint64_t ticks, uint64_t tps, int width)
{
	struct tk_buf t;
	if (tk_buf_init(&t, -1, 64) < 0)
		return;
	put_time(&t, ticks, tps);
	for (int i = (int)t.len < width ? (int)t.len : width - 1; i < width; i++)
		tk_buf_putc(b, ' ');
	tk_buf_put(b, t.data, t.len);
	tk_buf_free(&t);
}

static void write_summary_text(struct tk_buf *b, const struct tk_prof *p)
{
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	tk_buf_printf(b, "# events %llu, calls %llu, instructions %llu, blocks %llu, tracks %u",
		      (unsigned long long)s.events, (unsigned long long)s.calls,
		      (unsigned long long)s.insns, (unsigned long long)s.blocks, s.tracks);
	if (s.clock.ticks_per_second)
		tk_buf_printf(b, ", times in us (%llu ticks/s)", (unsigned long long)s.clock.ticks_per_second);
	else
		tk_buf_puts(b, ", times in ticks");
	tk_buf_putc(b, '\n');
	if (s.gaps || s.orphans || s.truncated || s.unmatched || s.open_at_end)
		tk_buf_printf(b, "# gaps %llu, calls cut by gaps %llu, exits without enter %llu, "
			      "lost exits %llu, open at end %llu\n",
			      (unsigned long long)s.gaps, (unsigned long long)s.truncated,
			      (unsigned long long)s.orphans, (unsigned long long)s.unmatched,
			      (unsigned long long)s.open_at_end);
}

static int out_table(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		     struct names *nm, int csv)
{
	enum tk_out_metric m = out_metric(p, o->metric);
	struct row *r;
	size_t n;
	int rc = make_rows(p, o, nm, m, &r, &n);
	if (rc < 0)
		return rc;
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	uint64_t tps = s.clock.ticks_per_second;

	if (csv) {
		tk_buf_puts(b, o->threads ? "thread," : "");
		tk_buf_puts(b, "function,calls,incl_time,excl_time,incl_insns,excl_insns,"
			       "min,median,p90,p99,max\n");
		for (size_t i = 0; i < n; i++) {
			const struct tk_prof_func *f = &r[i].f;
			if (o->threads) {
				tk_buf_u64(b, f->track);
				tk_buf_putc(b, ',');
			}
			/* quote names: C++ names contain commas */
			tk_buf_putc(b, '"');
			for (const char *c = r[i].name; *c; c++) {
				if (*c == '"')
					tk_buf_putc(b, '"');
				tk_buf_putc(b, *c);
			}
			tk_buf_putc(b, '"');
			uint64_t v[] = { f->calls };
			tk_buf_putc(b, ',');
			tk_buf_u64(b, v[0]);
			uint64_t tv[] = { f->incl_ticks, f->excl_ticks };
			for (int k = 0; k < 2; k++) {
				tk_buf_putc(b, ',');
				put_time(b, tv[k], tps);
			}
			tk_buf_putc(b, ',');
			tk_buf_u64(b, f->incl_insns);
			tk_buf_putc(b, ',');
			tk_buf_u64(b, f->excl_insns);
			uint64_t dv[] = { f->dur_min, f->dur_median, f->dur_p90, f->dur_p99, f->dur_max };
			for (int k = 0; k < 5; k++) {
				tk_buf_putc(b, ',');
				if (f->ndur)
					put_time(b, dv[k], tps);
			}
			tk_buf_putc(b, '\n');
		}
		free(r);
		return b->err;
	}

	write_summary_text(b, p);
	if (o->threads)
		tk_buf_puts(b, "  thread");
	tk_buf_puts(b, "       calls     incl-time     excl-time    incl-insns    excl-insns"
		       "         min      median         p90         p99         max  function\n");
	for (size_t i = 0; i < n; i++) {
		const struct tk_prof_func *f = &r[i].f;
		if (o->threads)
			pad_u64(b, f->track, 8);
		pad_u64(b, f->calls, 12);
		pad_time(b, f->incl_ticks, tps, 14);
		pad_time(b, f->excl_ticks, tps, 14);
		pad_u64(b, f->incl_insns, 14);
		pad_u64(b, f->excl_insns, 14);
		uint64_t dv[] = { f->dur_min, f->dur_median, f->dur_p90, f->dur_p99, f->dur_max };
		for (int k = 0; k < 5; k++) {
			if (f->ndur)
				pad_time(b, dv[k], tps, 12);
			else
				tk_buf_puts(b, "           -");
		}
		tk_buf_puts(b, "  ");
		tk_buf_puts(b, r[i].name);
		tk_buf_putc(b, '\n');
	}
	free(r);
	return b->err;
}

/* ---- folded stacks and the call tree ------------------------------------------------------ */

struct folded_line {
	char *path;
	uint64_t v;
};

static int cmp_folded(const void *x, const void *y)
{
	return strcmp(((const struct folded_line *)x)->path, ((const struct folded_line *)y)->path);
}

static int cmp_folded_heavy(const void *x, const void *y)
{
	const struct folded_line *a = x, *b = y;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return strcmp(a->path, b->path);
}

static int out_folded(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		      struct names *nm)
{
	struct agg a;
	enum tk_out_metric m = out_metric(p, o->metric);
	int rc = agg_build(&a, p, nm, o->threads);
	if (rc < 0) {
		agg_free(&a);
		return rc;
	}
	struct folded_line *lines = calloc(a.nn + 1, sizeof *lines);
	size_t nl = 0;
	struct tk_buf path;
	if (!lines || tk_buf_init(&path, -1, 4096) < 0) {
		free(lines);
		agg_free(&a);
		return -TK_E_NOMEM;
	}
	/* nodes are created parents first: one pass builds each path from its ancestors */
	uint32_t *anc = NULL;
	size_t cap = 0;
	for (size_t i = 1; i < a.nn && rc >= 0; i++) {
		uint64_t v = agg_self(&a.n[i], m);
		if (!v)
			continue;
		size_t d = 0;
		for (uint32_t x = (uint32_t)i; x != 0; x = a.n[x].parent) {
			if (d == cap) {
				size_t nc = cap ? cap * 2 : 64;
				uint32_t *na = realloc(anc, nc * sizeof *na);
				if (!na) {
					rc = -TK_E_NOMEM;
					break;
				}
				anc = na;
				cap = nc;
			}
			anc[d++] = x;
		}
		if (rc < 0)
			break;
		/* The base level of a track (code that ran outside any call the trace saw
		 * begin) is left off the stacks above it, as flame graph tools expect; its
		 * own time or instructions still show as "[unknown]". */
		if (d > 1 && !strcmp(names_str(nm, a.n[anc[d - 1]].name), "[unknown]"))
			d--;
		path.len = 0;
		while (d--) {
			tk_buf_puts(&path, names_str(nm, a.n[anc[d]].name));
			if (d)
				tk_buf_putc(&path, ';');
		}
		lines[nl].path = strndup(path.data, path.len);
		if (!lines[nl].path || path.err) {
			rc = -TK_E_NOMEM;
			break;
		}
		lines[nl++].v = v;
	}
	free(anc);
	qsort(lines, nl, sizeof *lines, cmp_folded);
	/* equal paths (of different tracks or unknown levels) become one line */
	size_t w = 0;
	for (size_t i = 0; i < nl;) {
		size_t j = i + 1;
		for (; j < nl && !strcmp(lines[j].path, lines[i].path); j++) {
			lines[i].v += lines[j].v;
			free(lines[j].path);
		}
		lines[w++] = lines[i];
		i = j;
	}
	nl = w;
	/* --top N: the N heaviest stacks, still in path order (as flame graph tools expect) */
	if (o->top && nl > o->top) {
		qsort(lines, nl, sizeof *lines, cmp_folded_heavy);
		for (size_t i = o->top; i < nl; i++)
			free(lines[i].path);
		nl = o->top;
		qsort(lines, nl, sizeof *lines, cmp_folded);
	}
	for (size_t i = 0; i < nl && rc >= 0; i++) {
		tk_buf_puts(b, lines[i].path);
		tk_buf_putc(b, ' ');
		tk_buf_u64(b, lines[i].v);
		tk_buf_putc(b, '\n');
	}
	for (size_t i = 0; i < nl; i++)
		free(lines[i].path);
	free(lines);
	tk_buf_free(&path);
	agg_free(&a);
	return rc < 0 ? rc : b->err;
}

struct tree_sort {
	const struct agg *a;
	enum sort_key key;
	int by_key;               /* --sort given; else by the metric's inclusive value */
	uint64_t top;
};

static uint64_t node_value(const struct agg_node *n, enum sort_key k, enum tk_out_metric m)
{
	switch (k) {
	case S_CALLS: return n->calls;
	case S_INCL: return n->incl_ticks;
	case S_EXCL: return n->excl_ticks;
	case S_INSNS: return n->incl_insns;
	case S_SELF_INSNS: return n->excl_insns;
	default: return agg_total(n, m);  /* duration statistics are per function only */
	}
}

static int cmp_tree(const void *x, const void *y, void *ctx)
{
	const struct tree_sort *ts = ctx;
	const struct agg_node *a = &ts->a->n[*(const uint32_t *)x], *b = &ts->a->n[*(const uint32_t *)y];
	if (ts->key != S_NAME) {
		uint64_t va = node_value(a, ts->key, TK_OUT_M_INSNS), vb = node_value(b, ts->key, TK_OUT_M_INSNS);
		if (va != vb)
			return va > vb ? -1 : 1;
	}
	return strcmp(names_str(ts->a->names, a->name), names_str(ts->a->names, b->name));
}

static int calltree_rec(struct tk_buf *b, const struct agg *a, uint32_t v, int depth,
			enum tk_out_metric m, uint64_t tps, struct tree_sort *ts)
{
	uint32_t *kids;
	size_t n;
	int rc = agg_children(a, v, m, &kids, &n);
	if (rc < 0)
		return rc;
	if (ts->by_key)
		qsort_r(kids, n, sizeof *kids, cmp_tree, ts);
	if (ts->top && n > ts->top)
		n = ts->top;   /* the heaviest callees of each caller */
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const struct agg_node *c = &a->n[kids[i]];
		pad_u64(b, c->calls, 12);
		if (m == TK_OUT_M_INSNS) {
			pad_u64(b, c->incl_insns, 14);
			pad_u64(b, c->excl_insns, 14);
		} else {
			pad_time(b, c->incl_ticks, tps, 14);
			pad_time(b, c->excl_ticks, tps, 14);
		}
		tk_buf_puts(b, "  ");
		for (int k = 0; k < depth; k++)
			tk_buf_puts(b, "  ");
		tk_buf_puts(b, names_str(a->names, c->name));
		tk_buf_putc(b, '\n');
		/* recursion depth follows the call depth; deep traces have deep trees */
		if (depth < 10000)
			rc = calltree_rec(b, a, kids[i], depth + 1, m, tps, ts);
	}
	free(kids);
	return rc;
}

static int out_calltree(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
			struct names *nm)
{
	struct agg a;
	enum tk_out_metric m = out_metric(p, o->metric);
	struct tk_prof_summary s;
	struct tree_sort ts = { .a = &a, .by_key = o->sort != NULL, .top = o->top };
	tk_prof_summary(p, &s);
	int rc = parse_sort(o->sort, m, &ts.key);
	if (rc < 0)
		return rc;
	rc = agg_build(&a, p, nm, o->threads);
	if (rc >= 0) {
		write_summary_text(b, p);
		tk_buf_printf(b, "       calls  %s  %s  call tree\n",
			      m == TK_OUT_M_INSNS ? "  incl-insns" : "   incl-time",
			      m == TK_OUT_M_INSNS ? "  excl-insns" : "   excl-time");
		rc = calltree_rec(b, &a, 0, 0, m, s.clock.ticks_per_second, &ts);
	}
	agg_free(&a);
	return rc < 0 ? rc : b->err;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void json_key_u64(struct tk_buf *b, const char *k, uint64_t v, int comma)
{
	if (comma)
		tk_buf_putc(b, ',');
	tk_buf_putc(b, '"');
	tk_buf_puts(b, k);
	tk_buf_puts(b, "\":");
	tk_buf_u64(b, v);
}

static int json_tree(struct tk_buf *b, const struct agg *a, uint32_t v, enum tk_out_metric m, int depth)
{
	uint32_t *kids;
	size_t n;
	int rc = agg_children(a, v, m, &kids, &n);
	if (rc < 0)
		return rc;
	tk_buf_puts(b, "[");
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const struct agg_node *c = &a->n[kids[i]];
		tk_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
		const char *s = names_str(a->names, c->name);
		tk_buf_json_str(b, s, strlen(s));
		json_key_u64(b, "calls", c->calls, 1);
		json_key_u64(b, "incl_ticks", c->incl_ticks, 1);
		json_key_u64(b, "excl_ticks", c->excl_ticks, 1);
		json_key_u64(b, "incl_insns", c->incl_insns, 1);
		json_key_u64(b, "excl_insns", c->excl_insns, 1);
		if (c->first_child != UINT32_MAX && depth < 10000) {
			tk_buf_puts(b, ",\"children\":");
			rc = json_tree(b, a, kids[i], m, depth + 1);
		}
		tk_buf_putc(b, '}');
	}
	tk_buf_puts(b, "]");
	free(kids);
	return rc;
}

static int out_json(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		    struct names *nm)
{
	enum tk_out_metric m = out_metric(p, o->metric);
	struct tk_prof_summary s;
	struct row *r;
	size_t n;
	int rc = make_rows(p, o, nm, m, &r, &n);
	if (rc < 0)
		return rc;
	tk_prof_summary(p, &s);
	tk_buf_puts(b, "{\"summary\":{");
	json_key_u64(b, "events", s.events, 0);
	json_key_u64(b, "calls", s.calls, 1);
	json_key_u64(b, "returns", s.returns, 1);
	json_key_u64(b, "instructions", s.insns, 1);
	json_key_u64(b, "blocks", s.blocks, 1);
	json_key_u64(b, "tracks", s.tracks, 1);
	json_key_u64(b, "gaps", s.gaps, 1);
	json_key_u64(b, "orphans", s.orphans, 1);
	json_key_u64(b, "lost_exits", s.unmatched, 1);
	json_key_u64(b, "truncated", s.truncated, 1);
	json_key_u64(b, "open_at_end", s.open_at_end, 1);
	json_key_u64(b, "ticks_per_second", s.clock.ticks_per_second, 1);
	tk_buf_puts(b, "},\n\"functions\":[");
	for (size_t i = 0; i < n; i++) {
		const struct tk_prof_func *f = &r[i].f;
		tk_buf_puts(b, i ? ",\n{\"name\":" : "\n{\"name\":");
		tk_buf_json_str(b, r[i].name, strlen(r[i].name));
		if (f->kind == TK_PROF_KEY_ADDR)
			tk_buf_printf(b, ",\"address\":\"0x%llx\"", (unsigned long long)f->key);
		else if (f->kind == TK_PROF_KEY_ID)
			json_key_u64(b, "id", f->key, 1);
		if (o->threads)
			json_key_u64(b, "thread", f->track, 1);
		json_key_u64(b, "calls", f->calls, 1);
		json_key_u64(b, "incl_ticks", f->incl_ticks, 1);
		json_key_u64(b, "excl_ticks", f->excl_ticks, 1);
		json_key_u64(b, "incl_insns", f->incl_insns, 1);
		json_key_u64(b, "excl_insns", f->excl_insns, 1);
		if (f->ndur) {
			json_key_u64(b, "min", f->dur_min, 1);
			json_key_u64(b, "median", f->dur_median, 1);
			json_key_u64(b, "p90", f->dur_p90, 1);
			json_key_u64(b, "p99", f->dur_p99, 1);
			json_key_u64(b, "max", f->dur_max, 1);
		}
		tk_buf_putc(b, '}');
	}
	free(r);
	tk_buf_puts(b, "],\n\"calltree\":");
	struct agg a;
	rc = agg_build(&a, p, nm, o->threads);
	if (rc >= 0)
		rc = json_tree(b, &a, 0, m, 0);
	agg_free(&a);
	tk_buf_puts(b, "}\n");
	return rc < 0 ? rc : b->err;
}

static int cmp_block_insns(const void *x, const void *y)
{
	const struct tk_prof_block *a = x, *b = y;
	if (a->insns != b->insns)
		return a->insns > b->insns ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int cmp_block_execs(const void *x, const void *y)
{
	const struct tk_prof_block *a = x, *b = y;
	if (a->execs != b->execs)
		return a->execs > b->execs ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int cmp_block_addr(const void *x, const void *y)
{
	const struct tk_prof_block *a = x, *b = y;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->end < b->end ? -1 : a->end > b->end;
}

static int out_blocks(struct tk_buf *b, const struct tk_prof *p, struct names *nm, const struct tk_out_opts *o)
{
	struct tk_prof_block *bl;
	size_t n;
	enum count_sort key;
	int rc = out_count_sort(o->sort, &key);
	if (rc < 0 || (rc = tk_prof_blocks(p, &bl, &n)) < 0)
		return rc;
	qsort(bl, n, sizeof *bl, key == CS_EXECS ? cmp_block_execs : key == CS_PLACE ? cmp_block_addr : cmp_block_insns);
	if (o->top && n > o->top)
		n = o->top;
	tk_buf_puts(b, "             start                end       execs       insns  function\n");
	for (size_t i = 0; i < n; i++) {
		tk_buf_puts(b, "0x");
		tk_buf_hex(b, bl[i].start, 16);
		tk_buf_puts(b, " 0x");
		tk_buf_hex(b, bl[i].end, 16);
		pad_u64(b, bl[i].execs, 12);
		pad_u64(b, bl[i].insns, 12);
		tk_buf_puts(b, "  ");
		char buf[512];
		if (o->sym)
			tk_buf_puts(b, tk_sym_addr_name(o->sym, bl[i].start, 1, buf, sizeof buf));
		tk_buf_putc(b, '\n');
	}
	(void)nm;
	free(bl);
	return b->err;
}

int tk_out_profile(struct tk_buf *b, const struct tk_prof *p, enum tk_out_kind kind,
		   const struct tk_out_opts *opts)
{
	struct tk_out_opts o = { .sz = sizeof o };
	struct names nm;
	int rc;

	if (opts) {
		size_t n = opts->sz < sizeof o ? opts->sz : sizeof o;
		memcpy(&o, opts, n);
	}
	if ((rc = names_init(&nm, o.sym)) < 0)
		return rc;
	switch (kind) {
	case TK_OUT_TEXT: rc = out_table(b, p, &o, &nm, 0); break;
	case TK_OUT_CSV: rc = out_table(b, p, &o, &nm, 1); break;
	case TK_OUT_JSON: rc = out_json(b, p, &o, &nm); break;
	case TK_OUT_FOLDED: rc = out_folded(b, p, &o, &nm); break;
	case TK_OUT_CALLTREE: rc = out_calltree(b, p, &o, &nm); break;
	case TK_OUT_BLOCKS: rc = out_blocks(b, p, &nm, &o); break;
	case TK_OUT_PPROF: rc = out_pprof(b, p, &o); break;
	case TK_OUT_SOURCE: rc = out_source(b, p, &o, 0); break;
	case TK_OUT_LINES: rc = out_source(b, p, &o, 1); break;
	default: rc = -TK_E_INVAL; break;
	}
	names_free(&nm);
	return rc;
}
