/* How fast each CPU runs one thread now: eight independent chains of multiplications (as
 * much work per cycle as a core gives one thread: a sibling hyperthread's load shows)
 * pinned to CPU 0, then CPU 1, ... (one at a time), the best of ROUNDS tries each. Prints the
 * slowest CPU's speed as a fraction of the fastest's (1.00: even), then each CPU's time
 * per million steps in µs.
 *
 * Why: on this project's shared 2-vCPU VM one vCPU is, for minutes at a time, about 1.6
 * times slower than the other (its host core is shared). A -j 1 run then takes 0.77 s or
 * 1.25 s as the scheduler places it, and a -j 2 speed-up measured against it is as
 * uneven. bench/scaling.sh takes this figure before each interleaved round and gives the
 * speed-up of the rounds whose CPUs were even beside that of all rounds.
 *
 * usage: core-speed [ROUNDS]   (default 3) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define STEPS 2000000   /* steps of all eight chains: about 10 ms */

/* each chain's steps depend on one another, the chains not: the core overlaps them */
#define STEP(v) v = v * 6364136223846793005ull + 1442695040888963407ull
static __attribute__((noinline)) uint64_t chains(uint64_t seed, long n)
{
	uint64_t a = seed, b = seed + 1, c = seed + 2, d = seed + 3, e = seed + 4, f = seed + 5,
		 g = seed + 6, h = seed + 7;
	for (long i = 0; i < n; i++) {
		STEP(a); STEP(b); STEP(c); STEP(d); STEP(e); STEP(f); STEP(g); STEP(h);
	}
	return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double best[256], fastest = 1e9, slowest = 0;
	uint64_t sink = 0;

	if (ncpu < 1 || ncpu > 256 || rounds < 1)
		return 1;
	for (long c = 0; c < ncpu; c++) {
		cpu_set_t s;
		CPU_ZERO(&s);
		CPU_SET((int)c, &s);
		if (sched_setaffinity(0, sizeof s, &s) != 0)
			return 1;
		best[c] = 1e9;
		for (int r = 0; r < rounds; r++) {
			double t0 = bench_now();
			sink += chains((uint64_t)r + 1, STEPS);
			double t = bench_now() - t0;
			if (t < best[c])
				best[c] = t;
		}
		if (best[c] < fastest)
			fastest = best[c];
		if (best[c] > slowest)
			slowest = best[c];
	}
	printf("%.2f", fastest / slowest);
	for (long c = 0; c < ncpu; c++)
		printf(" %.0f", best[c] * 1e6 / (STEPS / 1e6));
	printf("\n");
	return sink == 42;   /* (keeps the chains) */
}
