/* The source of Kanata pipeline logs: chunks cut at the line seams the parallel statistics
 * use, decoded in order by one reader (a chunk's instructions may have begun in an earlier
 * one), each chunk's pipeline events (event.h) into its consumer's sink. Tracks are the
 * simulated threads; times are cycles from the log's first one. */
#include <stdlib.h>

#include "formats/kanata/internal.h"
#include "tracekit/internal/source.h"

struct kanata_src {
	struct tk_kanata_decoder *d;
	struct tk_sink cur;           /* the sink of the chunk being decoded */
};

/* The decoder's sink: the current chunk's. */
static int forward(void *ctx, const struct tk_event *ev, size_t n)
{
	struct kanata_src *p = ctx;

	return p->cur.events ? p->cur.events(p->cur.ctx, ev, n) : 0;
}

static int kanata_open(struct tk_source *s)
{
	struct kanata_src *p = calloc(1, sizeof *p);
	int err;

	if (!p)
		return -TK_E_NOMEM;
	s->state = p;
	if (!(p->d = tk_kanata_decoder_new((struct tk_sink){ forward, p }, &err)))
		return err;
	s->info.track_label = "thread";
	s->info.sequential = 1;
	return 0;
}

static int kanata_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	size_t cap = 1;

	for (size_t pos = 0; pos < s->len; pos = kn_line_seam((const char *)s->data, s->len, pos))
		cap++;
	if (!(*chunks = calloc(cap, sizeof **chunks)))
		return -TK_E_NOMEM;
	*n = 0;
	for (size_t pos = 0, end; pos < s->len; pos = end) {
		end = kn_line_seam((const char *)s->data, s->len, pos);
		(*chunks)[(*n)++] = (struct tk_chunk){ 0, 0, pos, end };
	}
	if (!*n)   /* an empty log is one empty chunk: the reader still says what is missing */
		(*chunks)[(*n)++] = (struct tk_chunk){ 0, 0, 0, 0 };
	return 0;
}

static int kanata_run(struct tk_source *s, const struct tk_chunk_consumer *c)
{
	struct kanata_src *p = s->state;
	struct tk_chunk *ch = NULL;
	size_t n = 0;
	int rc = kanata_plan(s, &ch, &n);

	for (size_t i = 0; rc >= 0 && i < n; i++) {
		if ((rc = c->begin(c->ctx, i, NULL, &p->cur)) < 0)
			break;
		rc = kn_decoder_feed(p->d, (const char *)s->data + ch[i].begin,
				     ch[i].end - ch[i].begin, i + 1 == n);
		if (rc >= 0)
			rc = c->merge(c->ctx, i);
	}
	p->cur = (struct tk_sink){ 0 };
	free(ch);
	return rc < 0 ? rc : 0;
}

static void kanata_losses(struct tk_source *s, struct tk_losses *l)
{
	l->gaps = *tk_kanata_decoder_gaps(((struct kanata_src *)s->state)->d);
}

static int kanata_report(struct tk_source *s)
{
	struct tk_losses l = { 0 };

	kanata_losses(s, &l);
	tk_losses_add(&l, &s->added);
	return tk_gap_report(&l.gaps, "skipped line", s->path, s->o.msg, s->o.ctx);
}

static void kanata_close(struct tk_source *s)
{
	struct kanata_src *p = s->state;

	if (!p)
		return;
	tk_kanata_decoder_free(p->d);
	free(p);
}

const struct tk_source_ops tk_source_kanata = {
	.open = kanata_open, .plan = kanata_plan, .run = kanata_run, .report = kanata_report,
	.losses = kanata_losses,
	.close = kanata_close,
};
