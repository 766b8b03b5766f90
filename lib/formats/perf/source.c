/* The source of Intel PT inputs: a raw packet stream, or a perf.data file whose trace
 * queues are the streams (tk_perf_session). Each stream's chunks start at PSBs; they are
 * decoded on the flow decoder's workers (each with its walker and block cache) and merged
 * in order, stream after stream. */
#include <stdlib.h>

#include "tracekit/internal/source.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/perf.h"

struct ipt_src {
	struct tk_perf_session x;
	struct tk_ipt_flow_stats st;  /* of the streams decoded */
};

/* Most chunks past this size would leave the workers too few to share at the end. */
#define IPT_CHUNK_MAX ((size_t)16 << 20)

/* Stream I's flow options, its chunks cut for about sixteen per worker (the plan's:
 * plan_workers for a job of shards, so that all plan alike), at least the flow's default.
 * A profile merges each chunk's call tree into the total, and a real program's chunks
 * repeat the total's paths: fewer chunks, less merging (libLLVM's `profile -j 2` 1.525 ->
 * 1.408 s at 8 MiB: docs/PERFORMANCE.md, session 80). Per stream, as each stream is
 * decoded on its own (a perf.data queue's pool drains at its end). TK_IPT_CHUNK
 * (chunk_bytes) overrides it. */
static void stream_opts(const struct tk_source *s, const struct tk_perf_session *x, size_t i,
			struct tk_ipt_flow_opts *fo)
{
	unsigned nt = s->o.plan_workers ? s->o.plan_workers : s->o.nthreads ? s->o.nthreads : tk_cpu_count();

	tk_perf_session_flow_opts(x, i, fo);
	if (fo->chunk_bytes || nt <= 1)
		return;
	uint64_t per = x->s[i].len / (16 * (uint64_t)nt);
	if (per > TK_IPT_FLOW_CHUNK)
		fo->chunk_bytes = per > IPT_CHUNK_MAX ? IPT_CHUNK_MAX : (size_t)per;
}

static int ipt_open(struct tk_source *s)
{
	struct ipt_src *p = calloc(1, sizeof *p);
	const struct tk_source_opts *o = &s->o;
	struct tk_perf_session_opts so = {
		.sz = sizeof so, .code = 1, .quiet = o->quiet, .elf = o->elf, .nelf = o->nelf,
		.raw = o->raw, .nraw = o->nraw, .mtc_freq = o->mtc_freq, .nom_freq = o->nom_freq,
		.cpuid_15_eax = o->cpuid_15_eax, .cpuid_15_ebx = o->cpuid_15_ebx,
		.has_tsc_hz = o->has_tsc_hz, .tsc_hz = o->tsc_hz, .nthreads = o->nthreads,
		.chunk_bytes = o->chunk_bytes, .msg = o->msg, .ctx = o->ctx, .threads = 1,
		.filter = o->filter, .in = s->in, .cpu = o->ipt_cpu,
		.addr_filter = o->ipt_addr_filter,
	};
	int rc;

	if (!p)
		return -TK_E_NOMEM;
	if ((rc = tk_perf_session_open(&p->x, s->path, s->data, s->len,
				       s->info.format == TK_FMT_PERF, &so)) < 0) {
		free(p);
		return rc;
	}
	/* the --elf list as the session placed it (a kernel at its KASLR offset) */
	s->o.elf = (const char *const *)p->x.elf;
	s->o.nelf = p->x.nelf;
	s->state = p;
	s->info.nstreams = p->x.n;
	s->info.track_label = p->x.track_label;
	s->info.clock = tk_perf_session_clock(&p->x);
	s->info.sparse_time = 1;   /* times from timing packets between branches */
	return 0;
}

static int ipt_symbols(struct tk_source *s, struct tk_sym *sym)
{
	return tk_perf_session_symbols(&((struct ipt_src *)s->state)->x, sym);
}

