/* Worker pool: jobs run on N threads, results are merged on the caller's thread in job
 * order, with a bounded look-ahead window so memory does not grow with the job count. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

unsigned tk_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* ---- CPU accounting (tk_pool_times) ---------------------------------------------- */
static pthread_mutex_t times_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tk_pool_times times;
/* Per-job clocks only when someone will read them: in this VM a thread's CPU clock is a
 * system call (2.3 us), and a timeline's formatter read it twice per run, 3,800 times at
 * -j 2. */
static int timing;

void tk_pool_timing(int on)
{
	timing = on;
}

int tk_pool_timed(void)
{
	return timing;
}

double tk_thread_cpu(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Only the main thread's time outside pools is serial; a pool started on a worker is
 * inside that worker's time already. */
static int on_main_thread(void)
{
	return (pid_t)syscall(SYS_gettid) == getpid();
}

static void times_add(double *field, double seconds, size_t jobs)
{
	pthread_mutex_lock(&times_lock);
	*field += seconds;
	times.jobs += jobs;
	times.runs += jobs ? 1 : 0;
	pthread_mutex_unlock(&times_lock);
}

void tk_pool_add_ordered(double seconds)
{
	if (timing)
		times_add(&times.ordered_cpu, seconds, 0);
}

void tk_pool_times(struct tk_pool_times *t)
{
	pthread_mutex_lock(&times_lock);
	*t = times;
	pthread_mutex_unlock(&times_lock);
}

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t work_cv;   /* workers wait for a job to be startable */
	pthread_cond_t done_cv;   /* the merger waits for the next job to finish */
	size_t njobs, window;
	size_t next_job;          /* next job to hand out */
	size_t next_merge;        /* next job to merge */
	unsigned char *done;      /* per job: finished */
	int err;                  /* first error */
	unsigned idle;            /* workers waiting for the window */
	int merger_waits;         /* the merger waits for the next job */
	unsigned running;         /* workers sent here that have not left */
	tk_pool_work_fn work;
	void *ctx;
};

/* Wake-ups go out after the lock is let go, and only to a thread that waits: woken while
 * the waker still holds the lock, a thread may only go to sleep again on the lock; and on
 * a VM each wake-up of a sleeping thread is an interrupt sent to the other CPU (with the
 * timeline's likewise: a branch trace's timeline at -j 2 switched threads 10,000 times,
 * now 7,000). */
static void work_for(struct pool *p)
{
	double c0 = timing ? tk_thread_cpu() : 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->err && p->next_job < p->njobs &&
		       p->next_job >= p->next_merge + p->window) {
			p->idle++;
			pthread_cond_wait(&p->work_cv, &p->lock);
			p->idle--;
		}
		if (p->err || p->next_job >= p->njobs)
			break;
		size_t i = p->next_job++;
		pthread_mutex_unlock(&p->lock);
		int rc = p->work(p->ctx, i);
		pthread_mutex_lock(&p->lock);
		if (rc < 0 && !p->err)
			p->err = rc;
		p->done[i] = 1;
		/* the merger waits for the next job only */
		if (p->merger_waits && (i == p->next_merge || p->err)) {
			pthread_mutex_unlock(&p->lock);
			pthread_cond_signal(&p->done_cv);
			pthread_mutex_lock(&p->lock);
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (timing)
		times_add(&times.worker_cpu, tk_thread_cpu() - c0, 0);
}

/* ---- Threads kept between pools ----------------------------------------------------
 * A pool's workers are taken from threads parked by earlier pools and park again when it
 * ends. A new thread costs its creator 50-300 us here, and glibc gives an ended thread's
 * stack pages back, so the next one faults them in again (a 2-thread pool that touches 64
 * KiB of stack: 0.5 ms to start and join); XRay's `profile` runs seven pools. */
struct parked {
	pthread_cond_t cv;
	struct pool *pool;        /* the pool to work for; NULL: parked */
	struct parked *next;      /* in the idle list */
};

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static struct parked *park_idle;
static unsigned test_pause_us;   /* atomic: a worker reads it as its pool ends */

void tk_pool_test_pause(unsigned us)
{
	__atomic_store_n(&test_pause_us, us, __ATOMIC_RELAXED);
}

