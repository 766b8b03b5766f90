/* Helpers of the formats' sources (tracekit/internal/source.h): one chunk per stream, and
 * chunks that are independent byte ranges run on the pool with seam repair. */
#include <stdlib.h>

#include "tracekit/internal/source.h"

int tk_source_plan_streams(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	*n = s->info.nstreams;
	if (!(*chunks = calloc(*n ? *n : 1, sizeof **chunks)))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < *n; i++)
		(*chunks)[i].stream = (uint32_t)i;
	return 0;
}

/* ---- chunks on the pool ------------------------------------------------------------- */
struct pool_run {
	struct tk_source *s;
	tk_source_chunk_fn decode;
	const struct tk_chunk_consumer *c;
	struct tk_gap_stats *part_gaps, *gaps;
};

static int pool_work(void *ctx, size_t i)
{
	struct pool_run *r = ctx;
	struct tk_sink sink = { 0 };
	int rc = r->c->begin(r->c->ctx, i, NULL, &sink);

	return rc < 0 || rc == TK_CHUNK_SKIP ? (rc < 0 ? rc : 0) : r->decode(r->s, i, sink, &r->part_gaps[i]);
}

static int pool_merge(void *ctx, size_t i)
{
	struct pool_run *r = ctx;
	int rc = r->c->redo ? r->c->redo(r->c->ctx, i, NULL, NULL) : 0;

	if (rc > 0) {
		/* decoded again into the consumer's sink; its gaps count once */
		struct tk_gap_stats again = { 0 };
		struct tk_sink sink = { 0 };

		if ((rc = r->c->redo(r->c->ctx, i, NULL, &sink)) >= 0)
			rc = r->decode(r->s, i, sink, &again);
	}
	tk_gap_stats_merge(r->gaps, &r->part_gaps[i]);
	if (rc >= 0 && r->c->merge)
		rc = r->c->merge(r->c->ctx, i);
	return rc;
}

int tk_source_run_pool(struct tk_source *s, size_t nchunks, tk_source_chunk_fn decode,
		       const struct tk_chunk_consumer *c, struct tk_gap_stats *gaps)
{
	struct pool_run r = { s, decode, c, calloc(nchunks ? nchunks : 1, sizeof *r.part_gaps),
			      gaps };
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = s->o.nthreads,
				   .caller_works = c->caller_decodes };
	int rc;

	if (!r.part_gaps)
		return -TK_E_NOMEM;
	rc = tk_pool_run(&po, nchunks, pool_work, pool_merge, &r);
	free(r.part_gaps);
	return rc;
}
