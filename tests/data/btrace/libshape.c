/* A small shared library for tracing a module other than the executable. */
__attribute__((noinline)) static long step(long x)
{
	return (x & 1) ? 3 * x + 1 : x / 2;
}

long shape_walk(long x)
{
	long n = 0;
	while (x != 1) {
		x = step(x);
		n++;
	}
	return n;
}

long shape_pick(int k, long x)
{
	switch (k % 5) {
	case 0: return x + 1;
	case 1: return x * 7;
	case 2: return x ^ 0x55;
	case 3: return x - 9;
	default: return shape_walk(x + 2);
	}
}
