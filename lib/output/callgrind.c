/* The callgrind profile format (valgrind's callgrind, read by callgrind_annotate and
 * KCachegrind): per function its exclusive cost per source line, and per call site the
 * callee, the number of calls and the cost inclusive of the callee.
 *
 * Events: Ir (instructions) when the profile counts them, Ticks (the trace's clock) when it
 * has times. A function's lines come from the blocks executed in its code (the per-line
 * counts of --to lines); what its frames count beyond them (code without line tables,
 * another function's code run in its frame) is on line 0, so that a function's exclusive
 * cost is exactly the profile's. Times are on line 0 (a trace times calls, not lines).
 *
 * Inclusive costs: callgrind_annotate --inclusive=yes takes a function's inclusive cost as
 * the sum of the costs of the calls= lines into it. A recursive call's cost is 0 (the
 * outermost call holds it), so recursion is counted once, as in the profile's inclusive
 * columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
#include "image/sym_frames.h"

struct cg_func {
	uint64_t self_insns, self_ticks;
	uint64_t line_insns;      /* on source lines */
	const char *file;         /* fl= */
	uint64_t file_insns;      /* instructions in it */
	int seen;
};

struct cg_edge {
	uint32_t caller, callee;  /* name ids */
	uint64_t calls, insns, ticks;
};

struct lines_ctx {
	struct func_line *v;
	size_t n, cap;
	uint32_t func;            /* of the block being attributed */
	uint64_t execs;
};

