/* What fresh memory costs here: the time to fault in anonymous memory, a byte written per
 * 4 KiB page, first on 4 KiB pages (MADV_NOHUGEPAGE), then asked for on 2 MiB huge pages
 * (MADV_HUGEPAGE, as tk_malloc_huge asks). Prints µs per 4 KiB for each, the median of
 * ROUNDS rounds, and how many huge pages the kernel gave (AnonHugePages of the mapping).
 *
 * Why: on this project's VMs a 4 KiB page fault costs about 20 µs (the host maps each
 * page), fifty times a bare machine's, so a buffer made fresh per chunk at -j 2 shows as
 * extra CPU time. docs/PERFORMANCE.md (session 48) quotes this tool's figures.
 *
 * Rounds that follow each other get the memory the last one freed, still backed by the
 * host; IDLE seconds before each measurement let the host take it back first (this VM's
 * balloon reports freed memory within seconds: docs/PERFORMANCE.md, session 58), which is
 * what a run that starts after a pause pays.
 *
 * usage: page-fault [MIB [ROUNDS [IDLE]]]   (default 64 MiB, 5 rounds, 0 s) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define HUGE ((size_t)2 << 20)

/* µs per 4 KiB page to fault BYTES in with ADVICE; *HUGE_KB: the huge pages it got. */
static double fault_us(size_t bytes, int advice, long *huge_kb)
{
	/* a 2 MiB-aligned range inside a larger mapping, so that huge pages can fit */
	size_t len = bytes + HUGE;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	char *p = (char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	madvise(p, bytes, advice);
	double t0 = bench_now();
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = 1;
	double t = bench_now() - t0;
	*huge_kb = 0;
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	int in = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long a, b;
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2)   /* a mapping's first line */
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
		else if (in && !strncmp(line, "AnonHugePages:", 14))
			*huge_kb += strtol(line + 14, NULL, 10);
	}
	if (f)
		fclose(f);
	munmap(m, len);
	return t / (double)(bytes / 4096) * 1e6;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	unsigned idle = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 0;
	double small[64], huge[64];
	long kb = 0, got = 0;

	if (!mib || rounds < 1 || rounds > 64) {
		fprintf(stderr, "usage: page-fault [MIB [ROUNDS [IDLE]]]\n");
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		if (idle)
			sleep(idle);
		small[r] = fault_us(mib << 20, MADV_NOHUGEPAGE, &kb);
		if (idle)
			sleep(idle);
		huge[r] = fault_us(mib << 20, MADV_HUGEPAGE, &kb);
		got += kb;
		if (small[r] < 0 || huge[r] < 0) {
			perror("mmap");
			return 1;
		}
	}
	qsort(small, (size_t)rounds, sizeof *small, bench_cmp_double);
	qsort(huge, (size_t)rounds, sizeof *huge, bench_cmp_double);
	printf("4k %.2f us/4KiB  huge %.2f us/4KiB  (huge pages given: %ld of %zu MiB per round)\n",
	       small[rounds / 2], huge[rounds / 2], got / rounds / 1024, mib);
	return 0;
}
