/* Kanata -> neutral events (event.h), for consumers that do not know the format. */
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/internal.h"
#include "tracekit/internal/util.h"

struct tk_kanata_decoder {
	struct tk_kanata_reader *r;
	struct tk_event_batch batch;
	struct tk_gap_stats gaps;
	int rc;
	unsigned jobs;               /* tk_kanata_decode: chunks parsed on JOBS threads */
	size_t chunk_bytes;
	struct tk_progress *progress;
	/* a chunk of a parallel decode (tk_kanata_decode at -j N), parsed from its known start:
	 * its events held, their times counted from the log's first cycle FIRST */
	int chunk;
	struct tk_event_vec held;
	/* a chunk whose events only the merging thread reads (no prepare on its worker): each
	 * event made in PEND, then streamed to its slot PEND_AT past the cache (stream_pend) */
	int stream;
	struct tk_event pend, *pend_at;
	int64_t first;
	const struct tk_sink *prep;  /* the sink preparing them (up to PREP_UPTO), or NULL */
	size_t prep_upto;
	/* its sink reads none of them past its prepare (tk_sink.need_from): those are not
	 * kept, held.dropped of them (the chunk's index of held.ev[0]) */
	int bare;
	unsigned seed_lanes, seed_stages;   /* the names its reader began with */
	struct kn_gap { size_t at; uint64_t off; } *gaps_at;   /* its gap events, in order */
	size_t ngaps, cap_gaps;
	struct label_block *label_blocks; /* its label events' text (never moved) */
	void *prepared;              /* the sink's work on its held events, done ahead */
	struct tk_sink prepared_for; /* (the sink that did it) */
	/* label text of the batch's label events, by slot: valid during the sink call */
	char (*labels)[KN_LABEL_KEEP + 1];
};

#define LABEL_BLOCK ((size_t)64 << 10)
struct label_block {
	struct label_block *next;
	size_t used;
	char text[LABEL_BLOCK];
};

static uint64_t time_of(int64_t cycle, int64_t first)
{
	return cycle > first ? (uint64_t)(cycle - first) : 0;
}

static uint64_t ev_time(const struct tk_kanata_decoder *d, int64_t cycle)
{
	return time_of(cycle, d->chunk ? d->first : tk_kanata_reader_counts(d->r)->first_cycle);
}

#define HELD_AHEAD 32
/* Events prepared at a time, while the lines they are in are still in the cache */
#define PREPARE_BLOCK 64

static void prepare_held(struct tk_kanata_decoder *d, size_t b);

/* The chunk's events so far (the index of the next). */
static size_t chunk_events(const struct tk_kanata_decoder *d)
{
	return d->held.dropped + d->held.n;
}

/* A chunk that keeps none of its events: those prepared let go, and their labels' text
 * (the block stays in the cache: the next one goes there; fresh label blocks were most of
 * a report's page faults at -j 2). */
static void drop_prepared(struct tk_kanata_decoder *d)
{
	struct label_block *b = d->label_blocks;

	d->held.dropped += d->held.n;
	d->held.n = d->prep_upto = 0;
	if (!b)
		return;
	while (b->next) {
		struct label_block *x = b->next;
		b->next = x->next;
		free(x);
	}
	b->used = 0;
}

/* The event made last into its slot, streamed (whole lines, not read first): the slots'
 * lines were last read on the merging thread's core, and a store into them took each
 * line back from there first (the Kanata timeline at -j 2: the parse a third slower than
 * at -j 1 on far vCPUs). A fence orders them before the merge reads (stream_end). */
static inline void stream_pend(struct tk_kanata_decoder *d)
{
	struct tk_event *out = d->pend_at;

	if (!out)
		return;
	d->pend_at = NULL;
	tk_event_stream(out, &d->pend, d->pend.time);
}

static void stream_end(struct tk_kanata_decoder *d)
{
	stream_pend(d);
	tk_stream_fence();
}

/* The next event's slot: a chunk's written in place where it is held (or made in
 * D->pend first: D->stream). */
