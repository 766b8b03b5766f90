/* gem5 O3PipeView text -> Kanata. gem5 prints an instruction's record when it leaves the
 * pipeline, so records arrive out of seqNum order; they are sorted in a bounded window, then
 * their stage events are merged in time order (Kanata time is append-only). Uses only the
 * public Kanata writer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/gem5.h"
#include "tracekit/kanata.h"

enum { ST_F, ST_DC, ST_RN, ST_DS, ST_IS, ST_CM, ST_RT, ST_N };
static const char *const stage_names[ST_N] = { "F", "Dc", "Rn", "Ds", "Is", "Cm", "Rt" };
static const char *const gem5_names[ST_N] = { "fetch", "decode", "rename", "dispatch", "issue",
					      "complete", "retire" };

struct g5insn {
	uint64_t seq;
	uint32_t cpu;            /* index in conv.cpus */
	uint64_t tick[ST_N];     /* 0: not reached */
	uint64_t line;
	int complete;            /* retire record seen */
	int64_t kid;             /* Kanata id once scheduled */
	int pending;             /* events not yet written */
	char *label;
};

enum ev_kind { EV_INSN, EV_STAGE, EV_RETIRE };
struct g5ev {
	int64_t cycle;
	uint64_t serial;
	struct g5insn *in;
	int kind, stage, flush;
	int64_t rid;
};

/* One simulated CPU: seqNums are its own, so each sorts in its own heap. */
struct g5cpu {
	int64_t tid;                 /* Kanata thread: the name's trailing number, else 0 */
	int skip;                    /* not selected */
	struct g5insn *cur;          /* record being read */
	struct g5insn **seqheap;     /* completed, min-heap by seq */
	size_t nseq, capseq;
	uint64_t last_seq;
	int have_last, dup_warned;
};

struct conv {
	struct tk_gem5_opts o;
	struct tk_gem5_result *res;
	struct tk_buf *out;
	struct tk_kanata_writer *w;
	struct g5cpu *cpus;
	size_t ncpus;
	long cur_cpu;                /* CPU of the last record line (-1: not selected) */
	size_t nseq;                 /* completed records waiting, all CPUs */
	struct g5ev *evheap;         /* min-heap by (cycle, serial) */
	size_t nev, capev;
	uint64_t serial;
	uint64_t tpc, base_cycle;
	int64_t next_kid, next_rid;
	int err;
};

