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
		{ "callgrind", TK_OUT_CALLGRIND },
	};
	for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(name, kinds[i].name))
			return kinds[i].k;
	return 0;
}

/* ---- the function table ------------------------------------------------------------------ */

struct row {
	struct tk_prof_func f;
	const char *name;
	const char *module;       /* the text table's: the file name of its module, or NULL */
	const struct proc *proc;  /* the process of its thread (NULL: none known) */
	long pi;                  /* ... its index */
};
/* A thread's process (tk_out_opts.track_process) */
struct proc {
	uint32_t track, pid;
	int known;
	char comm[32];
	struct tk_sym *sym;
};

enum sort_key { S_CALLS, S_INCL, S_EXCL, S_INSNS, S_SELF_INSNS, S_NAME, S_MAX, S_MEDIAN, S_P99,
		S_MIN, S_P90, S_MODULE, S_CYCLES, S_IPC };

/* the text table's column names, then the older short ones */
#define PROFILE_SORT_KEYS "calls, incl-time, excl-time, incl-insns, excl-insns, min, median, " \
	"p90, p99, max, cycles, ipc, %, module, function; incl, excl, insns, self-insns, name"

/* The key named S (NULL: the metric's default); QUIET: no message when unknown. */
static int sort_lookup(const char *s, enum tk_out_metric m, enum sort_key *k, int quiet)
{
	static const struct { const char *n; enum sort_key k; } keys[] = {
		{ "calls", S_CALLS }, { "count", S_CALLS }, { "incl", S_INCL }, { "sum", S_INCL },
		{ "excl", S_EXCL }, { "self", S_EXCL }, { "insns", S_INSNS },
		{ "self-insns", S_SELF_INSNS }, { "name", S_NAME }, { "func", S_NAME },
		{ "max", S_MAX }, { "med", S_MEDIAN }, { "median", S_MEDIAN }, { "p99", S_P99 },
		{ "incl-time", S_INCL }, { "excl-time", S_EXCL }, { "incl-insns", S_INSNS },
		{ "excl-insns", S_SELF_INSNS }, { "min", S_MIN }, { "p90", S_P90 },
		{ "function", S_NAME }, { "module", S_MODULE }, { "cycles", S_CYCLES },
		{ "ipc", S_IPC },
	};
	if (!s || !strcmp(s, "%")) {   /* % is the share of the metric's exclusive value */
		*k = m == TK_OUT_M_INSNS ? S_SELF_INSNS : m == TK_OUT_M_TICKS ? S_EXCL : S_CALLS;
		return 0;
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(s, keys[i].n)) {
			*k = keys[i].k;
			return 0;
		}
	if (!quiet)
		tk_log(TK_LOG_ERROR, "unknown sort key '%s' (%s)", s, PROFILE_SORT_KEYS);
	return -TK_E_INVAL;
}

int tk_out_sort_check(enum tk_out_kind kind, const char *key, const char **keys)
{
	enum sort_key k;
	enum count_sort c;
	int counts = kind == TK_OUT_LINES || kind == TK_OUT_BLOCKS || kind == TK_OUT_SOURCE;
	if (keys)
		*keys = counts ? COUNT_SORT_KEYS : PROFILE_SORT_KEYS;
	if (counts)
		return out_count_sort_quiet(key, &c);
	return sort_lookup(key, TK_OUT_M_AUTO, &k, 1);
}

/* The key named S for P's rows: cycles and IPC only where P has cycles (Intel PT CYC) */
static int parse_sort(const struct tk_prof *p, const char *s, enum tk_out_metric m,
		      enum sort_key *k)
{
	int rc = sort_lookup(s, m, k, 0);
	if (rc == 0 && (*k == S_CYCLES || *k == S_IPC) && !tk_prof_has_cycles(p)) {
		tk_log(TK_LOG_ERROR, "--sort %s: the trace has no cycles (Intel PT with CYC "
		       "packets: perf record -e intel_pt/cyc/)", s);
		return -TK_E_INVAL;
	}
	return rc;
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
	case S_MIN: return r->f.dur_min;
	case S_P90: return r->f.dur_p90;
	case S_CYCLES: return r->f.cycles;
	default: return 0;
	}
}

/* Higher IPC first, exactly (the fractions cross-multiplied); functions without cycles
 * last. */
static int cmp_ipc(const struct tk_prof_func *a, const struct tk_prof_func *b)
{
	if (!a->cycles || !b->cycles)
		return (a->cycles == 0) - (b->cycles == 0);
	unsigned __int128 x = (unsigned __int128)a->cyc_insns * b->cycles,
			  y = (unsigned __int128)b->cyc_insns * a->cycles;
	return x > y ? -1 : x < y;
}

