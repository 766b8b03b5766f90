/* The HTML report: one self-contained page per trace. The page is a template (the files in
 * lib/output/report/, made into a C string at build time) with the data as one JSON
 * object in a <script type="application/json"> block. Every part is a summary sized for
 * the screen, so the page's size does not grow with the trace's:
 *   functions   the first TK_REPORT_TOP rows of tk_out_profile's CSV, the rest in one row
 *   flame graph call paths under 1/2000 of the total (and beyond 5,000 nodes or depth
 *               256) merged into an "(other)" node per parent
 *   source      `profile --source --top 200`, at most 1 MiB of it
 *   timeline    at most TK_REPORT_BINS columns per lane (of 2^k ticks each: see struct tl),
 *               TK_REPORT_LANES lanes
 *   pipeline    IPC in TK_REPORT_BINS columns (their width doubles as the log goes on),
 *               stage latencies in power-of-two bins, the TK_REPORT_SLOWEST slowest
 *               instructions, a diagram of at most TK_REPORT_WINDOW instructions.
 * The writer sees profiles and neutral events only; it never knows the trace's format. */
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"
/* generated at build time from lib/output/report/ (not a file of the source tree) */
#include <tk_report_template.h>

#define FLAME_SHARE 2000      /* nodes under 1/FLAME_SHARE of the total are merged */
#define FLAME_NODES 5000
#define FLAME_DEPTH 256
#define SOURCE_TOP 200
#define SOURCE_BYTES (1u << 20)
#define NOTES 50
#define HIST_BINS 24          /* [0], [1], [2,3], [4,7], ... */
#define STAGES_MAX 256
#define INSN_STAGES 64        /* stages kept per instruction of the diagram */
#define LABEL_MAX 96

struct pstage { uint32_t stage, lane; uint64_t b, e; };

struct pinsn {
	uint64_t id, sim_id, begin;
	uint64_t seq;             /* its place among the instructions begun (p_seq) */
	uint64_t end;
	uint32_t thread;
	int cand;                 /* may be in the diagram's window */
	int how;                  /* 0 retired, 1 flushed, 2 in flight at the end */
	char label[LABEL_MAX];
	struct pstage *st;
	size_t nst, cap;
	struct pinsn *next_spare; /* in tk_report.spare */
};

/* The timeline's bins, filled in one pass with no time range known beforehand: bin K of a
 * lane holds the events at times [K << shift, (K + 1) << shift), its row the keys [base,
 * top], fewer than TK_REPORT_BINS. When a time does not fit, bins merge in pairs (shift
 * + 1) until it does. Bins sit at multiples of their width, so the accumulators of chunks
 * decoded apart add up exactly, and the final width is the least power of two that puts
 * the whole trace in TK_REPORT_BINS columns, for any number of chunks or threads. Lanes
 * are tracks in the order they first appear (all kept; the page sums those beyond
 * TK_REPORT_LANES). */
struct tl {
	unsigned shift;
	int any;
	uint64_t base, top, tmin, tmax;
	size_t nlanes, cap, last;
	uint32_t *track;
	uint64_t *ltime;          /* per lane: its last time (for events without one) */
	uint64_t *insns, *calls;  /* nlanes rows of TK_REPORT_BINS */
	uint64_t wbegin, wend;    /* tk_report_opts.time_begin, time_end */
};

static void tl_free(struct tl *t)
{
	free(t->track);
	free(t->ltime);
	free(t->insns);
	free(t->calls);
	memset(t, 0, sizeof *t);
}

struct slow {
	uint64_t id, sim_id, begin, end;
	uint32_t thread;
	char label[LABEL_MAX];
	uint64_t at;              /* a chunk's: the event that retired it (merge order) */
};

struct stage_stat {
	int seen;
	uint32_t lane;            /* the lane of its last close */
	uint64_t count, sum, max, hist[HIST_BINS];
	uint64_t last_at, last_merge;  /* that close's tk_report.at and .merge */
};

struct tk_report {
	struct tk_report_opts o;
	char *title, *format, *track_label;
	struct tk_buf prof;       /* the profile's parts, as JSON members */
	int have_prof;
	int sparse;               /* TK_PROF_SPARSE_TIME: a time of 0 was not measured */
	struct tk_prof_summary sum;
	char **notes;
	size_t nnotes, more_notes;
	struct tl tl;             /* the timeline (shown where the profile has a time span) */
	/* pipeline */
	int have_pipe;
	struct pinsn **map;       /* instructions in flight, open addressing by id */
	size_t map_mask, map_n;
	uint64_t p_insns, p_retired, p_flushed, p_last, p_gaps, p_seq;
	uint64_t ipc_width, ipc_retired[TK_REPORT_BINS], ipc_flushed[TK_REPORT_BINS];
	struct stage_stat stages[STAGES_MAX];
	uint64_t stages_ignored;
	struct slow slow[TK_REPORT_SLOWEST];   /* min-heap on latency */
	size_t nslow;
	/* the report's: once its heap is full, the latency of its least slow (it only grows;
	 * chunks' workers read it, atomically); a chunk's: the report it goes into */
	uint64_t slow_floor;
	const struct tk_report *parent;
	struct pinsn **win;       /* the diagram's instructions, as they ended */
	size_t nwin;
	uint64_t win_left_out;
	/* ended instructions kept for the next ones, their stage arrays with them: a calloc
	 * and a free per instruction were a fifth of the report's pipeline work */
	struct pinsn *spare;
	/* a chunk's pipeline part done ahead (report_prepare), or the report merging one */
	int chunk;                /* this is a chunk's: none of its instructions in the window */
	int chunk_refused;        /* ... one would have been: the chunk goes through events */
	uint64_t nseen;           /* (a chunk's) events prepared */
	uint64_t at;              /* the event being taken: a chunk's index; in the report,
				     where a prepared chunk's taking stands (stage_stat) */
	uint64_t merge;           /* prepared chunks taken so far (a chunk's: 1 once its
				     taking began) */
};

struct tk_report *tk_report_new(const struct tk_report_opts *opts, int *err)
{
	struct tk_report *r = calloc(1, sizeof *r);
	*err = -TK_E_NOMEM;
	if (!r)
		return NULL;
	r->o.sz = sizeof r->o;
	if (opts)
		memcpy(&r->o, opts, opts->sz < sizeof r->o ? opts->sz : sizeof r->o);
	r->title = strdup(r->o.title ? r->o.title : "trace");
	r->format = strdup(r->o.format ? r->o.format : "");
	r->track_label = strdup(r->o.track_label ? r->o.track_label : "thread");
	r->map_mask = 1023;
	r->map = calloc(r->map_mask + 1, sizeof *r->map);
	r->win = calloc(TK_REPORT_WINDOW, sizeof *r->win);
	r->notes = calloc(NOTES, sizeof *r->notes);
	r->ipc_width = 1;
	r->tl.wbegin = r->o.time_begin;
	r->tl.wend = r->o.time_end;
	if (!r->title || !r->format || !r->track_label || !r->map || !r->win || !r->notes ||
	    tk_buf_init(&r->prof, -1, 4096) < 0) {
		tk_report_free(r);
		return NULL;
	}
	*err = 0;
	return r;
}

