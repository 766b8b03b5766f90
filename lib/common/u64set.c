/* A set of 64-bit values: open addressing, kept at most half full. Values are stored + 1
 * so that 0 marks an empty slot (the value UINT64_MAX cannot be stored). */
#include <stdlib.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

int tk_u64set_add(struct tk_u64set *s, uint64_t x)
{
	uint64_t key = x + 1;

	if (2 * (s->n + 1) > s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 1024;
		uint64_t *ns = calloc(ncap, sizeof *ns);

		if (!ns)
			return -TK_E_NOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			uint64_t k = s->slot[i];
			if (!k)
				continue;
			size_t h = tk_hash64(k) & (ncap - 1);
			while (ns[h])
				h = (h + 1) & (ncap - 1);
			ns[h] = k;
		}
		free(s->slot);
		s->slot = ns;
		s->cap = ncap;
	}
	size_t h = tk_hash64(key) & (s->cap - 1);
	while (s->slot[h]) {
		if (s->slot[h] == key)
			return 0;
		h = (h + 1) & (s->cap - 1);
	}
	s->slot[h] = key;
	s->n++;
	return 1;
}

int tk_u64set_has(const struct tk_u64set *s, uint64_t x)
{
	uint64_t key = x + 1;

	if (!s->cap)
		return 0;
	for (size_t h = tk_hash64(key) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (s->slot[h] == key)
			return 1;
	return 0;
}

void tk_u64set_free(struct tk_u64set *s)
{
	free(s->slot);
	*s = (struct tk_u64set){ 0 };
}
