/* The source of tracekit branch traces (.tkbt): every thread's Intel PT stream against the
 * recorded modules (plus --elf/--raw), thread after thread, in parts (a few MB of the
 * container's pieces, joined) that are the chunks: decoded on the pool, each on one worker,
 * and merged in order with the seam repair of Intel PT's chunks. A trace of one part is
 * split at its PSBs on the flow decoder's workers instead. */
#include <pthread.h>
#include <stdlib.h>

#include "tracekit/internal/source.h"
#include "tracekit/btrace.h"
#include "tracekit/image.h"
#include "tracekit/symbolize.h"
#include "formats/btrace/internal.h"

/* where the recorded modules' files are found */
#define MODULES(s) { .sz = sizeof(struct tk_btrace_modules_opts), .elf = (s)->o.elf, \
		     .nelf = (s)->o.nelf, .module_path = (s)->o.module_path, \
		     .nmodule_path = (s)->o.nmodule_path, .quiet = (s)->o.quiet, .msg = (s)->o.msg, \
		     .ctx = (s)->o.ctx, .file = (s)->path }

/* A chunk: thread THREAD's part from piece NEXT on, at BASE in its stream. */
struct part {
	uint32_t thread;
	size_t next;
	uint64_t base, len;
};

/* A buffer parts are joined into, kept for the next part: one freed on a worker goes back
 * to the system (its arena is trimmed), and joining the next part faults every page in
 * again (at -j 2, 10,000 page faults more than -j 1 on a 174 MB trace). */
struct join_buf {
	uint8_t *buf;
	size_t cap;
};
#define SPARE_JOINS 16

struct btrace_src {
	struct tk_btrace *bt;
	struct tk_image *img;
	struct tk_gap_stats gaps;     /* of the decoded parts (and the container's damage) */
	int missing;                  /* recorded modules left out (their trace: gaps) */
	struct part *parts;           /* the plan (NULL: not made yet) */
	size_t nparts, part_bytes;
	int first_decoded;            /* the first part was decoded here (not another shard):
					 the container's damage and state are this run's to say */
	pthread_mutex_t lock;         /* of the spares */
	struct join_buf spare[SPARE_JOINS];
	size_t nspare;
};

static int btrace_open(struct tk_source *s)
{
	struct btrace_src *p = calloc(1, sizeof *p);
	int err = 0;

	if (!p)
		return -TK_E_NOMEM;
	s->state = p;
	pthread_mutex_init(&p->lock, NULL);
	struct tk_btrace_opts bo = { .sz = sizeof bo, .nthreads = s->o.nthreads };
	if (!(p->bt = tk_btrace_open(s->data, s->len, &bo, &err))) {
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
	s->info.sparse_time = 1;   /* TSC packets at transfers, none at direct calls */
	return 0;
}

static int btrace_symbols(struct tk_source *s, struct tk_sym *sym)
{
	tk_btrace_load_modules(((struct btrace_src *)s->state)->bt,
			       &(struct tk_btrace_modules_opts)MODULES(s), NULL, sym);
	return 0;
}

struct parts_plan {
	struct btrace_src *p;
	size_t cap;
};

static int add_part(void *ctx, size_t i, size_t next, uint64_t base, uint64_t len)
{
	struct parts_plan *pl = ctx;
	struct btrace_src *p = pl->p;

	if (p->nparts == pl->cap) {
		size_t nc = pl->cap ? 2 * pl->cap : 64;
		struct part *np = realloc(p->parts, nc * sizeof *np);
		if (!np)
			return -TK_E_NOMEM;
		p->parts = np;
		pl->cap = nc;
	}
	p->parts[p->nparts++] = (struct part){ (uint32_t)i, next, base, len };
	return 0;
}

/* The parts' size: BTRACE_PART_BYTES, or smaller for the workers to share a small trace
 * (eight parts each, at least 1 MiB); TK_IPT_CHUNK's size for tests. The events do not
 * depend on where parts are cut (each reads on to finish its last block). */
static size_t part_bytes(const struct tk_source *s, const struct btrace_src *p)
{
	unsigned nt = s->o.plan_workers ? s->o.plan_workers : s->o.nthreads;
	uint64_t total = 0;

	if (s->o.chunk_bytes)
		return s->o.chunk_bytes;
	if (nt <= 1)
		return BTRACE_PART_BYTES;
	for (size_t i = 0; i < tk_btrace_thread_count(p->bt); i++)
		total += tk_btrace_thread(p->bt, i)->stream_bytes;
	total /= 8 * (uint64_t)nt;
	return total > BTRACE_PART_BYTES ? BTRACE_PART_BYTES : total < (1 << 20) ? 1 << 20 : (size_t)total;
}

/* The parts of every thread (--tid: of one), as tk_btrace_events cuts them; a thread
 * without pieces has one empty part (where its cuts are said). */
static int make_parts(struct tk_source *s, struct btrace_src *p)
{
	struct parts_plan pl = { p, 0 };
	int rc = 0;

	if (p->parts)
		return 0;
	p->part_bytes = part_bytes(s, p);
	for (size_t i = 0; i < tk_btrace_thread_count(p->bt) && rc >= 0; i++)
		if (!s->o.only_tid || tk_btrace_thread(p->bt, i)->tid == s->o.tid)
			rc = btrace_thread_parts(p->bt, i, p->part_bytes, add_part, &pl);
	if (rc >= 0 && !p->parts)
		rc = add_part(&pl, 0, SIZE_MAX, 0, 0);   /* no thread: none */
	if (rc < 0) {
		free(p->parts);   /* no half plan for a later call */
		p->parts = NULL;
		p->nparts = 0;
	}
	return rc;
}

static int btrace_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	struct btrace_src *p = s->state;
	int rc = make_parts(s, p);

	*chunks = NULL;
	if (rc < 0 || !(*chunks = calloc(p->nparts, sizeof **chunks)))
		return rc < 0 ? rc : -TK_E_NOMEM;
	for (size_t k = 0; k < p->nparts; k++) {
		const struct part *pt = &p->parts[k];
		const struct tk_btrace_thread *th = tk_btrace_thread(p->bt, pt->thread);
		(*chunks)[k] = (struct tk_chunk){ pt->thread, th ? th->tid : 0, pt->base,
						  pt->base + pt->len };
	}
	*n = p->nparts;
	return 0;
}

