/* XRay test program: recursion, loops, tail calls, logged arguments, custom events and
 * threads, with known call counts. Built by the tests with clang-16 -fxray-instrument.
 *   xray_prog MODE THREADS ITERS [wrap]
 * MODE basic: the runtime logs from start-up (XRAY_OPTIONS patch_premain=true).
 * MODE fdr: the program itself initialises FDR mode, then finalises and flushes the log
 *   (FDR needs these calls); XRAY_FDR_BUF (bytes per buffer, default 16384) and
 *   XRAY_FDR_MAX (buffers, default 4096) size the buffer queue.
 * wrap (fdr): flush a first log from inside two open calls and start a second one, whose
 *   first records are exits without enters, as in a ring-wrapped flight-recorder log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __xray_log_select_mode(const char *mode);
int __xray_log_init_mode(const char *mode, const char *config);
int __xray_patch(void);
int __xray_log_finalize(void);
int __xray_log_flushLog(void);

static volatile long sink;
static int fdr;

#define XI __attribute__((noinline, xray_always_instrument))

XI int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
XI int leaf(int x) { sink += x; return x * 3; }
XI int tailer(int x) { return leaf(x + 1); }   /* a tail call: tail-exit record */
__attribute__((noinline, xray_always_instrument, xray_log_args(1))) int witharg(int x)
{
	sink += x;
	return x + 1;
}

XI void work(int iters)
{
	for (int i = 0; i < iters; i++) {
		sink += tailer(i);
		sink += witharg(i);
		sink += fib(6);
		if (fdr && i % 16 == 0)
			__xray_customevent("tick", 4);
	}
}

static void *thread_main(void *arg)
{
	work(*(int *)arg);
	return NULL;
}

static void fdr_start(void)
{
	char cfg[160];
	const char *b = getenv("XRAY_FDR_BUF"), *m = getenv("XRAY_FDR_MAX");
	snprintf(cfg, sizeof cfg, "buffer_size=%s:buffer_max=%s:func_duration_threshold_us=0",
		 b ? b : "16384", m ? m : "4096");
	__xray_log_select_mode("xray-fdr");
	__xray_log_init_mode("xray-fdr", cfg);
	__xray_patch();
}

static void fdr_stop(void)
{
	__xray_log_finalize();
	__xray_log_flushLog();
}

XI void inner_flush(void)
{
	fdr_stop();
	fdr_start();
}
XI void outer(void) { inner_flush(); }

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: xray_prog basic|fdr THREADS ITERS [wrap]\n");
		return 2;
	}
	fdr = !strcmp(argv[1], "fdr");
	int nthreads = atoi(argv[2]), iters = atoi(argv[3]);
	int wrap = argc > 4 && !strcmp(argv[4], "wrap");
	pthread_t t[64];

	if (nthreads > 64)
		nthreads = 64;
	if (fdr)
		fdr_start();
	if (fdr && wrap) {
		work(2);
		outer();
	}
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, thread_main, &iters);
	work(iters);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	if (fdr)
		fdr_stop();
	return 0;
}