static void pinsn_free(struct pinsn *in)
{
	if (in)
		free(in->st);
	free(in);
}

void tk_report_free(struct tk_report *r)
{
	if (!r)
		return;
	if (r->map)
		for (size_t i = 0; i <= r->map_mask; i++)
			pinsn_free(r->map[i]);
	for (size_t i = 0; i < r->nwin; i++)
		pinsn_free(r->win[i]);
	while (r->spare) {
		struct pinsn *next = r->spare->next_spare;
		pinsn_free(r->spare);
		r->spare = next;
	}
	for (size_t i = 0; i < r->nnotes; i++)
		free(r->notes[i]);
	free(r->notes);
	free(r->map);
	free(r->win);
	tl_free(&r->tl);
	free(r->title);
	free(r->format);
	free(r->track_label);
	tk_buf_free(&r->prof);
	free(r);
}

int tk_report_note(struct tk_report *r, const char *msg)
{
	if (r->nnotes == NOTES) {
		r->more_notes++;
		return 0;
	}
	if (!(r->notes[r->nnotes] = strdup(msg)))
		return -TK_E_NOMEM;
	r->nnotes++;
	return 0;
}

/* ---- the profile's parts ---------------------------------------------------------------- */

static void key_str(struct tk_buf *b, const char *k, const char *v, size_t n)
{
	tk_buf_printf(b, ",\"%s\":", k);
	tk_buf_json_str(b, v, n);
}

/* A memory buffer's text as a JSON string member, cut at a line end before MAX bytes. */
static void key_text(struct tk_buf *b, const char *k, const struct tk_buf *t, size_t max)
{
	size_t n = t->len;
	if (n > max) {
		n = max;
		while (n && t->data[n - 1] != '\n')
			n--;
		tk_buf_printf(b, ",\"%s_cut\":%zu", k, t->len - n);
	}
	key_str(b, k, t->data, n);
}

/* The flame graph: [name, incl insns, incl ticks, calls, self insns, self ticks, [children]]
 * with NAMES' ids renumbered into the page's name table in order of first use. */
struct flame {
	struct tk_buf *b;
	const struct agg *a;
	enum tk_out_metric m;
	uint64_t min_insns, min_ticks;
	uint32_t *out_id, nout;
	struct tk_buf names;
	size_t nodes;
};

static uint32_t flame_name(struct flame *f, uint32_t name)
{
	if (f->out_id[name] == UINT32_MAX) {
		const char *s = names_str(f->a->names, name);
		tk_buf_puts(&f->names, f->nout ? "," : "");
		tk_buf_json_str(&f->names, s, strlen(s));
		f->out_id[name] = f->nout++;
	}
	return f->out_id[name];
}

static void flame_node(struct flame *f, uint32_t name, const uint64_t v[5])
{
	tk_buf_printf(f->b, "[%u,%llu,%llu,%llu,%llu,%llu", flame_name(f, name),
		      (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2],
		      (unsigned long long)v[3], (unsigned long long)v[4]);
	f->nodes++;
}

static int flame_rec(struct flame *f, uint32_t v, int depth, uint32_t other)
{
	const struct agg_node *n = &f->a->n[v];
	uint64_t nv[5] = { n->incl_insns, n->incl_ticks, n->calls, n->excl_insns, n->excl_ticks };
	uint32_t *kids;
	size_t nk;
	int rc;

	flame_node(f, n->name, nv);
	if ((rc = agg_children(f->a, v, f->m, &kids, &nk)) < 0)
		return rc;
	uint64_t rest[5] = { 0 };
	int first = 1, any_rest = 0;
	for (size_t i = 0; i < nk; i++) {
		const struct agg_node *c = &f->a->n[kids[i]];
		if (depth >= FLAME_DEPTH || f->nodes >= FLAME_NODES ||
		    (c->incl_insns < f->min_insns && c->incl_ticks < f->min_ticks)) {
			uint64_t cv[5] = { c->incl_insns, c->incl_ticks, c->calls, c->incl_insns,
					   c->incl_ticks };
			for (int k = 0; k < 5; k++)
				rest[k] += cv[k];
			any_rest = 1;
			continue;
		}
		tk_buf_puts(f->b, first ? ",[" : ",");
		first = 0;
		if ((rc = flame_rec(f, kids[i], depth + 1, other)) < 0)
			break;
	}
	free(kids);
	if (rc < 0)
		return rc;
	if (any_rest) {
		tk_buf_puts(f->b, first ? ",[" : ",");
		first = 0;
		flame_node(f, other, rest);
		tk_buf_putc(f->b, ']');
	}
	tk_buf_puts(f->b, first ? "]" : "]]");
	return f->b->err;
}

static int put_flame(struct tk_buf *b, const struct tk_prof *p, struct tk_sym *sym)
{
	struct names nm;
	struct agg a;
	int rc;
	if ((rc = names_init(&nm, sym)) < 0)
		return rc;
	if ((rc = agg_build(&a, p, &nm, NULL)) < 0) {
		names_free(&nm);
		return rc;
	}
	uint32_t root = names_intern(&nm, "all", 3), other = names_intern(&nm, "(other)", 7);
	struct flame f = { .b = b, .a = &a, .m = out_metric(p, TK_OUT_M_AUTO),
			   .min_insns = (a.n[0].incl_insns + FLAME_SHARE - 1) / FLAME_SHARE,
			   .min_ticks = (a.n[0].incl_ticks + FLAME_SHARE - 1) / FLAME_SHARE };
	f.out_id = malloc((nm.n + 1) * sizeof *f.out_id);
	if (root == UINT32_MAX || other == UINT32_MAX || !f.out_id ||
	    tk_buf_init(&f.names, -1, 4096) < 0) {
		free(f.out_id);
		agg_free(&a);
		names_free(&nm);
		return -TK_E_NOMEM;
	}
	memset(f.out_id, 0xff, (nm.n + 1) * sizeof *f.out_id);
	a.n[0].name = root;
	tk_buf_puts(b, ",\"flame\":");
	rc = flame_rec(&f, 0, 0, other);
	tk_buf_printf(b, ",\"flame_nodes\":%zu,\"flame_share\":%d,\"names\":[", f.nodes, FLAME_SHARE);
	tk_buf_put(b, f.names.data, f.names.len);
	tk_buf_putc(b, ']');
	if (f.names.err)
		rc = f.names.err;
	tk_buf_free(&f.names);
	free(f.out_id);
	agg_free(&a);
	names_free(&nm);
	return rc < 0 ? rc : b->err;
}

/* Skip one CSV field (quoted or not) and its comma; NULL at the line's end. */
static const char *csv_skip(const char *s, const char *end)
{
	if (s < end && *s == '"') {
		for (s++; s < end; s++)
			if (*s == '"' && !(s + 1 < end && s[1] == '"'))
				break;
			else if (*s == '"')
				s++;
		s++;
	}
	while (s < end && *s != ',')
		s++;
	return s < end ? s + 1 : NULL;
}

