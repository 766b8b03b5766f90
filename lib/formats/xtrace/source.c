/* The source of Kunpeng xtrace traces: the instruction file with its snapshot file (found by
 * name, either may be named), chunks from snapshot to snapshot decoded on the pool. The
 * pair is opened by tk_xtrace_pair_open, which the commands use as well (a snapshot file
 * alone is theirs to read: info, dump). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracekit/internal/source.h"
#include "tracekit/xtrace.h"

struct xtrace_src {
	struct tk_source *s;
	struct tk_xtrace_pair pair;
	struct tk_gap_stats gaps;
};

/* Library messages name the file they are about ("snapshot file: ..." is the other one). */
static void xtrace_log(void *ctx, enum tk_log_level level, const char *msg)
{
	const struct tk_xtrace_pair *p = ctx;

	if (strncmp(msg, "snapshot file: ", 15) == 0 && p->snap_path) {
		tk_msg(p->msg, p->ctx, level, p->snap_path, UINT64_MAX, "%s", msg + 15);
		return;
	}
	tk_msg(p->msg, p->ctx, level, p->insn_path ? p->insn_path : p->path, UINT64_MAX, "%s", msg);
}

int tk_xtrace_pair_open(struct tk_xtrace_pair *p, const char *path, int snapfile,
			struct tk_input *in, const uint8_t *data, size_t len, tk_msg_fn msg,
			void *ctx)
{
	int rc, err = 0;

	memset(p, 0, sizeof *p);
	p->path = path;
	p->msg = msg;
	p->ctx = ctx;
	tk_xtrace_parse_name(path, &p->name);
	if (tk_xtrace_companion(path, p->other, sizeof p->other) == 0 &&
	    access(p->other, R_OK) == 0) {
		const uint8_t *d;
		size_t n;

		if ((rc = tk_input_open(&p->in2, p->other, NULL)) < 0 ||
		    (rc = tk_input_map(p->in2, &d, &n)) < 0) {
			tk_msg(msg, ctx, TK_LOG_ERROR, p->other, UINT64_MAX, "cannot read: %s",
			       tk_strerror(rc));
			tk_xtrace_pair_close(p);
			return rc;
		}
		if (snapfile)
			p->insn = d, p->n = n, p->insn_path = p->other;
		else
			p->snap = d, p->sn = n, p->snap_path = p->other;
	}
	if (snapfile)
		p->snap = data, p->sn = len, p->snap_path = path;
	else
		p->insn = data, p->n = len, p->insn_path = path;
	p->release = p->insn &&
		     tk_input_is_file_mapping(snapfile ? p->in2 : in, p->insn_path, p->n);
	tk_set_log(xtrace_log, p);
	if (!(p->t = tk_xtrace_new(p->insn, p->n, p->snap, p->sn, &err))) {
		tk_msg(msg, ctx, TK_LOG_ERROR, p->snap_path, 0, "not a snapshot file: no vector "
		       "length from 128 to 2048 bits fits any snapshot (%s)", tk_strerror(err));
		tk_xtrace_pair_close(p);
		return err;
	}
	return 0;
}

void tk_xtrace_pair_close(struct tk_xtrace_pair *p)
{
	tk_xtrace_free(p->t);
	if (p->in2)
		tk_input_free(p->in2);
	p->t = NULL;
	p->in2 = NULL;
}

static int xtrace_open(struct tk_source *s)
{
	struct xtrace_src *x = calloc(1, sizeof *x);
	struct tk_xtrace_pair *p;
	int rc;

	if (!x)
		return -TK_E_NOMEM;
	s->state = x;
	x->s = s;
	p = &x->pair;
	if ((rc = tk_xtrace_pair_open(p, s->path, s->info.format == TK_FMT_XTRACE_SNAP, s->in,
				      s->data, s->len, s->o.msg, s->o.ctx)) < 0)
		return rc;
	if (!p->insn) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "no instruction file beside this snapshot file");
		return -TK_E_NOT_FOUND;
	}
	s->info.size = p->n;
	s->info.track_label = p->name.hint == 13 ? "core" : "thread";
	s->info.path = p->insn_path;
	return 0;
}

static int xtrace_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	struct tk_xtrace_pair *p = &((struct xtrace_src *)s->state)->pair;

	*n = tk_xtrace_nchunks(p->t);
	if (!(*chunks = calloc(*n ? *n : 1, sizeof **chunks)))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < *n; i++) {
		size_t b, e;

		tk_xtrace_chunk(p->t, i, &b, &e);
		(*chunks)[i] = (struct tk_chunk){ 0, (uint32_t)p->name.id, b, e };
	}
	return 0;
}

static int decode(struct tk_source *s, size_t i, struct tk_sink sink, struct tk_gap_stats *gaps)
{
	struct tk_xtrace_pair *p = &((struct xtrace_src *)s->state)->pair;
	int rc = tk_xtrace_decode_chunk(p->t, i, (uint32_t)p->name.id, 0, sink, gaps);

	if (p->release) {
		size_t b, e;

		tk_xtrace_chunk(p->t, i, &b, &e);
		tk_release_pages(p->insn, b, e);
	}
	return rc;
}

static int xtrace_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	struct xtrace_src *x = s->state;

	return tk_source_run_pool(s, tk_xtrace_nchunks(x->pair.t), decode, c, &x->gaps);
}

static void xtrace_losses(struct tk_source *s, struct tk_losses *l)
{
	l->gaps = ((struct xtrace_src *)s->state)->gaps;
}

static int xtrace_report(struct tk_source *s)
{
	struct xtrace_src *x = s->state;
	const struct tk_xtrace_pair *p = &x->pair;
	int a = tk_gap_report(tk_xtrace_open_gaps(p->t), "bad snapshot",
			      p->snap_path ? p->snap_path : s->path, s->o.msg, s->o.ctx);
	struct tk_losses l = { 0 };

	xtrace_losses(s, &l);
	tk_losses_add(&l, &s->added);
	return a | tk_gap_report(&l.gaps, "damaged region", p->insn_path, s->o.msg, s->o.ctx);
}


static void xtrace_close(struct tk_source *s)
{
	struct xtrace_src *x = s->state;

	tk_xtrace_pair_close(&x->pair);
	free(x);
}

const struct tk_source_ops tk_source_xtrace = {
	.open = xtrace_open, .plan = xtrace_plan, .run = xtrace_run, .report = xtrace_report,
	.losses = xtrace_losses,
	.close = xtrace_close, .elf_bias = 1,
};
