/* The scan -j N adds to a Kanata parse (kn_prefix_scan: each chunk's lines and effect on
 * the cycle), alone on one thread, against a plain read of the same mapping: how far the
 * scan is from the memory's speed. Prints the median of RUNS passes over the whole log in
 * 8 MiB chunks. usage: kanata-scan LOG [RUNS] (bench/kanata-scan.sh builds and runs it) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#include "formats/kanata/internal.h"

#define CHUNK ((size_t)8 << 20)

int main(int argc, char **argv)
{
	struct stat st;
	int fd, runs = argc > 2 ? atoi(argv[2]) : 5;

	if (argc < 2 || runs < 1 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "usage: kanata-scan LOG [RUNS]\n");
		return 2;
	}
	size_t len = (size_t)st.st_size;
	const char *d = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (d == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	double scan[64], plain[64];
	uint64_t lines = 0, sum = 0;
	if (runs > 64)
		runs = 64;
	for (int r = 0; r < runs; r++) {
		double t = bench_now();
		lines = 0;
		for (size_t o = 0; o < len; o += CHUNK) {
			struct kn_prefix pf;
			kn_prefix_scan(d + o, len - o < CHUNK ? len - o : CHUNK, o == 0, &pf);
			lines += pf.lines;
		}
		scan[r] = bench_now() - t;
		t = bench_now();
		for (size_t o = 0; o + 8 <= len; o += 8)   /* every byte read, as the scan does */
			sum += *(const uint64_t *)(const void *)(d + o);
		plain[r] = bench_now() - t;
	}
	double s = bench_median(scan, runs), p = bench_median(plain, runs);
	volatile uint64_t keep = sum;   /* (the plain read is not optimized away) */
	(void)keep;
	printf("scan %.1f ms (%.2f GB/s, %llu lines), plain read %.1f ms (%.2f GB/s)\n", s * 1e3,
	       (double)len / s / 1e9, (unsigned long long)lines, p * 1e3, (double)len / p / 1e9);
	return 0;
}