static void test_pause(void)
{
	unsigned us = __atomic_load_n(&test_pause_us, __ATOMIC_RELAXED);
	if (us)
		usleep(us);
}

/* A forked child has only the thread that forked: the parked ones are not there. */
static void park_forget(void)
{
	pthread_mutex_init(&park_lock, NULL);
	park_idle = NULL;
}

static void park_init(void)
{
	(void)pthread_atfork(NULL, NULL, park_forget);
}

static void *parked_main(void *arg)
{
	struct parked *t = arg;

	pthread_mutex_lock(&park_lock);
	for (;;) {
		while (!t->pool)
			pthread_cond_wait(&t->cv, &park_lock);
		struct pool *p = t->pool;
		pthread_mutex_unlock(&park_lock);
		work_for(p);
		/* idle first, so that the pool's caller finds this thread for its next pool */
		pthread_mutex_lock(&park_lock);
		t->pool = NULL;
		t->next = park_idle;
		park_idle = t;
		pthread_mutex_unlock(&park_lock);
		/* the last use of P: its caller frees it once no worker is in it */
		pthread_mutex_lock(&p->lock);
		if (--p->running == 0)
			pthread_cond_signal(&p->done_cv);
		pthread_mutex_unlock(&p->lock);
		test_pause();
		pthread_mutex_lock(&park_lock);
	}
	return NULL;
}

/* Sends up to N threads, parked or new, to work for P; returns how many went.
 * The threads to wake are noted in WAKE while the lock is held: one taken from the idle
 * list may not be waiting yet (between its last pool's end and its next wait), see its
 * pool without a signal, finish it and park again, rewriting its list link before the
 * link is read. Followed after the lock was let go, that link lost the rest of the list:
 * their pool's caller waited for them for ever (a unit test's 300 s time-out in CI). A
 * signal to a thread that has moved on wakes it to look and wait again. */
#define WAKE_BATCH 32
static unsigned park_send(struct pool *p, unsigned n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	unsigned sent = 0, nwake;
	struct parked *wake[WAKE_BATCH], *t;

	pthread_once(&once, park_init);
	pthread_mutex_lock(&p->lock);
	p->running = n;   /* lowered below for threads that could not start */
	pthread_mutex_unlock(&p->lock);
	do {
		nwake = 0;
		pthread_mutex_lock(&park_lock);
		for (; sent < n && park_idle && nwake < WAKE_BATCH; sent++) {
			t = park_idle;
			park_idle = t->next;
			t->pool = p;
			wake[nwake++] = t;
		}
		pthread_mutex_unlock(&park_lock);
		test_pause();
		for (unsigned k = 0; k < nwake; k++)   /* woken with the lock let go */
			pthread_cond_signal(&wake[k]->cv);
	} while (nwake == WAKE_BATCH);
	for (; sent < n; sent++) {
		t = calloc(1, sizeof *t);
		pthread_attr_t attr;
		pthread_t tid;
		int ok = 0;

		if (t && pthread_cond_init(&t->cv, NULL) == 0) {
			t->pool = p;
			if (pthread_attr_init(&attr) == 0) {
				pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
				ok = pthread_create(&tid, &attr, parked_main, t) == 0;
				pthread_attr_destroy(&attr);
			}
			if (!ok)
				pthread_cond_destroy(&t->cv);
		}
		if (!ok) {
			free(t);
			break;
		}
	}
	pthread_mutex_lock(&p->lock);
	p->running -= n - sent;
	pthread_mutex_unlock(&p->lock);
	return sent;
}

/* Pools this thread is running (a job may run a pool of its own): only the outermost
 * on the main thread counts its time, which holds the inner ones' (counted again, the
 * branch trace's profile, whose jobs on the main thread run pools, gave a negative serial
 * time). */
static __thread unsigned pool_depth;

