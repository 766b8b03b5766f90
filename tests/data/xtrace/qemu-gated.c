/* Collection gated by HINT #9 (the seed's trigger): only the loop between the two hints is
 * recorded. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	volatile long s = 0;
	__asm__ volatile("hint #9" ::: "memory");
	for (int i = 0; i < n; i++)
		s += i * (i & 3);
	__asm__ volatile("hint #9" ::: "memory");
	printf("%ld\n", (long)s);
	return 0;
}