static void g5diag(struct conv *c, uint64_t line, int is_error, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void g5diag(struct conv *c, uint64_t line, int is_error, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	if (!c->o.diag)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->o.diag(c->o.ctx, line, is_error, msg);
}

/* ---- heaps ------------------------------------------------------------------------------ */
static int seq_less(const struct g5insn *a, const struct g5insn *b)
{
	return a->seq < b->seq || (a->seq == b->seq && a->line < b->line);
}

static int seq_push(struct g5cpu *c, struct g5insn *in)
{
	if (c->nseq == c->capseq) {
		size_t cap = c->capseq ? c->capseq * 2 : 1024;
		void *p = realloc(c->seqheap, cap * sizeof *c->seqheap);
		if (!p)
			return -TK_E_NOMEM;
		c->seqheap = p;
		c->capseq = cap;
	}
	size_t i = c->nseq++;
	c->seqheap[i] = in;
	while (i && seq_less(c->seqheap[i], c->seqheap[(i - 1) / 2])) {
		struct g5insn *t = c->seqheap[i];
		c->seqheap[i] = c->seqheap[(i - 1) / 2];
		c->seqheap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct g5insn *seq_pop(struct g5cpu *c)
{
	struct g5insn *top = c->seqheap[0];
	c->seqheap[0] = c->seqheap[--c->nseq];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < c->nseq && seq_less(c->seqheap[l], c->seqheap[m]))
			m = l;
		if (r < c->nseq && seq_less(c->seqheap[r], c->seqheap[m]))
			m = r;
		if (m == i)
			break;
		struct g5insn *t = c->seqheap[i];
		c->seqheap[i] = c->seqheap[m];
		c->seqheap[m] = t;
		i = m;
	}
	return top;
}

static int ev_less(const struct g5ev *a, const struct g5ev *b)
{
	return a->cycle < b->cycle || (a->cycle == b->cycle && a->serial < b->serial);
}

static int ev_push(struct conv *c, struct g5ev e)
{
	if (c->nev == c->capev) {
		size_t cap = c->capev ? c->capev * 2 : 4096;
		void *p = realloc(c->evheap, cap * sizeof *c->evheap);
		if (!p)
			return -TK_E_NOMEM;
		c->evheap = p;
		c->capev = cap;
	}
	e.serial = c->serial++;
	size_t i = c->nev++;
	c->evheap[i] = e;
	while (i && ev_less(&c->evheap[i], &c->evheap[(i - 1) / 2])) {
		struct g5ev t = c->evheap[i];
		c->evheap[i] = c->evheap[(i - 1) / 2];
		c->evheap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct g5ev ev_pop(struct conv *c)
{
	struct g5ev top = c->evheap[0];
	c->evheap[0] = c->evheap[--c->nev];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < c->nev && ev_less(&c->evheap[l], &c->evheap[m]))
			m = l;
		if (r < c->nev && ev_less(&c->evheap[r], &c->evheap[m]))
			m = r;
		if (m == i)
			break;
		struct g5ev t = c->evheap[i];
		c->evheap[i] = c->evheap[m];
		c->evheap[m] = t;
		i = m;
	}
	return top;
}

static void insn_free(struct g5insn *in)
{
	free(in->label);
	free(in);
}

/* ---- output ----------------------------------------------------------------------------- */
static int64_t to_cycle(const struct conv *c, uint64_t tick)
{
	return (int64_t)(tick / c->tpc);
}

static int write_event(struct conv *c, const struct g5ev *e)
{
	struct g5insn *in = e->in;
	int rc;

	if (e->cycle > tk_kanata_w_now(c->w))
		tk_kanata_w_cycle_to(c->w, e->cycle);
	switch (e->kind) {
	case EV_INSN: {
		char l1[96];
		const struct g5cpu *cpu = &c->cpus[in->cpu];
		rc = tk_kanata_w_insn(c->w, in->kid, (int64_t)in->seq, cpu->tid);
		if (rc >= 0 && in->label)
			rc = tk_kanata_w_label(c->w, in->kid, 0, in->label, strlen(in->label));
		snprintf(l1, sizeof l1, "seqNum %llu, fetch tick %llu", (unsigned long long)in->seq,
			 (unsigned long long)in->tick[ST_F]);
		if (rc >= 0)
			rc = tk_kanata_w_label(c->w, in->kid, 1, l1, strlen(l1));
		break;
	}
	case EV_STAGE:
		rc = tk_kanata_w_stage(c->w, in->kid, "0", stage_names[e->stage]);
		break;
	default:
		rc = tk_kanata_w_retire(c->w, in->kid, e->rid, e->flush);
		break;
	}
	if (--in->pending == 0)
		insn_free(in);
	return rc;
}

/* Write the events that no later instruction can precede. */
static int drain_events(struct conv *c, int64_t upto)
{
	while (c->nev && c->evheap[0].cycle <= upto) {
		struct g5ev e = ev_pop(c);
		int rc = write_event(c, &e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void detect_tpc(struct conv *c)
{
	uint64_t g = 0, lo = UINT64_MAX;

	if (c->tpc)
		return;
	for (size_t k = 0; k < c->ncpus; k++)
		for (size_t i = 0; i < c->cpus[k].nseq; i++)
			for (int s = 0; s < ST_N; s++)
				if (c->cpus[k].seqheap[i]->tick[s] && c->cpus[k].seqheap[i]->tick[s] < lo)
					lo = c->cpus[k].seqheap[i]->tick[s];
	for (size_t k = 0; k < c->ncpus; k++)
		for (size_t i = 0; i < c->cpus[k].nseq; i++)
			for (int s = 0; s < ST_N; s++) {
			uint64_t t = c->cpus[k].seqheap[i]->tick[s];
			if (!t)
				continue;
			uint64_t a = t - lo, b = g;
			while (b) {
				uint64_t r = a % b;
				a = b;
				b = r;
			}
			g = a;
		}
	/* differences share every factor of the clock period; lo itself need not */
	c->tpc = g ? g : 1;
	c->res->ticks_per_cycle = c->tpc;
}

static int schedule(struct conv *c, struct g5insn *in)
{
	int64_t fetch, prev, last;
	int rc;

	if (!c->w) {
		c->w = tk_kanata_writer_new(c->out, in->tick[ST_F] ? to_cycle(c, in->tick[ST_F]) : 0, &rc);
		if (!c->w) {
			insn_free(in);   /* ours until its first event is queued */
			return rc;
		}
	}
	struct g5cpu *cpu = &c->cpus[in->cpu];
	if (cpu->have_last && in->seq < cpu->last_seq) {
		c->res->out_of_order++;
		g5diag(c, in->line, 0, "seqNum %llu arrived after %llu was written; a larger window "
		       "would sort it", (unsigned long long)in->seq, (unsigned long long)cpu->last_seq);
	} else if (cpu->have_last && in->seq == cpu->last_seq && !cpu->dup_warned) {
		/* gem5 prints O3PipeView raw: several CPUs in one file have no name to tell them
		 * apart, and their seqNums overlap */
		cpu->dup_warned = 1;
		c->res->duplicates++;
		g5diag(c, in->line, 0, "seqNum %llu appears twice: records of several CPUs without "
		       "a cpu name prefix? (further duplicates not reported)", (unsigned long long)in->seq);
	} else if (cpu->have_last && in->seq == cpu->last_seq) {
		c->res->duplicates++;
	}
	cpu->last_seq = in->seq;
	cpu->have_last = 1;
	in->kid = c->next_kid++;
	c->res->insns++;
	fetch = in->tick[ST_F] ? to_cycle(c, in->tick[ST_F]) : tk_kanata_w_now(c->w);
	if (fetch < tk_kanata_w_now(c->w))
		fetch = tk_kanata_w_now(c->w);  /* cannot go back in time */
	/* everything earlier than this fetch is final */
	if ((rc = drain_events(c, fetch - 1)) < 0) {
		insn_free(in);
		return rc;
	}
	in->pending = 1;
	if ((rc = ev_push(c, (struct g5ev){ .cycle = fetch, .in = in, .kind = EV_INSN })) < 0) {
		insn_free(in);
		return rc;
	}
	/* from here on the queued events own it: pending counts them */
	prev = last = fetch;
	for (int s = 0; s < ST_N; s++) {
		if (!in->tick[s] && s != ST_F)
			continue;
		int64_t cy = s == ST_F ? fetch : to_cycle(c, in->tick[s]);
		if (cy < prev)
			cy = prev;  /* stages never go back */
		in->pending++;
		if ((rc = ev_push(c, (struct g5ev){ .cycle = cy, .in = in, .kind = EV_STAGE, .stage = s })) < 0) {
			in->pending--;
			return rc;
		}
		prev = last = cy;
	}
	if (in->complete) {
		int flush = in->tick[ST_RT] == 0;
		in->pending++;
		if (flush)
			c->res->squashed++;
		else
			c->res->retired++;
		rc = ev_push(c, (struct g5ev){ .cycle = last + 1, .in = in, .kind = EV_RETIRE,
					       .flush = flush, .rid = flush ? c->next_rid : c->next_rid++ });
		if (rc < 0) {
			in->pending--;
			return rc;
		}
	}
	return 0;
}

/* The next record to write: each CPU's lowest seqNum, the CPU whose record was fetched
 * first (CPUs advance together in time; Kanata time only moves forward). */
static struct g5insn *pop_next(struct conv *c)
{
	struct g5cpu *best = NULL;
	for (size_t k = 0; k < c->ncpus; k++) {
		struct g5cpu *p = &c->cpus[k];
		if (p->nseq && (!best || p->seqheap[0]->tick[ST_F] < best->seqheap[0]->tick[ST_F]))
			best = p;
	}
	if (!best)
		return NULL;
	c->nseq--;
	return seq_pop(best);
}

static int finish_current(struct conv *c, struct g5cpu *cpu)
{
	struct g5insn *in = cpu->cur;
	int rc;

	if (!in)
		return 0;
	cpu->cur = NULL;
	if ((rc = seq_push(cpu, in)) < 0) {
		insn_free(in);
		return rc;
	}
	c->nseq++;
	if (c->nseq > c->o.window)
		detect_tpc(c);
	while (c->nseq > c->o.window)
		if ((rc = schedule(c, pop_next(c))) < 0)
			return rc;
	return 0;
}

/* The CPU of a record line: named in the debug prefix before "O3PipeView:" ("1000:
 * system.cpu1: ..."; the last word ending in ':', cut after its first component naming a
 * cpu: "system.cpu1.commit" -> "system.cpu1"); a CPU is its thread number (the name's
 * trailing digits, else 0), so "system.cpu" and unnamed lines are the same CPU. A line
 * without a name continues the CPU of the line before. Returns the CPU's index, -1 when
 * it is not selected, -2 when out of memory. */
static long cpu_of(struct conv *c, const char *p, const char *m)
{
	const char *e = m, *b;
	char name[64] = "";
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if (e > p && e[-1] == ':') {
		e--;
		b = e;
		while (b > p && b[-1] != ' ' && b[-1] != '\t' && b[-1] != ':')
			b--;
		size_t n = (size_t)(e - b);
		int digits_only = 1;
		for (size_t i = 0; i < n; i++)
			digits_only &= (unsigned)(b[i] - '0') < 10;
		if (n && !digits_only) {       /* a bare number is gem5's tick */
			if (n >= sizeof name)
				n = sizeof name - 1;
			memcpy(name, b, n);
			name[n] = 0;
			char *cpu = strstr(name, "cpu");
			char *dot = cpu ? strchr(cpu, '.') : NULL;
			if (dot)
				*dot = 0;
		}
	}
	if (!name[0] && c->ncpus)
		return c->cur_cpu;
	size_t n = strlen(name);
	while (n && (unsigned)(name[n - 1] - '0') < 10)
		n--;
	int64_t tid = name[n] ? strtoll(name + n, NULL, 10) : 0;
	size_t k = 0;
	while (k < c->ncpus && c->cpus[k].tid != tid)
		k++;
	if (k == c->ncpus) {
		void *np = realloc(c->cpus, (c->ncpus + 1) * sizeof *c->cpus);
		if (!np)
			return -2;
		c->cpus = np;
		struct g5cpu *cpu = &c->cpus[c->ncpus++];
		memset(cpu, 0, sizeof *cpu);
		cpu->tid = tid;
		cpu->skip = c->o.select_cpu && tid != c->o.cpu;
		if (!cpu->skip)
			c->res->cpus++;
	}
	c->cur_cpu = c->cpus[k].skip ? -1 : (long)k;
	return c->cur_cpu;
}

static int parse_u64(const char *p, const char *e, uint64_t *v)
{
	uint64_t x = 0;
	while (p < e && *p == ' ')
		p++;
	if (p == e)
		return -1;
	while (p < e && (unsigned)(*p - '0') < 10) {
		x = x * 10 + (uint64_t)(*p++ - '0');
		if (x > ((uint64_t)1 << 60))
			return -1;
	}
	while (p < e && (*p == ' ' || *p == '\r'))
		p++;
	if (p != e)
		return -1;
	*v = x;
	return 0;
}

static int line(struct conv *c, const char *p, const char *e, uint64_t lineno)
{
	const char *f[7], *fe[7];
	int nf = 0;
	const char *q = p;

	c->res->lines++;
	while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
		e--;
	/* debug-flag prefixes ("1000: system.cpu: ") are allowed before the record */
	const char *m = memmem(p, (size_t)(e - p), "O3PipeView:", 11);
	if (!m)
		return 0;  /* other debug output */
	long ci = cpu_of(c, p, m);
	if (ci == -2)
		return -TK_E_NOMEM;
	if (ci < 0) {
		c->res->other_cpu_lines++;
		return 0;
	}
	struct g5cpu *cpu = &c->cpus[ci];
	q = m;
	/* fields 0..5 are colon-separated; the 7th (disassembly) keeps its own colons */
	while (nf < 7) {
		const char *col = nf == 6 ? NULL : memchr(q, ':', (size_t)(e - q));
		f[nf] = q;
		fe[nf] = col ? col : e;
		nf++;
		if (!col)
			break;
		q = col + 1;
	}
	if (nf < 3)
		goto bad;
	int st = -1;
	for (int s = 0; s < ST_N; s++)
		if ((size_t)(fe[1] - f[1]) == strlen(gem5_names[s]) &&
		    !memcmp(f[1], gem5_names[s], (size_t)(fe[1] - f[1])))
			st = s;
	uint64_t tick;
	if (st < 0) {
		return 0;  /* e.g. a newer gem5's extra record kinds */
	}
	if (parse_u64(f[2], fe[2], &tick) < 0)
		goto bad;
	if (st == ST_F) {
		uint64_t seq;
		int rc;
		if (nf < 6 || parse_u64(f[5], fe[5], &seq) < 0)
			goto bad;
		if ((rc = finish_current(c, cpu)) < 0)
			return rc;
		cpu = &c->cpus[ci];
		struct g5insn *in = calloc(1, sizeof *in);
		if (!in)
			return -TK_E_NOMEM;
		in->seq = seq;
		in->cpu = (uint32_t)ci;
		in->line = lineno;
		in->tick[ST_F] = tick;
		const char *d = nf >= 7 ? f[6] : e;
		while (d < e && (*d == ' ' || *d == '\t'))
			d++;
		size_t alen = (size_t)(fe[3] - f[3]), dlen = (size_t)(e - d);
		in->label = malloc(alen + dlen + 3);
		if (!in->label) {
			free(in);
			return -TK_E_NOMEM;
		}
		memcpy(in->label, f[3], alen);
		memcpy(in->label + alen, ": ", 2);
		memcpy(in->label + alen + 2, d, dlen);
		in->label[alen + 2 + dlen] = 0;
		cpu->cur = in;
		return 0;
	}
	if (!cpu->cur) {
		g5diag(c, lineno, 1, "%s record without a fetch record before it; line skipped",
		       gem5_names[st]);
		c->res->skipped_lines++;
		return 0;
	}
	cpu->cur->tick[st] = tick;
	if (st == ST_RT) {
		cpu->cur->complete = 1;
		return finish_current(c, cpu);
	}
	return 0;
bad:
	g5diag(c, lineno, 1, "malformed O3PipeView record; line skipped");
	c->res->skipped_lines++;
	return 0;
}

int tk_gem5_to_kanata(struct tk_input *input, struct tk_buf *out, const struct tk_gem5_opts *opts,
		      struct tk_gem5_result *res)
{
	struct conv c = { .out = out, .res = res };
	size_t cap = (size_t)1 << 20, len = 0, maxline = (size_t)1 << 20;
	char *buf;
	uint64_t lineno = 0;
	int rc = 0, skipping = 0;
	long got;

	memset(res, 0, sizeof *res);
	if (opts)
		memcpy(&c.o, opts, opts->sz < sizeof c.o ? opts->sz : sizeof c.o);
	if (c.o.window < 16384)
		c.o.window = 16384;
	c.tpc = c.o.ticks_per_cycle;
	res->ticks_per_cycle = c.tpc;
	if (!(buf = malloc(cap)))
		return -TK_E_NOMEM;
	for (;;) {
		got = tk_input_read(input, buf + len, cap - len);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		size_t end = len + (size_t)got, start = 0;
		char *nl;
		while ((nl = memchr(buf + start, '\n', end - start))) {
			lineno++;
			if (!skipping && (rc = line(&c, buf + start, nl, lineno)) < 0)
				goto out;
			skipping = 0;
			start = (size_t)(nl - buf) + 1;
		}
		len = end - start;
		memmove(buf, buf + start, len);
		if (len >= maxline) {
			if (!skipping) {
				g5diag(&c, lineno + 1, 1, "line longer than 1 MiB; skipped");
				res->skipped_lines++;
			}
			skipping = 1;
			len = 0;
		}
		if (got == 0) {
			if (len && !skipping && tk_input_cut(input, NULL) == TK_INPUT_CUT) {
				/* the compressed data was cut inside this line: what is left of it
				 * would read as another tick ("1477" of "14770"), and the clock
				 * period is their common divisor */
				g5diag(&c, ++lineno, 1, "line cut short where the compressed data "
				       "ends; skipped");
				res->skipped_lines++;
			} else if (len && !skipping && (rc = line(&c, buf, buf + len, ++lineno)) < 0) {
				goto out;
			}
			break;
		}
	}
	for (size_t k = 0; k < c.ncpus; k++)
		if ((rc = finish_current(&c, &c.cpus[k])) < 0)
			goto out;
	detect_tpc(&c);
	while (c.nseq)
		if ((rc = schedule(&c, pop_next(&c))) < 0)
			goto out;
	if (!c.w && !(c.w = tk_kanata_writer_new(out, 0, &rc)))
		goto out;
	rc = drain_events(&c, INT64_MAX);
out:
	if (rc < 0 && rc != -TK_E_NOMEM && rc != -TK_E_IO)
		g5diag(&c, lineno, 1, "conversion stopped: %s", tk_strerror(rc));
	while (c.nev) {
		struct g5ev e = ev_pop(&c);
		if (--e.in->pending == 0)
			insn_free(e.in);
	}
	for (size_t k = 0; k < c.ncpus; k++) {
		while (c.cpus[k].nseq)
			insn_free(seq_pop(&c.cpus[k]));
		if (c.cpus[k].cur)
			insn_free(c.cpus[k].cur);
		free(c.cpus[k].seqheap);
	}
	free(c.cpus);
	free(c.evheap);
	tk_kanata_writer_free(c.w);
	free(buf);
	res->lines = lineno;
	return rc;
}