/* The function table: the CSV's header and first TOP rows as they are, and what the rows
 * after them add up to (calls, exclusive time and instructions: the columns that add). */
static int put_functions(struct tk_buf *b, const struct tk_prof *p, const struct tk_report_opts *o)
{
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = o->sym };
	struct tk_buf csv;
	uint64_t top = o->top ? o->top : TK_REPORT_TOP, row = 0, rest_rows = 0, rest_calls = 0,
		 rest_insns = 0;
	double rest_time = 0;
	size_t keep = 0;
	int rc;

	if (tk_buf_init(&csv, -1, 1 << 16) < 0)
		return -TK_E_NOMEM;
	if ((rc = tk_out_profile(&csv, p, TK_OUT_CSV, &oo)) < 0) {
		tk_buf_free(&csv);
		return rc;
	}
	for (const char *s = csv.data, *end = csv.data + csv.len; s < end; row++) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		nl = nl ? nl : end;
		if (row <= top) {
			keep = (size_t)(nl - csv.data) + (nl < end);
		} else {
			/* function, calls, incl_time, excl_time, incl_insns, excl_insns, ... */
			const char *f = csv_skip(s, nl);
			double v[5] = { 0 };
			for (int k = 0; k < 5 && f; k++) {
				v[k] = strtod(f, NULL);
				f = csv_skip(f, nl);
			}
			rest_rows++;
			rest_calls += (uint64_t)v[0];
			rest_time += v[2];
			rest_insns += (uint64_t)v[4];
		}
		s = nl + 1;
	}
	struct tk_buf kept = csv;
	kept.len = keep;
	key_text(b, "functions", &kept, keep);
	tk_buf_printf(b, ",\"functions_rest\":{\"rows\":%llu,\"calls\":%llu,\"excl_time\":%.3f,"
		      "\"excl_insns\":%llu}", (unsigned long long)rest_rows,
		      (unsigned long long)rest_calls, rest_time, (unsigned long long)rest_insns);
	tk_buf_free(&csv);
	return b->err;
}

/* `profile --source --top 200`: the hottest lines in their files. */
static int put_source(struct tk_buf *b, const struct tk_prof *p, const struct tk_report_opts *o)
{
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = o->sym, .top = SOURCE_TOP };
	struct tk_buf t;
	if (!o->sym)
		return 0;
	if (tk_buf_init(&t, -1, 1 << 16) < 0)
		return -TK_E_NOMEM;
	int rc = tk_out_profile(&t, p, TK_OUT_SOURCE, &oo);
	if (rc >= 0 && t.len)
		key_text(b, "source", &t, SOURCE_BYTES);
	tk_buf_free(&t);
	return rc < 0 ? rc : b->err;
}

/* `profile --to account-csv`, by total time, where functions are keyed by id (XRay). */
static int put_account(struct tk_buf *b, const struct tk_prof *p, const struct tk_report_opts *o)
{
	struct tk_out_account_opts ao = { .sz = sizeof ao, .sort_key = 7, .csv = 1,
					  .top = o->top ? o->top : TK_REPORT_TOP,
					  .func_name = o->func_name, .thread_id = o->thread_id,
					  .ctx = o->ctx };
	struct tk_prof_summary s;
	struct tk_buf t;
	tk_prof_summary(p, &s);
	ao.ticks_per_sec = s.clock.ticks_per_second;
	if (tk_buf_init(&t, -1, 1 << 12) < 0)
		return -TK_E_NOMEM;
	int rc = tk_out_account(&t, p, &ao);
	if (rc >= 0 && memchr(t.data, '\n', t.len) != t.data + t.len - 1)  /* any rows */
		key_text(b, "account", &t, t.len);
	tk_buf_free(&t);
	return rc < 0 ? rc : b->err;
}

int tk_report_profile(struct tk_report *r, const struct tk_prof *p)
{
	struct tk_buf *b = &r->prof;
	int rc;
	tk_prof_summary(p, &r->sum);
	r->have_prof = 1;
	r->sparse = (tk_prof_flags(p) & TK_PROF_SPARSE_TIME) != 0;
	if ((rc = put_flame(b, p, r->o.sym)) < 0 || (rc = put_functions(b, p, &r->o)) < 0 ||
	    (rc = put_source(b, p, &r->o)) < 0 || (rc = put_account(b, p, &r->o)) < 0)
		return rc;
	return 0;
}

/* ---- events: the timeline's bins and the pipeline -------------------------------------- */

/* Row L of the timeline: even L a lane's instructions, odd its calls. */
static uint64_t *tl_row(struct tl *t, size_t l)
{
	return (l & 1 ? t->calls : t->insns) + l / 2 * TK_REPORT_BINS;
}

/* Bins twice as wide: pairs merge. */
static void tl_coarsen(struct tl *t)
{
	uint64_t nb = t->base >> 1;
	for (size_t l = 0; l < 2 * t->nlanes; l++) {
		uint64_t *row = tl_row(t, l), tmp[TK_REPORT_BINS] = { 0 };
		for (uint64_t k = t->base; k <= t->top; k++)
			tmp[(k >> 1) - nb] += row[k - t->base];
		memcpy(row, tmp, sizeof tmp);
	}
	t->base = nb;
	t->top >>= 1;
	t->shift++;
}

/* Room for keys of times [LO, HI]: coarser bins until they fit with those held, then the
 * rows move right if LO comes before them. */
static void tl_fit(struct tl *t, uint64_t lo, uint64_t hi)
{
	if (!t->any) {
		while ((hi >> t->shift) - (lo >> t->shift) >= TK_REPORT_BINS)
			t->shift++;
		t->base = lo >> t->shift;
		t->top = hi >> t->shift;
		t->tmin = lo;
		t->tmax = hi;
		t->any = 1;
		return;
	}
	for (;;) {
		uint64_t b = lo >> t->shift < t->base ? lo >> t->shift : t->base;
		uint64_t e = hi >> t->shift > t->top ? hi >> t->shift : t->top;
		if (e - b < TK_REPORT_BINS)
			break;
		tl_coarsen(t);
	}
	if (lo >> t->shift < t->base) {
		size_t d = (size_t)(t->base - (lo >> t->shift)), n = (size_t)(t->top - t->base + 1);
		for (size_t l = 0; l < 2 * t->nlanes; l++) {
			uint64_t *row = tl_row(t, l);
			memmove(row + d, row, n * sizeof *row);
			memset(row, 0, d * sizeof *row);
		}
		t->base -= d;
	}
	if (hi >> t->shift > t->top)
		t->top = hi >> t->shift;
	t->tmin = lo < t->tmin ? lo : t->tmin;
	t->tmax = hi > t->tmax ? hi : t->tmax;
}

