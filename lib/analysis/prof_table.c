/* Profile storage: the growable arrays, the node, function and block tables, and a
 * profile's life (new, reset, free). The per-event lookups that hit are inline in
 * prof_internal.h; what misses comes here. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/prof_internal.h"
#include "tracekit/internal/util.h"

/* ---- growable arrays and hash tables --------------------------------------------------- */

int prof_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return -TK_E_NOMEM;
	*p = q;
	*cap = nc;
	return 0;
}

/* Rebuild a table of indexes of N elements at twice the size, or more if ROOM more are to
 * come; HASH_OF gives an element's hash. */
static int rehash(uint32_t **map, size_t *mask, size_t n, size_t room,
		  uint64_t (*hash_of)(const struct tk_prof *, uint32_t), const struct tk_prof *p)
{
	size_t size = *map ? (*mask + 1) * 2 : 1024;
	while (size < (n + room + 1) * 2)
		size *= 2;
	uint32_t *m = tk_malloc_huge(size * sizeof *m);   /* see grow_blocks */
	if (!m)
		return -TK_E_NOMEM;
	memset(m, 0xff, size * sizeof *m);
	for (uint32_t i = 0; i < n; i++) {
		size_t s = hash_of(p, i) & (size - 1);
		while (m[s] != NONE32)
			s = (s + 1) & (size - 1);
		m[s] = i;
	}
	free(*map);
	*map = m;
	*mask = size - 1;
	return 0;
}

static uint64_t block_hash_of(const struct tk_prof *p, uint32_t i)
{
	return block_hash(p->blocks[i].start, p->blocks[i].end);
}

static int func_rehash(struct tk_prof *p)
{
	size_t size = p->func_map ? (p->func_mask + 1) * 2 : 1024;
	while (size < (p->nfuncs + 1) * 2)
		size *= 2;
	struct fslot *m = malloc(size * sizeof *m);
	if (!m)
		return -TK_E_NOMEM;
	for (size_t s = 0; s < size; s++)
		m[s].fk = FSLOT_EMPTY;
	for (uint32_t i = 0; i < p->nfuncs; i++) {
		const struct func *f = &p->funcs[i];
		size_t s = func_hash(f->track, f->key, f->kind) & (size - 1);
		while (m[s].fk != FSLOT_EMPTY)
			s = (s + 1) & (size - 1);
		m[s] = (struct fslot){ f->key, f->track, fslot_fk(i, f->kind) };
	}
	free(p->func_map);
	p->func_map = m;
	p->func_mask = size - 1;
	return 0;
}

uint32_t prof_get_func(struct tk_prof *p, uint32_t track, uint64_t key, uint32_t kind)
{
	if ((p->nfuncs + 1) * 2 > p->func_mask + 1 || !p->func_map)
		if (func_rehash(p) < 0)
			return NONE32;
	size_t s = func_hash(track, key, kind) & p->func_mask;
	for (;; s = (s + 1) & p->func_mask) {
		const struct fslot *e = &p->func_map[s];
		if (e->fk == FSLOT_EMPTY)
			break;
		if (e->key == key && e->track == track && (e->fk & 3) == kind)
			return e->fk >> 2;
	}
	if (kind > TK_PROF_KEY_ID || p->nfuncs + 1 >= FUNCS_MAX ||
	    prof_grow((void **)&p->funcs, &p->cfuncs, p->nfuncs + 1, sizeof *p->funcs) < 0)
		return NONE32;
	uint32_t i = (uint32_t)p->nfuncs++;
	p->funcs[i] = (struct func){ .key = key, .kind = kind, .track = track };
	p->func_map[s] = (struct fslot){ key, track, fslot_fk(i, kind) };
	return i;
}

/* Node arrays of this many bytes or more are mappings of their own. */
#define NODES_MAPPED ((size_t)2 << 20)

/* The call tree's arrays (and the blocks), grown to BYTES with their first KEEP bytes kept: below
 * NODES_MAPPED from aligned_alloc (ALIGN: nodes are cache-line aligned, which realloc
 * would not keep), from there on a mapping of its own that mremap grows without copying
 * (doubling a 64 MiB array by a copy faulted in both), advised whole onto huge pages (so
 * that it stays one mapping for mremap): a random walk's tree grows by gigabytes, and a
 * 4 KiB fault costs 12-15 us here. NULL: no memory, OLD kept. */
