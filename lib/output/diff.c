/* Two profiles compared (tracekit diff): per function the calls, times and instructions of
 * A and B, B - A and its percentage of A; or the differential folded stacks flame-graph
 * tools read ("stack countA countB", as difffolded.pl writes). Functions and stacks are
 * matched by name (tracks merged), so A and B may come from other builds or formats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"

enum { V_CALLS, V_INCL_TIME, V_EXCL_TIME, V_INCL_INSNS, V_EXCL_INSNS, NV };
static const char *const vname[NV] = { "calls", "incl_time", "excl_time", "incl_insns",
				       "excl_insns" };
enum { C_A, C_B, C_DIFF, C_PCT, NC };
static const char *const cname[NC] = { "a", "b", "diff", "pct" };

#define DIFF_SORT_HELP "function, or METRIC_a, _b, _diff, _pct with METRIC one of calls, " \
	"incl_time, excl_time, incl_insns, excl_insns"

struct fn {
	uint64_t v[2][NV];                /* A's and B's; times in ns when the clock is known */
	uint8_t in[2];                    /* in A, in B */
};
struct side {
	int added;
	int sparse;                       /* TK_PROF_SPARSE_TIME: a time of 0 was not measured */
	uint64_t tps;                     /* ticks per second; 0: times in ticks */
	enum tk_out_metric metric;        /* of its folded stacks */
	struct tk_prof_summary sum;
};

struct tk_out_diff {
	enum tk_out_kind kind;
	struct names fnames, paths;       /* name (stack) -> index into fn (pv) */
	struct fn *fn;
	uint64_t (*pv)[2];
	size_t fcap, pcap;
	struct side side[2];
};

struct tk_out_diff *tk_out_diff_new(enum tk_out_kind kind, int *err)
{
	struct tk_out_diff *d = calloc(1, sizeof *d);
	int rc = -TK_E_NOMEM;
	if (kind != TK_OUT_TEXT && kind != TK_OUT_CSV && kind != TK_OUT_JSON && kind != TK_OUT_FOLDED)
		rc = -TK_E_INVAL;
	else if (d && names_init(&d->fnames, NULL) == 0 && names_init(&d->paths, NULL) == 0)
		rc = 0;
	if (rc < 0) {
		tk_out_diff_free(d);
		if (err)
			*err = rc;
		return NULL;
	}
	d->kind = kind;
	return d;
}

void tk_out_diff_free(struct tk_out_diff *d)
{
	if (!d)
		return;
	names_free(&d->fnames);
	names_free(&d->paths);
	free(d->fn);
	free(d->pv);
	free(d);
}

/* Index of NAME in NM, with *ARR (elements of SIZE, *CAP of them, zeroed) grown to hold it. */
static uint32_t slot(struct names *nm, const char *name, size_t len, void **arr, size_t *cap,
		     size_t size)
{
	uint32_t id = names_intern(nm, name, len);
	if (id == UINT32_MAX)
		return id;
	if (id >= *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		while (nc <= id)
			nc *= 2;
		void *a = realloc(*arr, nc * size);
		if (!a)
			return UINT32_MAX;
		memset((char *)a + *cap * size, 0, (nc - *cap) * size);
		*arr = a;
		*cap = nc;
	}
	return id;
}

static uint64_t to_ns(uint64_t ticks, uint64_t tps)
{
	return tps ? (uint64_t)((unsigned __int128)ticks * 1000000000u / tps) : ticks;
}

/* The folded stacks of P (as profile --to folded prints them) into D's side SIDE. */
static int add_stacks(struct tk_out_diff *d, int side, const struct tk_prof *p,
		      const struct tk_out_opts *o)
{
	/* (O has track_process: tk_out_diff_add_opts came with it) */
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = o->sym, .track_ctx = o->track_ctx,
				  .track_process = o->track_process };
	struct tk_buf t;
	int rc;
	if (tk_buf_init(&t, -1, 1 << 16) < 0)
		return -TK_E_NOMEM;
	if ((rc = tk_out_profile(&t, p, TK_OUT_FOLDED, &oo)) >= 0) {
		for (size_t i = 0; i < t.len && rc >= 0; ) {
			const char *line = (const char *)t.data + i;
			const char *end = memchr(line, '\n', t.len - i);
			size_t len = end ? (size_t)(end - line) : t.len - i;
			i += len + 1;
			const char *sp = memrchr(line, ' ', len);
			if (!sp) {
				rc = -TK_E_INVAL;
				break;
			}
			void *arr = d->pv;
			uint32_t id = slot(&d->paths, line, (size_t)(sp - line), &arr, &d->pcap,
					   sizeof *d->pv);
			d->pv = arr;
			if (id == UINT32_MAX)
				rc = -TK_E_NOMEM;
			else
				d->pv[id][side] += strtoull(sp + 1, NULL, 10);
		}
	}
	tk_buf_free(&t);
	return rc;
}