static int cmp_rows(const void *x, const void *y, void *ctx)
{
	const struct row *a = x, *b = y;
	enum sort_key k = *(enum sort_key *)ctx;
	int c;
	if (k == S_MODULE && (c = strcmp(a->module ? a->module : "", b->module ? b->module : "")))
		return c;
	if (k == S_IPC && (c = cmp_ipc(&a->f, &b->f)))
		return c;
	if (k != S_NAME && k != S_MODULE && k != S_IPC) {
		uint64_t va = sort_value(a, k), vb = sort_value(b, k);
		if (va != vb)
			return va > vb ? -1 : 1;
	}
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return a->f.track < b->f.track ? -1 : a->f.track > b->f.track;
}

/* The process of TRACK, looked up once per track into *PS (*NP of them): its index, -1
 * if it has none, -2 when out of memory. */
static long track_proc(const struct tk_out_opts *o, uint32_t track, struct proc **ps, size_t *np)
{
	for (size_t i = 0; i < *np; i++)
		if ((*ps)[i].track == track)
			return (*ps)[i].known ? (long)i : -1;
	if ((*np & (*np - 1)) == 0) {   /* 0, 1, 2, 4, ...: full */
		struct proc *n = realloc(*ps, (*np ? 2 * *np : 1) * sizeof *n);
		if (!n)
			return -2;
		*ps = n;
	}
	struct proc *q = &(*ps)[*np];
	q->track = track;
	q->known = out_track_process(o, track, &q->pid, q->comm, sizeof q->comm, &q->sym) == 0;
	return q->known ? (long)(*np)++ : ((*np)++, -1);
}

/* Instructions per cycle of F's cycles (Intel PT CYC), as perf script's IPC: two
 * decimals, right-aligned in WIDTH; nothing when F has no cycles. */
static void put_ipc(struct tk_buf *b, const struct tk_prof_func *f, int width)
{
	if (f->cycles)
		tk_buf_printf(b, "%*.2f", width, (double)f->cyc_insns / (double)f->cycles);
}

/* Rows named and sorted; *n limited by --top; *TOTAL (may be NULL): the metric's
 * exclusive values of all rows added (what the text table's % is of). With threads, each
 * named from its process's symbols when its track has one (*PS: the processes, freed by
 * the caller). */
static int make_rows(const struct tk_prof *p, const struct tk_out_opts *o, struct names *nm,
		     enum tk_out_metric m, struct row **out, size_t *n, uint64_t *total,
		     struct proc **ps)
{
	int modules = total != NULL;   /* the text table's column */
	struct tk_prof_func *f;
	size_t nf, np = 0;
	enum sort_key key;
	*ps = NULL;
	int rc = parse_sort(p, o->sort, m, &key);
	if (rc < 0)
		return rc;
	if ((rc = tk_prof_funcs(p, o->threads, &f, &nf)) < 0)
		return rc;
	struct row *r = malloc((nf + 1) * sizeof *r);
	if (!r) {
		free(f);
		return -TK_E_NOMEM;
	}
	/* merged over threads, a process's rows (tk_prof_track_group) are named by it too */
	const int by_proc = o->threads || tk_prof_grouped(p);
	for (size_t i = 0; i < nf; i++) {
		long k = by_proc ? track_proc(o, f[i].track, ps, &np) : -1;
		if (k == -2) {
			free(f);
			free(r);
			return -TK_E_NOMEM;
		}
		r[i].f = f[i];
		uint32_t id = k >= 0 ? names_frame_in(nm, (*ps)[k].sym, f[i].key, f[i].kind)
				     : names_frame(nm, f[i].key, f[i].kind);
		r[i].name = id == UINT32_MAX ? "?" : names_str(nm, id);
		r[i].pi = k;
		r[i].module = NULL;
		struct tk_sym_info si;
		struct tk_sym *sym = k >= 0 ? (*ps)[k].sym : o->sym;
		if (modules && sym && f[i].kind == TK_PROF_KEY_ADDR &&
		    tk_sym_lookup(sym, f[i].key, &si) == 0 && si.module) {
			const char *base = strrchr(si.module, '/');
			r[i].module = base ? base + 1 : si.module;
		}
	}
	for (size_t i = 0; i < nf; i++)   /* (*PS moved while it grew; pid, comm: per thread) */
		r[i].proc = r[i].pi >= 0 && o->threads ? &(*ps)[r[i].pi] : NULL;
	free(f);
	enum sort_key share;
	sort_lookup(NULL, m, &share, 1);
	for (size_t i = 0; total && i < nf; i++)
		*total += sort_value(&r[i], share);
	qsort_r(r, nf, sizeof *r, cmp_rows, &key);
	if (o->top && nf > o->top)
		nf = o->top;
	*out = r;
	*n = nf;
	return 0;
}

