/* Work inside libc for `tracekit record --btrace --module libc.so.6` (bench/btrace-libc.sh,
 * the recorder's speed; bench/ipt-flow.sh records bench/ipt-flow-libc.c, a broader mix of
 * libc for the decoders): format N keys with snprintf, sort them
 * with qsort and a comparator that calls strcmp, print the first and last. About 1400
 * instructions per key, nearly all in libc (N = 40000: 58 M instructions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 40000;
	char **v = malloc((size_t)n * sizeof *v), *buf = malloc((size_t)n * 16);
	unsigned x = 12345;
	if (!v || !buf)
		return 1;
	for (int i = 0; i < n; i++) {
		x = x * 1103515245 + 12345;
		v[i] = buf + (size_t)i * 16;
		snprintf(v[i], 16, "k%08x", x);
	}
	qsort(v, (size_t)n, sizeof *v, by_key);
	printf("%s %s\n", v[0], v[n - 1]);
	return 0;
}
