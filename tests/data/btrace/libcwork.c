/* Work done inside libc, for the recorder with libc traced: qsort calling a comparator of the
 * program (which calls strcmp back in libc), snprintf and strtol loops in the main thread,
 * in a second thread (start_thread is libc's) and in an atexit handler. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 4000

static char words[MAXN][16];
static char *ptrs[MAXN];
static volatile long sink;

__attribute__((noinline)) static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* format numbers and read them back */
__attribute__((noinline)) static long convert(long n, long seed)
{
	char buf[64], *end;
	long total = 0;
	for (long i = 0; i < n; i++) {
		snprintf(buf, sizeof buf, "%ld:%lx:%s", i * seed, i ^ seed, i & 1 ? "odd" : "even");
		total += strtol(buf, &end, 10);
		total += strtol(end + 1, NULL, 16);
	}
	return total;
}

static void *worker(void *arg)
{
	sink += convert((long)arg, 7);
	return NULL;
}

static void at_end(void)
{
	sink += convert(20, 3);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500;
	pthread_t t;

	if (n > MAXN)
		n = MAXN;
	atexit(at_end);
	for (int i = 0; i < n; i++) {
		snprintf(words[i], sizeof words[i], "w%05d", (i * 7919) % 100000);
		ptrs[i] = words[i];
	}
	qsort(ptrs, (size_t)n, sizeof *ptrs, by_str);
	pthread_create(&t, NULL, worker, (void *)(long)n);
	long sum = convert(n, 11);
	pthread_join(t, NULL);
	for (int i = 0; i < n; i++)
		sum += strtol(ptrs[i] + 1, NULL, 10);
	printf("%ld %s %s\n", sum, ptrs[0], ptrs[n - 1]);
	return 0;
}