/* A time as reported: with sparse time stamps (a branch trace: TSCs at transfers, none at
 * direct calls), 0 ticks means no stamp fell inside, so nothing was measured: TK_TIME_NONE,
 * shown as the durations of a function with no completed call are ("-" in text, an empty
 * CSV field, no JSON key), never as 0. */
static uint64_t shown(int sparse, uint64_t ticks)
{
	return sparse && !ticks ? TK_TIME_NONE : ticks;
}

static int sparse_of(const struct tk_prof *p)
{
	return (tk_prof_flags(p) & TK_PROF_SPARSE_TIME) != 0;
}

/* Ticks as microseconds when the clock is known, else raw ticks; TK_TIME_NONE: nothing. */
static void put_time(struct tk_buf *b, uint64_t ticks, uint64_t tps)
{
	if (ticks == TK_TIME_NONE)
		return;
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
	if (ticks == TK_TIME_NONE)
		tk_buf_putc(&t, '-');
	else
		put_time(&t, ticks, tps);
	for (int i = (int)t.len < width ? (int)t.len : width - 1; i < width; i++)
		tk_buf_putc(b, ' ');
	tk_buf_put(b, t.data, t.len);
	tk_buf_free(&t);
}

/* V's share of TOTAL in percent, 8 columns; with COLOR, as perf report colours it: red
 * from 5 %, green from 0.5 %. */
static void put_share(struct tk_buf *b, uint64_t v, uint64_t total, int color)
{
	double pct = total ? 100.0 * (double)v / (double)total : 0;
	const char *on = !color ? NULL : pct >= 5 ? "\033[31m" : pct >= 0.5 ? "\033[32m" : NULL;
	tk_buf_puts(b, "  ");
	if (on)
		tk_buf_puts(b, on);
	tk_buf_printf(b, "%6.2f", pct);
	if (on)
		tk_buf_puts(b, "\033[m");
}

/* SHARE (may be NULL): what the table's % column is a share of */
static void write_summary_text(struct tk_buf *b, const struct tk_prof *p, const char *share)
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
	if (share)
		tk_buf_printf(b, ", %% of the exclusive %s", share);
	tk_buf_putc(b, '\n');
	if (s.gaps || s.orphans || s.truncated || s.unmatched || s.open_at_end)
		tk_buf_printf(b, "# gaps %llu, calls cut by gaps %llu, exits without enter %llu, "
			      "lost exits %llu, open at end %llu",
			      (unsigned long long)s.gaps, (unsigned long long)s.truncated,
			      (unsigned long long)s.orphans, (unsigned long long)s.unmatched,
			      (unsigned long long)s.open_at_end);
	/* frames that untraced code unwound (longjmp, exceptions): said only when there were */
	if (s.unwound)
		tk_buf_printf(b, "%sunwound %llu\n",
			      s.gaps || s.orphans || s.truncated || s.unmatched || s.open_at_end ? ", " : "# ",
			      (unsigned long long)s.unwound);
	else if (s.gaps || s.orphans || s.truncated || s.unmatched || s.open_at_end)
		tk_buf_putc(b, '\n');
}


/* Whether some row's thread has a process (the tables then show pid and comm). */
static int has_procs(const struct row *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].proc)
			return 1;
	return 0;
}