static void *grow_array(void *old, size_t old_bytes, size_t bytes, size_t keep, size_t align)
{
	void *n;

	if (bytes < NODES_MAPPED) {
		n = aligned_alloc(align, bytes);
	} else {
		void *m = old_bytes >= NODES_MAPPED ? mremap(old, old_bytes, bytes, MREMAP_MAYMOVE)
						    : mmap(NULL, bytes, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		n = m == MAP_FAILED ? NULL : m;
		if (n)
			(void)madvise(n, bytes, MADV_HUGEPAGE);   /* a hint */
	}
	if (n && old_bytes < NODES_MAPPED) {
		if (keep)
			memcpy(n, old, keep);
		free(old);
	}
	return n;
}

static void free_array(void *a, size_t bytes)
{
	if (bytes >= NODES_MAPPED)
		munmap(a, bytes);
	else
		free(a);
}

static int grow_nodes(struct tk_prof *p, size_t need)
{
	if (need <= p->cnodes)
		return 0;
	size_t nc = p->cnodes ? p->cnodes * 2 : 256;
	while (nc < need)
		nc *= 2;
	if (p->ahead)
		tk_ahead_wait(p->ahead);   /* no populating of pages being moved */
	if (p->clinks < nc) {
		struct nlink *l = grow_array(p->links, p->clinks * sizeof *l, nc * sizeof *l,
					     p->clinks * sizeof *l, _Alignof(struct nlink));
		if (!l)
			return -TK_E_NOMEM;
		p->links = l;
		p->clinks = nc;
	}
	struct node *n = grow_array(p->nodes, p->cnodes * sizeof *n, nc * sizeof *n,
				    p->nnodes * sizeof *n, 64);
	if (!n)
		return -TK_E_NOMEM;
	p->nodes = n;
	p->cnodes = nc;
	return 0;
}

/* Nodes per window that the helper makes writable, ahead of the one being filled (4 MiB
 * of nodes, 1.5 MiB of links). */
#define AHEAD_NODES ((size_t)1 << 16)
/* How far ahead of the node being filled the helper's windows reach, in windows: with
 * two cores shared by the merging thread, a worker and the helper, the helper may wait
 * for a core for milliseconds, and one window ahead (12 ms of a random walk's merge) left
 * 5 % of the merging thread's time in page faults. */
#define AHEAD_LEAD 4
/* Node tables from this size on (bytes) are made by the helper. */
#define AHEAD_TABLE ((size_t)1 << 20)

/* A profile growing by millions of call paths (a random walk's) spends a quarter of its
 * time in the kernel, zeroing the pages of its nodes, links and node tables. With
 * threads to spare (-j 2 and more) a helper does that on another core, ahead: the window
 * of nodes and links after the next, and the node table twice as large once the current
 * one is 7/16 full (node_rehash takes it at half; asked for earlier, it would often be
 * made in vain, at the end of the walk: the largest table). The same contents: only who
 * faults the pages in changes. */
static void node_ahead(struct tk_prof *p)
{
	p->ahead_at = p->nnodes + AHEAD_NODES;
	if (!p->ahead) {
		if (p->opts.nthreads < 2 || p->no_ahead || !p->nnodes)
			return;
		if (!(p->ahead = tk_ahead_start())) {
			p->ahead_at = SIZE_MAX;   /* the main thread does it all */
			return;
		}
	}
	size_t from = p->nnodes + AHEAD_NODES, to = p->nnodes + AHEAD_LEAD * AHEAD_NODES;
	/* room first (mremap moves populated pages along): a window cut at the room's end
	 * was never populated once the array doubled, and the main thread faulted it in */
	if (to > p->cnodes && grow_nodes(p, to) < 0)
		to = p->cnodes;
	if (from < p->populated)
		from = p->populated;
	if (from < to) {
		p->populated = to;
		tk_ahead_populate(p->ahead, p->nodes + from, (to - from) * sizeof *p->nodes);
		tk_ahead_populate(p->ahead, p->links + from, (to - from) * sizeof *p->links);
	}
	size_t slots = p->node_mask + 1, table_at = slots / 16 * 7;
	if (2 * slots * sizeof *p->node_map < AHEAD_TABLE)
		return;
	/* On huge pages, even when the helper has no core of its own: the main thread saves a
	 * TLB miss a lookup, and the helper a fault per 4 KiB (12-20 us each in this
	 * project's VMs: the walk's tables on small pages faulted 260,000 times, 3-7 s). */
	if (p->nnodes >= table_at)
		tk_ahead_table(p->ahead, 2 * slots * sizeof *p->node_map);
	else if (table_at < p->ahead_at)
		p->ahead_at = table_at;
}

/* Nodes prof_nodes_expect populates at most (20 MiB): memory made ready in vain when the
 * merged trees turn out to be in the total already stays bounded. */
#define EXPECT_NODES ((size_t)1 << 18)

/* A merge is about to add up to MORE nodes at once (a chunk's whole tree, grafted in a
 * burst that outruns node_ahead's window: the first merges' nodes were faulted in by the
 * main thread). The helper populates that much beyond the nodes now, from where it was
 * last asked to; the rest is node_ahead's as before. */
void prof_nodes_expect(struct tk_prof *p, size_t more)
{
	if (p->opts.nthreads < 2 || p->no_ahead || !more)
		return;
	if (more > EXPECT_NODES)
		more = EXPECT_NODES;
	if (!p->ahead && !(p->ahead = tk_ahead_start()))
		return;
	size_t from = p->nnodes > p->populated ? p->nnodes : p->populated, to = p->nnodes + more;
	if (to > p->cnodes && grow_nodes(p, to) < 0)
		return;
	if (from >= to)
		return;
	p->populated = to;
	tk_ahead_populate(p->ahead, p->nodes + from, (to - from) * sizeof *p->nodes);
	tk_ahead_populate(p->ahead, p->links + from, (to - from) * sizeof *p->links);
	if (p->ahead_at == 0)
		p->ahead_at = p->nnodes + AHEAD_NODES;
}

/* FUNC: the node's function, or PROF_FUNC_LOOKUP to look it up (made if new). */
static uint32_t new_node(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			 uint32_t track, uint32_t func)
{
	if (p->nnodes >= p->ahead_at)
		node_ahead(p);
	if (grow_nodes(p, p->nnodes + 1) < 0)
		return NONE32;
	if (kind != TK_PROF_KEY_ADDR && kind != TK_PROF_KEY_ID)
		func = NONE32;
	else if (func == PROF_FUNC_LOOKUP && (func = prof_get_func(p, track, key, kind)) == NONE32)
		return NONE32;
	uint32_t i = (uint32_t)p->nnodes++;
	struct node *n = &p->nodes[i];
	memset(n, 0, sizeof *n);
	n->key = key;
	n->kind = kind;
	n->parent = parent;
	n->track = track;
	n->func = func;
	struct nlink *l = &p->links[i];
	memset(l, 0, sizeof *l);
	l->first_child = l->next_sibling = NONE32;
	if (parent != NONE32) {
		l->next_sibling = p->links[parent].first_child;
		p->links[parent].first_child = i;
	}
	return i;
}

/* Part of a rehash: the old table's slots FROM.. (COUNT of them, wrapping) into the new one,
 * writing none of its slots from HI on (cyclic: up to the other part's first). */
struct rehash_part {
	const struct nslot *old;
	size_t omask, from, count;
	struct nslot *m;
	size_t nmask, hi;
	unsigned shift;
	int overflow;             /* an entry's probe reached HI: not placed */
};

static void rehash_part(struct rehash_part *r)
{
	for (size_t k = 0; k < r->count && !r->overflow; k++) {
		struct nslot e = r->old[(r->from + k) & r->omask];
		if (!e.tag)
			continue;
		size_t s = e.tag >> r->shift;
		while (r->m[s].tag && !r->overflow)
			r->overflow = (s = (s + 1) & r->nmask) == r->hi;
		if (!r->overflow)
			r->m[s] = e;
	}
}

static void *rehash_thread(void *arg)
{
	rehash_part(arg);
	return NULL;
}

/* Old tables from this many slots (16 MiB) are copied by two threads when the profile has
 * threads to spare: the random walk's profile spent 0.24 s of its main thread here. */
#define REHASH_SPLIT ((size_t)1 << 21)

/* Copy OLD (OMASK + 1 slots) into M (NMASK + 1, at least twice as many). The old table has
 * empty slots (it is at most 3/4 full); no entry's probe crosses one. Cut at the first from
 * the start (Z) and from the middle (E): the old slots [Z, E) go to the new [G Z, G E) (G the
 * growth), the others to the rest, so with threads to spare two threads copy the halves.
 * (An entry never probes past its part's end: the entries homed in any stretch of the new
 * table fill at most half of it. Were it to, the table is copied again in order.) */
static void rehash_copy(const struct tk_prof *p, const struct nslot *old, size_t omask,
			struct nslot *m, size_t nmask, unsigned shift)
{
	size_t osize = omask + 1, z = 0, e = osize / 2, grow = (nmask + 1) / osize;
	while (z < osize && old[z].tag)
		z++;
	while (e < osize && old[e].tag)
		e++;
	struct rehash_part whole = { old, omask, 0, osize, m, nmask, nmask + 1, shift, 0 };
	struct rehash_part a = { old, omask, z, e - z, m, nmask, grow * e, shift, 0 };
	struct rehash_part b = { old, omask, e, osize - e + z, m, nmask, (grow * z) & nmask,
				 shift, 0 };
	pthread_t t;

	if (osize >= p->rehash_split && p->opts.nthreads >= 2 && z < e && e < osize &&
	    pthread_create(&t, NULL, rehash_thread, &b) == 0) {
		rehash_part(&a);
		pthread_join(t, NULL);
		if (!a.overflow && !b.overflow)
			return;
		memset(m, 0, (nmask + 1) * sizeof *m);
	}
	rehash_part(&whole);   /* in order: one part, the whole table */
}

/* Rebuild the node table at twice the size (or for NNODES + 1 nodes). A slot's tag holds
 * its node's place (node_slot): the old table is read in order, no node is loaded. */
static int node_rehash(struct tk_prof *p)
{
	size_t size = p->node_map ? (p->node_mask + 1) * 2 : 1024;
	unsigned bits = 10;
	while (size < (p->nnodes + 1) * 2)
		size *= 2;
	for (size_t s = 1024; s < size; s *= 2)
		bits++;
	/* the tag's bit 0 is always set: it cannot place a node */
	if (bits > 31)
		return -TK_E_NOMEM;
	struct nslot *m = p->ahead ? tk_ahead_take_table(p->ahead, size * sizeof *m) : NULL;
	/* read at random: on huge pages one TLB entry per 2 MiB, and one fault (a 4 KiB
	 * fault cost 12-15 us here: the walk's tables faulted 200,000 times at -j 1) */
	if (!m && !(m = tk_calloc_huge(size, sizeof *m)))
		return -TK_E_NOMEM;
	if (p->node_map)
		rehash_copy(p, p->node_map, p->node_mask, m, size - 1, 32 - bits);
	if (p->ahead)
		tk_ahead_free(p->ahead, p->node_map);   /* its unmapping, too, off this thread */
	else
		free(p->node_map);
	p->node_map = m;
	p->node_mask = size - 1;
	p->node_shift = 32 - bits;
	return 0;
}

/* Past half full the table grows; while the helper is still making the next one it fills
 * on to 3/4 (longer probes, the same nodes) instead of waiting: with the other core busy,
 * the main thread of the random walk's profile waited up to a second for its tables. */
static int table_due(const struct tk_prof *p)
{
	return !p->ahead || (p->nnodes + 1) * 4 > (p->node_mask + 1) * 3 ||
	       tk_ahead_table_ready(p->ahead);
}

/* get_child past the first slot: probe on, or create the node. A node found further on
 * trades places with the one in its first slot (linear probing allows it: both runs stay
 * unbroken), so the nodes in use are found at the first try. */
static uint32_t child_slow(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			   uint32_t track, uint64_t h, uint32_t func)
{
	uint32_t tag = node_tag(h);
	size_t home = node_slot(p, h), s = home;
	for (; p->node_map[s].tag; s = (s + 1) & p->node_mask) {
		if (p->node_map[s].tag != tag)
			continue;
		uint32_t i = p->node_map[s].node;
		const struct node *n = &p->nodes[i];
		if (n->key == key && n->parent == parent && n->kind == kind) {
			struct nslot e = p->node_map[s];
			p->node_map[s] = p->node_map[home];
			p->node_map[home] = e;
			return i;
		}
	}
	if ((p->nnodes + 1) * 2 > p->node_mask + 1 && table_due(p)) {
		if (node_rehash(p) < 0)
			return NONE32;
		for (s = node_slot(p, h); p->node_map[s].tag; s = (s + 1) & p->node_mask)
			;
	}
	uint32_t i = new_node(p, parent, key, kind, track, func);
	if (i != NONE32)
		p->node_map[s] = (struct nslot){ .node = i, .tag = tag };
	return i;
}

uint32_t prof_get_child_slow(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			     uint32_t track, uint64_t h)
{
	return child_slow(p, parent, key, kind, track, h, PROF_FUNC_LOOKUP);
}

uint32_t prof_make_child(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			 uint32_t track, uint32_t func)
{
	return child_slow(p, parent, key, kind, track, node_hash(parent, key, kind), func);
}

/* Count one execution of block [START, END] of COUNT instructions. The counts stay in the
 * cache slot while the block is there: a hit touches one slot and nothing else. */

/* Every profile starts with this block cache, empty and never written (a slot of it is
 * never a hit, and flushing it moves nothing): one that counts no blocks (XRay's, a
 * timeline's) never makes its own, whose 128 KiB a chunk's profile faulted in afresh at
 * every chunk at -j N (at -j 64 of an XRay log, 2.5 % of the CPU). */
static struct block_slot empty_cache[BLOCK_CACHE] __attribute__((aligned(64)));
static pthread_once_t empty_cache_once = PTHREAD_ONCE_INIT;

static void empty_cache_init(void)
{
	/* an empty slot holds a start address that belongs to another slot: never a hit */
	for (size_t i = 0; i < BLOCK_CACHE; i++)
		empty_cache[i] = (struct block_slot){ .start = i ^ 1, .index = NONE32 };
}

int prof_block_cache_used(const struct tk_prof *p)
{
	return p->block_cache != empty_cache;
}

int prof_count_block_slow(struct tk_prof *p, uint64_t start, uint64_t end, uint64_t count)
{
	if (!prof_block_cache_used(p)) {   /* its first block: a cache of its own */
		/* cache-line aligned: a slot must not straddle two lines */
		struct block_slot *own = aligned_alloc(64, sizeof empty_cache);
		if (!own)
			return -TK_E_NOMEM;
		memcpy(own, empty_cache, sizeof empty_cache);
		p->block_cache = own;
	}
	struct block *b = prof_get_block(p, start, end);
	if (!b)
		return -TK_E_NOMEM;
	if (end - start > UINT32_MAX) {
		b->execs++;
		b->insns += count;
		return 0;
	}
	struct block_slot *c = &p->block_cache[block_slot(start)];
	block_slot_flush(p, c);
	*c = (struct block_slot){ .start = start, .len = (uint32_t)(end - start),
				  .index = (uint32_t)(b - p->blocks), .execs = 1, .insns = count };
	return 0;
}

/* All counts of the cache into the blocks (before they are read). */
void prof_block_cache_flush(struct tk_prof *p)
{
	for (size_t i = 0; prof_block_cache_used(p) && i < BLOCK_CACHE; i++)
		block_slot_flush(p, &p->block_cache[i]);
}

/* Room for NEED blocks, grown as the call tree's arrays are (in place, on huge pages):
 * the block counts of a walk over libLLVM (130,000 blocks, 4 MiB) go into the total after
 * the run, on one thread, where each doubling's copy into fresh pages (a first touch costs
 * about 1 us per KiB on this VM) took 10-20 ms of llvm-prof's 60 ms serial part. */
static int grow_blocks(struct tk_prof *p, size_t need)
{
	if (need <= p->cblocks)
		return 0;
	size_t nc = p->cblocks ? p->cblocks * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *q = grow_array(p->blocks, p->cblocks * sizeof *p->blocks, nc * sizeof *p->blocks,
			     p->nblocks * sizeof *p->blocks, _Alignof(struct block));
	if (!q)
		return -TK_E_NOMEM;
	p->blocks = q;
	p->cblocks = nc;
	return 0;
}

/* The block [START, END] in the table, created when missing (its counts may lag: the
 * cache's are added by block_cache_flush). */
struct block *prof_get_block(struct tk_prof *p, uint64_t start, uint64_t end)
{
	if ((p->nblocks + 1) * 2 > p->block_mask + 1 || !p->block_map)
		if (rehash(&p->block_map, &p->block_mask, p->nblocks, 0, block_hash_of, p) < 0)
			return NULL;
	size_t s = block_hash(start, end) & p->block_mask;
	for (;; s = (s + 1) & p->block_mask) {
		uint32_t i = p->block_map[s];
		if (i == NONE32)
			break;
		struct block *b = &p->blocks[i];
		if (b->start == start && b->end == end)
			return b;
	}
	if (grow_blocks(p, p->nblocks + 1) < 0)
		return NULL;
	uint32_t i = (uint32_t)p->nblocks++;
	p->blocks[i] = (struct block){ .start = start, .end = end };
	p->block_map[s] = i;
	return &p->blocks[i];
}

/* Add the counts V[0..N) to their blocks (created when missing; none for no executions).
 * The table grows once, up front; then each lookup's map slot is fetched BLOCKS_AHEAD
 * counts before it, and the block that slot names half as far: with a walker's 100,000
 * blocks going into a table far larger than the caches, one at a time each lookup waited
 * on two misses in a row. */
#define BLOCKS_AHEAD 16
int prof_add_blocks(struct tk_prof *p, const struct tk_prof_block_count *v, size_t n)
{
	if ((p->nblocks + n + 1) * 2 > p->block_mask + 1 || !p->block_map)
		if (rehash(&p->block_map, &p->block_mask, p->nblocks, n, block_hash_of, p) < 0)
			return -TK_E_NOMEM;
	if (grow_blocks(p, p->nblocks + n) < 0)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		if (i + BLOCKS_AHEAD < n)
			__builtin_prefetch(&p->block_map[block_hash(v[i + BLOCKS_AHEAD].start,
								    v[i + BLOCKS_AHEAD].last) &
							 p->block_mask]);
		if (i + BLOCKS_AHEAD / 2 < n) {
			const struct tk_prof_block_count *a = &v[i + BLOCKS_AHEAD / 2];
			uint32_t k = p->block_map[block_hash(a->start, a->last) & p->block_mask];
			if (k != NONE32)
				__builtin_prefetch(&p->blocks[k]);
		}
		if (!v[i].execs)
			continue;
		struct block *b = prof_get_block(p, v[i].start, v[i].last);   /* no growth: room made */
		if (!b)
			return -TK_E_NOMEM;
		b->execs += v[i].execs;
		b->insns += v[i].insns;
	}
	return 0;
}

