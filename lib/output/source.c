/* Per-source-line counts from executed blocks (DWARF line tables) and the annotated source
 * listing: every line of each source file with its executions and instructions; and the
 * --sort keys of the count tables (profile.c's block table too: it calls here, never back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"

struct line_count {
	const char *file;         /* interned by libdw: equal strings are equal pointers per CU,
				     so files are compared by content */
	unsigned line;
	uint64_t execs, insns;
};

struct line_table {
	struct line_count *v;
	size_t n, cap;
	uint64_t cur_execs;       /* executions of the block being attributed */
	int err;
};

static int add_line(void *ctx, const char *file, unsigned line, uint64_t insns)
{
	struct line_table *t = ctx;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 1024;
		struct line_count *nv = realloc(t->v, nc * sizeof *nv);
		if (!nv)
			return -TK_E_NOMEM;
		t->v = nv;
		t->cap = nc;
	}
	/* insns is per execution when the block was decoded; scaled by the caller's execs */
	t->v[t->n++] = (struct line_count){ file, line, t->cur_execs, insns };
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	const struct line_count *x = a, *y = b;
	int c = strcmp(x->file, y->file);
	if (c)
		return c;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Sorted, merged per-line counts of the profile's blocks. */
static int collect_lines(const struct tk_prof *p, struct tk_sym *sym, struct line_table *t)
{
	struct tk_prof_block *bl;
	size_t nb;
	int rc = tk_prof_blocks(p, &bl, &nb);
	if (rc < 0)
		return rc;
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < nb && rc >= 0; i++) {
		size_t first = t->n;
		uint64_t per_exec = bl[i].execs ? bl[i].insns / bl[i].execs : 0;
		t->cur_execs = bl[i].execs;
		rc = tk_sym_lines(sym, bl[i].start, bl[i].end, per_exec, add_line, t);
		/* each part of a block on a line counts one execution of that line; the
		 * instruction counts from the symboliser are per execution */
		for (size_t k = first; k < t->n; k++)
			t->v[k].insns *= bl[i].execs;
	}
	free(bl);
	if (rc < 0) {
		free(t->v);
		return rc;
	}
	if (nb && !t->n)   /* code ran, none of it on a line: say why the table is empty */
		tk_log(TK_LOG_WARN, "none of the %zu executed blocks has a source line: the code has "
		       "no line tables (build it with -g; give the binaries that have them with --elf)",
		       nb);
	if (t->n)
		qsort(t->v, t->n, sizeof *t->v, cmp_line);
	/* merge equal (file, line); a block that enters a line twice (a loop inside one
	 * block cannot: blocks are straight-line) counts once per part */
	size_t w = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (w && t->v[w - 1].line == t->v[i].line && !strcmp(t->v[w - 1].file, t->v[i].file)) {
			t->v[w - 1].execs += t->v[i].execs;
			t->v[w - 1].insns += t->v[i].insns;
		} else {
			t->v[w++] = t->v[i];
		}
	}
	t->n = w;
	return 0;
}

static void pad(struct tk_buf *b, uint64_t v, int width)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
	for (int i = n; i < width; i++)
		tk_buf_putc(b, ' ');
	tk_buf_put(b, tmp, (size_t)n);
}

static int annotate_file(struct tk_buf *b, const char *path, const char *root,
			 const struct line_count *v, size_t n)
{
	char full[4096];
	FILE *f;
	if (root && path[0] != '/')
		snprintf(full, sizeof full, "%s/%s", root, path);
	else
		snprintf(full, sizeof full, "%s", path);
	tk_buf_puts(b, "-- file: ");
	tk_buf_puts(b, full);
	tk_buf_putc(b, '\n');
	tk_buf_puts(b, "       execs        insns  line  source\n");
	f = fopen(full, "r");
	if (!f) {
		/* no source: list the counted lines alone */
		for (size_t i = 0; i < n; i++) {
			pad(b, v[i].execs, 12);
			pad(b, v[i].insns, 13);
			pad(b, v[i].line, 6);
			tk_buf_puts(b, "  (source not found)\n");
		}
		return 0;
	}
	char *line = NULL;
	size_t cap = 0, k = 0;
	ssize_t len;
	unsigned no = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		no++;
		while (k < n && v[k].line < no)
			k++;
		if (k < n && v[k].line == no) {
			pad(b, v[k].execs, 12);
			pad(b, v[k].insns, 13);
		} else {
			tk_buf_puts(b, "           .            .");
		}
		pad(b, no, 6);
		tk_buf_puts(b, "  ");
		if (len && line[len - 1] == '\n')
			len--;
		tk_buf_put(b, line, (size_t)len);
		tk_buf_putc(b, '\n');
	}
	free(line);
	fclose(f);
	return 0;
}

int out_count_sort(const char *s, enum count_sort *k)
{
	int rc = out_count_sort_quiet(s, k);
	if (rc < 0)
		tk_log(TK_LOG_ERROR, "sort key '%s' does not apply to lines or blocks (%s)", s,
		       COUNT_SORT_KEYS);
	return rc;
}

int out_count_sort_quiet(const char *s, enum count_sort *k)
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
	return -TK_E_INVAL;
}

static int cmp_line_insns(const void *a, const void *b)
{
	const struct line_count *x = a, *y = b;
	if (x->insns != y->insns)
		return x->insns > y->insns ? -1 : 1;
	return cmp_line(a, b);
}

static int cmp_line_execs(const void *a, const void *b)
{
	const struct line_count *x = a, *y = b;
	if (x->execs != y->execs)
		return x->execs > y->execs ? -1 : 1;
	return cmp_line(a, b);
}

int out_source(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o, int lines_table)
{
	struct line_table t;
	enum count_sort key;
	if (!o->sym) {
		tk_log(TK_LOG_ERROR, "per-line output needs the program's ELF file (with debug info)");
		return -TK_E_INVAL;
	}
	int rc = out_count_sort(o->sort, &key);
	if (rc < 0)
		return rc;
	if ((rc = collect_lines(p, o->sym, &t)) < 0)
		return rc;
	/* the table in --sort order; --top N keeps the first N lines (the annotated source
	 * then shows counts on those lines only, in the files that have them) */
	if (t.n && (lines_table || o->top))
		qsort(t.v, t.n, sizeof *t.v, key == CS_EXECS ? cmp_line_execs :
		      key == CS_PLACE ? cmp_line : cmp_line_insns);
	if (o->top && t.n > o->top)
		t.n = o->top;
	if (!lines_table && o->top && t.n)
		qsort(t.v, t.n, sizeof *t.v, cmp_line);
	if (lines_table) {
		tk_buf_puts(b, "       execs        insns  file:line\n");
		for (size_t i = 0; i < t.n; i++) {
			pad(b, t.v[i].execs, 12);
			pad(b, t.v[i].insns, 13);
			tk_buf_puts(b, "  ");
			tk_buf_puts(b, t.v[i].file);
			tk_buf_putc(b, ':');
			tk_buf_u64(b, t.v[i].line);
			tk_buf_putc(b, '\n');
		}
	} else {
		for (size_t i = 0; i < t.n;) {
			size_t j = i;
			while (j < t.n && !strcmp(t.v[j].file, t.v[i].file))
				j++;
			annotate_file(b, t.v[i].file, o->source_root, t.v + i, j - i);
			i = j;
		}
	}
	free(t.v);
	return b->err;
}
