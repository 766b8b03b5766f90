/* Vector and x87 values live across short branches recorded by trampolines: ymm (both
 * halves) and long double must come out as without the recorder. Build with -O2 -mavx2. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long sink;

__attribute__((noinline)) static void run(long n)
{
	__m256d acc = _mm256_set_pd(1.0, 2.0, 3.0, 4.0), step = _mm256_set_pd(0.5, 0.25, 0.125, 0.0625);
	__m128d lo = _mm_set_pd(1.5, 2.5);
	long double x = 1.0L;
	long k = 0;
	for (long i = 0; i < n; i++) {
		if ((i * 7) % 3 == 0) {   /* a short jcc: relocated into a trampoline */
			acc = _mm256_add_pd(acc, step);
			k++;
			sink = k;
		} else {
			acc = _mm256_mul_pd(acc, _mm256_set1_pd(0.999));
			lo = _mm_add_pd(lo, _mm_set1_pd(0.001));
		}
		x = x * 1.0000001L + (long double)(k & 1);
	}
	double o[4], l[2];
	_mm256_storeu_pd(o, acc);
	_mm_storeu_pd(l, lo);
	printf("%.17g %.17g %.17g %.17g %.17g %.17g %.21Lg %ld\n", o[0], o[1], o[2], o[3], l[0], l[1], x, k);
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atol(argv[1]) : 1000000);
	return 0;
}