/* ---- the duration log: memory, then a spill file ------------------------------------- */

/* Make the current slice of the log's chunk writable in one call: filling the log is
 * otherwise dominated by one page fault per 4 KiB (more than the pages' zeroing). */
static void dlog_populate(uint64_t *from, uint64_t *to)
{
#ifdef MADV_POPULATE_WRITE
	const uintptr_t page = 4096;
	uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), e = (uintptr_t)to & ~(page - 1);
	if (e > a)
		madvise((void *)a, e - a, MADV_POPULATE_WRITE);   /* a hint: faults do it else */
#else
	(void)from, (void)to;
#endif
}

void dlog_release(const struct dchunk *d, size_t entries)
{
	if (d->spilled && entries)
		madvise(d->v, ((entries * sizeof *d->v) + 4095) & ~(size_t)4095, MADV_DONTNEED);
}

/* A chunk of DLOG_CHUNK entries in the spill file (created on first use), or NULL. */
uint64_t *prof_spill_chunk(struct tk_prof *p)
{
	const size_t bytes = DLOG_CHUNK * sizeof(uint64_t);
	if (!p->spill_fd) {
		const char *dir = getenv("TMPDIR");
		if (!dir || !*dir)
			dir = "/tmp";
		int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			return NULL;
		p->spill_fd = fd + 1;
	}
	if (ftruncate(p->spill_fd - 1, (off_t)(p->spill_off + bytes)) < 0)
		return NULL;
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->spill_fd - 1,
		       (off_t)p->spill_off);
	if (m == MAP_FAILED)
		return NULL;
	p->spill_off += bytes;
	return m;
}

