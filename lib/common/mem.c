/* Memory for large, growing data: on huge pages past 1 MiB (a page fault per 2 MiB, where
 * each 4 KiB one costs microseconds in a VM), and written up front where a worker must not
 * fault it in later. (Kept apart from the pool: nothing here needs its threads.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

void *tk_calloc_written(size_t n, size_t size)
{
	char *m = calloc(n, size);

	/* volatile: malloc + memset would be turned into calloc by the compiler */
	for (size_t i = 0; m && i < n * size; i += 4096)
		((volatile char *)m)[i] = 0;
	return m;
}

void *tk_malloc_huge(size_t bytes)
{
	const size_t huge = TK_HUGE_PAGE;
	size_t len;
	void *m;

	if (bytes > SIZE_MAX - huge)
		return NULL;
	if (bytes < TK_HUGE_FROM)   /* a huge page would be mostly waste */
		return malloc(bytes ? bytes : 1);
	len = (bytes + huge - 1) / huge * huge;
	if (!(m = aligned_alloc(huge, len)))
		return NULL;
	(void)madvise(m, len, MADV_HUGEPAGE);   /* a hint: small pages otherwise */
	return m;
}

void *tk_realloc_huge(void *old, size_t used, size_t bytes)
{
	void *m;

	if (bytes < TK_HUGE_FROM)
		return realloc(old, bytes ? bytes : 1);
	if (!(m = tk_malloc_huge(bytes)))
		return NULL;
	if (used)
		memcpy(m, old, used < bytes ? used : bytes);
	free(old);
	return m;
}

void *tk_map_zeroed(size_t bytes)
{
	void *m = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

void tk_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes ? bytes : 1);
}

void *tk_calloc_huge(size_t n, size_t size)
{
	size_t bytes = n * size;
	void *m;

	if (size && bytes / size != n)
		return NULL;
	if (bytes < TK_HUGE_FROM)
		return tk_calloc_written(n, size);
	if ((m = tk_malloc_huge(bytes)))
		memset(m, 0, bytes);
	return m;
}
