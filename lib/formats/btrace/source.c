/* The source of tracekit branch traces (.tkbt): every thread's Intel PT stream against the
 * recorded modules (plus --elf/--raw), thread after thread (each split at its PSBs on the
 * flow decoder's workers inside tk_btrace_events). */
#include <stdlib.h>

#include "tracekit/internal/source.h"
#include "tracekit/btrace.h"
#include "tracekit/image.h"
#include "tracekit/symbolize.h"

/* where the recorded modules' files are found */
#define MODULES(s) { .sz = sizeof(struct tk_btrace_modules_opts), .elf = (s)->o.elf, \
		     .nelf = (s)->o.nelf, .module_path = (s)->o.module_path, \
		     .nmodule_path = (s)->o.nmodule_path, .quiet = (s)->o.quiet, .msg = (s)->o.msg, \
		     .ctx = (s)->o.ctx, .file = (s)->path }

struct btrace_src {
	struct tk_btrace *bt;
	struct tk_image *img;
	struct tk_gap_stats gaps;     /* of the decoded threads (and the container's damage) */
	int missing;                  /* recorded modules left out (their trace: gaps) */
	int skipped;                  /* its chunk left out of this run (TK_CHUNK_SKIP) */
};

static int btrace_open(struct tk_source *s)
{
	struct btrace_src *p = calloc(1, sizeof *p);
	int err = 0;

	if (!p)
		return -TK_E_NOMEM;
	s->state = p;
	if (!(p->bt = tk_btrace_open(s->data, s->len, NULL, &err))) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return err;
	}
	/* the --elf/--raw files, then the recorded modules */
	if (!(p->img = tk_image_new(&err)))
		return err;
	for (size_t i = 0; i < s->o.nelf; i++)
		if (tk_image_add_elf_arg(p->img, s->o.elf[i]) < 0) {
			TK_SRC_ERROR(s, s->o.elf[i], UINT64_MAX, "cannot load ELF file into the image");
			return -TK_E_IO;
		}
	for (size_t i = 0; i < s->o.nraw; i++)
		if (tk_image_add_raw_arg(p->img, s->o.raw[i]) < 0) {
			TK_SRC_ERROR(s, s->o.raw[i], UINT64_MAX, "cannot load raw file (want FILE:ADDR)");
			return -TK_E_IO;
		}
	p->missing = tk_btrace_load_modules(p->bt, &(struct tk_btrace_modules_opts)MODULES(s),
					    p->img, NULL);
	s->info.clock.ticks_per_second = s->o.has_tsc_hz ? s->o.tsc_hz : tk_btrace_info(p->bt)->tsc_hz;
	s->info.sequential = 1;
	s->info.sparse_time = 1;   /* TSC packets at transfers, none at direct calls */
	return 0;
}

static int btrace_symbols(struct tk_source *s, struct tk_sym *sym)
{
	tk_btrace_load_modules(((struct btrace_src *)s->state)->bt,
			       &(struct tk_btrace_modules_opts)MODULES(s), NULL, sym);
	return 0;
}

static int btrace_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	struct btrace_src *p = s->state;
	struct tk_btrace_events_opts eo = { .sz = sizeof eo, .image = p->img,
					    .nthreads = s->o.nthreads, .only_tid = s->o.only_tid,
					    .tid = s->o.tid };
	struct tk_sink sink = { 0 };
	int rc = c->begin(c->ctx, 0, NULL, &sink);

	if (rc == TK_CHUNK_SKIP)
		p->skipped = 1;
	else if (rc >= 0 && (rc = tk_btrace_events(p->bt, &eo, sink, &p->gaps)) < 0)
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
	if (rc >= 0 && c->merge)
		rc = c->merge(c->ctx, 0);
	return rc;
}

static void btrace_losses(struct tk_source *s, struct tk_losses *l)
{
	l->gaps = ((struct btrace_src *)s->state)->gaps;
}

static int btrace_report(struct tk_source *s)
{
	struct btrace_src *p = s->state;
	struct tk_losses l = { 0 };

	btrace_losses(s, &l);
	tk_losses_add(&l, &s->added);
	int lost = tk_gap_report(&l.gaps, "gap", s->path, s->o.msg, s->o.ctx);

	if (p->skipped)
		return 0;   /* another shard decoded it, and reports it */

	/* a recording that did not end (killed, or cut short) is missing its tail */
	return lost | !tk_btrace_info(p->bt)->complete | (p->missing > 0);
}

static void btrace_close(struct tk_source *s)
{
	struct btrace_src *p = s->state;

	tk_image_free(p->img);
	tk_btrace_free(p->bt);
	free(p);
}

const struct tk_source_ops tk_source_btrace = {
	.open = btrace_open, .symbols = btrace_symbols, .plan = tk_source_plan_streams,
	.run = btrace_run, .report = btrace_report, .losses = btrace_losses, .close = btrace_close,
};