size_t prof_dlog_budget(const struct tk_prof *p)
{
	return p->opts.durations_in_memory ? p->opts.durations_in_memory : DLOG_IN_MEMORY;
}

void prof_count_durations(struct tk_prof *p)
{
	p->counting = 1;
}

/* Twice the slots of the counting index (every entry of druns in it again). */
int prof_dhash_grow(struct tk_prof *p)
{
	size_t cap = p->dhash_mask ? 2 * (p->dhash_mask + 1) : 4096;
	while (cap < 2 * (p->ndruns + 1))
		cap *= 2;
	if (p->ndruns >= NONE32)
		return -TK_E_NOMEM;
	uint32_t *h = malloc(cap * sizeof *h);
	if (!h)
		return -TK_E_NOMEM;
	memset(h, 0xff, cap * sizeof *h);
	for (size_t i = 0; i < p->ndruns; i++) {
		const struct dval *v = &p->druns[i];
		size_t k = tk_hash64(v->ticks ^ (uint64_t)v->func << 40) & (cap - 1);
		while (h[k] != NONE32)
			k = (k + 1) & (cap - 1);
		h[k] = (uint32_t)i;
	}
	free(p->dhash);
	p->dhash = h;
	p->dhash_mask = cap - 1;
	return 0;
}

/* Room for the next duration: the next slice of the chunk, or a new chunk. */
int prof_dlog_more(struct tk_prof *p)
{
	if (p->dlog_cur && p->dlog_cap < p->dlog_end) {
		size_t e = p->dlog_cap + DLOG_SLICE < p->dlog_end ? p->dlog_cap + DLOG_SLICE : p->dlog_end;
		/* not a chunk on huge pages: each fault there makes 2 MiB writable holding
		 * only its mapping's lock, where a populate holds the process's (its zeroing
		 * of cold memory took 1.5-3 ms here, while another worker's mmap waited) */
		if (p->dlog_end != DLOG_CHUNK || p->dlog[p->ndlog - 1].spilled)
			dlog_populate(p->dlog_cur + p->dlog_cap, p->dlog_cur + e);
		p->dlog_cap = e;
		return 0;
	}
	if (prof_grow((void **)&p->dlog, &p->cdlog, p->ndlog + 1, sizeof *p->dlog) < 0)
		return -TK_E_NOMEM;
	/* after a take, a small one first: the seams of a merge complete few calls; a chunk's
	 * profile whose last chunk's durations outgrew the first chunk goes on in large ones
	 * (each small first chunk was fresh memory on small pages, 64 of a run's 3,300 page
	 * faults, written at a stall per page: XRay's profile -j 2 at 64 chunks took 0.56 s of
	 * CPU against 0.44 s at 16) */
	if (!p->dlog_cur && !p->ndlog && p->dlog_spare.v) {
		/* the rest of the chunk its last log ended in: already on huge pages, its last
		 * one written in part (writable at once: no populate there) */
		struct dchunk d = p->dlog_spare;
		p->dlog_spare = (struct dchunk){ 0 };
		p->dlog_heap += d.cap * sizeof *d.v;
		p->dlog[p->ndlog++] = d;
		p->dlog_cur = d.v;
		p->dlog_n = 0;
		p->dlog_end = p->dlog_cap = d.cap;
		return 0;
	}
	size_t cap = p->dlog_cur ? DLOG_CHUNK : p->ndlog ? DLOG_SMALL :
		     p->dlog_grew ? DLOG_CHUNK : DLOG_FIRST;
	uint64_t *c = NULL;
	int spilled = 0;
	if (cap == DLOG_CHUNK && p->dlog_heap + cap * sizeof *c > prof_dlog_budget(p))
		spilled = (c = prof_spill_chunk(p)) != NULL;   /* else memory, as long as there is */
	/* A profile past its first chunk grows by millions of durations: its next chunks on
	 * huge pages, a fault for each 2 MiB (each 4 KiB page populated alone cost 6 us
	 * here: 130 ms for a branch trace's 90 MB log). The first chunk, which a
	 * chunk's profile often fills only in part, is small, on small pages: 8 MiB ones,
	 * huge from the start, held 14 MB more of a sanitizer build's memory for a trace in
	 * 56 parts (tests/oracle/btrace_memory.sh); on small pages throughout, the stores
	 * into them were a third of XRay's profile -j 2 (each chunk's 2.5 MiB of durations,
	 * every page fresh). */
	if (!c && !(c = cap == DLOG_CHUNK ? tk_malloc_huge(cap * sizeof *c) : malloc(cap * sizeof *c)))
		return -TK_E_NOMEM;
	if (!spilled)
		p->dlog_heap += cap * sizeof *c;
	if (p->dlog_cur) {
		p->dlog[p->ndlog - 1].n = p->dlog_n;
		dlog_release(&p->dlog[p->ndlog - 1], p->dlog_n);
	}
	p->dlog[p->ndlog++] = (struct dchunk){ .v = c, .cap = cap, .spilled = (uint8_t)spilled,
					       .huge = !spilled && cap == DLOG_CHUNK };
	p->dlog_cur = c;
	p->dlog_n = 0;
	p->dlog_end = cap;
	/* the first few thousand fault in as usual: small profiles stay small */
	p->dlog_cap = cap < DLOG_SMALL ? cap : DLOG_SMALL;
	return 0;
}

