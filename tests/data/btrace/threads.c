/* Four threads (one started from a constructor, before main) doing branchy work. */
#include <pthread.h>
#include <stdio.h>

static long results[5];

__attribute__((noinline)) static long collatz(long n)
{
	long steps = 0;
	while (n != 1) {
		n = (n & 1) ? 3 * n + 1 : n / 2;
		steps++;
	}
	return steps;
}

static void *work(void *arg)
{
	long id = (long)arg, s = 0;
	for (long i = 1; i < 400 + 100 * id; i++)
		s += collatz(i);
	results[id] = s;
	return NULL;
}

static pthread_t early;

__attribute__((constructor)) static void start_early(void)
{
	pthread_create(&early, NULL, work, (void *)4);
}

int main(void)
{
	pthread_t t[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, work, (void *)i);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pthread_join(early, NULL);
	printf("%ld %ld %ld %ld\n", results[0], results[1], results[2], results[4]);
	return 0;
}