/* The lane of TRACK (a new one at the end); -1 when out of memory. */
static ssize_t tl_lane(struct tl *t, uint32_t track)
{
	if (t->last < t->nlanes && t->track[t->last] == track)
		return (ssize_t)t->last;
	for (size_t l = 0; l < t->nlanes; l++)
		if (t->track[l] == track)
			return (ssize_t)(t->last = l);
	if (t->nlanes == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 4;
		uint32_t *tr = realloc(t->track, nc * sizeof *tr);
		if (tr)
			t->track = tr;
		uint64_t *lt = realloc(t->ltime, nc * sizeof *lt);
		if (lt)
			t->ltime = lt;
		uint64_t *in = realloc(t->insns, nc * TK_REPORT_BINS * sizeof *in);
		if (in)
			t->insns = in;
		uint64_t *ca = realloc(t->calls, nc * TK_REPORT_BINS * sizeof *ca);
		if (ca)
			t->calls = ca;
		if (!tr || !lt || !in || !ca)
			return -1;
		t->cap = nc;
	}
	size_t l = t->nlanes++;
	t->track[l] = track;
	t->ltime[l] = TK_TIME_NONE;
	memset(t->insns + l * TK_REPORT_BINS, 0, TK_REPORT_BINS * sizeof *t->insns);
	memset(t->calls + l * TK_REPORT_BINS, 0, TK_REPORT_BINS * sizeof *t->calls);
	return (ssize_t)(t->last = l);
}

/* Instructions and calls of one event (a block, the instructions a walker counted before
 * an event, a call or a function entry) into its lane's bin; an event without a time
 * counts at its track's last time, as the profile counts it. */
static int tl_event(struct tl *t, const struct tk_event *e)
{
	uint64_t insns = 0, calls = 0;
	switch (e->kind) {
	case TK_EV_BLOCK: insns = e->count + e->arg; break;
	case TK_EV_INSNS: insns = e->count; break;
	case TK_EV_RETURN: insns = e->count; break;
	case TK_EV_CALL: insns = e->count; calls = 1; break;
	case TK_EV_FUNC_ENTER: calls = 1; break;
	default: return 0;
	}
	ssize_t l = tl_lane(t, e->track);
	if (l < 0)
		return -TK_E_NOMEM;
	uint64_t time = e->time != TK_TIME_NONE ? e->time : t->ltime[l];
	if (time == TK_TIME_NONE || !(insns | calls))
		return 0;
	t->ltime[l] = time;
	if (time < t->wbegin || (t->wend && time >= t->wend))
		return 0;   /* outside the profile's --time window */
	tl_fit(t, time, time);
	t->insns[(size_t)l * TK_REPORT_BINS + (time >> t->shift) - t->base] += insns;
	t->calls[(size_t)l * TK_REPORT_BINS + (time >> t->shift) - t->base] += calls;
	return 0;
}

/* SRC's bins added into DST (the chunk after DST's). */
static int tl_merge(struct tl *dst, struct tl *src)
{
	if (!src->any)
		return 0;
	if (!dst->any) {
		dst->shift = src->shift;
		tl_fit(dst, src->base << src->shift, src->top << src->shift);
		dst->tmin = src->tmin;
		dst->tmax = src->tmax;
	}
	while (dst->shift < src->shift)
		tl_coarsen(dst);
	tl_fit(dst, src->tmin, src->tmax);
	while (src->shift < dst->shift)
		tl_coarsen(src);
	for (size_t k = 0; k < src->nlanes; k++) {
		ssize_t l = tl_lane(dst, src->track[k]);
		if (l < 0)
			return -TK_E_NOMEM;
		size_t off = (size_t)(src->base - dst->base), n = (size_t)(src->top - src->base + 1);
		for (size_t i = 0; i < n; i++) {
			dst->insns[(size_t)l * TK_REPORT_BINS + off + i] += src->insns[k * TK_REPORT_BINS + i];
			dst->calls[(size_t)l * TK_REPORT_BINS + off + i] += src->calls[k * TK_REPORT_BINS + i];
		}
		if (src->ltime[k] != TK_TIME_NONE)
			dst->ltime[l] = src->ltime[k];
	}
	return 0;
}

static struct pinsn **map_slot(struct tk_report *r, uint64_t id)
{
	size_t i = (size_t)(id * 0x9e3779b97f4a7c15ull >> 20) & r->map_mask;
	while (r->map[i] && r->map[i]->id != id)
		i = (i + 1) & r->map_mask;
	return &r->map[i];
}

static int map_grow(struct tk_report *r)
{
	struct pinsn **old = r->map;
	size_t on = r->map_mask + 1;
	if (!(r->map = calloc(on * 2, sizeof *r->map))) {
		r->map = old;
		return -TK_E_NOMEM;
	}
	r->map_mask = on * 2 - 1;
	for (size_t i = 0; i < on; i++)
		if (old[i])
			*map_slot(r, old[i]->id) = old[i];
	free(old);
	return 0;
}

/* Take the instruction out of the map (linear probing: the ones after it move up). */
static void map_remove(struct tk_report *r, struct pinsn **slot)
{
	size_t i = (size_t)(slot - r->map);
	r->map[i] = NULL;
	r->map_n--;
	for (size_t j = (i + 1) & r->map_mask; r->map[j]; j = (j + 1) & r->map_mask) {
		struct pinsn *in = r->map[j];
		r->map[j] = NULL;
		*map_slot(r, in->id) = in;
	}
}

/* The IPC columns twice as wide: pairs merge. (Columns sit at multiples of their width,
 * so a chunk's, made apart, add up exactly once as wide as the report's.) */
static void ipc_coarsen(struct tk_report *r)
{
	for (size_t i = 0; i < TK_REPORT_BINS / 2; i++) {
		r->ipc_retired[i] = r->ipc_retired[2 * i] + r->ipc_retired[2 * i + 1];
		r->ipc_flushed[i] = r->ipc_flushed[2 * i] + r->ipc_flushed[2 * i + 1];
	}
	memset(r->ipc_retired + TK_REPORT_BINS / 2, 0, TK_REPORT_BINS / 2 * sizeof *r->ipc_retired);
	memset(r->ipc_flushed + TK_REPORT_BINS / 2, 0, TK_REPORT_BINS / 2 * sizeof *r->ipc_flushed);
	r->ipc_width *= 2;
}

static void ipc_add(struct tk_report *r, uint64_t t, int flushed)
{
	while (t / r->ipc_width >= TK_REPORT_BINS)
		ipc_coarsen(r);
	(flushed ? r->ipc_flushed : r->ipc_retired)[t / r->ipc_width]++;
}

static unsigned hist_bin(uint64_t v)
{
	unsigned b = v ? 64 - (unsigned)__builtin_clzll(v) : 0;   /* bits in V */
	return b < HIST_BINS - 1 ? b : HIST_BINS - 1;
}