static int out_table(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		     struct names *nm, int csv)
{
	enum tk_out_metric m = out_metric(p, o->metric);
	struct row *r;
	struct proc *ps;
	size_t n;
	uint64_t total = 0;
	int rc = make_rows(p, o, nm, m, &r, &n, &total, &ps);
	if (rc < 0) {
		free(ps);
		return rc;
	}
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	uint64_t tps = s.clock.ticks_per_second;
	int procs = ps != NULL && has_procs(r, n);
	enum sort_key share;
	sort_lookup(NULL, m, &share, 1);
	const int sparse = sparse_of(p);
	const int ipc = tk_prof_has_cycles(p);   /* Intel PT with CYC: cycles and IPC */

	if (csv) {
		if (o->threads) {
			tk_buf_puts(b, out_track_label(o));
			tk_buf_putc(b, ',');
		}
		tk_buf_puts(b, "function,calls,incl_time,excl_time,incl_insns,excl_insns,"
			       "min,median,p90,p99,max");
		/* (last: the columns before keep their places) */
		tk_buf_puts(b, procs ? ",pid,comm" : "");
		tk_buf_puts(b, ipc ? ",cycles,ipc\n" : "\n");
		for (size_t i = 0; i < n; i++) {
			const struct tk_prof_func *f = &r[i].f;
			if (o->threads) {
				tk_buf_u64(b, out_track_id(o, f->track));
				tk_buf_putc(b, ',');
			}
			out_csv_quoted(b, r[i].name);   /* C++ names contain commas */
			uint64_t v[] = { f->calls };
			tk_buf_putc(b, ',');
			tk_buf_u64(b, v[0]);
			uint64_t tv[] = { shown(sparse, f->incl_ticks), shown(sparse, f->excl_ticks) };
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
			if (procs) {
				tk_buf_putc(b, ',');
				if (r[i].proc) {
					tk_buf_u64(b, r[i].proc->pid);
					tk_buf_putc(b, ',');
					out_csv_quoted(b, r[i].proc->comm);
				} else {
					tk_buf_putc(b, ',');
				}
			}
			if (ipc) {
				tk_buf_putc(b, ',');
				if (f->cycles)
					tk_buf_u64(b, f->cycles);
				tk_buf_putc(b, ',');
				put_ipc(b, f, 0);
			}
			tk_buf_putc(b, '\n');
		}
		free(r);
		free(ps);
		return b->err;
	}

	/* the module column where the trace or --elf names modules */
	size_t mw = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].module && strlen(r[i].module) > mw)
			mw = strlen(r[i].module);
	mw = mw && mw < 6 ? 6 : mw;
	write_summary_text(b, p, m == TK_OUT_M_INSNS ? "instructions" :
			   m == TK_OUT_M_TICKS ? "time" : "calls");
	if (procs)
		tk_buf_puts(b, "     pid");
	if (o->threads)
		tk_buf_printf(b, "%8.8s", out_track_label(o));
	if (procs)
		tk_buf_puts(b, "  comm           ");
	tk_buf_puts(b, "       calls     incl-time     excl-time    incl-insns    excl-insns"
		       "         min      median         p90         p99         max");
	if (ipc)
		tk_buf_puts(b, "        cycles    ipc");
	tk_buf_puts(b, "       %");
	if (mw)
		tk_buf_printf(b, "  %-*s", (int)mw, "module");
	tk_buf_puts(b, "  function\n");
	for (size_t i = 0; i < n; i++) {
		const struct tk_prof_func *f = &r[i].f;
		if (procs && r[i].proc)
			pad_u64(b, r[i].proc->pid, 8);
		else if (procs)
			tk_buf_puts(b, "       -");
		if (o->threads)
			pad_u64(b, out_track_id(o, f->track), 8);
		if (procs)
			tk_buf_printf(b, "  %-15.15s", r[i].proc ? r[i].proc->comm : "-");
		pad_u64(b, f->calls, 12);
		pad_time(b, shown(sparse, f->incl_ticks), tps, 14);
		pad_time(b, shown(sparse, f->excl_ticks), tps, 14);
		pad_u64(b, f->incl_insns, 14);
		pad_u64(b, f->excl_insns, 14);
		uint64_t dv[] = { f->dur_min, f->dur_median, f->dur_p90, f->dur_p99, f->dur_max };
		for (int k = 0; k < 5; k++) {
			if (f->ndur)
				pad_time(b, dv[k], tps, 12);
			else
				tk_buf_puts(b, "           -");
		}
		if (ipc && f->cycles) {
			pad_u64(b, f->cycles, 14);
			put_ipc(b, f, 7);
		} else if (ipc) {
			tk_buf_puts(b, "             -      -");
		}
		put_share(b, sort_value(&r[i], share), total, o->color);
		if (mw) {
			const char *mod = r[i].module ? r[i].module : "-";
			tk_buf_puts(b, "  ");
			tk_buf_text(b, mod, strlen(mod));
			for (size_t k = strlen(mod); k < mw; k++)
				tk_buf_putc(b, ' ');
		}
		tk_buf_puts(b, "  ");
		tk_buf_puts(b, r[i].name);
		tk_buf_putc(b, '\n');
	}
	free(r);
	free(ps);
	return b->err;
}

/* ---- folded stacks and the call tree ------------------------------------------------------ */

/* Folded stacks are "a;b;c VALUE" lines in strcmp order of the joined path, equal paths
 * merged. Building every path string costs paths x depth bytes (a random walk through libc
 * has 270,000-deep stacks), so the paths are merged in a trie and printed by walking it in
 * that order, with only the current path held as text.
 *
 * A trie node is one distinct path string. Its key is one ';'-free component of a name: a
 * name holding ';' spans several nodes, so paths that join to equal strings land on the
 * same node whatever names they came from. Among the children of a node (paths P;x...), each
 * child x has two sort keys: its own line "x" and its subtree "x;". Because no component
 * holds ';', strcmp order of these keys is the strcmp order of all the joined paths below. */
