/* A sink on a thread of its own: a producer that cannot be cut into chunks (a Kanata log's
 * reader, whose instructions live across any seam) runs at the same time as its consumer
 * instead of taking turns with it on one thread. Events are copied, with the payloads that
 * are only valid during a call, into batches; a few batches wait at most, so memory does
 * not grow with the trace. The consumer sees the same events in the same order. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/internal/util.h"

#define RELAY_EVENTS 8192   /* events per batch (384 KiB) */
#define RELAY_WAITING 4     /* batches handed over and not yet taken */

struct batch {
	struct tk_event_vec v;  /* payloads copied */
	struct batch *next;
};

struct tk_relay {
	struct tk_sink sink;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *head, *tail; /* handed over, oldest first */
	size_t waiting;
	struct batch *spare;       /* taken and emptied */
	struct batch *cur;         /* the producer's */
	int err, closing, started;
};

static void batch_free(struct batch *b)
{
	if (b) {
		tk_event_vec_free(&b->v);
		free(b);
	}
}

static void *relay_main(void *arg)
{
	struct tk_relay *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->head && !r->closing)
			pthread_cond_wait(&r->cond, &r->lock);
		struct batch *b = r->head;
		if (!b)
			break;
		if (!(r->head = b->next))
			r->tail = NULL;
		r->waiting--;
		int err = r->err;
		pthread_mutex_unlock(&r->lock);
		if (!err)
			err = tk_event_vec_pass(&b->v, r->sink);
		tk_event_vec_drop(&b->v);   /* (handed on, or not after an error) */
		pthread_mutex_lock(&r->lock);
		if (err < 0 && !r->err)
			__atomic_store_n(&r->err, err, __ATOMIC_RELAXED);  /* read unlocked */
		b->next = r->spare;
		r->spare = b;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	if (tk_pool_timed())   /* the consumer's stage: in order */
		tk_pool_add_ordered(tk_thread_cpu());
	return NULL;
}

/* The producer's batch to the thread; the next one from the spares (or new). */
static int hand_over(struct tk_relay *r)
{
	struct batch *b = r->cur;
	int err;

	pthread_mutex_lock(&r->lock);
	while (!r->err && r->waiting >= RELAY_WAITING)
		pthread_cond_wait(&r->cond, &r->lock);
	if (!(err = r->err)) {
		b->next = NULL;
		if (r->tail)
			r->tail->next = b;
		else
			r->head = b;
		r->tail = b;
		r->waiting++;
		r->cur = r->spare;
		if (r->cur)
			r->spare = r->cur->next;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	if (err)
		return err;
	if (!r->cur && (!(r->cur = calloc(1, sizeof *r->cur)) ||
			tk_event_vec_reserve(&r->cur->v, RELAY_EVENTS) < 0)) {
		/* no batch to fill: every later call says so too */
		pthread_mutex_lock(&r->lock);
		if (!r->err)
			__atomic_store_n(&r->err, -TK_E_NOMEM, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&r->lock);
		return -TK_E_NOMEM;
	}
	return 0;
}

static int relay_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_relay *r = ctx;
	int err = __atomic_load_n(&r->err, __ATOMIC_RELAXED);

	if (err)
		return err;
	for (size_t i = 0; i < n;) {
		if (r->cur->v.n == RELAY_EVENTS && (err = hand_over(r)) < 0)
			return err;
		size_t m = RELAY_EVENTS - r->cur->v.n < n - i ? RELAY_EVENTS - r->cur->v.n : n - i;
		if ((err = tk_event_vec_add_thin(&r->cur->v, NULL, ev + i, m)) < 0)
			return err;
		i += m;
	}
	return 0;
}

struct tk_relay *tk_relay_new(struct tk_sink sink, int *err)
{
	struct tk_relay *r = calloc(1, sizeof *r);

	*err = -TK_E_NOMEM;
	if (!r)
		return NULL;
	r->sink = sink;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	if (!(r->cur = calloc(1, sizeof *r->cur)) ||
	    tk_event_vec_reserve(&r->cur->v, RELAY_EVENTS) < 0 ||
	    pthread_create(&r->thread, NULL, relay_main, r) != 0) {
		tk_relay_free(r);
		return NULL;
	}
	r->started = 1;
	*err = 0;
	return r;
}

struct tk_sink tk_relay_sink(struct tk_relay *r)
{
	return (struct tk_sink){ relay_events, r, NULL };
}

int tk_relay_finish(struct tk_relay *r)
{
	int err = r->cur && r->cur->v.n ? hand_over(r) : 0;

	pthread_mutex_lock(&r->lock);
	r->closing = 1;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (r->started)
		pthread_join(r->thread, NULL);
	r->started = 0;
	return r->err ? r->err : err;
}

void tk_relay_free(struct tk_relay *r)
{
	if (!r)
		return;
	if (r->started)
		tk_relay_finish(r);
	batch_free(r->cur);
	for (struct batch *b = r->head, *next; b; b = next) {
		next = b->next;
		batch_free(b);
	}
	for (struct batch *b = r->spare, *next; b; b = next) {
		next = b->next;
		batch_free(b);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}