static int decode_part(struct tk_source *s, size_t k, struct tk_sink sink, struct tk_gap_stats *gaps)
{
	struct btrace_src *p = s->state;
	const struct part *pt = &p->parts[k];

	if (k == 0) {
		/* the container's damage, once: with the first part (in any shard that has it) */
		tk_gap_stats_merge(gaps, tk_btrace_gaps(p->bt));
		p->first_decoded = 1;
	}
	if (pt->next == SIZE_MAX)
		return 0;
	/* one part: its PSB chunks on the flow decoder's workers; else the pool's */
	unsigned nthreads = p->nparts == 1 ? s->o.nthreads : 1;
	const struct tk_btrace_thread *th = tk_btrace_thread(p->bt, pt->thread);
	if (!th || pt->next >= th->pieces)   /* the thread's cuts alone */
		return btrace_part_events(p->bt, pt->thread, pt->next, p->part_bytes, p->img,
					  nthreads, sink, gaps, pt->base, NULL);
	struct join_buf jb = { 0 };
	pthread_mutex_lock(&p->lock);
	if (p->nspare)
		jb = p->spare[--p->nspare];
	pthread_mutex_unlock(&p->lock);
	struct btrace_joined j = { .end = pt->next };
	int rc = btrace_thread_part_into(p->bt, pt->thread, &j.end, p->part_bytes, &jb.buf, &jb.cap,
					 &j.len, &j.part_len);
	j.pt = jb.buf;
	if (rc >= 0)
		rc = btrace_part_events(p->bt, pt->thread, pt->next, p->part_bytes, p->img, nthreads,
					sink, gaps, pt->base, &j);
	pthread_mutex_lock(&p->lock);
	if (p->nspare < SPARE_JOINS) {
		p->spare[p->nspare++] = jb;
		jb.buf = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	free(jb.buf);
	return rc;
}

static int btrace_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	struct btrace_src *p = s->state;
	int rc = make_parts(s, p);

	if (rc >= 0)
		rc = tk_source_run_pool(s, p->nparts, decode_part, c, &p->gaps);
	while (p->nspare)
		free(p->spare[--p->nspare].buf);
	if (rc < 0)
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
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

	if (!p->first_decoded)
		return lost;   /* another shard decoded the first part, and says the rest */

	/* a recording that did not end (killed, or cut short) is missing its tail */
	return lost | !tk_btrace_info(p->bt)->complete | (p->missing > 0);
}

static void btrace_close(struct tk_source *s)
{
	struct btrace_src *p = s->state;

	tk_image_free(p->img);
	tk_btrace_free(p->bt);
	free(p->parts);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

const struct tk_source_ops tk_source_btrace = {
	.open = btrace_open, .symbols = btrace_symbols, .plan = btrace_plan,
	.run = btrace_run, .report = btrace_report, .losses = btrace_losses, .close = btrace_close,
};