struct ftrie {
	uint32_t name;            /* component (names id, no ';') */
	uint32_t parent, first_child, next_sibling;
	uint32_t line;            /* some call path ends here with a self value */
	uint64_t v;
};

struct fold {
	struct ftrie *t;
	size_t nt, cap;
	uint32_t *map;            /* (parent, name) -> node */
	size_t mask;
	const struct names *nm;
};

static uint32_t fold_child(struct fold *f, uint32_t parent, uint32_t name)
{
	if ((f->nt + 1) * 2 > f->mask + 1 || !f->map) {
		size_t size = f->map ? (f->mask + 1) * 2 : 1024;
		uint32_t *m = malloc(size * sizeof *m);
		if (!m)
			return UINT32_MAX;
		memset(m, 0xff, size * sizeof *m);
		for (size_t i = 1; i < f->nt; i++) {
			size_t k = tk_hash64((uint64_t)f->t[i].parent << 32 | f->t[i].name) & (size - 1);
			while (m[k] != UINT32_MAX)
				k = (k + 1) & (size - 1);
			m[k] = (uint32_t)i;
		}
		free(f->map);
		f->map = m;
		f->mask = size - 1;
	}
	size_t k = tk_hash64((uint64_t)parent << 32 | name) & f->mask;
	for (; f->map[k] != UINT32_MAX; k = (k + 1) & f->mask) {
		const struct ftrie *n = &f->t[f->map[k]];
		if (n->parent == parent && n->name == name)
			return f->map[k];
	}
	if (f->nt >= UINT32_MAX >> 1)
		return UINT32_MAX;                /* keys are node << 1 | subtree */
	if (f->nt == f->cap) {
		size_t nc = f->cap * 2;
		struct ftrie *nt = realloc(f->t, nc * sizeof *nt);
		if (!nt)
			return UINT32_MAX;
		f->t = nt;
		f->cap = nc;
	}
	uint32_t i = (uint32_t)f->nt++;
	f->t[i] = (struct ftrie){ .name = name, .parent = parent, .first_child = UINT32_MAX,
				  .next_sibling = f->t[parent].first_child };
	f->t[parent].first_child = i;
	f->map[k] = i;
	return i;
}

/* The trie node of path PARENT;NAME, splitting NAME at each ';' (interning the pieces). */
static uint32_t fold_name(struct fold *f, struct names *nm, uint32_t parent, uint32_t name)
{
	const char *s = names_str(nm, name);
	if (!strchr(s, ';'))
		return fold_child(f, parent, name);
	for (;;) {
		const char *e = strchr(s, ';');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		uint32_t id = names_intern(nm, s, len);
		if (id == UINT32_MAX || (parent = fold_child(f, parent, id)) == UINT32_MAX)
			return UINT32_MAX;
		if (!e)
			return parent;
		s = e + 1;
	}
}

/* Merge the call tree into the trie. Returns the number of lines, or < 0. */
static int64_t fold_build(struct fold *f, const struct agg *a, struct names *nm, enum tk_out_metric m)
{
	memset(f, 0, sizeof *f);
	f->nm = nm;
	f->cap = 1024;
	f->t = malloc(f->cap * sizeof *f->t);
	/* base[i]: the trie node below which agg node i's children go */
	uint32_t *base = malloc(a->nn * sizeof *base);
	if (!f->t || !base) {
		free(base);
		return -TK_E_NOMEM;
	}
	f->t[0] = (struct ftrie){ .parent = UINT32_MAX, .first_child = UINT32_MAX,
				  .next_sibling = UINT32_MAX };
	f->nt = 1;
	base[0] = 0;
	int64_t lines = 0;
	/* nodes are created parents first */
	for (size_t i = 1; i < a->nn; i++) {
		const struct agg_node *n = &a->n[i];
		uint32_t own;
		/* The base level of a track (code that ran outside any call the trace saw
		 * begin) is left off the stacks above it, as flame graph tools expect; its
		 * own time or instructions still show as "[unknown]" (with --threads, under
		 * the thread's node). */
		int base_level = n->parent == 0 || (a->tracks && a->n[n->parent].parent == 0);
		if (base_level && !strcmp(names_str(nm, n->name), "[unknown]")) {
			own = fold_child(f, base[n->parent], n->name);
			base[i] = base[n->parent];
		} else {
			own = fold_name(f, nm, base[n->parent], n->name);
			base[i] = own;
		}
		if (own == UINT32_MAX) {
			free(base);
			return -TK_E_NOMEM;
		}
		uint64_t v = agg_self(n, m);
		if (!v)
			continue;
		lines += !f->t[own].line;
		f->t[own].line = 1;
		f->t[own].v += v;
	}
	free(base);
	free(f->map);
	f->map = NULL;
	return lines;
}

