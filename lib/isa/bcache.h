/* Block cache: each code address decoded once per image and mode (internal). A block runs
 * from its start to the first control-flow instruction (inclusive), or to where the code
 * runs out of the image or stops decoding. */
#ifndef TK_ISA_BCACHE_H
#define TK_ISA_BCACHE_H

#include "isa/isa.h"
#include "tracekit/common.h"
#include "tracekit/image.h"

enum tk_block_flags {
	TK_BLK_ZERO_CALL = 1,   /* the final call targets the next instruction */
	TK_BLK_NOMAP = 2,       /* code ended: the instruction after `last` is not in the image */
	TK_BLK_BAD = 4,         /* the instruction after `last` does not decode */
	TK_BLK_EMPTY = 8,       /* no instruction at start at all (see NOMAP/BAD) */
	TK_BLK_ENTRY = 16,      /* starts at a function entry (tk_bcache_set_entries) */
};

struct tk_block {
	uint64_t start;
	uint64_t last;       /* address of the last instruction */
	uint64_t next;       /* address after the last instruction */
	uint64_t target;     /* direct target of the last instruction */
	uint32_t ninsn;
	uint32_t lens;       /* index of the instruction lengths in the cache's length array */
	uint32_t succ[2];    /* successor block index + 1 (0: not linked yet): [0] fall-through
				or direct target, [1] taken conditional branch or a call's return address */
	uint8_t cls;         /* enum tk_isa_class of the last instruction (OTHER: block cut) */
	uint8_t mode;
	uint8_t flags;
	uint8_t nopath;      /* the flow walker's: bit S set when its path cache found that the
				blocks from succ[S] end a path before any outcome */
	uint64_t execs;      /* executions counted by the flow walker's count mode (with
				this, a block is 64 bytes: indexing is a shift) */
};

struct tk_bcache {
	const struct tk_image *img;
	struct tk_isa isa;
	struct tk_block *blocks;
	uint32_t nblocks, capblocks;
	uint32_t *slots;     /* open addressing: block index + 1, 0 = empty */
	uint32_t mask;
	uint8_t *lens;
	size_t nlens, caplens;
	uint64_t decoded_bytes;
	uint64_t *entries;   /* sorted function entries: blocks starting there get TK_BLK_ENTRY */
	size_t nentries;
};

int tk_bcache_init(struct tk_bcache *c, const struct tk_image *img);
void tk_bcache_fini(struct tk_bcache *c);
/* Function entries (any order; copied): blocks built from now on, and those already
 * built, carry TK_BLK_ENTRY when they start at one. */
int tk_bcache_set_entries(struct tk_bcache *c, const uint64_t *entries, size_t n);
/* The block at IP in MODE (built on first use). NULL only when out of memory. */
const struct tk_block *tk_bcache_get_slow(struct tk_bcache *c, uint64_t ip, int mode);

/* Index of the block at IP, or UINT32_MAX when out of memory. */
uint32_t tk_bcache_index_slow(struct tk_bcache *c, uint64_t ip, int mode);

static inline uint32_t tk_bcache_index(struct tk_bcache *c, uint64_t ip, int mode)
{
	uint32_t h = (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62) & c->mask;
	uint32_t s;

	while ((s = c->slots[h])) {
		const struct tk_block *b = &c->blocks[s - 1];

		if (b->start == ip && b->mode == mode)
			return s - 1;
		h = (h + 1) & c->mask;
	}
	return tk_bcache_index_slow(c, ip, mode);
}

static inline const struct tk_block *tk_bcache_get(struct tk_bcache *c, uint64_t ip, int mode)
{
	uint32_t h = (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62) & c->mask;
	uint32_t s;

	while ((s = c->slots[h])) {
		const struct tk_block *b = &c->blocks[s - 1];

		if (b->start == ip && b->mode == mode)
			return b;
		h = (h + 1) & c->mask;
	}
	return tk_bcache_get_slow(c, ip, mode);
}

#endif