static struct tk_event *next(struct tk_kanata_decoder *d)
{
	struct tk_event *e;
	if (d->rc < 0)
		return NULL;
	if (d->chunk && d->stream) {
		stream_pend(d);   /* (before the room may move) */
		if (d->held.n == d->held.cap && (d->rc = tk_event_vec_reserve(&d->held, 1)) < 0)
			return NULL;
		d->pend_at = &d->held.ev[d->held.n++];
		e = &d->pend;
	} else if (d->chunk) {
		/* (the events made so far are whole: the sink's work on the last block now) */
		if (d->prep && d->held.n - d->prep_upto >= PREPARE_BLOCK) {
			prepare_held(d, d->held.n);
			if (d->bare)
				drop_prepared(d);
		}
		if (d->held.n == d->held.cap && (d->rc = tk_event_vec_reserve(&d->held, 1)) < 0)
			return NULL;
		e = &d->held.ev[d->held.n++];
		/* held events (megabytes a chunk) go where no line is in the cache: the line
		 * HELD_AHEAD events on asked for now, to be written (report -j 2: 5 % fewer
		 * samples, the parse's 10 %) */
		if (d->held.cap - d->held.n > HELD_AHEAD)
			__builtin_prefetch(e + HELD_AHEAD, 1, 3);
	} else {
		e = tk_event_batch_next(&d->batch, &d->rc);
	}
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

/* A chunk's room for N bytes of label text, kept until the decoder is freed. */
static char *label_room(struct tk_kanata_decoder *d, size_t n)
{
	struct label_block *b = d->label_blocks;

	if (!b || b->used + n > LABEL_BLOCK) {
		if (!(b = malloc(sizeof *b)))
			return NULL;
		b->next = d->label_blocks;
		b->used = 0;
		d->label_blocks = b;
	}
	b->used += n;
	return b->text + b->used - n;
}

/* The instruction's type-0 label as a TK_TYPED_INSN_LABEL event. */
static void label(struct tk_kanata_decoder *d, const struct kn_insn *in, int64_t cycle)
{
	struct tk_event *e;
	if (!in->label_len || !(e = next(d)))
		return;
	e->kind = TK_EV_TYPED;
	e->flags = TK_TYPED_INSN_LABEL;
	e->time = ev_time(d, cycle);
	e->addr = (uint64_t)in->id;
	e->count = in->label_len;
	e->track = (uint32_t)in->thread;
	char *text = d->chunk ? label_room(d, in->label_len) : d->labels[d->batch.n - 1];
	if (!text) {
		d->rc = -TK_E_NOMEM;
		d->held.n--;
		d->pend_at = NULL;
		return;
	}
	memcpy(text, in->label, in->label_len);
	e->data = text;
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
	if (d->chunk) {   /* counted among the gaps at the merge, in order */
		if (d->ngaps == d->cap_gaps) {
			size_t cap = d->cap_gaps ? 2 * d->cap_gaps : 64;
			struct kn_gap *p = realloc(d->gaps_at, cap * sizeof *p);
			if (!p) {
				d->rc = -TK_E_NOMEM;
				return;
			}
			d->gaps_at = p;
			d->cap_gaps = cap;
		}
		d->gaps_at[d->ngaps++] = (struct kn_gap){ chunk_events(d) - 1, g->offset };
	}
	e->kind = TK_EV_GAP;
	e->time = TK_TIME_NONE;
	e->arg = g->offset;
	e->count = 1;
	e->flags = TK_GAP_DECODE_ERROR;
}

static int settle(struct tk_kanata_decoder *d, int rc, int final);

/* The events a chunk has made so far (the frags' marks). */
static size_t made(void *ctx)
{
	return chunk_events(ctx);
}

static struct tk_kanata_decoder *decoder_new(struct tk_sink sink, int chunk, int *err)
{
	struct tk_kanata_decoder *d = calloc(1, sizeof *d);
	if (!d) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = on_cmd,
					    .diag = on_diag, .ctx = d };
	if ((!chunk && !(d->labels = malloc(TK_EVENT_BATCH * sizeof *d->labels))) ||
	    !(d->r = tk_kanata_reader_new(&ro, err))) {
		*err = d->labels || chunk ? *err : -TK_E_NOMEM;
		free(d->labels);
		free(d);
		return NULL;
	}
	struct kn_hooks h = { on_stage, on_done, d, chunk ? made : NULL };
	kn_reader_set_hooks(d->r, &h);
	d->chunk = chunk;
	tk_event_batch_init(&d->batch, sink);
	*err = 0;
	return d;
}

struct tk_kanata_decoder *tk_kanata_decoder_new(struct tk_sink sink, int *err)
{
	return decoder_new(sink, 0, err);
}

void tk_kanata_decoder_free(struct tk_kanata_decoder *d)
{
	if (!d)
		return;
	if (d->prepared && d->prepared_for.drop)
		d->prepared_for.drop(d->prepared_for.ctx, d->prepared);
	tk_kanata_reader_free(d->r);
	tk_event_vec_free(&d->held);
	free(d->gaps_at);
	free(d->labels);
	while (d->label_blocks) {
		struct label_block *b = d->label_blocks;
		d->label_blocks = b->next;
		free(b);
	}
	free(d);
}