static void fold_free(struct fold *f)
{
	free(f->t);
	free(f->map);
	memset(f, 0, sizeof *f);
}

/* strcmp of NAME(x) + (x & 1 ? ";" : "") against the same for y; x, y = node << 1 | subtree */
static int cmp_fold_key(const void *px, const void *py, void *ctx)
{
	const struct fold *f = ctx;
	uint32_t x = *(const uint32_t *)px, y = *(const uint32_t *)py;
	const unsigned char *s = (const unsigned char *)names_str(f->nm, f->t[x >> 1].name);
	const unsigned char *t = (const unsigned char *)names_str(f->nm, f->t[y >> 1].name);
	while (*s && *s == *t)
		s++, t++;
	int cs = *s ? *s : (x & 1) ? ';' : 0;
	int ct = *t ? *t : (y & 1) ? ';' : 0;
	if (cs != ct || !cs)
		return cs - ct;
	/* both names ended and both keys go on with ';' (a node against itself) */
	return 0;
}

struct fold_frame {
	size_t kbeg, kpos, kend;  /* this frame's keys on the key stack; the next one */
	size_t plen;              /* length of the node's path text */
};

struct fold_walk {
	const struct fold *f;
	struct fold_frame *fr;
	size_t nf, fcap;
	uint32_t *keys;
	size_t nk, kcap;
	struct tk_buf path;       /* the path of the top frame's node ("" for the root) */
};

/* Push a frame for node V: the keys of its children (own lines with a value, subtrees that
 * are not empty) in strcmp order. */
static int fold_push(struct fold_walk *w, uint32_t v)
{
	const struct ftrie *t = w->f->t;
	size_t n = 0;
	for (uint32_t c = t[v].first_child; c != UINT32_MAX; c = t[c].next_sibling)
		n++;
	if (w->nf == w->fcap) {
		size_t nc = w->fcap ? w->fcap * 2 : 64;
		struct fold_frame *nf = realloc(w->fr, nc * sizeof *nf);
		if (!nf)
			return -TK_E_NOMEM;
		w->fr = nf;
		w->fcap = nc;
	}
	if (w->nk + 2 * n > w->kcap) {
		size_t nc = w->kcap ? w->kcap : 256;
		while (w->nk + 2 * n > nc)
			nc *= 2;
		uint32_t *nk = realloc(w->keys, nc * sizeof *nk);
		if (!nk)
			return -TK_E_NOMEM;
		w->keys = nk;
		w->kcap = nc;
	}
	size_t k0 = w->nk;
	for (uint32_t c = t[v].first_child; c != UINT32_MAX; c = t[c].next_sibling) {
		if (t[c].line)
			w->keys[w->nk++] = c << 1;
		if (t[c].first_child != UINT32_MAX)
			w->keys[w->nk++] = c << 1 | 1;
	}
	if (w->nk > k0)   /* (no keys yet: keys may still be NULL) */
		qsort_r(w->keys + k0, w->nk - k0, sizeof *w->keys, cmp_fold_key, (void *)w->f);
	w->fr[w->nf++] = (struct fold_frame){ .kbeg = k0, .kpos = k0, .kend = w->nk,
					      .plen = w->path.len };
	return 0;
}

static int cmp_u64_desc(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a > b ? -1 : a < b;
}

