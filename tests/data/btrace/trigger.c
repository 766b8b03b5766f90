/* record --trigger: a function called directly and through a pointer, in a loop. */
#include <stdlib.h>

__attribute__((noinline)) int step(int i)
{
	return i % 7 == 3 ? i * 2 : i + 1;
}

int (*volatile through)(int) = step;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? step((int)i) : through((int)i);
	return s == 0;
}
