/* Sorting by 64-bit keys without a comparator: a stable least-significant-byte radix sort.
 * Symbol tables and function entries of large modules (libLLVM: ~40 K symbols, ~100 K FDE
 * starts) were sorted with qsort on every run before any trace was read, a serial start
 * that every -j paid; the radix sort does it in a few passes and skips the bytes all keys
 * share (the high bytes of addresses in one module). (The btrace recorder keeps its own
 * in recorder/btrace/startup.c: it runs inside the traced program, links no libtracekit
 * and calls no libc on its trap path.) */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

static inline uint64_t key_at(const char *base, size_t i, size_t size, size_t key_off)
{
	uint64_t k;

	memcpy(&k, base + i * size + key_off, sizeof k);
	return k;
}

static inline int sorted(const char *base, size_t n, size_t size, size_t key_off)
{
	for (size_t i = 1; i < n; i++)
		if (key_at(base, i - 1, size, key_off) > key_at(base, i, size, key_off))
			return 0;
	return 1;
}

/* Inlined into each caller below so that SIZE and KEY_OFF are constants there. */
static inline int radix(void *base, size_t n, size_t size, size_t key_off)
{
	if (n < 2 || sorted(base, n, size, key_off))
		return 0;
	size_t (*count)[256] = calloc(8, sizeof *count);
	char *tmp = malloc(n * size);
	if (!count || !tmp) {
		free(count);
		free(tmp);
		return -TK_E_NOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t k = key_at(base, i, size, key_off);
		for (unsigned d = 0; d < 8; d++)
			count[d][(k >> (8 * d)) & 255]++;
	}
	char *src = base, *dst = tmp;
	uint64_t first = key_at(base, 0, size, key_off);
	for (unsigned d = 0; d < 8; d++) {
		if (count[d][(first >> (8 * d)) & 255] == n)
			continue;   /* every key has this byte: the pass would move nothing */
		size_t at = 0;
		for (unsigned b = 0; b < 256; b++) {
			size_t c = count[d][b];
			count[d][b] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++) {
			uint64_t k = key_at(src, i, size, key_off);
			memcpy(dst + count[d][(k >> (8 * d)) & 255]++ * size, src + i * size, size);
		}
		char *t = src;
		src = dst;
		dst = t;
	}
	if (src != base)
		memcpy(base, src, n * size);
	free(count);
	free(tmp);
	return 0;
}

int tk_sort_by_u64(void *base, size_t n, size_t size, size_t key_off)
{
	switch (size) {   /* element copies of a known size are moves, not memcpy calls */
	case 16:
		return radix(base, n, 16, key_off);
	case 24:
		return radix(base, n, 24, key_off);
	default:
		return radix(base, n, size, key_off);
	}
}

int tk_sort_u64(uint64_t *v, size_t n)
{
	return radix(v, n, sizeof *v, 0);
}