/* ---- a profile's life ------------------------------------------------------------------ */

static struct entry_set *entry_set_new(const uint64_t *entries, size_t n)
{
	struct entry_set *e = calloc(1, sizeof *e);
	size_t nslots = 16;

	while (nslots < 2 * n)
		nslots *= 2;
	/* (tk_sym_entries' come sorted: the sort is one pass over them) */
	/* on huge pages when large: libLLVM's 142,012 entries fill 4 MiB of slots, whose
	 * 1,024 small pages faulted in were 15-20 ms of its profile's serial part */
	if (!e || !(e->v = tk_malloc_huge(n * sizeof *e->v)) ||
	    !(e->bits = calloc(ENTRY_BITS / 64, sizeof *e->bits)) ||
	    !(e->slots = tk_calloc_huge(nslots, sizeof *e->slots)) ||
	    tk_sort_u64(memcpy(e->v, entries, n * sizeof *e->v), n) < 0) {
		if (e) {
			free(e->v);
			free(e->bits);
			free(e->slots);
		}
		free(e);
		return NULL;
	}
	e->slot_mask = nslots - 1;
	for (size_t i = 0; i < n; i++)
		if (!e->n || e->v[e->n - 1] != e->v[i])
			e->v[e->n++] = e->v[i];
	for (size_t i = 0; i < e->n; i++) {
		size_t b = entry_bit(e->v[i]);
		e->bits[b / 64] |= (uint64_t)1 << (b % 64);
		if (!e->v[i])
			continue;   /* is_entry looks 0 up in v */
		size_t k = entry_slot(e->v[i]);
		while (e->slots[k & e->slot_mask])
			k++;
		e->slots[k & e->slot_mask] = e->v[i];
	}
	e->refs = 1;
	return e;
}

