/* A helper thread for the memory work of a growing structure, done ahead of its owner on
 * another core: the kernel's zeroing of the pages a growing array will be written into,
 * the next (twice as large) table, the freeing of the table it replaced. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tracekit/internal/util.h"

enum { AH_POPULATE = 1, AH_FREE, AH_UNMAP, AH_TABLE };

struct ahead_task {
	int what;
	void *addr;
	size_t len;
};

/* Tasks posted when the queue is full are done by the owner (or dropped: a populate is a
 * hint), never waited for. */
#define AHEAD_TASKS 16

struct tk_ahead {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	struct ahead_task q[AHEAD_TASKS];
	size_t head, n;           /* queued, q[head] first */
	int small;                /* a populate, free or unmap taken off the queue runs */
	int stop;
	size_t table_len;         /* the table asked for (bytes; 0: none) */
	void *table;              /* ... once made (NULL while being made, or if it failed) */
	int table_pending;        /* asked for, not made yet (atomic: tk_ahead_table_ready) */
};

/* A table is zeroed this much at a time, what was queued meanwhile run between the
 * slices: the walk's 512 MiB table took the helper 0.3-0.7 s, in which the owner's next
 * nodes went unpopulated and its array's growth (tk_ahead_wait) waited for the table. */
#define TABLE_SLICE ((size_t)16 << 20)

static void populate(void *addr, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	const uintptr_t page = 4096;
	uintptr_t a = ((uintptr_t)addr + page - 1) & ~(page - 1);
	uintptr_t e = ((uintptr_t)addr + len) & ~(page - 1);

	/* pages faulted in writable, their contents kept: the owner may write them meanwhile */
	if (e > a)
		(void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
	(void)addr, (void)len;
#endif
}

/* The queue's first task, taken off it (lock held, the queue not empty). */
static struct ahead_task take(struct tk_ahead *a)
{
	struct ahead_task t = a->q[a->head];

	a->head = (a->head + 1) % AHEAD_TASKS;
	a->n--;
	return t;
}

/* Run T, a populate, free or unmap (lock held; dropped while it runs). */
static void run_small(struct tk_ahead *a, struct ahead_task t)
{
	a->small = 1;
	pthread_mutex_unlock(&a->lock);
	if (t.what == AH_POPULATE)
		populate(t.addr, t.len);
	else if (t.what == AH_FREE)
		free(t.addr);
	else
		tk_unmap(t.addr, t.len);
	pthread_mutex_lock(&a->lock);
	a->small = 0;
	pthread_cond_broadcast(&a->done);
}

/* A table of LEN zero bytes (lock held; dropped while it is made), the tasks queued
 * meanwhile run between its slices (only one table is asked for at a time: none of them
 * is another); NULL once the owner stops (a random walk's profile ended while its last
 * table, 512 MiB, was being made: 0.4 s more of the helper that nobody needed). The owner
 * reads it at random: on huge pages, one TLB miss a lookup less; the compaction huge
 * pages may cost is paid here, not there. */
static void *make_table(struct tk_ahead *a, size_t len)
{
	pthread_mutex_unlock(&a->lock);
	char *m = tk_malloc_huge(len);
	pthread_mutex_lock(&a->lock);
	for (size_t at = 0; m && at < len; at += TABLE_SLICE) {
		while (a->n)
			run_small(a, take(a));
		if (a->stop) {
			free(m);
			return NULL;
		}
		pthread_mutex_unlock(&a->lock);
		memset(m + at, 0, len - at < TABLE_SLICE ? len - at : TABLE_SLICE);
		pthread_mutex_lock(&a->lock);
	}
	return m;
}

static void *ahead_main(void *arg)
{
	struct tk_ahead *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (!a->n && !a->stop)
			pthread_cond_wait(&a->wake, &a->lock);
		if (!a->n)
			break;
		struct ahead_task t = take(a);
		if (t.what != AH_TABLE) {
			run_small(a, t);
			continue;
		}
		a->table = make_table(a, t.len);
		__atomic_store_n(&a->table_pending, 0, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&a->done);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

struct tk_ahead *tk_ahead_start(void)
{
	struct tk_ahead *a = calloc(1, sizeof *a);

	if (!a)
		return NULL;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->wake, NULL);
	pthread_cond_init(&a->done, NULL);
	if (pthread_create(&a->thread, NULL, ahead_main, a) != 0) {
		pthread_mutex_destroy(&a->lock);
		pthread_cond_destroy(&a->wake);
		pthread_cond_destroy(&a->done);
		free(a);
		return NULL;
	}
	return a;
}

/* Queue a task (with the lock held); 0 if the queue is full. */
static int post(struct tk_ahead *a, int what, void *addr, size_t len)
{
	if (a->n == AHEAD_TASKS)
		return 0;
	a->q[(a->head + a->n) % AHEAD_TASKS] = (struct ahead_task){ what, addr, len };
	a->n++;
	pthread_cond_signal(&a->wake);
	return 1;
}

void tk_ahead_populate(struct tk_ahead *a, void *addr, size_t len)
{
	pthread_mutex_lock(&a->lock);
	post(a, AH_POPULATE, addr, len);
	pthread_mutex_unlock(&a->lock);
}

void tk_ahead_free(struct tk_ahead *a, void *p)
{
	pthread_mutex_lock(&a->lock);
	int queued = post(a, AH_FREE, p, 0);
	pthread_mutex_unlock(&a->lock);
	if (!queued)
		free(p);
}

void tk_ahead_unmap(struct tk_ahead *a, void *p, size_t bytes)
{
	pthread_mutex_lock(&a->lock);
	int queued = post(a, AH_UNMAP, p, bytes);
	pthread_mutex_unlock(&a->lock);
	if (!queued)
		tk_unmap(p, bytes);
}

void tk_ahead_wait(struct tk_ahead *a)
{
	pthread_mutex_lock(&a->lock);
	/* (a table being made runs the queue between its slices: not waited for) */
	while (a->n || a->small)
		pthread_cond_wait(&a->done, &a->lock);
	pthread_mutex_unlock(&a->lock);
}

void tk_ahead_table(struct tk_ahead *a, size_t bytes)
{
	pthread_mutex_lock(&a->lock);
	if (!a->table_len && post(a, AH_TABLE, NULL, bytes)) {
		a->table_len = bytes;
		__atomic_store_n(&a->table_pending, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&a->lock);
}

void *tk_ahead_take_table(struct tk_ahead *a, size_t bytes)
{
	void *t = NULL, *other = NULL;

	pthread_mutex_lock(&a->lock);
	if (a->table_len) {
		/* the table's task only: populates queued after it are hints, not waited for */
		while (__atomic_load_n(&a->table_pending, __ATOMIC_ACQUIRE))
			pthread_cond_wait(&a->done, &a->lock);
		if (a->table_len == bytes)
			t = a->table;
		else
			other = a->table;
		a->table = NULL;
		a->table_len = 0;
	}
	pthread_mutex_unlock(&a->lock);
	free(other);
	return t;
}

int tk_ahead_table_ready(struct tk_ahead *a)
{
	return !__atomic_load_n(&a->table_pending, __ATOMIC_ACQUIRE);
}

void tk_ahead_stop(struct tk_ahead *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);   /* it empties the queue first */
	free(a->table);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->done);
	free(a);
}