static int add_line(void *ctx, uint64_t addr, const char *file, unsigned line, uint64_t insns)
{
	struct lines_ctx *t = ctx;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 1024;
		struct func_line *nv = realloc(t->v, nc * sizeof *nv);
		if (!nv)
			return -TK_E_NOMEM;
		t->v = nv;
		t->cap = nc;
	}
	/* the symboliser counts per execution */
	t->v[t->n++] = (struct func_line){ t->func, file, line, addr, insns * t->execs };
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	const struct func_line *x = a, *y = b;
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	int c = strcmp(x->file, y->file);
	if (c)
		return c;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int cmp_block(const void *a, const void *b)
{
	const struct tk_prof_block *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_edge(const void *a, const void *b)
{
	const struct cg_edge *x = a, *y = b;
	if (x->caller != y->caller)
		return x->caller < y->caller ? -1 : 1;
	return x->callee < y->callee ? -1 : x->callee > y->callee;
}

int out_func_lines(const struct tk_prof *p, struct names *nm, struct func_line **out, size_t *n)
{
	struct lines_ctx t = { 0 };
	struct tk_prof_block *bl;
	size_t nb;
	int rc;

	*out = NULL;
	*n = 0;
	if (!nm->sym)
		return 0;
	if ((rc = tk_prof_blocks(p, &bl, &nb)) < 0)
		return rc;
	/* in address order: the block table's order depends on which worker counted a block
	 * first, and the names interned below must not (pprof's string table, -j N = -j 1) */
	if (nb)
		qsort(bl, nb, sizeof *bl, cmp_block);
	for (size_t i = 0; i < nb && rc >= 0; i++) {
		struct tk_sym_info si;
		if (tk_sym_lookup(nm->sym, bl[i].start, &si) < 0 || !si.func)
			continue;
		uint32_t f = names_frame(nm, si.func_start, TK_PROF_KEY_ADDR);
		if (f == UINT32_MAX) {
			rc = -TK_E_NOMEM;
			break;
		}
		t.func = f;
		t.execs = bl[i].execs;
		rc = tk_sym_line_ranges(nm->sym, bl[i].start, bl[i].end,
					bl[i].execs ? bl[i].insns / bl[i].execs : 0, add_line, &t);
	}
	free(bl);
	if (rc < 0) {
		free(t.v);
		return rc;
	}
	if (t.n)
		qsort(t.v, t.n, sizeof *t.v, cmp_line);
	size_t w = 0;
	for (size_t i = 0; i < t.n; i++) {
		struct func_line *l = &t.v[i], *prev = w ? &t.v[w - 1] : NULL;
		if (prev && prev->func == l->func && prev->line == l->line && !strcmp(prev->file, l->file)) {
			prev->insns += l->insns;
			if (l->addr < prev->addr)
				prev->addr = l->addr;
		} else {
			t.v[w++] = *l;
		}
	}
	*out = t.v;
	*n = w;
	return 0;
}

/* The calls between functions with their inclusive costs. A call of F counts its
 * inclusive cost unless F is running already (a recursive call: the outer call holds it),
 * so that the costs of the calls into F add up to F's inclusive cost, as
 * callgrind_annotate --inclusive=yes takes it. ACTIVE (one slot per name) counts the
 * frames of each name on the path walked. */
static int cg_edges(const struct agg *a, uint32_t *active, struct cg_edge **out, size_t *n)
{
	struct cg_edge *e = calloc(a->nn ? a->nn : 1, sizeof *e);
	uint32_t *stack = malloc((a->nn ? a->nn : 1) * sizeof *stack);
	if (!e || !stack) {
		free(e);
		free(stack);
		return -TK_E_NOMEM;
	}
	/* depth first: a node is pushed when entered; its next sibling replaces it on exit */
	size_t sp = 0;
	if (a->nn > 1 && a->n[0].first_child != UINT32_MAX)
		stack[sp++] = a->n[0].first_child;
	int entering = 1;
	while (sp) {
		uint32_t c = stack[sp - 1];
		const struct agg_node *nc = &a->n[c];
		if (entering) {
			uint32_t p = nc->parent;
			e[c] = (struct cg_edge){ p ? a->n[p].name : UINT32_MAX, nc->name, nc->calls,
						 active[nc->name] ? 0 : nc->incl_insns,
						 active[nc->name] ? 0 : nc->incl_ticks };
			active[nc->name]++;
			if (nc->first_child != UINT32_MAX) {
				stack[sp++] = nc->first_child;
				continue;
			}
		}
		active[nc->name]--;
		if (nc->next_sibling != UINT32_MAX) {
			stack[sp - 1] = nc->next_sibling;
			entering = 1;
		} else {
			sp--;
			entering = 0;
		}
	}
	free(stack);
	/* one edge per (caller, callee) name pair; calls from the root are no calls */
	size_t w = 0;
	for (uint32_t c = 1; c < a->nn; c++)
		if (e[c].caller != UINT32_MAX)
			e[w++] = e[c];
	if (w)
		qsort(e, w, sizeof *e, cmp_edge);
	size_t k = 0;
	for (size_t i = 0; i < w; i++) {
		if (k && e[k - 1].caller == e[i].caller && e[k - 1].callee == e[i].callee) {
			e[k - 1].calls += e[i].calls;
			e[k - 1].insns += e[i].insns;
			e[k - 1].ticks += e[i].ticks;
		} else {
			e[k++] = e[i];
		}
	}
	*out = e;
	*n = k;
	return 0;
}

static void put_costs(struct tk_buf *b, unsigned line, int ir, uint64_t insns, int ticks, uint64_t t)
{
	char tmp[80];
	int n = snprintf(tmp, sizeof tmp, "%u", line);
	if (ir)
		n += snprintf(tmp + n, sizeof tmp - (size_t)n, " %llu", (unsigned long long)insns);
	if (ticks)
		n += snprintf(tmp + n, sizeof tmp - (size_t)n, " %llu", (unsigned long long)t);
	tmp[n++] = '\n';
	tk_buf_put(b, tmp, (size_t)n);
}

static void put_total(struct tk_buf *b, const char *key, int ir, uint64_t insns, int ticks,
		      uint64_t t)
{
	tk_buf_puts(b, key);
	if (ir)
		tk_buf_printf(b, " %llu", (unsigned long long)insns);
	if (ticks)
		tk_buf_printf(b, " %llu", (unsigned long long)t);
	tk_buf_putc(b, '\n');
}

static void put_str(struct tk_buf *b, const char *key, const char *s)
{
	tk_buf_puts(b, key);
	tk_buf_puts(b, s);
	tk_buf_putc(b, '\n');
}

int out_callgrind(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		  struct names *nm)
{
	struct tk_prof_summary s;
	struct agg a;
	struct func_line *lines = NULL;
	size_t nlines = 0;
	struct cg_edge *edges = NULL;
	struct cg_func *fn = NULL;
	uint32_t *active = NULL;
	size_t nedges = 0;
	int rc;

	tk_prof_summary(p, &s);
	if ((rc = agg_build(&a, p, nm, NULL)) < 0)
		return rc;
	if ((rc = out_func_lines(p, nm, &lines, &nlines)) < 0)
		goto out;
	/* every name is interned by now: tables per name id */
	fn = calloc(nm->n, sizeof *fn);
	active = calloc(nm->n, sizeof *active);
	if (!fn || !active) {
		rc = -TK_E_NOMEM;
		goto out;
	}
	if ((rc = cg_edges(&a, active, &edges, &nedges)) < 0)
		goto out;
	for (size_t i = 1; i < a.nn; i++) {
		struct cg_func *f = &fn[a.n[i].name];
		f->self_insns += a.n[i].excl_insns;
		f->self_ticks += a.n[i].excl_ticks;
		f->seen = 1;
	}
	/* a function's file (fl=): the one most of its instructions are in (lines are in
	 * file order per function) */
	for (size_t i = 0, j; i < nlines; i = j) {
		struct cg_func *f = &fn[lines[i].func];
		uint64_t in_file = 0;
		for (j = i; j < nlines && lines[j].func == lines[i].func &&
			    !strcmp(lines[j].file, lines[i].file); j++)
			in_file += lines[j].insns;
		if (!f->file || in_file > f->file_insns) {
			f->file = lines[i].file;
			f->file_insns = in_file;
		}
		f->line_insns += in_file;
	}
	/* lines that are more than the function's frames count (its code run in another
	 * function's frame) cannot be shown exactly: such a function gets line 0 only */
	for (size_t i = 0; i < nm->n; i++)
		if (fn[i].line_insns > fn[i].self_insns || !fn[i].seen)
			fn[i].line_insns = 0;

	int ir = s.insns || !(s.time_first != TK_TIME_NONE && s.time_last > s.time_first);
	int ticks = s.time_first != TK_TIME_NONE && s.time_last > s.time_first;
	uint64_t tot_insns = 0, tot_ticks = 0, unmeasured = 0;
	for (size_t i = 0; i < nm->n; i++) {
		tot_insns += fn[i].self_insns;
		tot_ticks += fn[i].self_ticks;
		unmeasured += a.sparse && fn[i].seen && !fn[i].self_ticks;
	}
	tk_buf_puts(b, "# callgrind format\nversion: 1\ncreator: tracekit\npositions: line\n");
	/* callgrind has no "not measured": a cost left out is 0, so a time of 0 that was not
	 * measured (sparse time stamps) would read as one; the event goes instead */
	if (ticks && unmeasured) {
		tk_buf_printf(b, "# no Ticks event: the times of %llu functions were not measured\n",
			      (unsigned long long)unmeasured);
		ticks = 0;
		ir = 1;
	}
	tk_buf_printf(b, "events:%s%s\n", ir ? " Ir" : "", ticks ? " Ticks" : "");
	if (ticks && s.clock.ticks_per_second)
		tk_buf_printf(b, "# Ticks: %llu per second\n",
			      (unsigned long long)s.clock.ticks_per_second);
	put_total(b, "summary:", ir, tot_insns, ticks, tot_ticks);

	size_t li = 0, ei = 0;
	for (uint32_t f = 1; f < nm->n; f++) {
		struct cg_func *cf = &fn[f];
		while (li < nlines && lines[li].func < f)
			li++;
		while (ei < nedges && edges[ei].caller < f)
			ei++;
		if (!cf->seen)
			continue;
		const char *fl = cf->line_insns ? cf->file : "???";
		tk_buf_putc(b, '\n');
		put_str(b, "fl=", fl);
		put_str(b, "fn=", names_str(nm, f));
		put_costs(b, 0, ir, cf->self_insns - cf->line_insns, ticks, cf->self_ticks);
		for (; ei < nedges && edges[ei].caller == f; ei++) {
			const struct cg_edge *e = &edges[ei];
			put_str(b, "cfl=", fn[e->callee].line_insns ? fn[e->callee].file : "???");
			put_str(b, "cfn=", names_str(nm, e->callee));
			tk_buf_printf(b, "calls=%llu 0\n", (unsigned long long)e->calls);
			put_costs(b, 0, ir, e->insns, ticks, e->ticks);
		}
		if (!cf->line_insns)
			continue;
		const char *cur = fl;
		for (; li < nlines && lines[li].func == f; li++) {
			const struct func_line *l = &lines[li];
			if (strcmp(l->file, cur))
				put_str(b, "fi=", cur = l->file);
			put_costs(b, l->line, ir, l->insns, ticks, 0);
		}
	}
	put_total(b, "\ntotals:", ir, tot_insns, ticks, tot_ticks);
	(void)o;
out:
	free(lines);
	free(edges);
	free(fn);
	free(active);
	agg_free(&a);
	return rc;
}
