/* The source of Kunpeng xtrace traces: the instruction file with its snapshot file (found by
 * name, either may be named), chunks from snapshot to snapshot decoded on the pool. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracekit/internal/source.h"
#include "tracekit/xtrace.h"

struct xtrace_src {
	struct tk_source *s;
	struct tk_input *in2;         /* the companion file */
	const uint8_t *insn, *snap;
	size_t n, sn;
	const char *insn_path, *snap_path;
	char other[4096];
	struct tk_xtrace *t;
	struct tk_xtrace_name name;
	int release;                  /* insn is a file mapping: give read chunks' pages back */
	struct tk_gap_stats gaps;
};

/* Library messages name the file they are about ("snapshot file: ..." is the other one). */
static void xtrace_log(void *ctx, enum tk_log_level level, const char *msg)
{
	struct xtrace_src *p = ctx;
	const char *f = p->insn_path ? p->insn_path : p->s->path;

	if (strncmp(msg, "snapshot file: ", 15) == 0 && p->snap_path) {
		f = p->snap_path;
		msg += 15;
	}
	tk_msg(p->s->o.msg, p->s->o.ctx, level, f, UINT64_MAX, "%s", msg);
}

static int xtrace_open(struct tk_source *s)
{
	struct xtrace_src *p = calloc(1, sizeof *p);
	int snapfile = s->info.format == TK_FMT_XTRACE_SNAP, rc, err = 0;

	if (!p)
		return -TK_E_NOMEM;
	s->state = p;
	p->s = s;
	tk_xtrace_parse_name(s->path, &p->name);
	if (tk_xtrace_companion(s->path, p->other, sizeof p->other) == 0 &&
	    access(p->other, R_OK) == 0) {
		const uint8_t *d;
		size_t n;

		if ((rc = tk_input_open(&p->in2, p->other, NULL)) < 0 ||
		    (rc = tk_input_map(p->in2, &d, &n)) < 0) {
			TK_SRC_ERROR(s, p->other, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
			return rc;
		}
		if (snapfile)
			p->insn = d, p->n = n, p->insn_path = p->other;
		else
			p->snap = d, p->sn = n, p->snap_path = p->other;
	}
	if (snapfile)
		p->snap = s->data, p->sn = s->len, p->snap_path = s->path;
	else
		p->insn = s->data, p->n = s->len, p->insn_path = s->path;
	if (!p->insn) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "no instruction file beside this snapshot file");
		return -TK_E_NOT_FOUND;
	}
	p->release = tk_input_is_file_mapping(snapfile ? p->in2 : s->in, p->insn_path, p->n);
	tk_set_log(xtrace_log, p);
	if (!(p->t = tk_xtrace_new(p->insn, p->n, p->snap, p->sn, &err))) {
		TK_SRC_ERROR(s, p->snap_path, 0, "not a snapshot file: no vector length from 128 "
			     "to 2048 bits fits any snapshot (%s)", tk_strerror(err));
		return err;
	}
	s->info.size = p->n;
	s->info.track_label = p->name.hint == 13 ? "core" : "thread";
	s->info.path = p->insn_path;
	return 0;
}

static int xtrace_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	struct xtrace_src *p = s->state;

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
	struct xtrace_src *p = s->state;
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
	struct xtrace_src *p = s->state;

	return tk_source_run_pool(s, tk_xtrace_nchunks(p->t), decode, c, &p->gaps);
}

static int xtrace_report(struct tk_source *s)
{
	struct xtrace_src *p = s->state;
	int a = tk_gap_report(tk_xtrace_open_gaps(p->t), "bad snapshot",
			      p->snap_path ? p->snap_path : s->path, s->o.msg, s->o.ctx);

	return a | tk_gap_report(&p->gaps, "damaged region", p->insn_path, s->o.msg, s->o.ctx);
}

static void xtrace_close(struct tk_source *s)
{
	struct xtrace_src *p = s->state;

	tk_xtrace_free(p->t);
	if (p->in2)
		tk_input_free(p->in2);
	free(p);
}

const struct tk_source_ops tk_source_xtrace = {
	.open = xtrace_open, .plan = xtrace_plan, .run = xtrace_run, .report = xtrace_report,
	.close = xtrace_close, .elf_bias = 1,
};
