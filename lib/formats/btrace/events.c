/* A branch trace's threads as neutral events, through the Intel PT flow decoder's public
 * API (the container holds one PT stream per thread). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/btrace.h"
#include "tracekit/event.h"
#include "tracekit/ipt_flow.h"
#include "formats/btrace/internal.h"

/* A gap the container itself shows (REASON) in thread TID's trace, at file offset OFF. */
static int cut(struct tk_sink sink, uint32_t tid, struct tk_gap_stats *gaps, uint64_t off,
	       unsigned reason)
{
	struct tk_event ev = { .time = TK_TIME_NONE, .arg = off, .track = tid, .kind = TK_EV_GAP,
			       .flags = (uint16_t)reason };
	if (gaps)
		tk_gap_stats_add(gaps, off, 0);
	return sink.events(sink.ctx, &ev, 1);
}

int btrace_part_events(const struct tk_btrace *bt, size_t i, size_t next, size_t max,
		       const struct tk_image *img, unsigned nthreads, struct tk_sink sink,
		       struct tk_gap_stats *gaps, uint64_t base, const struct btrace_joined *joined)
{
	const struct tk_btrace_thread *th = tk_btrace_thread(bt, i);
	int rc = 0;

	if (!th)
		return -TK_E_INVAL;
	/* the start of a ring snapshot (or lost first pieces), the end of a trace stopped
	 * at --max-size: data is missing there, never silently */
	int cut_start, cut_end;
	uint64_t end_off;
	btrace_thread_cuts(bt, i, &cut_start, &cut_end, &end_off);
	if (next == 0 && cut_start)
		rc = cut(sink, th->tid, gaps, th->first_offset, TK_GAP_WRAP);
	if (rc >= 0 && next < th->pieces) {
		/* the events' track: the recorded thread id */
		struct tk_ipt_flow_opts fo = { .sz = sizeof fo, .image = img, .nthreads = nthreads,
					       .track = th->tid };
		struct tk_ipt_flow_stats st;
		uint8_t *pt = NULL;
		size_t n;

		/* each part reads on into the next part's first piece to end its last block */
		if (joined) {
			n = joined->len;
			fo.part_end = joined->part_len;
			next = joined->end;
		} else {
			rc = btrace_thread_part(bt, i, &next, max, &pt, &n, &fo.part_end);
		}
		if (rc >= 0) {
			memset(&st, 0, sizeof st);
			rc = tk_ipt_flow_events(joined ? joined->pt : pt, n, &fo, sink, &st);
			free(pt);
			if (gaps) {
				/* offsets in the thread's whole stream, as dump shows them */
				for (uint64_t k = 0; k < st.gaps.count && k < TK_GAP_FIRST_OFFSETS; k++)
					st.gaps.first_offsets[k] += base;
				tk_gap_stats_merge(gaps, &st.gaps);
			}
		}
	}
	if (rc >= 0 && next >= th->pieces && cut_end)
		rc = cut(sink, th->tid, gaps, end_off, TK_GAP_TRUNCATED);
	return rc;
}

/* A part joined into a buffer kept for the next ones (no page faulted in again). */
struct join_slot {
	const struct tk_btrace *bt;
	size_t thread, next;      /* the part: its thread and first piece */
	size_t max;               /* its bytes at most (whole pieces) */
	uint8_t *buf;
	size_t cap;
	struct btrace_joined j;
	int rc;
};

static void *join_part(void *arg)
{
	struct join_slot *js = arg;

	js->j.end = js->next;
	js->rc = btrace_thread_part_into(js->bt, js->thread, &js->j.end, js->max, &js->buf,
					 &js->cap, &js->j.len, &js->j.part_len);
	js->j.pt = js->buf;
	return NULL;
}

/* With workers (-j N), a thread's next part is joined on a thread of its own while this
 * one decodes, into the other of two slots: joining copies every byte, 30 ms of a 174 MB
 * trace's timeline on the calling thread otherwise (5 % of it at -j 2). The helper is
 * started once and kept for the run's parts: a thread made for each part cost the calling
 * thread about 0.3 ms a part in this project's VMs (22 parts of libc's branch trace: 7 ms,
 * a third of its timeline's serial part at -j 2). */
struct events_run {
	const struct tk_btrace *bt;
	const struct tk_btrace_events_opts *o;
	struct tk_sink sink;
	struct tk_gap_stats *gaps;
	struct join_slot slot[2];
	unsigned cur;             /* the slot of the part to decode next */
	pthread_t helper;
	int started;              /* the helper runs (until STOP) */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct join_slot *job;    /* the slot the helper is to join or joins; NULL: idle */
	int stop;
	int ahead;                /* the helper is joining slot[cur] */
};

