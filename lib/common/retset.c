/* The return addresses of a call stack as a multiset (tracekit/internal/retset.h). */
#include <stdlib.h>
#include <string.h>

#include "tracekit/internal/retset.h"
#include "tracekit/internal/util.h"

static void put(struct tk_retset *r, uint64_t ret)
{
	size_t i = tk_retset_hash(ret) & r->mask;
	while (r->key[i] && r->key[i] != ret)
		i = (i + 1) & r->mask;
	if (!r->key[i]) {
		r->key[i] = ret;
		r->used++;
	}
	r->cnt[i]++;
}

/* Size the set for the stack (a quarter full at most) and drop keys no frame holds. */
static int rebuild(struct tk_retset *r, struct tk_retset_stack st)
{
	size_t size = 64;
	while (size < 4 * (r->depth + 1))
		size *= 2;
	uint64_t *key = tk_calloc_written(size, sizeof *key);
	uint32_t *cnt = tk_calloc_written(size, sizeof *cnt);
	if (!key || !cnt) {
		free(key);
		free(cnt);
		return -TK_E_NOMEM;
	}
	free(r->key);
	free(r->cnt);
	*r = (struct tk_retset){ .key = key, .cnt = cnt, .mask = size - 1, .depth = r->depth };
	for (size_t i = 0; i < r->depth; i++)
		if (tk_retset_ret(st, i))
			put(r, tk_retset_ret(st, i));
	return 0;
}

int tk_retset_sync(struct tk_retset *r, struct tk_retset_stack st, size_t depth)
{
	for (; r->depth < depth; r->depth++) {
		uint64_t ret = tk_retset_ret(st, r->depth);
		if (!ret)
			continue;
		if (2 * (r->used + 1) > r->mask + 1 || !r->key) {
			int rc = rebuild(r, st);
			if (rc < 0)
				return rc;
		}
		put(r, ret);
	}
	return 0;
}

void tk_retset_clear(struct tk_retset *r)
{
	r->depth = 0;
	if (r->key) {
		memset(r->key, 0, (r->mask + 1) * sizeof *r->key);
		memset(r->cnt, 0, (r->mask + 1) * sizeof *r->cnt);
		r->used = 0;
	}
}

void tk_retset_free(struct tk_retset *r)
{
	free(r->key);
	free(r->cnt);
	memset(r, 0, sizeof *r);
}
