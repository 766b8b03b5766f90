/* Calls into libshape.so (traced with --module) from an untraced executable. */
#include <dlfcn.h>
#include <stdio.h>

long shape_walk(long x);
long shape_pick(int k, long x);

int main(int argc, char **argv)
{
	long s = 0;
	for (int i = 1; i < 400; i++)
		s += shape_pick(i, i) + shape_walk(i);
	/* a module opened later is reported, not traced */
	if (argc > 1 && !dlopen(argv[1], RTLD_NOW))
		return 2;
	printf("%ld\n", s);
	return 0;
}