static int out_folded(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		      struct names *nm)
{
	struct agg a;
	struct fold f;
	enum tk_out_metric m = out_metric(p, o->metric);
	int rc = agg_build(&a, p, nm, o);
	if (rc < 0) {
		agg_free(&a);
		return rc;
	}
	int64_t nl = fold_build(&f, &a, nm, m);
	agg_free(&a);
	if (nl < 0) {
		fold_free(&f);
		return (int)nl;
	}
	/* --top N: the N heaviest stacks, ties in path order, still printed in path order (as
	 * flame graph tools expect): every line above the N-th largest value, and of the lines
	 * equal to it the first ones in path order. */
	uint64_t thr = 0, quota = UINT64_MAX;
	int limit = o->top && (uint64_t)nl > o->top;
	if (limit) {
		uint64_t *vals = malloc((size_t)nl * sizeof *vals);
		if (!vals) {
			fold_free(&f);
			return -TK_E_NOMEM;
		}
		size_t k = 0;
		for (size_t i = 1; i < f.nt; i++)
			if (f.t[i].line)
				vals[k++] = f.t[i].v;
		qsort(vals, k, sizeof *vals, cmp_u64_desc);
		thr = vals[o->top - 1];
		quota = o->top;
		for (size_t i = 0; i < k && vals[i] > thr; i++)
			quota--;
		free(vals);
	}
	/* depth-first walk with an explicit stack (paths can be 270,000 deep): a frame per
	 * trie node on the current path, its children's keys sorted on a shared key stack */
	struct fold_walk w = { .f = &f };
	tk_buf_init(&w.path, -1, 4096);
	rc = fold_push(&w, 0);
	while (rc >= 0 && w.nf && !b->err) {
		struct fold_frame *t = &w.fr[w.nf - 1];
		if (t->kpos == t->kend) {
			w.nk = t->kbeg;
			w.nf--;
			continue;
		}
		uint32_t key = w.keys[t->kpos++], c = key >> 1;
		const char *name = names_str(nm, f.t[c].name);
		w.path.len = t->plen;
		if (key & 1) {
			if (w.nf > 1)
				tk_buf_putc(&w.path, ';');
			tk_buf_puts(&w.path, name);
			rc = w.path.err ? w.path.err : fold_push(&w, c);  /* t is stale now */
			continue;
		}
		uint64_t v = f.t[c].v;
		if (limit && v <= thr) {
			if (v < thr || !quota)
				continue;
			quota--;
		}
		tk_buf_put(b, w.path.data, w.path.len);
		if (w.nf > 1)
			tk_buf_putc(b, ';');
		tk_buf_puts(b, name);
		tk_buf_putc(b, ' ');
		tk_buf_u64(b, v);
		tk_buf_putc(b, '\n');
	}
	free(w.fr);
	free(w.keys);
	tk_buf_free(&w.path);
	fold_free(&f);
	return rc < 0 ? rc : b->err;
}

struct tree_sort {
	const struct agg *a;
	enum sort_key key;
	int by_key;               /* --sort given; else by the metric's inclusive value */
	uint64_t top;
	uint64_t cut;             /* callers whose callees were left out (CALLTREE_MAX_DEPTH) */
};

/* The text call tree indents by depth, so its size grows with the depth squared; deeper
 * levels are left out, marked, and said on stderr (--to json has them all). */
#define CALLTREE_MAX_DEPTH 1000

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

