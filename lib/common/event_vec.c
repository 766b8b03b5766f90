/* Events held for their turn: the in-order merge of chunks decoded in parallel (the chunk
 * runner, Intel PT's event stream, XRay's and xtrace's timelines) and the batches of the
 * relay. */
#include <assert.h>
#include <stdint.h>
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
		if (cap > SIZE_MAX / sizeof(*e) / 2)
			return -TK_E_NOMEM;
		/* huge pages come whole: what rounding up to them adds is used, not copied later */
		if (cap * sizeof(*e) >= TK_HUGE_FROM)
			cap = ((cap * sizeof(*e) + TK_HUGE_PAGE - 1) & ~(TK_HUGE_PAGE - 1)) / sizeof(*e);
		/* a chunk's held events are fresh memory: on huge pages, one page fault per
		 * 2 MiB instead of 512 (each about 20 us in this project's VMs) */
		if (!(e = tk_realloc_huge(v->ev, v->n * sizeof(*e), cap * sizeof(*e))))
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

/* Kinds whose data points at COUNT bytes that live only during the sink call (event.h). */
static int has_payload(const struct tk_event *e)
{
	return (e->kind == TK_EV_CUSTOM || e->kind == TK_EV_TYPED) && e->data && e->count;
}

/* E's payload into V's bytes; E's data holds its offset + 1 (never NULL) until handed on:
 * the bytes may move as they grow. E's index goes on V's list of them, so that handing on
 * reads only those events again. */
static int keep_payload(struct tk_event_vec *v, struct tk_event *e)
{
	if (v->npay == v->cappay) {
		size_t cap = v->cappay ? 2 * v->cappay : 256;
		size_t *p = realloc(v->pay, cap * sizeof *p);
		if (!p)
			return -TK_E_NOMEM;
		v->pay = p;
		v->cappay = cap;
	}
	if (v->nbytes + e->count > v->capbytes) {
		size_t cap = v->capbytes ? v->capbytes : 4096;
		while (cap < v->nbytes + e->count)
			cap *= 2;
		char *p = realloc(v->bytes, cap);
		if (!p)
			return -TK_E_NOMEM;
		v->bytes = p;
		v->capbytes = cap;
	}
	memcpy(v->bytes + v->nbytes, e->data, e->count);
	e->data = (const void *)(uintptr_t)(v->nbytes + 1);
	v->nbytes += e->count;
	v->pay[v->npay++] = (size_t)(e - v->ev);
	return 0;
}

/* What was prepared, dropped (the events themselves kept). */
static void unprepare(struct tk_event_vec *v)
{
	if (v->prepared && v->prepared_for.drop)
		v->prepared_for.drop(v->prepared_for.ctx, v->prepared);
	v->prepared = NULL;
}

/* V's events from FIRST on (just kept): TO's work on them, while they are in the cache
 * (unless TO's thin wrote them past it, as the timeline's does on x86-64). */
static void prepare_more(struct tk_event_vec *v, const struct tk_sink *to, size_t first)
{
	if (v->unprepared || v->n == first)
		return;
	if (v->prepared ? v->nprepared != first || v->prepared_for.ctx != to->ctx : first != 0) {
		unprepare(v);   /* (not all of the chunk's events, or another sink's) */
		v->unprepared = 1;
		return;
	}
	v->prepared = to->prepare(to->ctx, v->prepared, v->ev + first, v->n - first);
	v->nprepared = v->n;
	v->prepared_for = *to;
	v->unprepared = !v->prepared;
	if (!v->lean || !v->prepared || !to->need_from)
		return;
	/* a lean hold keeps only what take will still need */
	size_t need = to->need_from(to->ctx, v->prepared), at = v->dropped + first;
	size_t drop = need == SIZE_MAX ? v->n - first : need > at ? need - at : 0;
	if (drop > v->n - first)
		drop = v->n - first;
	if (drop) {
		memmove(v->ev + first, v->ev + first + drop, (v->n - first - drop) * sizeof *v->ev);
		v->n -= drop;
		v->dropped += drop;
		v->nprepared = v->n;
	}
}

/* Whether TO can prepare a lean V's next events as they come, without their copy: V
 * keeps none so far (all prepared and not needed), and TO thins what it keeps. */
static int can_prepare_unkept(const struct tk_event_vec *v, const struct tk_sink *to)
{
	if (!v->lean || v->n || v->unprepared || !to->thin || !to->prepare || !to->take || !to->need_from)
		return 0;
	return v->prepared ? v->prepared_for.ctx == to->ctx && v->prepared_for.take == to->take :
			     v->dropped == 0;
}