void tk_kanata_decoder_set_jobs(struct tk_kanata_decoder *d, unsigned jobs, size_t chunk_bytes,
				struct tk_progress *progress)
{
	d->jobs = jobs;
	d->chunk_bytes = chunk_bytes;
	d->progress = progress;
}

/* ---- a chunk of a parallel decode (tk_kanata_decode at -j N) -------------------------------- */
struct tk_kanata_decoder *kn_decoder_chunk_new(int *err)
{
	return decoder_new((struct tk_sink){ 0 }, 1, err);
}

struct tk_kanata_reader *kn_decoder_reader(struct tk_kanata_decoder *d)
{
	return d->r;
}

void kn_decoder_swap_held(struct tk_kanata_decoder *d, struct tk_event_vec *v)
{
	struct tk_event_vec t = d->held;

	d->held = *v;
	*v = t;
}

static int can_prepare(const struct tk_sink *s)
{
	return s->prepare && s->take && s->take_in_parts;
}

/* Whether S reads none of a chunk's events past their prepare. */
static int keeps_none(const struct tk_sink *s)
{
	return can_prepare(s) && s->need_from && s->need_from(s->ctx, NULL) == SIZE_MAX;
}

int kn_decoder_reserve(struct tk_kanata_decoder *d, const struct tk_kanata_decoder *g, size_t n, int keep)
{
	/* (a chunk that keeps none of its events holds a block at a time: fresh huge pages
	 * for its room would be cleared for nothing) */
	if (!keep && keeps_none(&g->batch.sink))
		n = 2 * PREPARE_BLOCK;
	return n > d->held.n ? tk_event_vec_reserve(&d->held, n - d->held.n) : 0;
}

int kn_decoder_error(const struct tk_kanata_decoder *d)
{
	return d->rc;
}

/* Chunk D's held events [D->prep_upto, B) to its sink's prepare. */
static void prepare_held(struct tk_kanata_decoder *d, size_t b)
{
	const struct tk_sink *s = d->prep;

	if (b > d->prep_upto &&
	    !(d->prepared = s->prepare(s->ctx, d->prepared, d->held.ev + d->prep_upto, b - d->prep_upto)))
		d->prep = NULL;   /* (given up: the sink freed it) */
	d->prep_upto = b;
}

void kn_decoder_chunk_begin(const struct tk_kanata_decoder *g, struct tk_kanata_decoder *c, int64_t first,
			    int keep)
{
	const struct tk_sink *s = &g->batch.sink;

	c->first = first;
	c->prep = can_prepare(s) && !keep ? s : NULL;
	c->stream = !c->prep;
	c->bare = c->prep && keeps_none(s);
	c->prep_upto = 0;
	c->seed_lanes = kn_reader_nlanes(c->r);
	c->seed_stages = kn_reader_nstages(c->r);
	if (c->prep)
		c->prepared_for = *s;
}

void kn_decoder_chunk_parsed(struct tk_kanata_decoder *c)
{
	if (c->stream)
		stream_end(c);
}

void kn_decoder_chunk_done(struct tk_kanata_decoder *c)
{
	kn_decoder_chunk_parsed(c);   /* (if its parse did not: a second call does nothing) */
	if (c->prep)
		prepare_held(c, c->held.n);
	c->prep = NULL;
	if (c->bare)
		drop_prepared(c);
}

int kn_decoder_take_begin(struct tk_kanata_decoder *g, struct tk_kanata_decoder *c)
{
	if (!c->bare || !chunk_events(c))
		return 0;
	/* its names are G's by the same numbers if it added none to those it began with, or
	 * G has none past them (its new ones then come in the same order) */
	int same = (kn_reader_nlanes(c->r) == c->seed_lanes && kn_reader_nstages(c->r) == c->seed_stages) ||
		   (kn_reader_nlanes(g->r) == c->seed_lanes && kn_reader_nstages(g->r) == c->seed_stages);
	if (!c->prepared || !same)
		return 1;
	/* the first part, empty: where the sink refuses the chunk, it does so here */
	const struct tk_sink *s = &g->batch.sink;
	int rc = s->take(s->ctx, NULL, 0, 0, c->prepared);
	if (rc < 0 || rc == TK_SINK_AGAIN)
		c->prepared = NULL;   /* (the sink's take freed it) */
	return rc < 0 ? rc : rc == TK_SINK_AGAIN;
}