static inline __attribute__((always_inline)) void stage_close(struct tk_report *r,
							       struct pstage *s, uint64_t t)
{
	s->e = t;
	if (s->stage >= STAGES_MAX) {
		r->stages_ignored++;
		return;
	}
	struct stage_stat *st = &r->stages[s->stage];
	uint64_t lat = t - s->b;
	st->seen = 1;
	st->lane = s->lane;
	st->last_at = r->at;
	st->last_merge = r->merge;
	st->count++;
	st->sum += lat;
	st->max = lat > st->max ? lat : st->max;
	st->hist[hist_bin(lat)]++;
}

/* The slowest: a min-heap, the least slow on top to be replaced. Slower: a longer latency,
 * or the same and a lower id (as `tracekit stats --slowest` orders them). */
static int less_slow(const struct slow *a, const struct slow *b)
{
	uint64_t la = a->end - a->begin, lb = b->end - b->begin;
	return la != lb ? la < lb : a->id > b->id;
}

static void slow_swap(struct slow *a, struct slow *b)
{
	struct slow t = *a;
	*a = *b;
	*b = t;
}

/* S into the heap; LABEL: its label (most are not slower: not copied for them). The
 * heap keeps the earlier of two as slow: the same of them whatever order chunks' were
 * merged in, so long as each chunk's come in the order it retired them. */
