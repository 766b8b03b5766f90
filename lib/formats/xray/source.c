/* The source of LLVM XRay logs: chunks of buffers (cut where a buffer needs no state from
 * the one before), decoded on the workers of tk_xray_decode_chunks; names from the
 * instrumentation map. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/xray/internal.h"
#include "tracekit/internal/source.h"
#include "tracekit/xray.h"

struct xray_src {
	struct tk_xray *x;
	struct tk_xray_map *map;
};

static int xray_open(struct tk_source *s)
{
	struct xray_src *p = calloc(1, sizeof *p);
	struct stat st;
	int err;

	if (!p)
		return -TK_E_NOMEM;
	s->state = p;
	if (s->o.instr_map && !(p->map = tk_xray_map_load(s->o.instr_map, &err))) {
		TK_SRC_ERROR(s, s->o.instr_map, UINT64_MAX, "cannot load the instrumentation map: %s",
			     tk_strerror(err));
		return err;
	}
	/* a pipe or compressed file is read into memory, where giving pages back would lose
	 * the data */
	struct tk_xray_opts xo = {
		.sz = sizeof xo, .nthreads = s->o.nthreads, .max_func_id = tk_xray_map_max_id(p->map),
		.plan_workers = s->o.plan_workers,
		.release_input = strcmp(s->path, "-") != 0 && stat(s->path, &st) == 0 &&
				 S_ISREG(st.st_mode) && tk_input_compression(s->in) == TK_COMP_NONE,
		.in = s->in,
	};
	if (!(p->x = tk_xray_open(s->data, s->len, &xo, &err))) {
		TK_SRC_ERROR(s, s->path, err == -TK_E_TRUNCATED || err == -TK_E_BAD_FORMAT ? 0 : UINT64_MAX,
			     "not a readable XRay log: %s", tk_strerror(err));
		return err;
	}
	/* --tsc-hz: where the log's cycle frequency is wrong (the XRay runtime's guess from
	 * sysfs, 0 when it found none) */
	s->info.clock.ticks_per_second = s->o.has_tsc_hz ? s->o.tsc_hz
							 : tk_xray_header(p->x)->cycle_frequency;
	s->info.exact_seams = 1;
	s->info.functions_only = 1;
	return 0;
}

static int xray_symbols(struct tk_source *s, struct tk_sym *sym)
{
	return tk_xray_map_to_sym(((struct xray_src *)s->state)->map, sym);
}

static int xray_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	struct xray_src *p = s->state;
	uint64_t *begin, *end;
	uint32_t *thread;
	int rc = tk_xray_chunks(p->x, NULL, NULL, NULL, n);

	if (rc < 0)
		return rc;
	begin = malloc((*n + 1) * sizeof *begin);
	end = malloc((*n + 1) * sizeof *end);
	thread = malloc((*n + 1) * sizeof *thread);
	*chunks = calloc(*n + 1, sizeof **chunks);
	if (begin && end && thread && *chunks && (rc = tk_xray_chunks(p->x, begin, end, thread, n)) >= 0)
		for (size_t i = 0; i < *n; i++)
			(*chunks)[i] = (struct tk_chunk){ 0, thread[i], begin[i], end[i] };
	else if (rc >= 0)
		rc = -TK_E_NOMEM;
	free(begin);
	free(end);
	free(thread);
	return rc;
}

static int run_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	const struct tk_chunk_consumer *c = ctx;

	*consumer = NULL;
	return c->begin(c->ctx, chunk, NULL, sink);
}

static int run_merge(void *ctx, size_t chunk, void *consumer)
{
	const struct tk_chunk_consumer *c = ctx;

	(void)consumer;
	return c->merge ? c->merge(c->ctx, chunk) : 0;
}

static int xray_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	static const struct tk_xray_chunk_ops ops = { run_begin, run_merge };

	/* the chunks carry each thread's call depth across their seams themselves */
	return xr_decode_chunks(((struct xray_src *)s->state)->x, &ops, (void *)c, c->caller_decodes);
}

static void xray_losses(struct tk_source *s, struct tk_losses *l)
{
	const struct tk_xray_stats *st = tk_xray_stats(((struct xray_src *)s->state)->x);

	l->gaps = st->gaps;
	l->unmatched = st->orphan_exits;
}

static int xray_report(struct tk_source *s)
{
	struct tk_losses l = { 0 };

	xray_losses(s, &l);
	tk_losses_add(&l, &s->added);
	if (l.unmatched)
		TK_SRC_WARN(s, s->path, "%llu exits without their enters (the log does not hold "
			    "their calls' starts: wrapped away, or lost by the runtime)", (unsigned long long)l.unmatched);
	return tk_gap_report(&l.gaps, "damaged or lost region", s->path, s->o.msg, s->o.ctx);
}

/* Tracks are places in the thread table; users know the threads by id. */
static uint32_t xray_track_id(const struct tk_source *s, uint32_t track)
{
	const struct tk_xray_thread_info *ti = tk_xray_thread(((struct xray_src *)s->state)->x, track);

	return ti ? ti->tid : track;
}

static void xray_close(struct tk_source *s)
{
	struct xray_src *p = s->state;

	tk_xray_free(p->x);
	tk_xray_map_free(p->map);
	free(p);
}

const struct tk_source_ops tk_source_xray = {
	.open = xray_open, .symbols = xray_symbols, .plan = xray_plan, .run = xray_run,
	.report = xray_report, .losses = xray_losses, .close = xray_close, .track_id = xray_track_id,
	.no_dwarf = 1,
};

