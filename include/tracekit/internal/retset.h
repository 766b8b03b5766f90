/* The return addresses of a call stack's frames [0, depth), as an exact multiset (linear
 * probing; a key leaves when its count reaches zero). Brought up to the whole stack only
 * when a return or resume does not match the top frame, so matching calls and returns
 * never touch it (each frame enters and leaves it at most once): a return or resume to an
 * address that no frame holds skips the search down the stack, which deep stacks (a
 * random walk's, a deep recursion's) made quadratic. Shared by the profile builder and the
 * timeline writer; their frames differ, so the stack is given as a base, the size of a
 * frame and the offset of its return address (0: none, never a key). */
#ifndef TRACEKIT_INTERNAL_RETSET_H
#define TRACEKIT_INTERNAL_RETSET_H

#include <stddef.h>
#include <stdint.h>

struct tk_retset {
	uint64_t *key;            /* 0 = empty slot */
	uint32_t *cnt;
	size_t mask, used;        /* used: slots with a key (all with a count > 0) */
	size_t depth;             /* the frames below this are in the set */
};

/* A stack of frames: frame I's return address at base + I * size + off. */
struct tk_retset_stack {
	const void *base;
	size_t size, off;
};

static inline uint64_t tk_retset_ret(struct tk_retset_stack st, size_t i)
{
	return *(const uint64_t *)((const char *)st.base + i * st.size + st.off);
}

/* Bring the set up to the stack's DEPTH frames (after pushes since the last time). */
int tk_retset_sync(struct tk_retset *r, struct tk_retset_stack st, size_t depth);
/* Empty, for a cleared stack (memory kept); free. */
void tk_retset_clear(struct tk_retset *r);
void tk_retset_free(struct tk_retset *r);

static inline size_t tk_retset_hash(uint64_t ret)
{
	return (size_t)((ret * 0x9E3779B97F4A7C15ull) >> 32);
}

/* Whether a frame of the synced part returns to RET (not 0). */
static inline int tk_retset_has(const struct tk_retset *r, uint64_t ret)
{
	if (!r->key)
		return 0;
	size_t i = tk_retset_hash(ret) & r->mask;
	while (r->key[i] && r->key[i] != ret)
		i = (i + 1) & r->mask;
	return r->key[i] != 0;
}

/* Drop one occurrence of RET; a key whose count reaches zero leaves the table
 * (backward-shift deletion), so the table never fills with dead keys. */
static inline void tk_retset_del(struct tk_retset *r, uint64_t ret)
{
	size_t i = tk_retset_hash(ret) & r->mask;
	while (r->key[i] != ret)
		i = (i + 1) & r->mask;
	if (--r->cnt[i])
		return;
	for (size_t j = i;;) {
		j = (j + 1) & r->mask;
		if (!r->key[j])
			break;
		size_t h = tk_retset_hash(r->key[j]) & r->mask;
		/* the key at j may move to the hole at i unless its home lies in (i, j] */
		if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
			r->key[i] = r->key[j];
			r->cnt[i] = r->cnt[j];
			i = j;
		}
	}
	r->key[i] = 0;
	r->cnt[i] = 0;
	r->used--;
}

/* The stack popped to DEPTH frames; RET: the return address of the frame at DEPTH (the
 * one that left), for one pop at a time. */
static inline void tk_retset_popped(struct tk_retset *r, uint64_t ret, size_t depth)
{
	if (__builtin_expect(r->depth > depth, 0)) {
		if (ret)
			tk_retset_del(r, ret);
		r->depth = depth;
	}
}

#endif