static int has_children(const struct agg *a, uint32_t v, enum tk_out_metric m)
{
	uint32_t *kids;
	size_t n = 0;

	if (agg_children(a, v, m, &kids, &n) < 0)
		return 0;
	free(kids);
	return n > 0;
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
			pad_time(b, shown(a->sparse, c->incl_ticks), tps, 14);
			pad_time(b, shown(a->sparse, c->excl_ticks), tps, 14);
		}
		tk_buf_puts(b, "  ");
		for (int k = 0; k < depth; k++)
			tk_buf_puts(b, "  ");
		tk_buf_puts(b, names_str(a->names, c->name));
		tk_buf_putc(b, '\n');
		/* recursion depth follows the call depth, at most CALLTREE_MAX_DEPTH */
		if (depth + 1 < CALLTREE_MAX_DEPTH) {
			rc = calltree_rec(b, a, kids[i], depth + 1, m, tps, ts);
		} else if (has_children(a, kids[i], m)) {
			tk_buf_printf(b, "%12s%14s%14s  ", "", "", "");
			for (int k = 0; k <= depth; k++)
				tk_buf_puts(b, "  ");
			tk_buf_puts(b, "[deeper calls left out]\n");
			ts->cut++;
		}
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
	int rc = parse_sort(p, o->sort, m, &ts.key);
	if (rc < 0)
		return rc;
	rc = agg_build(&a, p, nm, o);
	if (rc >= 0) {
		write_summary_text(b, p, NULL);
		tk_buf_printf(b, "       calls  %s  %s  call tree\n",
			      m == TK_OUT_M_INSNS ? "  incl-insns" : "   incl-time",
			      m == TK_OUT_M_INSNS ? "  excl-insns" : "   excl-time");
		rc = calltree_rec(b, &a, 0, 0, m, s.clock.ticks_per_second, &ts);
		if (ts.cut)
			tk_log(TK_LOG_WARN, "call tree: the callees of %llu calls deeper than %d levels "
			       "are left out, marked [deeper calls left out] (--to json has them all)",
			       (unsigned long long)ts.cut, CALLTREE_MAX_DEPTH);
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

/* A time key, left out when nothing was measured (shown) */
static void json_key_time(struct tk_buf *b, const char *k, uint64_t v, int comma)
{
	if (v != TK_TIME_NONE)
		json_key_u64(b, k, v, comma);
}

/* The call tree as a flat list of nodes, each after its parent, with ids in that order (0:
 * the root): nested objects would be as deep as the recursion, deeper than JSON parsers
 * accept. Children in the order of agg_children. */
static int json_tree(struct tk_buf *b, const struct agg *a, enum tk_out_metric m)
{
	struct level { uint32_t *kids; size_t n, i; uint64_t id; } *st = NULL;
	size_t depth = 0, cap = 0;
	uint64_t next = 0;
	int rc = 0;

	tk_buf_puts(b, "[");
	for (uint32_t v = 0;;) {
		/* V's children become the next level */
		if (depth == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct level *ns = realloc(st, nc * sizeof *ns);
			if (!ns) {
				rc = -TK_E_NOMEM;
				break;
			}
			st = ns;
			cap = nc;
		}
		if ((rc = agg_children(a, v, m, &st[depth].kids, &st[depth].n)) < 0)
			break;
		st[depth].i = 0;
		st[depth++].id = next;
		/* the next node: the first one left at the deepest level */
		while (depth && st[depth - 1].i == st[depth - 1].n)
			free(st[--depth].kids);
		if (!depth)
			break;
		struct level *l = &st[depth - 1];
		v = l->kids[l->i++];
		const struct agg_node *c = &a->n[v];
		const char *s = names_str(a->names, c->name);
		tk_buf_puts(b, next ? ",\n{\"id\":" : "\n{\"id\":");
		tk_buf_u64(b, ++next);
		json_key_u64(b, "parent", l->id, 1);
		tk_buf_puts(b, ",\"name\":");
		tk_buf_json_str(b, s, strlen(s));
		json_key_u64(b, "calls", c->calls, 1);
		json_key_time(b, "incl_ticks", shown(a->sparse, c->incl_ticks), 1);
		json_key_time(b, "excl_ticks", shown(a->sparse, c->excl_ticks), 1);
		json_key_u64(b, "incl_insns", c->incl_insns, 1);
		json_key_u64(b, "excl_insns", c->excl_insns, 1);
		tk_buf_putc(b, '}');
	}
	while (depth)
		free(st[--depth].kids);
	free(st);
	tk_buf_puts(b, "]");
	return rc;
}

static int out_json(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		    struct names *nm)
{
	enum tk_out_metric m = out_metric(p, o->metric);
	struct tk_prof_summary s;
	struct row *r;
	struct proc *ps;
	size_t n;
	int rc = make_rows(p, o, nm, m, &r, &n, NULL, &ps);
	if (rc < 0) {
		free(ps);
		return rc;
	}
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
	json_key_u64(b, "unwound", s.unwound, 1);
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
			json_key_u64(b, out_track_label(o), out_track_id(o, f->track), 1);
		if (r[i].proc) {
			json_key_u64(b, "pid", r[i].proc->pid, 1);
			tk_buf_puts(b, ",\"comm\":");
			tk_buf_json_str(b, r[i].proc->comm, strlen(r[i].proc->comm));
		}
		json_key_u64(b, "calls", f->calls, 1);
		json_key_time(b, "incl_ticks", shown(sparse_of(p), f->incl_ticks), 1);
		json_key_time(b, "excl_ticks", shown(sparse_of(p), f->excl_ticks), 1);
		json_key_u64(b, "incl_insns", f->incl_insns, 1);
		json_key_u64(b, "excl_insns", f->excl_insns, 1);
		if (f->cycles) {
			json_key_u64(b, "cycles", f->cycles, 1);
			json_key_u64(b, "ipc_insns", f->cyc_insns, 1);
			tk_buf_puts(b, ",\"ipc\":");
			put_ipc(b, f, 0);
		}
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
	free(ps);
	tk_buf_puts(b, "],\n\"calltree\":");
	struct agg a;
	rc = agg_build(&a, p, nm, o);
	if (rc >= 0)
		rc = json_tree(b, &a, m);
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
	case TK_OUT_CALLGRIND: rc = out_callgrind(b, p, &o, &nm); break;
	case TK_OUT_SOURCE: rc = out_source(b, p, &o, 0); break;
	case TK_OUT_LINES: rc = out_source(b, p, &o, 1); break;
	default: rc = -TK_E_INVAL; break;
	}
	names_free(&nm);
	return rc;
}