static void entry_set_put(struct entry_set *e)
{
	if (e && __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(e->v);
		free(e->bits);
		free(e->slots);
		free(e);
	}
}

/* P's entries from its entry set (none without one). */
static void use_entries(struct tk_prof *p)
{
	use_entry_set(p, p->eset);
	p->opts.entries = p->entries;
	p->opts.nentries = p->nentries;
}

int tk_prof_track_entries(struct tk_prof *p, uint32_t track, const uint64_t *entries, size_t n)
{
	struct track_entries *t = realloc(p->tsets, (p->ntsets + 1) * sizeof *t);
	struct entry_set *e;

	if (!t)
		return -TK_E_NOMEM;
	p->tsets = t;
	if (!(e = entry_set_new(entries, n)))
		return -TK_E_NOMEM;
	p->tsets[p->ntsets++] = (struct track_entries){ track, e };
	p->last_track = NONE32;   /* get_track sets the hot fields again */
	return 0;
}

int tk_prof_track_group(struct tk_prof *p, uint32_t track, uint32_t group)
{
	struct track_group *g = realloc(p->tgroups, (p->ntgroups + 1) * sizeof *g);

	if (!g)
		return -TK_E_NOMEM;
	p->tgroups = g;
	g[p->ntgroups++] = (struct track_group){ track, group };
	return 0;
}

int tk_prof_grouped(const struct tk_prof *p)
{
	return p->ntgroups != 0;
}

/* The state of a profile that has seen nothing (its tables empty). */
static void start_empty(struct tk_prof *p)
{
	memset(&p->sum, 0, sizeof p->sum);
	p->sum.time_first = p->sum.time_last = TK_TIME_NONE;
	p->sum.clock = p->opts.clock;
	p->last_track = NONE32;
	memset(&p->slots, 0, sizeof p->slots);
	p->slots.nnodes = SIZE_MAX;
	if (prof_block_cache_used(p))   /* kept: the next chunk is likely to count blocks too */
		memcpy(p->block_cache, empty_cache, sizeof empty_cache);
}

