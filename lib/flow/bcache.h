/* Block cache: each code address decoded once per image and mode (internal). A block runs
 * from its start to the first control-flow instruction (inclusive), or to where the code
 * runs out of the image or stops decoding. */
#ifndef TK_FLOW_BCACHE_H
#define TK_FLOW_BCACHE_H

#include "isa/isa.h"
#include "tracekit/common.h"
#include "tracekit/image.h"

enum tk_block_flags {
	TK_BLK_ZERO_CALL = 1,   /* the final call targets the next instruction */
	TK_BLK_NOMAP = 2,       /* code ended: the instruction after `last` is not in the image */
	TK_BLK_BAD = 4,         /* the instruction after `last` does not decode */
	TK_BLK_EMPTY = 8,       /* no instruction at start at all (see NOMAP/BAD) */
	TK_BLK_ENTRY = 16,      /* starts at a function entry (tk_bcache_set_entries) */
	/* (tk_block_link only) the flow walker's: its path cache found that the blocks from
	 * succ[S] end a path before any outcome; bit TK_BLK_NOPATH << S */
	TK_BLK_NOPATH = 32,
	/* (tk_block_link only) the target is not next + target_rel: read the block's */
	TK_BLK_FAR = 128,
};

struct tk_block {
	uint64_t start;
	uint64_t last;       /* address of the last instruction */
	uint64_t next;       /* address after the last instruction */
	uint64_t target;     /* direct target of the last instruction */
	uint32_t ninsn;
	uint32_t lens;       /* index of the instruction lengths in the cache's length array */
	uint8_t cls;         /* enum tk_isa_class of the last instruction (OTHER: block cut) */
	uint8_t mode;
	uint8_t flags;
	uint8_t sys;         /* enum tk_isa_sys of the last instruction (cls OTHER) */
	uint64_t execs;      /* the flow walker's count mode: executions beyond the link's */
};

/* What the flow walker needs of each block it passes, its events' addresses included,
 * kept apart from the rest: 32 bytes, two to a cache line, so the blocks a large program
 * runs through stay in L2 (libLLVM: 90% of the executions in 19 K blocks, 600 KB of
 * links, 1.2 MB of blocks). Entry I belongs to block I; tk_link_last and the others give
 * the block's addresses. */
struct tk_block_link {
	uint32_t succ[2];    /* successor block index + 1 (0: not linked yet): [0] fall-through
				or direct target, [1] taken conditional branch or a call's return address;
				an indirect branch's or return's [0]: its last target (the walker's
				guess, checked before use) */
	uint32_t execs;      /* count mode: executions, carried into tk_block.execs on wrap */
	uint16_t ninsn;      /* as the block's (a block has at most 4096) */
	uint8_t cls;         /* as the block's */
	uint8_t flags;       /* as the block's, plus NOPATH and FAR */
	uint64_t start;
	uint16_t last_off;   /* last - start (at most 4096 instructions of 15 bytes) */
	uint8_t last_len;    /* next - last */
	uint8_t mode;
	int32_t target_rel;  /* target - next (a direct branch's displacement) */
};

/* Addresses wrap at the width of the block's mode. */
static inline uint64_t tk_link_wrap(const struct tk_block_link *l, uint64_t a)
{
	return l->mode == TK_ISA_64 ? a : l->mode == TK_ISA_32 ? (uint32_t)a : (uint16_t)a;
}

static inline uint64_t tk_link_last(const struct tk_block_link *l)
{
	return tk_link_wrap(l, l->start + l->last_off);
}

static inline uint64_t tk_link_next(const struct tk_block_link *l)
{
	return tk_link_wrap(l, tk_link_last(l) + l->last_len);
}

struct tk_bcache {
	const struct tk_image *img;
	struct tk_isa isa;
	struct tk_block *blocks;
	struct tk_block_link *links;   /* one per block */
	uint32_t nblocks, capblocks;
	uint32_t *slots;     /* open addressing: block index + 1, 0 = empty */
	uint32_t mask;
	uint8_t *lens;
	size_t nlens, caplens;
	uint64_t decoded_bytes;
	uint64_t *entries;   /* sorted function entries: blocks starting there get TK_BLK_ENTRY */
	size_t nentries;
	struct tk_bshare *share;   /* blocks other caches of the run decoded, or NULL */
};

int tk_bcache_init(struct tk_bcache *c, const struct tk_image *img);
void tk_bcache_fini(struct tk_bcache *c);
/* Function entries (any order; copied): blocks built from now on, and those already
 * built, carry TK_BLK_ENTRY when they start at one. */
int tk_bcache_set_entries(struct tk_bcache *c, const uint64_t *entries, size_t n);
/* The block at IP in MODE (built on first use). NULL only when out of memory. */
const struct tk_block *tk_bcache_get_slow(struct tk_bcache *c, uint64_t ip, int mode);

/* The direct target of block I's last instruction. */
static inline uint64_t tk_bcache_target(const struct tk_bcache *c, uint32_t i)
{
	const struct tk_block_link *l = &c->links[i];

	if (__builtin_expect(l->flags & TK_BLK_FAR, 0))
		return c->blocks[i].target;
	return tk_link_wrap(l, tk_link_next(l) + (uint64_t)(int64_t)l->target_rel);
}

/* Index of the block at IP, or UINT32_MAX when out of memory. */
uint32_t tk_bcache_index_slow(struct tk_bcache *c, uint64_t ip, int mode);

static inline uint32_t tk_bcache_index(struct tk_bcache *c, uint64_t ip, int mode)
{
	uint32_t h = (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62) & c->mask;
	uint32_t s;

	/* compared in the link, which the walker reads next anyway: one miss, not two */
	while ((s = c->slots[h])) {
		const struct tk_block_link *l = &c->links[s - 1];

		if (l->start == ip && l->mode == mode)
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
		const struct tk_block_link *l = &c->links[s - 1];

		if (l->start == ip && l->mode == mode)
			return &c->blocks[s - 1];
		h = (h + 1) & c->mask;
	}
	return tk_bcache_get_slow(c, ip, mode);
}

#endif
