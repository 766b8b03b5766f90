/* memcpy, memset, memmove and memcmp for libtkbtrace.so itself. The compiler emits calls to
 * them on its own (struct copies, zeroing, constant-size copies it does not inline); with
 * libc traced, libc's would trap inside the SIGTRAP handler. Defined here with hidden
 * visibility (the library is built with -fvisibility=hidden), every call the linker sees
 * in this library binds to these, never to a PLT slot; the rest of the program keeps libc's.
 * Compiled with -fno-builtin and without loop-pattern distribution, so that gcc does not
 * turn the loops below back into calls of themselves. */
#include <stddef.h>

void *memcpy(void *dst, const void *src, size_t n)
{
	void *d = dst;
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	void *d = dst;
	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
	return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (d <= s || d >= s + n)
		return memcpy(dst, src, n);
	while (n--)
		d[n] = s[n];
	return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}
