/* Time per call in a branch trace: spin busy-waits a given number of TSC ticks (a leaf
 * with a loop), tiny does a few instructions (a leaf with no branch: nothing is recorded
 * between its call and its return, so its time cannot be measured). Prints the TSC ticks
 * the loop of calls took, as the program measures it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

__attribute__((noinline)) uint64_t spin(uint64_t ticks)
{
	uint64_t t0 = __rdtsc(), n = 0;
	while (__rdtsc() - t0 < ticks)
		n++;
	return n;
}

__attribute__((noinline)) int tiny(int x)
{
	return x * 3 + 1;
}

/* Its recorded return is a stamp ahead of spin's first call. */
__attribute__((noinline)) uint64_t mark(uint64_t x)
{
	return x ^ 1;
}

int main(int argc, char **argv)
{
	/* before strtoull: spin's first call is timed from the last stamp ahead of it, which
	 * must fall inside the span measured here even when the process is preempted in
	 * between (a loaded machine). After strtoull (untraced), the first record would be in
	 * spin, after its first rdtsc: mark's return is recorded before the call. */
	uint64_t t0 = __rdtsc();
	uint64_t ticks = mark(argc > 1 ? strtoull(argv[1], NULL, 0) : 100000) ^ 1, s = 0;
	for (int i = 0; i < 10; i++)
		s += spin(ticks) + (uint64_t)tiny(i);
	uint64_t t1 = __rdtsc();
	printf("%llu\n", (unsigned long long)(t1 - t0));
	return s == 0;
}