static int pool_run(const struct tk_pool_opts *opts, size_t njobs, tk_pool_work_fn work,
		    tk_pool_merge_fn merge, void *ctx)
{
	unsigned nthreads = opts && opts->nthreads ? opts->nthreads : tk_cpu_count();
	size_t window = opts && opts->sz >= sizeof *opts && opts->window ? opts->window : 2 * (size_t)nthreads;
	int rc = 0;

	if (nthreads > njobs)
		nthreads = (unsigned)(njobs ? njobs : 1);
	int timed = timing && pool_depth == 1 && on_main_thread();
	double t0 = timed ? tk_thread_cpu() : 0;

	if (nthreads <= 1) {
		double in_work = 0;
		for (size_t i = 0; i < njobs && rc >= 0; i++) {
			double w0 = timed ? tk_thread_cpu() : 0;
			rc = work(ctx, i);
			in_work += timed ? tk_thread_cpu() - w0 : 0;
			if (rc >= 0 && merge)
				rc = merge(ctx, i);
		}
		if (timed) {
			times_add(&times.inline_work_cpu, in_work, njobs);
			times_add(&times.merge_cpu, tk_thread_cpu() - t0 - in_work, 0);
		}
		return rc < 0 ? rc : 0;
	}

	struct pool p = { .njobs = njobs, .window = window < nthreads ? nthreads : window,
			  .work = work, .ctx = ctx };
	p.done = calloc(njobs, 1);
	if (!p.done)
		return -TK_E_NOMEM;
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.work_cv, NULL);
	pthread_cond_init(&p.done_cv, NULL);

	/* caller_works: one worker thread fewer, the calling thread runs jobs while the job it
	 * merges next is not done (the window allowing): N busy threads on N cores, not N + 1
	 * where the merges are heavy */
	int helps = opts && opts->sz >= offsetof(struct tk_pool_opts, caller_works) + sizeof(int) &&
		    opts->caller_works;
	double in_work = 0;
	unsigned started = park_send(&p, nthreads - (unsigned)helps);
	if (started == 0)
		p.err = -TK_E_NOMEM;

	pthread_mutex_lock(&p.lock);
	while (!p.err && p.next_merge < njobs) {
		while (!p.err && !p.done[p.next_merge]) {
			if (helps && p.next_job < p.njobs && p.next_job < p.next_merge + p.window) {
				size_t k = p.next_job++;
				pthread_mutex_unlock(&p.lock);
				double w0 = timed ? tk_thread_cpu() : 0;
				int wrc = work(ctx, k);
				in_work += timed ? tk_thread_cpu() - w0 : 0;
				pthread_mutex_lock(&p.lock);
				if (wrc < 0 && !p.err)
					p.err = wrc;
				p.done[k] = 1;
				continue;
			}
			p.merger_waits = 1;
			pthread_cond_wait(&p.done_cv, &p.lock);
			p.merger_waits = 0;
		}
		if (p.err)
			break;
		size_t i = p.next_merge;
		pthread_mutex_unlock(&p.lock);
		int mrc = merge ? merge(ctx, i) : 0;
		pthread_mutex_lock(&p.lock);
		if (mrc < 0 && !p.err)
			p.err = mrc;
		p.next_merge++;
		if (p.idle) {   /* one more job may start */
			pthread_mutex_unlock(&p.lock);
			pthread_cond_signal(&p.work_cv);
			pthread_mutex_lock(&p.lock);
		}
	}
	rc = p.err;
	if (!p.err)
		p.err = 1; /* tell idle workers to leave; rc already taken */
	pthread_cond_broadcast(&p.work_cv);
	while (p.running)   /* the workers' last touch of P */
		pthread_cond_wait(&p.done_cv, &p.lock);
	pthread_mutex_unlock(&p.lock);

	pthread_mutex_destroy(&p.lock);
	pthread_cond_destroy(&p.work_cv);
	pthread_cond_destroy(&p.done_cv);
	free(p.done);
	if (timed) {
		times_add(&times.inline_work_cpu, in_work, 0);
		times_add(&times.merge_cpu, tk_thread_cpu() - t0 - in_work, njobs);
	}
	return rc < 0 ? rc : 0;
}

int tk_pool_run(const struct tk_pool_opts *opts, size_t njobs, tk_pool_work_fn work,
		tk_pool_merge_fn merge, void *ctx)
{
	pool_depth++;
	int rc = pool_run(opts, njobs, work, merge, ctx);
	pool_depth--;
	return rc;
}