/* Chunk C's held events [A, B) to G's sink, stages and lanes by G's numbers (the maps,
 * when not NULL: in blocks that the sink reads while they are in the cache), after what G
 * made before them; their gaps counted after G's. */
static int pass_held(struct tk_kanata_decoder *g, struct tk_kanata_decoder *c, size_t a, size_t b,
		     const uint16_t *lane_map, const uint16_t *stage_map, size_t *gi)
{
	int rc = tk_event_batch_flush(&g->batch);
	struct tk_event *ev = c->held.ev;
	size_t block = !stage_map ? SIZE_MAX : TK_EVENT_BATCH;

	if (rc < 0)
		return g->rc = rc;
	for (; *gi < c->ngaps && c->gaps_at[*gi].at < b; ++*gi)
		tk_gap_stats_add(&g->gaps, c->gaps_at[*gi].off, 0);
	if (c->prepared) {
		/* what the sink prepared takes the place of these events */
		const struct tk_sink *s = &g->batch.sink;
		rc = s->take(s->ctx, c->bare ? NULL : ev + a, b - a, a, c->prepared);
		if (rc < 0 || rc == TK_SINK_AGAIN || b == chunk_events(c))
			c->prepared = NULL;   /* (the sink's take freed it) */
		if (rc == TK_SINK_AGAIN && c->bare)
			rc = -TK_E_INTERNAL;   /* (refused past its first part) */
		if (rc < 0)
			return g->rc = rc;
		if (rc != TK_SINK_AGAIN)
			return 0;
		rc = 0;   /* refused: the events after all */
	}
	if (c->bare && a < b)   /* (kn_decoder_take_begin said so before the merge) */
		return g->rc = -TK_E_INTERNAL;
	for (size_t x = a, y; x < b && rc >= 0; x = y) {
		y = b - x > block ? x + block : b;
		for (size_t i = x; stage_map && i < y; i++)
			if (ev[i].kind == TK_EV_STAGE_BEGIN || ev[i].kind == TK_EV_STAGE_END) {
				ev[i].arg = stage_map[ev[i].arg];
				ev[i].flags = lane_map[ev[i].flags];
			}
		if (g->batch.sink.events && (rc = g->batch.sink.events(g->batch.sink.ctx, ev + x, y - x)) < 0)
			g->rc = rc;
	}
	return rc;
}

int kn_decoder_merge(struct tk_kanata_decoder *g, struct tk_kanata_decoder *c,
		     const uint16_t *lane_map, const uint16_t *stage_map)
{
	size_t nf, at = 0, gi = 0, ns = kn_reader_nstages(c->r), nl = kn_reader_nlanes(c->r);
	const struct kn_frag *f = kn_reader_frags(c->r, &nf);
	int same = 1, rc = 0;

	for (size_t k = 0; k < ns && same; k++)
		same = stage_map[k] == k;
	for (size_t k = 0; k < nl && same; k++)
		same = lane_map[k] == k;
	const uint16_t *lmap = same ? NULL : lane_map, *smap = same ? NULL : stage_map;
	kn_decoder_chunk_done(c);   /* (if its worker did not) */
	if (c->prepared && !same) {   /* prepared in the chunk's own stage numbers */
		c->prepared_for.drop(c->prepared_for.ctx, c->prepared);
		c->prepared = NULL;
	}
	/* each command about an earlier chunk's instruction between the events made before
	 * and after it, as a reader in order would have made them */
	for (size_t k = 0; k < nf && rc >= 0; k++) {
		if ((rc = pass_held(g, c, at, f[k].mark, lmap, smap, &gi)) >= 0)
			rc = kn_reader_replay(g->r, &f[k], lane_map, c->r);
		at = f[k].mark;
	}
	if (rc >= 0)
		rc = pass_held(g, c, at, chunk_events(c), lmap, smap, &gi);
	tk_event_vec_drop(&c->held);
	return rc < 0 ? rc : g->rc;
}

int kn_decoder_finish(struct tk_kanata_decoder *g)
{
	return settle(g, 0, 1);
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

int kn_decoder_read(struct tk_kanata_decoder *d, struct tk_input *in)
{
	return settle(d, tk_kanata_reader_run(d->r, in), 1);
}

unsigned kn_decoder_jobs(const struct tk_kanata_decoder *d, size_t *chunk_bytes,
			 struct tk_progress **progress)
{
	*chunk_bytes = d->chunk_bytes ? d->chunk_bytes : KN_DECODE_CHUNK;
	*progress = d->progress;
	return d->jobs;
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
