/* How far apart two CPUs are, as the time a cache line takes to go from one to the other
 * and back: two threads, pinned to CPU A and CPU B, hand a counter to each other through
 * two lines of their own. Prints the median of ROUNDS rounds' mean round trip, in ns.
 *
 * Why: on this project's shared 2-vCPU VM, runs at -j 2 that move data between threads
 * (pipelines, merges) have fast and slow phases a few minutes apart while -j 1 stays
 * put. The host moves the two vCPUs between near cores (a round trip of ~120 ns) and far
 * ones (~530 ns). bench/scaling.sh prints this figure beside each row, so a speed-up can
 * be read with the distance it was measured at.
 *
 * usage: core-distance [ROUNDS [A B]]   (default 5 rounds, CPUs 0 and 1) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

#define TRIPS 100000

/* each on a line pair of its own: the adjacent-line prefetcher pairs lines */
static _Alignas(128) atomic_long there;
static _Alignas(128) atomic_long back;
static int cpu_b;

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *arg)
{
	(void)arg;
	pin(cpu_b);
	for (long i = 1; i <= TRIPS; i++) {
		while (atomic_load_explicit(&there, memory_order_acquire) != i)
			;
		atomic_store_explicit(&back, i, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, cpu_a = argc > 3 ? atoi(argv[2]) : 0;
	cpu_b = argc > 3 ? atoi(argv[3]) : 1;
	/* both CPUs tried here first: the rounds' threads wait for each other */
	if (rounds < 1 || rounds > 1000 || pin(cpu_b) || pin(cpu_a)) {
		fprintf(stderr, "usage: core-distance [ROUNDS [A B]] (CPUs that exist)\n");
		return 2;
	}
	double *ns = malloc(rounds * sizeof *ns);
	if (!ns)
		return 1;
	for (int r = 0; r < rounds; r++) {
		pthread_t t;
		atomic_store(&there, 0);
		atomic_store(&back, 0);
		if (pthread_create(&t, NULL, answer, NULL))
			return 1;
		double t0 = bench_now();
		for (long i = 1; i <= TRIPS; i++) {
			atomic_store_explicit(&there, i, memory_order_release);
			while (atomic_load_explicit(&back, memory_order_acquire) != i)
				;
		}
		ns[r] = (bench_now() - t0) / TRIPS * 1e9;
		pthread_join(t, NULL);
	}
	qsort(ns, rounds, sizeof *ns, bench_cmp_double);
	printf("%.0f\n", ns[rounds / 2]);
	free(ns);
	return 0;
}