static void *helper_main(void *arg)
{
	struct events_run *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->job && !r->stop)
			pthread_cond_wait(&r->cv, &r->lock);
		if (!r->job)
			break;
		struct join_slot *js = r->job;
		pthread_mutex_unlock(&r->lock);
		join_part(js);
		pthread_mutex_lock(&r->lock);
		r->job = NULL;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* JS joined on the helper (started the first time): 1, or 0 if there is no helper. */
static int join_ahead(struct events_run *r, struct join_slot *js)
{
	if (!r->started) {
		pthread_mutex_init(&r->lock, NULL);
		pthread_cond_init(&r->cv, NULL);
		if (pthread_create(&r->helper, NULL, helper_main, r) != 0) {
			pthread_mutex_destroy(&r->lock);
			pthread_cond_destroy(&r->cv);
			return 0;
		}
		r->started = 1;
	}
	pthread_mutex_lock(&r->lock);
	r->job = js;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
	return 1;
}

static void join_wait(struct events_run *r)
{
	if (r->ahead) {
		pthread_mutex_lock(&r->lock);
		while (r->job)
			pthread_cond_wait(&r->cv, &r->lock);
		pthread_mutex_unlock(&r->lock);
	}
	r->ahead = 0;
}

static void helper_stop(struct events_run *r)
{
	join_wait(r);
	if (!r->started)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->helper, NULL);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cv);
	r->started = 0;
}

static int takes_thread(const struct tk_btrace_events_opts *o, const struct tk_btrace *bt,
			size_t i)
{
	return !o->only_tid || tk_btrace_thread(bt, i)->tid == o->tid;
}

static int part_events(void *ctx, size_t i, size_t next, uint64_t base, uint64_t len)
{
	struct events_run *r = ctx;
	struct join_slot *js = &r->slot[r->cur];

	(void)len;
	if (next >= tk_btrace_thread(r->bt, i)->pieces)   /* the thread's cuts alone */
		return btrace_part_events(r->bt, i, next, js->max, r->o->image, r->o->nthreads,
					  r->sink, r->gaps, base, NULL);
	int was_ahead = r->ahead;
	join_wait(r);
	if (!was_ahead || js->thread != i || js->next != next) {
		js->thread = i;
		js->next = next;
		join_part(js);
	}
	if (js->rc < 0)
		return js->rc;
	/* the next part joined meanwhile: this thread's, or the next thread's first (else each
	 * thread's first part is joined here while the workers wait) */
	struct join_slot *following = &r->slot[r->cur ^ 1];
	unsigned workers = r->o->nthreads ? r->o->nthreads : tk_cpu_count();
	size_t k = i;
	following->next = js->j.end;
	if (js->j.end >= tk_btrace_thread(r->bt, i)->pieces) {
		while (++k < tk_btrace_thread_count(r->bt) && !takes_thread(r->o, r->bt, k))
			;
		following->next = 0;
	}
	if (workers > 1 && k < tk_btrace_thread_count(r->bt) &&
	    following->next < tk_btrace_thread(r->bt, k)->pieces) {
		following->thread = k;
		r->ahead = join_ahead(r, following);
	}
	int rc = btrace_part_events(r->bt, i, next, js->max, r->o->image, r->o->nthreads,
				    r->sink, r->gaps, base, &js->j);
	if (r->ahead)
		r->cur ^= 1;
	return rc;
}

int tk_btrace_events(const struct tk_btrace *bt, const struct tk_btrace_events_opts *opts,
		     struct tk_sink sink, struct tk_gap_stats *gaps)
{
	struct tk_btrace_events_opts o = { 0 };
	if (!bt || !opts || !sink.events)
		return -TK_E_INVAL;
	memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	if (gaps)
		tk_gap_stats_merge(gaps, tk_btrace_gaps(bt));
	/* each thread's stream part by part, so memory does not grow with the trace */
	size_t max = o.part_bytes ? o.part_bytes : BTRACE_PART_BYTES;
	struct events_run r = { bt, &o, sink, gaps,
				{ { .bt = bt, .max = max }, { .bt = bt, .max = max } } };
	int rc = 0;
	for (size_t i = 0; i < tk_btrace_thread_count(bt) && rc >= 0; i++)
		if (takes_thread(&o, bt, i))
			rc = btrace_thread_parts(bt, i, max, part_events, &r);
	helper_stop(&r);
	free(r.slot[0].buf);
	free(r.slot[1].buf);
	return rc < 0 ? rc : 0;
}