int tk_out_diff_add(struct tk_out_diff *d, int side, const struct tk_prof *p, struct tk_sym *sym)
{
	struct tk_out_opts o = { .sz = sizeof o, .sym = sym };
	return tk_out_diff_add_opts(d, side, p, &o);
}

int tk_out_diff_add_opts(struct tk_out_diff *d, int side, const struct tk_prof *p,
			 const struct tk_out_opts *o)
{
	struct side *s = &d->side[side & 1];
	struct tk_prof_func *f;
	struct names nm;
	size_t n;
	int rc;

	if (s->added)
		return -TK_E_INVAL;
	tk_prof_summary(p, &s->sum);
	s->added = 1;
	s->tps = s->sum.clock.ticks_per_second;
	s->sparse = (tk_prof_flags(p) & TK_PROF_SPARSE_TIME) != 0;
	s->metric = out_metric(p, TK_OUT_M_AUTO);
	if (d->kind == TK_OUT_FOLDED)
		return add_stacks(d, side & 1, p, o);
	if ((rc = names_init(&nm, o->sym)) < 0)
		return rc;
	if ((rc = tk_prof_funcs(p, 0, &f, &n)) < 0) {
		names_free(&nm);
		return rc;
	}
	/* a session of several processes: each row named by its process's symbols (the
	 * same addresses hold other functions in another process) */
	const int by_proc = tk_prof_grouped(p);
	struct tk_sym *psym = o->sym;
	uint32_t ptrack = UINT32_MAX;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		if (by_proc && f[i].track != ptrack) {
			uint32_t pid;
			char comm[32];
			ptrack = f[i].track;
			if (out_track_process(o, ptrack, &pid, comm, sizeof comm, &psym) < 0)
				psym = o->sym;
		}
		uint32_t id = by_proc ? names_frame_in(&nm, psym, f[i].key, f[i].kind)
				      : names_frame(&nm, f[i].key, f[i].kind);
		const char *name = id == UINT32_MAX ? "?" : names_str(&nm, id);
		void *arr = d->fn;
		uint32_t k = slot(&d->fnames, name, strlen(name), &arr, &d->fcap, sizeof *d->fn);
		d->fn = arr;
		if (k == UINT32_MAX) {
			rc = -TK_E_NOMEM;
			break;
		}
		/* functions of equal names (statics of two modules, [unknown]) are one row */
		uint64_t *v = d->fn[k].v[side & 1];
		d->fn[k].in[side & 1] = 1;
		v[V_CALLS] += f[i].calls;
		v[V_INCL_TIME] += to_ns(f[i].incl_ticks, s->tps);
		v[V_EXCL_TIME] += to_ns(f[i].excl_ticks, s->tps);
		v[V_INCL_INSNS] += f[i].incl_insns;
		v[V_EXCL_INSNS] += f[i].excl_insns;
	}
	free(f);
	names_free(&nm);
	return rc;
}

/* ---- sorting ------------------------------------------------------------------------- */

struct key { int name, v, c; };          /* by name, or column C of metric V */

static int parse_key(const char *s, struct key *k)
{
	*k = (struct key){ 0 };
	if (!strcmp(s, "function") || !strcmp(s, "name")) {
		k->name = 1;
		return 0;
	}
	for (int v = 0; v < NV; v++) {
		size_t l = strlen(vname[v]);
		if (strncmp(s, vname[v], l) || s[l] != '_')
			continue;
		for (int c = 0; c < NC; c++)
			if (!strcmp(s + l + 1, cname[c])) {
				*k = (struct key){ 0, v, c };
				return 0;
			}
	}
	return -TK_E_INVAL;
}

