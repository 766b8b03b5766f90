/* Kanata -> neutral events (event.h), for consumers that do not know the format. */
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/internal.h"

struct tk_kanata_decoder {
	struct tk_kanata_reader *r;
	struct tk_event_batch batch;
	struct tk_gap_stats gaps;
	int rc;
	/* label text of the batch's label events, by slot: valid during the sink call */
	char labels[TK_EVENT_BATCH][KN_LABEL_KEEP + 1];
};

static uint64_t ev_time(const struct tk_kanata_decoder *d, int64_t cycle)
{
	int64_t first = tk_kanata_reader_counts(d->r)->first_cycle;
	return cycle > first ? (uint64_t)(cycle - first) : 0;
}

static struct tk_event *next(struct tk_kanata_decoder *d)
{
	struct tk_event *e;
	if (d->rc < 0)
		return NULL;
	e = tk_event_batch_next(&d->batch, &d->rc);
	if (e)
		memset(e, 0, sizeof *e);
	return e;
}

static void on_stage(void *ctx, const struct kn_insn *in, unsigned stage, int64_t start, int64_t end)
{
	struct tk_kanata_decoder *d = ctx;
	struct tk_event *e = next(d);
	(void)start;
	if (!e)
		return;
	e->kind = TK_EV_STAGE_END;
	e->time = ev_time(d, end);
	e->addr = (uint64_t)in->id;
	e->arg = stage;
	e->flags = kn_reader_stage(d->r, stage)->lane;
	e->track = (uint32_t)in->thread;
}

/* The instruction's type-0 label as a TK_TYPED_INSN_LABEL event. */
static void label(struct tk_kanata_decoder *d, const struct kn_insn *in, int64_t cycle)
{
	struct tk_event *e;
	if (!in->label_len || !(e = next(d)))
		return;
	char *text = d->labels[d->batch.n - 1];
	memcpy(text, in->label, in->label_len);
	e->kind = TK_EV_TYPED;
	e->flags = TK_TYPED_INSN_LABEL;
	e->time = ev_time(d, cycle);
	e->addr = (uint64_t)in->id;
	e->data = text;
	e->count = in->label_len;
	e->track = (uint32_t)in->thread;
}

static void on_done(void *ctx, const struct kn_insn *in, int flushed, int64_t rid, int64_t end)
{
	struct tk_kanata_decoder *d = ctx;
	label(d, in, end);
	struct tk_event *e = next(d);
	if (!e)
		return;
	e->kind = flushed ? TK_EV_FLUSH : TK_EV_RETIRE;
	e->time = ev_time(d, end);
	e->addr = (uint64_t)in->id;
	e->arg = flushed ? 0 : (uint64_t)rid;
	e->track = (uint32_t)in->thread;
}

static int on_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct tk_kanata_decoder *d = ctx;
	struct tk_event *e;
	const struct kn_insn *in;

	switch (c->kind) {
	case TK_KANATA_INSN:
		if (!(e = next(d)))
			return d->rc;
		e->kind = TK_EV_INSN_BEGIN;
		e->addr = (uint64_t)c->id;
		e->addr2 = (uint64_t)c->a;
		e->arg = (uint64_t)c->b;
		e->track = (uint32_t)c->b;
		break;
	case TK_KANATA_STAGE_BEGIN:
		if (!(in = kn_reader_find(d->r, c->id)) || !in->nopen || !(e = next(d)))
			return d->rc;
		/* the stage just opened is the last in the open list */
		e->kind = TK_EV_STAGE_BEGIN;
		e->addr = (uint64_t)c->id;
		e->arg = in->open[in->nopen - 1].stage;
		e->flags = in->open[in->nopen - 1].lane;
		e->track = (uint32_t)in->thread;
		break;
	case TK_KANATA_DEP:
		if (!(in = kn_reader_find(d->r, c->id)) || !(e = next(d)))
			return d->rc;
		e->kind = TK_EV_DEPENDENCY;
		e->addr = (uint64_t)c->id;
		e->addr2 = (uint64_t)c->a;
		e->arg = (uint64_t)c->b;
		e->track = (uint32_t)in->thread;
		break;
	default:
		return d->rc;
	}
	e->time = ev_time(d, c->cycle);
	return d->rc;
}

static void on_diag(void *ctx, const struct tk_kanata_diag *g)
{
	struct tk_kanata_decoder *d = ctx;
	struct tk_event *e;
	if (g->level != TK_LOG_ERROR)
		return;
	tk_gap_stats_add(&d->gaps, g->offset, 0);
	if (!(e = next(d)))
		return;
	e->kind = TK_EV_GAP;
	e->time = TK_TIME_NONE;
	e->arg = g->offset;
	e->count = 1;
	e->flags = TK_GAP_DECODE_ERROR;
}

struct tk_kanata_decoder *tk_kanata_decoder_new(struct tk_sink sink, int *err)
{
	struct tk_kanata_decoder *d = calloc(1, sizeof *d);
	if (!d) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = on_cmd,
					    .diag = on_diag, .ctx = d };
	if (!(d->r = tk_kanata_reader_new(&ro, err))) {
		free(d);
		return NULL;
	}
	struct kn_hooks h = { on_stage, on_done, d };
	kn_reader_set_hooks(d->r, &h);
	tk_event_batch_init(&d->batch, sink);
	*err = 0;
	return d;
}

void tk_kanata_decoder_free(struct tk_kanata_decoder *d)
{
	if (!d)
		return;
	tk_kanata_reader_free(d->r);
	free(d);
}

static void live_label(void *ctx, const struct kn_insn *in)
{
	struct tk_kanata_decoder *d = ctx;
	label(d, in, tk_kanata_reader_counts(d->r)->last_cycle);
}

/* After the reader's RC: the labels of instructions still in flight at the end (FINAL),
 * and every event so far delivered. */
static int settle(struct tk_kanata_decoder *d, int rc, int final)
{
	if (final && rc >= 0 && d->rc >= 0)
		kn_reader_live(d->r, live_label, d);
	if (d->rc < 0)
		return d->rc;
	if (rc < 0)
		return rc;
	return tk_event_batch_flush(&d->batch);
}

int tk_kanata_decode(struct tk_kanata_decoder *d, struct tk_input *in)
{
	return settle(d, tk_kanata_reader_run(d->r, in), 1);
}

int kn_decoder_feed(struct tk_kanata_decoder *d, const char *p, size_t n, int final)
{
	return settle(d, tk_kanata_reader_feed(d->r, p, n, final), final);
}

int tk_kanata_decode_bytes(struct tk_kanata_decoder *d, const char *p, size_t n, int final)
{
	return kn_decoder_feed(d, p, n, final);
}

const char *tk_kanata_decoder_stage(const struct tk_kanata_decoder *d, unsigned number,
				    const char **lane)
{
	if (number >= kn_reader_nstages(d->r)) {
		if (lane)
			*lane = NULL;
		return NULL;
	}
	const struct kn_name *s = kn_reader_stage(d->r, number);
	if (lane)
		*lane = kn_reader_lane(d->r, s->lane)->name;
	return s->name;
}

const struct tk_kanata_counts *tk_kanata_decoder_counts(const struct tk_kanata_decoder *d)
{
	return tk_kanata_reader_counts(d->r);
}

const struct tk_gap_stats *tk_kanata_decoder_gaps(const struct tk_kanata_decoder *d)
{
	return &d->gaps;
}
