/* Events held for their turn: the in-order merge of chunks decoded in parallel (the chunk
 * runner, Intel PT's event stream). */
#include <stdlib.h>
#include <string.h>

#include "tracekit/internal/util.h"

int tk_event_vec_reserve(struct tk_event_vec *v, size_t n)
{
	if (v->n + n > v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 4096;
		struct tk_event *e;

		while (cap < v->n + n)
			cap *= 2;
		if (!(e = realloc(v->ev, cap * sizeof(*e))))
			return -TK_E_NOMEM;
		v->ev = e;
		v->cap = cap;
	}
	return 0;
}

int tk_event_vec_add(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_event_vec *v = ctx;
	int rc = tk_event_vec_reserve(v, n);

	if (rc < 0)
		return rc;
	memcpy(v->ev + v->n, ev, n * sizeof(*ev));
	v->n += n;
	return 0;
}

int tk_event_vec_add_thin(struct tk_event_vec *v, const struct tk_sink *to, const struct tk_event *ev,
			  size_t n)
{
	if (!to->thin)
		return tk_event_vec_add(v, ev, n);
	int rc = tk_event_vec_reserve(v, n);
	if (rc >= 0)
		v->n += to->thin(to->ctx, ev, n, v->ev + v->n);
	return rc;
}

int tk_event_vec_flush(struct tk_event_vec *v, struct tk_sink sink)
{
	int rc = v->n ? sink.events(sink.ctx, v->ev, v->n) : 0;

	free(v->ev);
	memset(v, 0, sizeof *v);
	return rc;
}