int tk_out_diff_sort_check(const char *key, const char **keys)
{
	struct key k;
	if (keys)
		*keys = DIFF_SORT_HELP;
	return key ? parse_key(key, &k) : 0;
}

struct row { uint32_t id; const char *name; const uint64_t *a, *b; int unmeasured[2][NV]; };

/* B - A as a percentage of A; *NEW when A is 0 and B is not (no percentage). */
static double pct(uint64_t a, uint64_t b, int *isnew)
{
	*isnew = !a && b;
	return a ? 100.0 * ((double)b - (double)a) / (double)a : 0;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Whether column C of metric V of R is a time a side did not measure (or a change from
 * one). */
static int unmeasured(const struct row *r, int v, int c)
{
	return (c != C_B && r->unmeasured[0][v]) || (c != C_A && r->unmeasured[1][v]);
}

static int cmp_rows(const void *x, const void *y, void *ctx)
{
	const struct row *r = x, *s = y;
	const struct key *k = ctx;
	if (!k->name && unmeasured(r, k->v, k->c) != unmeasured(s, k->v, k->c))
		return unmeasured(r, k->v, k->c) ? 1 : -1;   /* after those measured */
	if (!k->name) {
		int v = k->v, na, nb;
		double pa, pb;
		uint64_t ua, ub;
		switch (k->c) {
		case C_A: ua = r->a[v]; ub = s->a[v]; break;
		case C_B: ua = r->b[v]; ub = s->b[v]; break;
		case C_DIFF: ua = absdiff(r->a[v], r->b[v]); ub = absdiff(s->a[v], s->b[v]); break;
		default:
			/* the largest change first; new functions (no percentage) before all */
			pa = pct(r->a[v], r->b[v], &na);
			pb = pct(s->a[v], s->b[v], &nb);
			pa = pa < 0 ? -pa : pa;
			pb = pb < 0 ? -pb : pb;
			if (na != nb)
				return na ? -1 : 1;
			if (pa != pb)
				return pa > pb ? -1 : 1;
			ua = ub = 0;
		}
		if (ua != ub)
			return ua > ub ? -1 : 1;
	}
	return strcmp(r->name, s->name);
}

/* ---- writing ------------------------------------------------------------------------- */

/* The cost the text table shows: instructions when either side counted them, else time
 * when either has it, else calls only. */
static int main_metric(const struct tk_out_diff *d)
{
	if (d->side[0].sum.insns || d->side[1].sum.insns)
		return V_EXCL_INSNS;
	for (int i = 0; i < 2; i++)
		if (d->side[i].metric == TK_OUT_M_TICKS)
			return V_EXCL_TIME;
	return V_CALLS;
}

static int is_time(int v)
{
	return v == V_INCL_TIME || v == V_EXCL_TIME;
}

/* Value column C of metric V of row R (times as microseconds when the clock is known);
 * nothing (text: "-") for a time a side did not measure, or a change from one. */
static void put_cell(struct tk_buf *b, const struct row *r, int v, int c, int ns, int text)
{
	uint64_t a = r->a[v], bv = r->b[v];
	if (unmeasured(r, v, c)) {
		tk_buf_puts(b, text ? "-" : "");
		return;
	}
	if (c == C_PCT) {
		int isnew;
		double p = pct(a, bv, &isnew);
		if (isnew)
			tk_buf_puts(b, text ? "new" : "");
		else   /* a change that rounds to 0 is 0.0, not -0.0 */
			tk_buf_printf(b, "%.1f", p > -0.05 && p < 0.05 ? 0.0 : p);
		return;
	}
	int64_t x = c == C_A ? (int64_t)a : c == C_B ? (int64_t)bv : (int64_t)(bv - a);
	if (is_time(v) && ns)
		tk_buf_fixed(b, x, 3);
	else
		tk_buf_i64(b, x);
}

static void put_right(struct tk_buf *b, const struct tk_buf *cell, size_t width)
{
	for (size_t i = cell->len < width ? cell->len : width - 1; i < width; i++)
		tk_buf_putc(b, ' ');
	tk_buf_put(b, cell->data, cell->len);
}

static void put_side(struct tk_buf *b, const char *which, const char *name, const struct side *s)
{
	tk_buf_printf(b, "# %s: %s: calls %llu, instructions %llu", which, name ? name : "-",
		      (unsigned long long)s->sum.calls, (unsigned long long)s->sum.insns);
	if (s->tps)
		tk_buf_printf(b, ", times in us (%llu ticks/s)\n", (unsigned long long)s->tps);
	else
		tk_buf_puts(b, ", times in ticks\n");
}

static int write_table(struct tk_buf *b, const struct tk_out_diff *d, const struct row *r,
		       size_t n, const struct tk_out_diff_opts *o)
{
	int ns = d->side[0].tps || d->side[1].tps;   /* times are in ns, else ticks */
	/* columns: (metric, column) pairs */
	int cols[2 * NV * NC][2], ncol = 0, m = main_metric(d);
	for (int v = 0; v < NV; v++)
		for (int c = 0; c < NC; c++) {
			int shown = d->kind != TK_OUT_TEXT ||
				(v == V_CALLS && (c != C_PCT || m == V_CALLS)) ||
				(m != V_CALLS && (v == m || v == m - 1));
			if (shown) {
				cols[ncol][0] = v;
				cols[ncol++][1] = c;
			}
		}
	struct tk_buf cell;
	if (tk_buf_init(&cell, -1, 64) < 0)
		return -TK_E_NOMEM;
	if (d->kind == TK_OUT_CSV) {
		tk_buf_puts(b, "function");
		for (int i = 0; i < ncol; i++)
			tk_buf_printf(b, ",%s_%s", vname[cols[i][0]], cname[cols[i][1]]);
		tk_buf_putc(b, '\n');
	} else if (d->kind == TK_OUT_JSON) {
		tk_buf_printf(b, "{\"a\":{\"name\":");
		tk_buf_json_str(b, o->name_a ? o->name_a : "", o->name_a ? strlen(o->name_a) : 0);
		tk_buf_printf(b, ",\"ticks_per_second\":%llu},\"b\":{\"name\":",
			      (unsigned long long)d->side[0].tps);
		tk_buf_json_str(b, o->name_b ? o->name_b : "", o->name_b ? strlen(o->name_b) : 0);
		tk_buf_printf(b, ",\"ticks_per_second\":%llu},\n\"functions\":[",
			      (unsigned long long)d->side[1].tps);
	} else {
		put_side(b, "A", o->name_a, &d->side[0]);
		put_side(b, "B", o->name_b, &d->side[1]);
		for (int i = 0; i < ncol; i++) {
			cell.len = 0;
			tk_buf_printf(&cell, "%s_%s", vname[cols[i][0]], cname[cols[i][1]]);
			put_right(b, &cell, cell.len + 2 > 12 ? cell.len + 2 : 12);
		}
		tk_buf_puts(b, "  function\n");
	}
	for (size_t k = 0; k < n; k++) {
		if (d->kind == TK_OUT_CSV) {
			out_csv_quoted(b, r[k].name);
		} else if (d->kind == TK_OUT_JSON) {
			tk_buf_puts(b, k ? ",\n{\"function\":" : "\n{\"function\":");
			tk_buf_json_str(b, r[k].name, strlen(r[k].name));
		}
		for (int i = 0; i < ncol; i++) {
			int v = cols[i][0], c = cols[i][1];
			cell.len = 0;
			put_cell(&cell, &r[k], v, c, ns, d->kind == TK_OUT_TEXT);
			if (d->kind == TK_OUT_CSV) {
				tk_buf_putc(b, ',');
				tk_buf_put(b, cell.data, cell.len);
			} else if (d->kind == TK_OUT_JSON) {
				if (is_time(v) && !cell.len)   /* unmeasured: no key, as profile */
					continue;
				tk_buf_printf(b, ",\"%s_%s\":", vname[v], cname[c]);
				if (cell.len)
					tk_buf_put(b, cell.data, cell.len);
				else
					tk_buf_puts(b, "null");
			} else {
				size_t w = strlen(vname[v]) + strlen(cname[c]) + 3;
				put_right(b, &cell, w > 12 ? w : 12);
			}
		}
		if (d->kind == TK_OUT_JSON)
			tk_buf_putc(b, '}');
		else if (d->kind == TK_OUT_CSV)
			tk_buf_putc(b, '\n');
		else
			tk_buf_printf(b, "  %s\n", r[k].name);
	}
	if (d->kind == TK_OUT_JSON)
		tk_buf_puts(b, "]}\n");
	tk_buf_free(&cell);
	return b->err;
}

static int cmp_paths(const void *x, const void *y, void *ctx)
{
	const struct names *nm = ctx;
	return strcmp(names_str(nm, *(const uint32_t *)x), names_str(nm, *(const uint32_t *)y));
}

/* The largest change first (then by stack). */
static int cmp_change(const void *x, const void *y, void *ctx)
{
	const struct tk_out_diff *d = ctx;
	const uint64_t *p = d->pv[*(const uint32_t *)x], *q = d->pv[*(const uint32_t *)y];
	uint64_t a = absdiff(p[0], p[1]), b = absdiff(q[0], q[1]);

	return a != b ? (a > b ? -1 : 1) : cmp_paths(x, y, (void *)&d->paths);
}

/* "stack countA countB" per stack of either, in stack order, as difffolded.pl writes;
 * with TOP, only the TOP stacks that changed most. */
static int write_folded(struct tk_buf *b, struct tk_out_diff *d, uint64_t top)
{
	uint32_t *ids = malloc((d->paths.n + 1) * sizeof *ids);
	size_t n = 0;
	if (!ids)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < d->paths.n; i++)
		if (i < d->pcap && (d->pv[i][0] || d->pv[i][1]))
			ids[n++] = (uint32_t)i;
	if (top && n > top) {
		qsort_r(ids, n, sizeof *ids, cmp_change, d);
		n = top;
	}
	qsort_r(ids, n, sizeof *ids, cmp_paths, &d->paths);
	for (size_t i = 0; i < n; i++)
		tk_buf_printf(b, "%s %llu %llu\n", names_str(&d->paths, ids[i]),
			      (unsigned long long)d->pv[ids[i]][0], (unsigned long long)d->pv[ids[i]][1]);
	free(ids);
	return b->err;
}