/* EV[0..n) prepared by TO as they come (can_prepare_unkept), V keeping, thinned, only the
 * events from the cut on (need_from), at the cut's index: a chunk passed whole keeps
 * none. If TO gives up on the chunk's first events, all of them are kept for events(). */
static int prepare_unkept(struct tk_event_vec *v, const struct tk_sink *to, const struct tk_event *ev,
			  size_t n)
{
	size_t at = v->dropped, skip = 0;
	void *p = to->prepare(to->ctx, v->prepared, ev, n);

	v->prepared = p;
	if (p) {
		v->prepared_for = *to;
		size_t cut = to->need_from(to->ctx, p);
		if (cut >= at + n) {   /* none needed so far */
			v->dropped += n;
			return 0;
		}
		skip = cut > at ? cut - at : 0;
	} else if (at) {   /* given up past events not kept: take asks for them all again */
		v->unprepared = 1;
		v->dropped += n;
		return 0;
	} else {
		v->unprepared = 1;
	}
	int rc = tk_event_vec_reserve(v, n - skip);
	if (rc < 0) {
		unprepare(v);
		v->unprepared = 1;
		return rc;
	}
	v->n = to->thin(to->ctx, ev + skip, n - skip, v->ev);
	v->nprepared = v->n;
	v->dropped = at + skip;
	return 0;
}

int tk_event_vec_add_thin(struct tk_event_vec *v, const struct tk_sink *to, const struct tk_event *ev,
			  size_t n)
{
	int rc = 0;
	size_t first = v->n;

	if (v->lean && v->unprepared && v->dropped) {   /* (to be decoded again) */
		v->dropped += n;
		return 0;
	}
	if (to && can_prepare_unkept(v, to)) {
		if ((rc = prepare_unkept(v, to, ev, n)) < 0)
			return rc;
	} else {
		if ((rc = tk_event_vec_reserve(v, n)) < 0)
			return rc;
		if (to && to->thin) {
			v->n += to->thin(to->ctx, ev, n, v->ev + v->n);
		} else {
			memcpy(v->ev + v->n, ev, n * sizeof(*ev));
			v->n += n;
		}
		if (to && to->prepare && to->take)
			prepare_more(v, to, first);   /* (before the payloads: a lean V may drop them) */
	}
#ifdef TK_CHECKED
	for (size_t i = first; v->no_payloads && i < v->n; i++)
		assert(!has_payload(&v->ev[i]));
#endif
	for (size_t i = first; !v->no_payloads && i < v->n; i++) {
		if (has_payload(&v->ev[i]) && (rc = keep_payload(v, &v->ev[i])) < 0) {
			v->n = i;   /* no event with a payload it does not hold */
			unprepare(v);
			v->unprepared = 1;
			return rc;
		}
	}
	return 0;
}

int tk_event_vec_pass(struct tk_event_vec *v, struct tk_sink sink)
{
	int rc = 0;

	for (size_t k = 0; k < v->npay; k++) {
		struct tk_event *e = &v->ev[v->pay[k]];
		e->data = v->bytes + ((uintptr_t)e->data - 1);
	}
	/* what was prepared for this sink, on these very events */
	if (v->prepared && v->nprepared == v->n && v->prepared_for.ctx == sink.ctx &&
	    v->prepared_for.take == sink.take) {
		void *p = v->prepared;
		v->prepared = NULL;
		rc = sink.take(sink.ctx, v->ev, v->n, v->dropped, p);
	} else if (v->dropped) {
		rc = TK_SINK_AGAIN;   /* (events gone, and nothing prepared of them) */
	} else if (v->n) {
		rc = sink.events(sink.ctx, v->ev, v->n);
	}
	tk_event_vec_drop(v);
	return rc;
}

void tk_event_vec_drop(struct tk_event_vec *v)
{
	unprepare(v);
	v->unprepared = 0;
	v->n = v->nbytes = v->npay = v->dropped = 0;
}

int tk_event_hold_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_event_hold *h = ctx;

	return tk_event_vec_add_thin(&h->v, h->to, ev, n);
}

void tk_event_vec_free(struct tk_event_vec *v)
{
	unprepare(v);
	free(v->ev);
	free(v->bytes);
	free(v->pay);
	memset(v, 0, sizeof *v);
}

int tk_event_vec_flush(struct tk_event_vec *v, struct tk_sink sink)
{
	int rc = tk_event_vec_pass(v, sink);

	tk_event_vec_free(v);
	return rc;
}