struct tk_prof *tk_prof_new(const struct tk_prof_opts *opts, int *err)
{
	struct tk_prof *p = calloc(1, sizeof *p);
	if (!p) {
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	if (opts) {
		size_t n = opts->sz < sizeof p->opts ? opts->sz : sizeof p->opts;
		memcpy(&p->opts, opts, n);
	}
	p->opts.sz = sizeof p->opts;
	/* (tests run the slot loads on small profiles, under the sanitizers) */
	const char *slots_min = getenv("TK_PROF_SLOTS_MIN");
	p->slots_min = slots_min ? strtoull(slots_min, NULL, 10) : SLOTS_AHEAD_MIN;
	p->rehash_split = REHASH_SPLIT;
	if ((p->opts.flags & TK_PROF_WINDOW) && !p->opts.window_end)
		p->opts.window_end = UINT64_MAX;    /* no end */
	if (!p->opts.entries)
		p->opts.nentries = 0;
	if (p->opts.nentries && !(p->eset = entry_set_new(p->opts.entries, p->opts.nentries))) {
		free(p);
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	use_entries(p);
	pthread_once(&empty_cache_once, empty_cache_init);
	p->block_cache = empty_cache;
	if (node_rehash(p) < 0) {
		tk_prof_free(p);
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	start_empty(p);
	if (err)
		*err = 0;
	return p;
}

struct tk_prof *tk_prof_new_like(const struct tk_prof *p, int *err)
{
	struct tk_prof_opts o = p->opts;

	o.entries = NULL;
	o.nentries = 0;
	o.match_free = NULL;   /* P's */
	struct tk_prof *q = tk_prof_new(&o, err);

	if (q) {
		q->counting = p->counting;
		q->no_ahead = 1;
	}
	if (q && p->eset) {
		__atomic_add_fetch(&p->eset->refs, 1, __ATOMIC_RELAXED);
		q->eset = p->eset;
		use_entries(q);
	}
	if (q && p->ntsets) {
		if (!(q->tsets = malloc(p->ntsets * sizeof *q->tsets))) {
			tk_prof_free(q);
			if (err)
				*err = -TK_E_NOMEM;
			return NULL;
		}
		for (size_t i = 0; i < p->ntsets; i++) {
			__atomic_add_fetch(&p->tsets[i].es->refs, 1, __ATOMIC_RELAXED);
			q->tsets[q->ntsets++] = p->tsets[i];
		}
	}
	return q;
}

void dchunk_free(const struct dchunk *d)
{
	if (d->spilled) {
		munmap(d->v, DLOG_CHUNK * sizeof *d->v);
	} else if (!d->share) {
		free(d->v);
	} else if (__atomic_sub_fetch(&d->share->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(d->share->base);   /* (its pieces are freed on any thread: free_dlog) */
		free(d->share);
	}
}

static int free_dchunk(void *ctx, size_t i)
{
	dchunk_free((const struct dchunk *)ctx + i);
	return 0;
}

/* The duration log's chunks. A large log (tens of megabytes of written pages, whose
 * unmapping is the kernel's work: ~10 ms on the 153 MB XRay log of bench/scaling.sh) is
 * given back on the profile's threads when FINAL, not on the caller's. */
static void free_dlog(struct tk_prof *p, int final)
{
	size_t done = 0, n = 0;

	for (size_t i = 0; final && i < p->ndlog; i++)
		n += p->dlog[i].n;
	if (p->opts.nthreads > 1 && n >= 4 * DLOG_CHUNK) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = p->opts.nthreads };
		if (tk_pool_run(&po, p->ndlog, free_dchunk, NULL, p->dlog) == 0)
			done = p->ndlog;
	}
	for (size_t i = done; i < p->ndlog; i++)   /* one thread, or none could start */
		free_dchunk(p->dlog, i);
}

/* Free what P gathered besides its tables: the functions' big[], the duration log and its
 * maps, the tracks' stacks. */
static void free_gathered(struct tk_prof *p, int final)
{
	for (size_t i = 0; i < p->nfuncs; i++)
		free(p->funcs[i].big);
	free_dlog(p, final);
	if (p->spill_fd)
		close(p->spill_fd - 1);
	for (size_t i = 0; i < p->nfmaps; i++)
		free(p->fmaps[i].v);
	free(p->druns);
	p->druns = NULL;
	p->ndruns = p->cdruns = 0;
	free(p->dhash);
	p->dhash = NULL;
	p->dhash_mask = 0;
	for (size_t i = 0; i < p->ntracks; i++) {
		free(p->tracks[i].st);
		free(p->tracks[i].orph);
		tk_retset_free(&p->tracks[i].rets);
	}
}

int tk_prof_reset(struct tk_prof *p)
{
	free_gathered(p, 0);
	free(p->cyc);
	p->cyc = NULL;
	p->ncyc = 0;
	p->nnodes = p->nfuncs = p->nblocks = p->ntracks = p->ndlog = p->nfmaps = 0;
	p->dlog_cur = NULL;
	p->dlog_n = p->dlog_cap = p->dlog_end = p->dlog_heap = 0;
	p->spill_fd = 0;
	p->spill_off = 0;
	memset(p->node_map, 0, (p->node_mask + 1) * sizeof *p->node_map);
	for (size_t s = 0; p->func_map && s <= p->func_mask; s++)
		p->func_map[s].fk = FSLOT_EMPTY;
	if (p->block_map)
		memset(p->block_map, 0xff, (p->block_mask + 1) * sizeof *p->block_map);
	p->serial = 0;
	p->ahead_at = 0;
	p->populated = 0;
	p->final_orphans = 0;
	p->finished = p->nomem = 0;
	start_empty(p);
	return 0;
}

void tk_prof_free(struct tk_prof *p)
{
	if (!p)
		return;
	tk_ahead_stop(p->ahead);   /* before the arrays it may be populating go */
	free_gathered(p, 1);
	if (p->dlog_spare.v)
		dchunk_free(&p->dlog_spare);
	free(p->dlog);
	free(p->fmaps);
	free_array(p->nodes, p->cnodes * sizeof *p->nodes);
	free_array(p->links, p->clinks * sizeof *p->links);
	free(p->cyc);
	free(p->node_map);
	free(p->funcs);
	free(p->func_map);
	free_array(p->blocks, p->cblocks * sizeof *p->blocks);
	free(p->block_map);
	free(p->tracks);
	if (prof_block_cache_used(p))
		free(p->block_cache);
	free(p->match);
	if (p->opts.match_free)
		p->opts.match_free(p->opts.match_ctx);
	entry_set_put(p->eset);
	for (size_t i = 0; i < p->ntsets; i++)
		entry_set_put(p->tsets[i].es);
	free(p->tsets);
	free(p->tgroups);
	free(p);
}

int prof_add_cycles(struct tk_prof *p, uint32_t n, uint64_t cycles, uint64_t insns)
{
	if (n >= p->ncyc) {
		size_t nc = p->cnodes > n ? p->cnodes : (size_t)n + 1;
		struct node_cyc *c = realloc(p->cyc, nc * sizeof *c);

		if (!c)
			return -TK_E_NOMEM;
		memset(c + p->ncyc, 0, (nc - p->ncyc) * sizeof *c);
		p->cyc = c;
		p->ncyc = nc;
	}
	p->cyc[n].cycles += cycles;
	p->cyc[n].insns += insns;
	return 0;
}

/* ---- durations as distinct values (partial results, statistics of merged partials) ---- */

int prof_dval_cmp(const void *a, const void *b)
{
	const struct dval *x = a, *y = b;

	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	return x->ticks < y->ticks ? -1 : x->ticks > y->ticks;
}

/* Equal durations counted in a hash table of the distinct (function, ticks) pairs: most
 * are repeats, so the table stays small (in cache) where a copy of the log sorted would
 * be written and read several times over. */
struct dcount {
	struct dval *v;
	size_t n, mask;
};

static int dcount_grow(struct dcount *c)
{
	size_t cap = 2 * (c->mask + 1);
	struct dval *nv = calloc(cap, sizeof *nv);

	if (!nv)
		return -TK_E_NOMEM;
	for (size_t i = 0; i <= c->mask; i++)
		if (c->v[i].count) {
			size_t h = tk_hash64(c->v[i].ticks ^ (uint64_t)c->v[i].func << 40) & (cap - 1);
			while (nv[h].count)
				h = (h + 1) & (cap - 1);
			nv[h] = c->v[i];
		}
	free(c->v);
	c->v = nv;
	c->mask = cap - 1;
	return 0;
}

/* (inline: a partial's save adds every call's duration) */
static inline int dcount_add(struct dcount *c, uint32_t f, uint64_t ticks, uint64_t n)
{
	if (2 * (c->n + 1) > c->mask + 1 && dcount_grow(c) < 0)
		return -TK_E_NOMEM;
	struct dval *v = c->v;
	size_t h = tk_hash64(ticks ^ (uint64_t)f << 40) & c->mask;
	while (v[h].count && (v[h].ticks != ticks || v[h].func != f))
		h = (h + 1) & c->mask;
	if (!v[h].count) {
		v[h] = (struct dval){ ticks, 0, f };
		c->n++;
	}
	v[h].count += n;
	return 0;
}

/* A counting profile's values (druns: distinct but where merges added to them) sorted in
 * a copy, equal neighbours joined: no second table of them. */
static int counted_values(const struct tk_prof *p, const uint32_t *map, struct dval **out, size_t *n)
{
	struct dval *v = malloc((p->ndruns ? p->ndruns : 1) * sizeof *v);
	size_t m = 0;

	if (!v)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < p->ndruns; i++) {
		uint32_t f = p->druns[i].func;
		if (f >= p->nfuncs) {
			free(v);
			return -TK_E_INTERNAL;
		}
		v[i] = p->druns[i];
		v[i].func = map ? map[f] : f;
	}
	qsort(v, p->ndruns, sizeof *v, prof_dval_cmp);
	for (size_t i = 0; i < p->ndruns; i++) {
		if (m && v[m - 1].func == v[i].func && v[m - 1].ticks == v[i].ticks)
			v[m - 1].count += v[i].count;
		else
			v[m++] = v[i];
	}
	*out = v;
	*n = m;
	return 0;
}

int prof_duration_values(const struct tk_prof *p, const uint32_t *map, struct dval **out, size_t *n)
{
	if (p->counting && !p->ndlog)
		return counted_values(p, map, out, n);
	size_t nf = p->nfuncs;
	size_t *bigi = calloc(nf + 1, sizeof *bigi);
	/* room for the runs a loaded profile holds (mostly distinct values) from the start:
	 * growing by doubling would insert each of them again and again */
	size_t cap = 1024;
	while (cap < 2 * p->ndruns && cap < ((size_t)1 << 26))
		cap *= 2;
	struct dcount c = { calloc(cap, sizeof *c.v), 0, cap - 1 };
	int rc = bigi && c.v ? 0 : -TK_E_NOMEM;

	*out = NULL;
	*n = 0;
	for (size_t k = 0; k < p->ndlog && rc == 0; k++) {
		const struct dchunk *d = &p->dlog[k];
		for (size_t j = 0, e = dlog_len(p, k), r; j < e && rc == 0; j = r) {
			uint32_t f = (uint32_t)(d->v[j] >> 32);
			uint64_t ticks = d->v[j] & 0xffffffffu;
			/* a run of one function's equal durations (calls in a loop) added at
			 * once; those of DUR_BIG or more one by one, from its big[] in turn */
			for (r = j + 1; ticks != DUR_BIG && r < e && d->v[r] == d->v[j]; r++)
				;
			if (d->map)
				f = d->map[f];
			if (f >= nf) {
				rc = -TK_E_INTERNAL;
				break;
			}
			if (ticks == DUR_BIG)
				ticks = bigi[f] < p->funcs[f].nbig ? p->funcs[f].big[bigi[f]++] : DUR_BIG;
			rc = dcount_add(&c, map ? map[f] : f, ticks, r - j);
		}
	}
	for (size_t i = 0; i < p->ndruns && rc == 0; i++) {
		uint32_t f = p->druns[i].func;
		rc = f < nf ? dcount_add(&c, map ? map[f] : f, p->druns[i].ticks, p->druns[i].count)
			    : -TK_E_INTERNAL;
	}
	free(bigi);
	if (rc < 0) {
		free(c.v);
		return rc;
	}
	/* the distinct values together, by function then ticks */
	size_t m = 0;
	for (size_t i = 0; i <= c.mask; i++)
		if (c.v[i].count)
			c.v[m++] = c.v[i];
	qsort(c.v, m, sizeof *c.v, prof_dval_cmp);
	*out = c.v;
	*n = m;
	return 0;
}