int tk_out_diff_write(struct tk_buf *b, struct tk_out_diff *d, const struct tk_out_diff_opts *o)
{
	const struct side *A = &d->side[0], *B = &d->side[1];
	struct key key;
	int rc;

	if (!A->added || !B->added)
		return -TK_E_INVAL;
	if (d->kind == TK_OUT_FOLDED) {
		if (A->metric != B->metric) {
			static const char *const what[] = { "", "instructions", "time", "calls" };
			tk_log(TK_LOG_ERROR, "the stacks of A count %s, those of B %s: not comparable",
			       what[A->metric], what[B->metric]);
			return -TK_E_INVAL;
		}
		return write_folded(b, d, o->top);
	}
	if ((A->sum.time_first != TK_TIME_NONE && B->sum.time_first != TK_TIME_NONE) &&
	    !A->tps != !B->tps) {
		tk_log(TK_LOG_ERROR, "the times of A are in %s, those of B in %s: not comparable "
		       "(give both a clock, e.g. --tsc-hz)", A->tps ? "us" : "ticks",
		       B->tps ? "us" : "ticks");
		return -TK_E_INVAL;
	}
	if (o->sort) {
		if (parse_key(o->sort, &key) < 0) {
			tk_log(TK_LOG_ERROR, "unknown sort key '%s' (%s)", o->sort, DIFF_SORT_HELP);
			return -TK_E_INVAL;
		}
	} else {
		/* by the absolute change of the main cost */
		key = (struct key){ 0, main_metric(d), C_DIFF };
	}
	struct row *r = malloc((d->fnames.n + 1) * sizeof *r);
	size_t n = 0;
	if (!r)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < d->fnames.n; i++) {
		if (i >= d->fcap)
			break;
		if (i == 0)
			continue;                 /* the names table's "", no function's */
		r[n] = (struct row){ (uint32_t)i, names_str(&d->fnames, (uint32_t)i), d->fn[i].v[0],
				     d->fn[i].v[1] };
		/* a sparse clock's 0 is no measure (a function a side lacks ran no time there) */
		for (int sd = 0; sd < 2; sd++)
			for (int v = 0; v < NV; v++)
				r[n].unmeasured[sd][v] = is_time(v) && d->side[sd].sparse &&
					d->fn[i].in[sd] && !d->fn[i].v[sd][v];
		n++;
	}
	qsort_r(r, n, sizeof *r, cmp_rows, &key);
	if (o->top && n > o->top)
		n = o->top;
	rc = write_table(b, d, r, n, o);
	free(r);
	return rc;
}