static int ipt_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	const struct tk_perf_session *x = &((struct ipt_src *)s->state)->x;
	size_t total = 0, k = 0;

	*chunks = NULL;
	for (size_t i = 0; i < x->n; i++) {
		struct tk_ipt_flow_opts fo;
		int64_t m;

		stream_opts(s, x, i, &fo);
		if ((m = tk_ipt_flow_chunks(x->s[i].data, x->s[i].len, &fo, NULL, 0)) < 0)
			return (int)m;
		total += (size_t)m;
	}
	if (!(*chunks = calloc(total ? total : 1, sizeof **chunks)))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < x->n; i++) {
		struct tk_ipt_flow_opts fo;
		uint64_t *starts = malloc((total ? total : 1) * sizeof *starts);
		int64_t m;

		stream_opts(s, x, i, &fo);
		if (!starts || (m = tk_ipt_flow_chunks(x->s[i].data, x->s[i].len, &fo, starts,
						       total)) < 0) {
			free(starts);
			free(*chunks);
			*chunks = NULL;
			return -TK_E_NOMEM;
		}
		for (int64_t j = 0; j < m; j++)
			(*chunks)[k++] = (struct tk_chunk){
				(uint32_t)i, fo.track, starts[j],
				j + 1 < m ? starts[j + 1] : x->s[i].len };
		free(starts);
	}
	*n = k;
	return 0;
}

/* The flow decoder's chunk numbers are the stream's: the plan's are BASE on. */
struct ipt_run {
	const struct tk_chunk_consumer *c;
	size_t base;
};

static int run_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ipt_run *r = ctx;
	return r->c->begin(r->c->ctx, r->base + i, flow, sink);
}

static int run_merge(void *ctx, size_t i)
{
	struct ipt_run *r = ctx;
	return r->c->merge ? r->c->merge(r->c->ctx, r->base + i) : 0;
}

static int run_redo(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ipt_run *r = ctx;
	return r->c->redo(r->c->ctx, r->base + i, flow, sink);
}

static int run_done(void *ctx, struct tk_flow *flow)
{
	struct ipt_run *r = ctx;
	return r->c->done(r->c->ctx, flow);
}

static int ipt_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	struct ipt_src *p = s->state;
	struct tk_perf_session *x = &p->x;
	struct ipt_run r = { c, 0 };
	/* streams in the file's mapping (a raw trace; perf.data's AUX buffers read in place) */
	int release = s->in && tk_input_is_file_mapping(s->in, s->path, s->len);
	struct tk_ipt_flow_consumer fc = { sizeof fc, run_begin, NULL, run_merge, &r,
					   c->done ? run_done : NULL, c->redo ? run_redo : NULL,
					   .caller_decodes = c->caller_decodes };
	int rc = 0;

	for (size_t i = 0; i < x->n && rc >= 0; i++) {
		struct tk_ipt_flow_stats one = { 0 };
		struct tk_ipt_flow_opts fo;

		stream_opts(s, x, i, &fo);
		fo.release_read = release && x->s[i].data >= s->data &&
				  x->s[i].data + x->s[i].len <= s->data + s->len;
		rc = tk_ipt_flow_decode(x->s[i].data, x->s[i].len, &fo, &fc, &one);
		tk_ipt_flow_stats_add(&p->st, &one);
		x->s[i].gaps = one.gaps;
		r.base += one.chunks;
	}
	return rc;
}

static void ipt_losses(struct tk_source *s, struct tk_losses *l)
{
	struct ipt_src *p = s->state;

	l->gaps = p->st.gaps;
	l->insns = p->st.insns;
}

static int ipt_report(struct tk_source *s)
{
	struct ipt_src *p = s->state;
	struct tk_losses l = { 0 };

	ipt_losses(s, &l);
	tk_losses_add(&l, &s->added);
	return tk_perf_session_report(&p->x, s->path, &l.gaps, l.insns);
}

/* A thread's process: its names from its own files (processes whose code overlaps, as
 * two non-PIE programs, must not share them). */
static int ipt_track_process(struct tk_source *s, uint32_t track, uint32_t *pid, char *comm,
			     size_t n, size_t *proc)
{
	struct ipt_src *p = s->state;
	int rc = tk_perf_session_track(&p->x, track, proc, comm, n);

	if (rc == 0)
		*pid = p->x.procs[*proc].pid;
	return rc;
}

static int ipt_proc_symbols(struct tk_source *s, size_t proc, struct tk_sym *sym)
{
	return tk_perf_session_proc_symbols(&((struct ipt_src *)s->state)->x, proc, sym);
}

static void ipt_close(struct tk_source *s)
{
	struct ipt_src *p = s->state;

	tk_perf_session_close(&p->x);
	free(p);
}

const struct tk_source_ops tk_source_ipt = {
	.open = ipt_open, .symbols = ipt_symbols, .plan = ipt_plan, .run = ipt_run,
	.report = ipt_report, .losses = ipt_losses, .close = ipt_close, .track_process = ipt_track_process,
	.proc_symbols = ipt_proc_symbols,
};