static void slow_put(struct tk_report *r, struct slow s, const char *label)
{
	struct slow *h = r->slow;
	size_t i = 0;
	if (r->nslow < TK_REPORT_SLOWEST) {
		memcpy(s.label, label, sizeof s.label);
		h[i = r->nslow++] = s;
		for (; i && less_slow(&h[i], &h[(i - 1) / 2]); i = (i - 1) / 2)
			slow_swap(&h[i], &h[(i - 1) / 2]);
		if (!r->chunk && r->nslow == TK_REPORT_SLOWEST)
			__atomic_store_n(&r->slow_floor, h[0].end - h[0].begin, __ATOMIC_RELAXED);
		return;
	}
	if (!less_slow(&h[0], &s))
		return;
	memcpy(s.label, label, sizeof s.label);
	h[0] = s;
	for (;;) {
		size_t m = i, l = 2 * i + 1;
		if (l < r->nslow && less_slow(&h[l], &h[m]))
			m = l;
		if (l + 1 < r->nslow && less_slow(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			break;
		slow_swap(&h[i], &h[m]);
		i = m;
	}
	if (!r->chunk)
		__atomic_store_n(&r->slow_floor, h[0].end - h[0].begin, __ATOMIC_RELAXED);
}

static void slow_add(struct tk_report *r, const struct pinsn *in, uint64_t end)
{
	/* a chunk's instruction less slow than the report's least slow so far can never be
	 * among the slowest (its heap's floor only rises): left out, its chunk's heap does not
	 * fill from empty (report -j 2: 50 samples against 9 at -j 1) */
	if (r->parent && end - in->begin < __atomic_load_n(&r->parent->slow_floor, __ATOMIC_RELAXED))
		return;
	slow_put(r, (struct slow){ in->id, in->sim_id, in->begin, end, in->thread, { 0 }, r->at },
		 in->label);
}

/* An instruction ended at T (HOW: 0 retired, 1 flushed, 2 still in flight at the end, T
 * the last cycle): its open stages close, and it joins the diagram if it is in the window. */
static void insn_end(struct tk_report *r, struct pinsn **slot, uint64_t t, int how)
{
	struct pinsn *in = *slot;
	for (size_t i = 0; i < in->nst; i++)
		if (in->st[i].e == UINT64_MAX)
			stage_close(r, &in->st[i], t);
	if (how == 0)
		slow_add(r, in, t);
	map_remove(r, slot);
	in->end = t;
	in->how = how;
	if (in->cand && (!r->o.window_end || t >= r->o.window_begin)) {
		if (r->nwin < TK_REPORT_WINDOW) {
			r->win[r->nwin++] = in;
			return;
		}
		r->win_left_out++;
	}
	in->next_spare = r->spare;
	r->spare = in;
}

/* (inlined into its one call, in tk_report_events' loop: its entry and exit were a
 * fifth of its instructions, a call per event) */
static inline __attribute__((always_inline)) int pipeline_event(struct tk_report *r,
								 const struct tk_event *e)
{
	struct pinsn **slot, *in;
	uint64_t t = e->time == TK_TIME_NONE ? r->p_last : e->time;

	r->have_pipe = 1;
	r->p_last = t > r->p_last ? t : r->p_last;
	if (e->kind == TK_EV_INSN_BEGIN) {
		if (*(slot = map_slot(r, e->addr)))      /* an id used again: the first ends */
			insn_end(r, slot, t, 2);
		struct pstage *st = NULL;
		size_t cap = 0;
		if ((in = r->spare)) {
			r->spare = in->next_spare;
			st = in->st;
			cap = in->cap;
		} else if (!(in = malloc(sizeof *in))) {
			return -TK_E_NOMEM;
		}
		/* (fields set one by one: zeroing the whole label was 13 % of this function) */
		in->id = e->addr;
		in->sim_id = e->addr2;
		in->begin = t;
		in->end = 0;
		in->thread = e->track;
		in->seq = r->p_seq;
		in->cand = r->o.window_end ? t < r->o.window_end : r->p_seq < TK_REPORT_WINDOW;
		if (r->chunk) {   /* (its place among all is not known here) */
			r->chunk_refused |= r->o.window_end && in->cand;
			in->cand = 0;
		}
		in->how = 0;
		in->label[0] = 0;
		in->st = st;
		in->nst = 0;
		in->cap = cap;
		in->next_spare = NULL;
		r->p_insns++;
		r->p_seq++;
		*map_slot(r, e->addr) = in;
		if (++r->map_n * 2 > r->map_mask)
			return map_grow(r);
		return 0;
	}
	if (e->kind == TK_EV_GAP) {
		r->p_gaps++;
		return 0;
	}
	if (!*(slot = map_slot(r, e->addr)))
		return 0;
	in = *slot;
	switch (e->kind) {
	case TK_EV_STAGE_BEGIN:
		if (in->nst == in->cap) {
			size_t nc = in->cap ? in->cap * 2 : 8;
			struct pstage *ns = realloc(in->st, nc * sizeof *ns);
			if (!ns)
				return -TK_E_NOMEM;
			in->st = ns;
			in->cap = nc;
		}
		in->st[in->nst++] = (struct pstage){ (uint32_t)e->arg, e->flags, t, UINT64_MAX };
		break;
	case TK_EV_STAGE_END:
		for (size_t i = in->nst; i-- > 0;)
			if (in->st[i].e == UINT64_MAX && in->st[i].stage == e->arg &&
			    in->st[i].lane == e->flags) {
				stage_close(r, &in->st[i], t);
				/* the diagram keeps the stages of its instructions, the rest only
				 * count */
				if (!in->cand || i >= INSN_STAGES)
					in->st[i] = in->st[--in->nst];
				break;
			}
		break;
	case TK_EV_TYPED:
		if (e->flags == TK_TYPED_INSN_LABEL && e->data) {
			size_t n = e->count < LABEL_MAX - 1 ? e->count : LABEL_MAX - 1;
			memcpy(in->label, e->data, n);
			in->label[n] = 0;
		}
		break;
	case TK_EV_RETIRE:
	case TK_EV_FLUSH:
		if (e->kind == TK_EV_RETIRE)
			r->p_retired++;
		else
			r->p_flushed++;
		ipc_add(r, t, e->kind == TK_EV_FLUSH);
		insn_end(r, slot, t, e->kind == TK_EV_FLUSH);
		break;
	}
	return 0;
}

int tk_report_events(struct tk_report *r, const struct tk_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		if ((e->kind >= TK_EV_INSN_BEGIN && e->kind <= TK_EV_DEPENDENCY) ||
		    (e->kind == TK_EV_TYPED && e->flags == TK_TYPED_INSN_LABEL) ||
		    (e->kind == TK_EV_GAP && r->have_pipe)) {
			int rc = pipeline_event(r, e);
			if (rc < 0)
				return rc;
		} else {
			int rc = tl_event(&r->tl, e);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int report_sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	return tk_report_events(ctx, ev, n);
}

/* ---- a chunk's pipeline part ahead of its turn (tk_sink.prepare) ------------------------- */

/* tk_sink.prepare, on the producer's thread (a Kanata log's chunk, its times known): the
 * pipeline part of EV[0..n) on a report of the chunk's own, with none of its instructions
 * in the diagram (report_take refuses the chunk where one would be). Everything it counts
 * adds up; what depends on order keeps where in the chunk it happened. NULL: given up
 * (an event not of a pipeline, or without a time: the chunk goes through events()). */
static void *report_prepare(void *ctx, void *prepared, const struct tk_event *ev, size_t n)
{
	const struct tk_report *r = ctx;
	struct tk_report *c = prepared;

	if (!c) {
		if (!(c = calloc(1, sizeof *c)))
			return NULL;
		c->o = r->o;   /* (the options only: set before any event, then read) */
		c->chunk = c->have_pipe = 1;
		c->parent = r;
		c->ipc_width = 1;
		c->map_mask = 1023;
		if (!(c->map = calloc(c->map_mask + 1, sizeof *c->map))) {
			free(c);
			return NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		int pipe = (e->kind >= TK_EV_INSN_BEGIN && e->kind <= TK_EV_DEPENDENCY) ||
			   (e->kind == TK_EV_TYPED && e->flags == TK_TYPED_INSN_LABEL);
		c->at = c->nseen + i;
		if ((!pipe && e->kind != TK_EV_GAP) || (pipe && e->time == TK_TIME_NONE) ||
		    pipeline_event(c, e) < 0 || c->chunk_refused) {
			tk_report_free(c);
			return NULL;
		}
	}
	c->nseen += n;
	return c;
}

static void report_drop(void *ctx, void *prepared)
{
	(void)ctx;
	tk_report_free(prepared);
}

/* Chunk C's pipeline part into R, after what R had and the commands about earlier
 * chunks' instructions replayed between C's events (R->at: where the last of them came). */
static int take_chunk(struct tk_report *r, struct tk_report *c)
{
	uint64_t seq0 = r->p_seq;

	r->p_insns += c->p_insns;
	r->p_seq += c->p_seq;
	r->p_retired += c->p_retired;
	r->p_flushed += c->p_flushed;
	r->p_gaps += c->p_gaps;
	r->p_last = c->p_last > r->p_last ? c->p_last : r->p_last;
	while (r->ipc_width < c->ipc_width)
		ipc_coarsen(r);
	while (c->ipc_width < r->ipc_width)
		ipc_coarsen(c);
	for (size_t i = 0; i < TK_REPORT_BINS; i++) {
		r->ipc_retired[i] += c->ipc_retired[i];
		r->ipc_flushed[i] += c->ipc_flushed[i];
	}
	for (size_t s = 0; s < STAGES_MAX; s++) {
		struct stage_stat *d = &r->stages[s];
		const struct stage_stat *f = &c->stages[s];
		if (!f->seen)
			continue;
		/* the lane of the last close: the chunk's, unless a replayed one came after it */
		if (d->last_merge != r->merge || f->last_at >= d->last_at)
			d->lane = f->lane;
		d->seen = 1;
		d->count += f->count;
		d->sum += f->sum;
		d->max = f->max > d->max ? f->max : d->max;
		for (size_t b = 0; b < HIST_BINS; b++)
			d->hist[b] += f->hist[b];
	}
	r->stages_ignored += c->stages_ignored;
	/* the chunk's slowest in the order it retired them (the heap keeps the earlier) */
	struct slow *h = c->slow;
	for (size_t i = 1; i < c->nslow; i++)
		for (size_t k = i; k && h[k - 1].at > h[k].at; k--)
			slow_swap(&h[k - 1], &h[k]);
	for (size_t i = 0; i < c->nslow; i++)
		slow_put(r, h[i], h[i].label);
	/* its instructions still in flight, for later chunks' commands */
	for (size_t i = 0; i <= c->map_mask; i++) {
		struct pinsn *in = c->map[i];
		if (!in)
			continue;
		struct pinsn **slot = map_slot(r, in->id);
		if (*slot)
			return -TK_E_INTERNAL;   /* (the producer refuses ids used again across chunks) */
		c->map[i] = NULL;
		c->map_n--;
		in->seq += seq0;
		*slot = in;
		if (++r->map_n * 2 > r->map_mask && map_grow(r) < 0)
			return -TK_E_NOMEM;
	}
	while (c->spare) {
		struct pinsn *in = c->spare;
		c->spare = in->next_spare;
		in->next_spare = r->spare;
		r->spare = in;
	}
	return 0;
}

/* tk_sink.take, in parts (take_in_parts): a prepared chunk in its turn. Refused (the
 * events again) where one of its instructions would be in the diagram. */
static int report_take(void *ctx, const struct tk_event *ev, size_t n, size_t first, void *prepared)
{
	struct tk_report *r = ctx, *c = prepared;
	int rc = 0;

	(void)ev;   /* (all in C already; NULL when the producer kept none: need_from) */
	if (!c->merge) {   /* the first part (those before it may be empty, as FIRST is 0) */
		c->merge = 1;
		if (!r->have_pipe || (!r->o.window_end && r->p_seq < TK_REPORT_WINDOW)) {
			tk_report_free(c);
			return TK_SINK_AGAIN;
		}
		r->merge++;
	}
	r->at = first + n;   /* replayed commands from here come after these events */
	if (first + n < c->nseen)
		return 0;
	rc = take_chunk(r, c);
	r->at = 0;
	tk_report_free(c);
	return rc;
}

/* tk_sink.need_from: none of a prepared chunk's events, but with a window of time (a
 * chunk's prepare then gives up on one that reaches into it); take's first part may
 * still refuse a chunk, while the diagram is not full */
static size_t report_need_from(void *ctx, const void *prepared)
{
	const struct tk_report *r = ctx;

	(void)prepared;
	return r->o.window_end ? 0 : SIZE_MAX;
}

struct tk_sink tk_report_sink(struct tk_report *r)
{
	return (struct tk_sink){ .events = report_sink_fn, .ctx = r, .prepare = report_prepare,
				 .take = report_take, .drop = report_drop, .need_from = report_need_from,
				 .take_in_parts = 1 };
}

/* ---- the timeline from the profile's run (tk_run_profile_tee): a struct tl per chunk -- */

static int tl_sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = tl_event(ctx, &ev[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int tee_begin(void *ctx, size_t chunk, struct tk_sink *sink)
{
	const struct tk_report *r = ctx;
	struct tl *t = calloc(1, sizeof *t);
	(void)chunk;
	if (!t)
		return -TK_E_NOMEM;
	t->wbegin = r->tl.wbegin;
	t->wend = r->tl.wend;
	*sink = (struct tk_sink){ tl_sink_fn, t };
	return 0;
}

static void tee_drop(void *ctx, void *chunk_ctx)
{
	(void)ctx;
	tl_free(chunk_ctx);
	free(chunk_ctx);
}

static int tee_merge(void *ctx, size_t chunk, void *chunk_ctx)
{
	struct tk_report *r = ctx;
	int rc = tl_merge(&r->tl, chunk_ctx);
	(void)chunk;
	tee_drop(NULL, chunk_ctx);
	return rc;
}

struct tk_run_tee tk_report_tee(struct tk_report *r)
{
	return (struct tk_run_tee){ sizeof(struct tk_run_tee), tee_begin, tee_merge, tee_drop, r };
}

static int calls_begin(void *ctx, uint32_t track, uint64_t key, uint32_t kind, uint64_t time)
{
	struct tk_report *r = ctx;
	struct tk_event e = { .kind = TK_EV_FUNC_ENTER, .track = track, .time = time, .addr = key };

	(void)kind;
	return tl_event(&r->tl, &e);
}

static int calls_end(void *ctx, uint32_t track, uint64_t time)
{
	(void)ctx, (void)track, (void)time;
	return 0;
}

struct tk_prof_calls tk_report_calls(struct tk_report *r)
{
	return (struct tk_prof_calls){ calls_begin, calls_end, r };
}

/* ---- the page ------------------------------------------------------------------------ */

static void put_u64s(struct tk_buf *b, const char *k, const uint64_t *v, size_t n)
{
	tk_buf_printf(b, "\"%s\":[", k);
	for (size_t i = 0; i < n; i++) {
		if (i)
			tk_buf_putc(b, ',');
		tk_buf_u64(b, v[i]);
	}
	tk_buf_putc(b, ']');
}

/* The lanes, those beyond TK_REPORT_LANES summed into one; times from the first event's
 * (LEAD: where it falls in the first bin). */
static void put_timeline(struct tk_report *r, struct tk_buf *b)
{
	struct tl *t = &r->tl;
	size_t bins = (size_t)(t->top - t->base + 1);
	tk_buf_printf(b, ",\"timeline\":{\"width\":%llu,\"lead\":%llu,\"span\":%llu,\"tps\":%llu,"
		      "\"lanes\":[", 1ull << t->shift,
		      (unsigned long long)(t->tmin - (t->base << t->shift)),
		      (unsigned long long)(t->tmax - t->tmin),
		      (unsigned long long)r->sum.clock.ticks_per_second);
	uint64_t oins[TK_REPORT_BINS] = { 0 }, ocal[TK_REPORT_BINS] = { 0 };
	for (size_t l = 0; l < t->nlanes && l <= TK_REPORT_LANES; l++) {
		const uint64_t *ins = t->insns + l * TK_REPORT_BINS, *cal = t->calls + l * TK_REPORT_BINS;
		if (l == TK_REPORT_LANES) {   /* the tracks beyond the lanes */
			for (size_t k = l; k < t->nlanes; k++)
				for (size_t i = 0; i < bins; i++) {
					oins[i] += t->insns[k * TK_REPORT_BINS + i];
					ocal[i] += t->calls[k * TK_REPORT_BINS + i];
				}
			ins = oins;
			cal = ocal;
			tk_buf_puts(b, ",{\"name\":\"other tracks\",");
		} else {
			uint32_t id = r->o.thread_id ? r->o.thread_id(r->o.ctx, t->track[l]) : t->track[l];
			tk_buf_printf(b, "%s{\"name\":\"%.40s %u\",", l ? "," : "", r->track_label, id);
		}
		put_u64s(b, "insns", ins, bins);
		tk_buf_putc(b, ',');
		put_u64s(b, "calls", cal, bins);
		tk_buf_putc(b, '}');
	}
	tk_buf_puts(b, "]}");
}

static int cmp_win(const void *x, const void *y)
{
	const struct pinsn *a = *(struct pinsn *const *)x, *b = *(struct pinsn *const *)y;
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

static int cmp_slow(const void *x, const void *y)
{
	const struct slow *a = x, *b = y;
	int c = less_slow(a, b) - less_slow(b, a);   /* slowest first */
	if (c)
		return c;
	/* (an id retired twice as slowly: by when it began, whatever the heap's layout) */
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->sim_id != b->sim_id)
		return a->sim_id < b->sim_id ? -1 : 1;
	if (a->thread != b->thread)
		return a->thread < b->thread ? -1 : 1;
	return strcmp(a->label, b->label);
}

static int cmp_seq(const void *x, const void *y)
{
	const struct pinsn *a = *(struct pinsn *const *)x, *b = *(struct pinsn *const *)y;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void put_pipeline(struct tk_report *r, struct tk_buf *b)
{
	uint64_t in_flight = r->map_n;
	/* what is still in flight ends at the last cycle, in the order it began (not the
	 * map's, which depends on when chunks' were put in it) */
	struct pinsn **fl = r->map_n ? malloc(r->map_n * sizeof *fl) : NULL;
	size_t nfl = 0;
	for (size_t i = 0; fl && i <= r->map_mask; i++)
		if (r->map[i])
			fl[nfl++] = r->map[i];
	if (fl)
		qsort(fl, nfl, sizeof *fl, cmp_seq);
	for (size_t k = 0; k < nfl; k++)
		insn_end(r, map_slot(r, fl[k]->id), r->p_last, 2);
	free(fl);
	while (r->map_n)    /* (no memory for the order; ending one moves others: scan again) */
		for (size_t i = 0; i <= r->map_mask; i++)
			if (r->map[i])
				insn_end(r, &r->map[i], r->p_last, 2);
	tk_buf_printf(b, ",\"pipeline\":{\"insns\":%llu,\"retired\":%llu,\"flushed\":%llu,"
		      "\"in_flight\":%llu,\"cycles\":%llu,\"gaps\":%llu,\"ipc\":{\"width\":%llu,",
		      (unsigned long long)r->p_insns, (unsigned long long)r->p_retired,
		      (unsigned long long)r->p_flushed, (unsigned long long)in_flight,
		      (unsigned long long)r->p_last, (unsigned long long)r->p_gaps,
		      (unsigned long long)r->ipc_width);
	size_t bins = (size_t)(r->p_last / r->ipc_width) + 1;
	bins = bins > TK_REPORT_BINS ? TK_REPORT_BINS : bins;
	put_u64s(b, "retired", r->ipc_retired, bins);
	tk_buf_putc(b, ',');
	put_u64s(b, "flushed", r->ipc_flushed, bins);
	tk_buf_puts(b, "},\"stages\":[");
	int first = 1;
	for (unsigned s = 0; s < STAGES_MAX; s++) {
		const struct stage_stat *st = &r->stages[s];
		const char *lane = NULL, *name;
		if (!st->seen)
			continue;
		name = r->o.stage_name ? r->o.stage_name(r->o.stage_ctx, s, &lane) : NULL;
		tk_buf_printf(b, "%s{\"id\":%u,\"name\":", first ? "" : ",", s);
		first = 0;
		if (name)
			tk_buf_json_str(b, name, strlen(name));
		else
			tk_buf_printf(b, "\"stage %u\"", s);
		tk_buf_puts(b, ",\"lane\":");
		if (lane)
			tk_buf_json_str(b, lane, strlen(lane));
		else
			tk_buf_printf(b, "\"lane %u\"", st->lane);
		tk_buf_printf(b, ",\"count\":%llu,\"sum\":%llu,\"max\":%llu,",
			      (unsigned long long)st->count, (unsigned long long)st->sum,
			      (unsigned long long)st->max);
		size_t nh = HIST_BINS;
		while (nh > 1 && !st->hist[nh - 1])
			nh--;
		put_u64s(b, "hist", st->hist, nh);
		tk_buf_putc(b, '}');
	}
	tk_buf_puts(b, "],\"slowest\":[");
	qsort(r->slow, r->nslow, sizeof *r->slow, cmp_slow);
	for (size_t i = 0; i < r->nslow; i++) {
		const struct slow *s = &r->slow[i];
		tk_buf_printf(b, "%s[%llu,%llu,%u,%llu,%llu,", i ? "," : "", (unsigned long long)s->id,
			      (unsigned long long)s->sim_id, s->thread, (unsigned long long)s->begin,
			      (unsigned long long)s->end);
		tk_buf_json_str(b, s->label, strlen(s->label));
		tk_buf_putc(b, ']');
	}
	tk_buf_printf(b, "],\"window\":{\"begin\":%llu,\"end\":%llu,\"first\":%d,\"left_out\":%llu,"
		      "\"insns\":[", (unsigned long long)r->o.window_begin,
		      (unsigned long long)r->o.window_end, TK_REPORT_WINDOW,
		      (unsigned long long)r->win_left_out);
	qsort(r->win, r->nwin, sizeof *r->win, cmp_win);
	for (size_t i = 0; i < r->nwin; i++) {
		const struct pinsn *in = r->win[i];
		tk_buf_printf(b, "%s[%llu,%llu,%u,%llu,%llu,%d,", i ? "," : "",
			      (unsigned long long)in->id, (unsigned long long)in->sim_id, in->thread,
			      (unsigned long long)in->begin, (unsigned long long)in->end, in->how);
		tk_buf_json_str(b, in->label, strlen(in->label));
		tk_buf_puts(b, ",[");
		for (size_t k = 0; k < in->nst; k++)
			tk_buf_printf(b, "%s[%u,%llu,%llu]", k ? "," : "", in->st[k].stage,
				      (unsigned long long)in->st[k].b, (unsigned long long)in->st[k].e);
		tk_buf_puts(b, "]]");
	}
	tk_buf_puts(b, "]}}");
}

int tk_report_write(struct tk_report *r, struct tk_buf *b)
{
	struct tk_buf j;
	if (tk_buf_init(&j, -1, 1 << 16) < 0)
		return -TK_E_NOMEM;
	tk_buf_puts(&j, "{\"title\":");
	tk_buf_json_str(&j, r->title, strlen(r->title));
	key_str(&j, "format", r->format, strlen(r->format));
	key_str(&j, "track_label", r->track_label, strlen(r->track_label));
	tk_buf_printf(&j, ",\"size\":%llu,\"bound\":%u,\"notes\":[", (unsigned long long)r->o.size,
		      TK_REPORT_MAX_BYTES);
	for (size_t i = 0; i < r->nnotes; i++) {
		tk_buf_puts(&j, i ? "," : "");
		tk_buf_json_str(&j, r->notes[i], strlen(r->notes[i]));
	}
	tk_buf_printf(&j, "],\"more_notes\":%zu", r->more_notes);
	if (r->have_prof) {
		const struct tk_prof_summary *s = &r->sum;
		int timed = s->time_first != TK_TIME_NONE;
		tk_buf_printf(&j, ",\"summary\":{\"events\":%llu,\"insns\":%llu,\"blocks\":%llu,"
			      "\"calls\":%llu,\"returns\":%llu,\"gaps\":%llu,\"truncated\":%llu,"
			      "\"orphans\":%llu,\"unmatched\":%llu,\"open_at_end\":%llu,"
			      "\"unwound\":%llu,\"tracks\":%u,\"tps\":%llu,\"time\":%llu,\"timed\":%d,\"sparse\":%d}",
			      (unsigned long long)s->events, (unsigned long long)s->insns,
			      (unsigned long long)s->blocks, (unsigned long long)s->calls,
			      (unsigned long long)s->returns, (unsigned long long)s->gaps,
			      (unsigned long long)s->truncated, (unsigned long long)s->orphans,
			      (unsigned long long)s->unmatched, (unsigned long long)s->open_at_end,
			      (unsigned long long)s->unwound, s->tracks,
			      (unsigned long long)s->clock.ticks_per_second,
			      (unsigned long long)(timed ? s->time_last - s->time_first : 0), timed,
			      r->sparse);
		tk_buf_put(&j, r->prof.data, r->prof.len);
	}
	if (r->tl.any && r->tl.tmax > r->tl.tmin)
		put_timeline(r, &j);
	if (r->have_pipe)
		put_pipeline(r, &j);
	tk_buf_puts(&j, "}");
	if (j.err) {
		int rc = j.err;
		tk_buf_free(&j);
		return rc;
	}
	/* the template's text around its data marker; '<' in the data (a symbol named
	 * "</script>") is written as \u003c, which JSON reads back as '<' */
	const char *tpl = tk_report_template, *mark = strstr(tpl, "@DATA@");
	tk_buf_put(b, tpl, (size_t)(mark - tpl));
	for (size_t i = 0, k = 0; i <= j.len; i++)
		if (i == j.len || j.data[i] == '<') {
			tk_buf_put(b, j.data + k, i - k);
			if (i < j.len)
				tk_buf_puts(b, "\\u003c");
			k = i + 1;
		}
	tk_buf_puts(b, mark + 6);
	tk_buf_free(&j);
	return b->err;
}
