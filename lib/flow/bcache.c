/* Block cache: straight-line runs of code classified once, looked up by start address. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "flow/bcache.h"
#include "flow/share.h"
#include "tracekit/common.h"
#include "tracekit/internal/util.h"

#define MAX_BLOCK_INSNS 4096   /* cut very long straight runs: keeps lengths bounded */
/* a block's last instruction is within a link's 16-bit offset of its start */
_Static_assert((MAX_BLOCK_INSNS - 1) * TK_MAX_INSN_BYTES < 65536, "tk_block_link.last_off");

/* OLD (N elements of SIZE in use) grown to CAP elements, on huge pages once that is large
 * enough (tk_calloc_huge: the walker reads links, and less often blocks and slots, at
 * random); NULL when out of memory (OLD is then kept). realloc cannot keep the alignment. */
static void *grow_array(void *old, size_t n, size_t cap, size_t size)
{
	void *m;

	if (cap * size < TK_HUGE_FROM)
		return realloc(old, cap * size);
	if (!(m = tk_calloc_huge(cap, size)))
		return NULL;
	if (n)
		memcpy(m, old, n * size);
	free(old);
	return m;
}

int tk_bcache_init(struct tk_bcache *c, const struct tk_image *img)
{
	memset(c, 0, sizeof(*c));
	c->img = img;
	tk_isa_init(&c->isa);
	c->mask = 4095;
	c->slots = tk_calloc_huge(c->mask + 1, sizeof(*c->slots));
	return c->slots ? 0 : -TK_E_NOMEM;
}

void tk_bcache_fini(struct tk_bcache *c)
{
	free(c->entries);
	free(c->slots);
	free(c->blocks);
	free(c->links);
	free(c->lens);
	memset(c, 0, sizeof(*c));
}

int tk_bcache_set_entries(struct tk_bcache *c, const uint64_t *entries, size_t n)
{
	uint64_t *e = NULL;

	if (n) {
		if (!(e = malloc(n * sizeof(*e))))
			return -TK_E_NOMEM;
		memcpy(e, entries, n * sizeof(*e));
		/* (a session switches process, and entries, at every context switch: sorted
		 * ones, a profile's, cost one pass) */
		if (tk_sort_u64(e, n) < 0) {
			free(e);
			return -TK_E_NOMEM;
		}
	}
	free(c->entries);
	c->entries = e;
	c->nentries = n;
	for (uint32_t i = 0; i < c->nblocks; i++) {
		struct tk_block *b = &c->blocks[i];

		b->flags = (uint8_t)((b->flags & ~TK_BLK_ENTRY) |
				     (tk_sorted_has_u64(e, n, b->start) ? TK_BLK_ENTRY : 0));
		/* an entry can end a path (count mode) */
		c->links[i].flags = (uint8_t)(b->flags | (c->links[i].flags & TK_BLK_FAR));
	}
	return 0;
}

static inline uint32_t block_hash(uint64_t ip, int mode)
{
	return (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62);
}

/* Blocks [0, N) into the empty table SLOTS (MASK + 1 of them): index + 1 at each. */
static void place_blocks(uint32_t *slots, uint32_t mask, const struct tk_block *blocks, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t h = block_hash(blocks[i].start, blocks[i].mode) & mask;

		while (slots[h])
			h = (h + 1) & mask;
		slots[h] = i + 1;
	}
}

static int grow_slots(struct tk_bcache *c)
{
	uint32_t mask = c->mask * 2 + 1;
	uint32_t *slots = tk_calloc_huge((size_t)mask + 1, sizeof(*slots));

	if (!slots)
		return -TK_E_NOMEM;
	place_blocks(slots, mask, c->blocks, c->nblocks);
	free(c->slots);
	c->slots = slots;
	c->mask = mask;
	return 0;
}

/* Room for NEED instruction lengths in *LENS (*CAP of them now). */
static int grow_lens(uint8_t **lens, size_t *cap, size_t need)
{
	if (need > *cap) {
		size_t c = *cap ? *cap : 65536;
		while (c < need)
			c *= 2;
		uint8_t *l = realloc(*lens, c);

		if (!l)
			return -TK_E_NOMEM;
		*lens = l;
		*cap = c;
	}
	return 0;
}

static int push_len(struct tk_bcache *c, uint8_t len)
{
	if (grow_lens(&c->lens, &c->caplens, c->nlens + 1) < 0)
		return -TK_E_NOMEM;
	c->lens[c->nlens++] = len;
	return 0;
}

/* ---- blocks shared by the caches of one run ------------------------------------------
 * Looked up without a lock (a cache asks on each of its own misses, and the lock's line
 * crossing between cores on every ask cost as much as the decodes it saved on the walk
 * over libc); added under one. Nothing a reader may be reading moves or is freed before
 * tk_bshare_free: blocks and their lengths live in segments that are never reallocated,
 * and a slot table outgrown is kept. A slot is published (release) after its block. */
/* blocks a segment: 2 MiB, one huge page (segments of 256 KiB on small pages were 550 of
 * the 1,700 page faults the walk's decode --stat -j 2 made over -j 1) */
#define SHARE_SEG_BITS 15
#define SHARE_SEGS 4096                         /* 128 M blocks at most: then not shared */
#define SHARE_LENS_SEG ((size_t)1 << 16)        /* bytes a lengths' segment (>= 4096) */

struct share_block {
	struct tk_block b;        /* never TK_BLK_ENTRY (a cache's own) */
	const uint8_t *lens;
};

struct share_table {
	struct share_table *older;
	uint32_t mask;
	_Atomic uint32_t slots[];  /* block index + 1, 0 = empty */
};

struct tk_bshare {
	pthread_mutex_t lock;     /* adders */
	_Atomic(struct share_table *) table;
	struct share_block *seg[SHARE_SEGS];
	uint32_t n;               /* blocks (the adders') */
	uint8_t *lens;            /* the current lengths' segment, LENS_USED of it used */
	size_t lens_used;
	uint8_t **lens_segs;      /* all of them, to free */
	size_t nlens_segs;
};

static struct share_table *share_table_new(uint32_t mask, struct share_table *older)
{
	struct share_table *t = calloc(1, sizeof *t + ((size_t)mask + 1) * sizeof t->slots[0]);
	if (t) {
		t->mask = mask;
		t->older = older;
	}
	return t;
}

struct tk_bshare *tk_bshare_new(void)
{
	struct tk_bshare *s = calloc(1, sizeof *s);
	struct share_table *t = s ? share_table_new(4095, NULL) : NULL;

	if (!t) {
		free(s);
		return NULL;
	}
	atomic_init(&s->table, t);
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

void tk_bshare_free(struct tk_bshare *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	for (struct share_table *t = atomic_load(&s->table), *o; t; t = o) {
		o = t->older;
		free(t);
	}
	for (size_t i = 0; i < SHARE_SEGS && s->seg[i]; i++)
		free(s->seg[i]);
	for (size_t i = 0; i < s->nlens_segs; i++)
		free(s->lens_segs[i]);
	free(s->lens_segs);
	free(s);
}

static inline struct share_block *share_at(const struct tk_bshare *s, uint32_t i)
{
	return &s->seg[i >> SHARE_SEG_BITS][i & ((1u << SHARE_SEG_BITS) - 1)];
}

/* The block at IP in MODE, or NULL; any thread, no lock. */
static const struct share_block *share_find(const struct tk_bshare *s, uint64_t ip, int mode)
{
	const struct share_table *t = atomic_load_explicit(&s->table, memory_order_acquire);
	uint32_t v;

	for (uint32_t h = block_hash(ip, mode) & t->mask;
	     (v = atomic_load_explicit(&t->slots[h], memory_order_acquire));
	     h = (h + 1) & t->mask) {
		const struct share_block *sb = share_at(s, v - 1);
		if (sb->b.start == ip && sb->b.mode == mode)
			return sb;
	}
	return NULL;
}

/* The block at B's start and mode into B, its lengths appended to C's: 1, or 0 when no
 * cache of the run has it, or an error. */
static int share_get(const struct tk_bshare *s, struct tk_bcache *c, struct tk_block *b)
{
	const struct share_block *sb = share_find(s, b->start, b->mode);

	if (!sb)
		return 0;
	if (grow_lens(&c->lens, &c->caplens, c->nlens + sb->b.ninsn) < 0)
		return -TK_E_NOMEM;
	*b = sb->b;
	b->lens = (uint32_t)c->nlens;
	if (sb->b.ninsn)   /* (an empty block's lengths may be NULL) */
		memcpy(c->lens + c->nlens, sb->lens, sb->b.ninsn);
	c->nlens += sb->b.ninsn;
	return 1;
}

/* Room for N lengths in the current segment (a new one when they do not fit). */
static uint8_t *share_lens(struct tk_bshare *s, size_t n)
{
	if (!s->lens || s->lens_used + n > SHARE_LENS_SEG) {
		uint8_t **segs = realloc(s->lens_segs, (s->nlens_segs + 1) * sizeof *segs);
		if (!segs)
			return NULL;
		s->lens_segs = segs;
		if (!(s->lens = malloc(SHARE_LENS_SEG)))
			return NULL;
		s->lens_segs[s->nlens_segs++] = s->lens;
		s->lens_used = 0;
	}
	uint8_t *l = s->lens + s->lens_used;
	s->lens_used += n;
	return l;
}

/* A table twice the size with every block in it, published; the old one kept (readers). */
static int share_grow(struct tk_bshare *s, struct share_table *t)
{
	uint32_t mask = t->mask * 2 + 1;
	struct share_table *nt = share_table_new(mask, t);

	if (!nt)
		return -TK_E_NOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		const struct tk_block *b = &share_at(s, i)->b;
		uint32_t h = block_hash(b->start, b->mode) & mask;
		while (atomic_load_explicit(&nt->slots[h], memory_order_relaxed))
			h = (h + 1) & mask;
		atomic_store_explicit(&nt->slots[h], i + 1, memory_order_relaxed);
	}
	atomic_store_explicit(&s->table, nt, memory_order_release);
	return 0;
}

/* B, just decoded by C, for the other caches; dropped when out of memory or room (they
 * decode it themselves). */
static void share_put(struct tk_bshare *s, const struct tk_block *b, const struct tk_bcache *c)
{
	pthread_mutex_lock(&s->lock);
	struct share_table *t = atomic_load_explicit(&s->table, memory_order_relaxed);
	uint32_t i = s->n, seg = i >> SHARE_SEG_BITS;
	uint8_t *lens;

	if (share_find(s, b->start, b->mode))
		goto out;   /* another cache decoded it meanwhile */
	if ((i + 1) * 2 > t->mask) {
		if (share_grow(s, t) < 0)
			goto out;
		t = atomic_load_explicit(&s->table, memory_order_relaxed);
	}
	if (seg >= SHARE_SEGS ||
	    (!s->seg[seg] && !(s->seg[seg] = tk_calloc_huge((size_t)1 << SHARE_SEG_BITS,
							    sizeof *s->seg[seg]))) ||
	    !(lens = share_lens(s, b->ninsn)))
		goto out;
	struct share_block *sb = share_at(s, i);
	sb->b = *b;
	sb->b.flags &= (uint8_t)~TK_BLK_ENTRY;
	sb->b.execs = 0;
	sb->b.lens = 0;
	if (b->ninsn)
		memcpy(lens, c->lens + b->lens, b->ninsn);
	sb->lens = lens;
	s->n = i + 1;
	uint32_t h = block_hash(b->start, b->mode) & t->mask;
	while (atomic_load_explicit(&t->slots[h], memory_order_relaxed))
		h = (h + 1) & t->mask;
	atomic_store_explicit(&t->slots[h], i + 1, memory_order_release);
out:
	pthread_mutex_unlock(&s->lock);
}

/* Decode the block at B's start and mode into B (its lengths appended to C's). */
static int decode_block(struct tk_bcache *c, struct tk_block *b)
{
	int mode = b->mode;
	const uint8_t *code = NULL;
	size_t avail = 0;

	for (;;) {
		struct tk_isa_insn in;
		uint8_t tmp[16];
		const uint8_t *p;
		size_t n;
		int rc;

		if (avail < 16) {
			/* Refill: straddling two segments needs a copy. */
			code = tk_image_ptr(c->img, b->next, &avail);
			if (!code) {
				b->flags |= TK_BLK_NOMAP;
				break;
			}
		}
		p = code;
		n = avail;
		if (n < TK_MAX_INSN_BYTES) {
			int got = tk_image_read(c->img, b->next, tmp, sizeof(tmp));
			size_t m = got > 0 ? (size_t)got : 0;

			/* Bytes may continue in a following segment. */
			while (m < TK_MAX_INSN_BYTES) {
				int more = tk_image_read(c->img, b->next + m, tmp + m,
							 TK_MAX_INSN_BYTES - m);

				if (more <= 0)
					break;
				m += (size_t)more;
			}
			p = tmp;
			n = m;
		}
		rc = tk_isa_classify(&c->isa, mode, p, n, b->next, &in);
		if (rc < 0) {
			b->flags |= rc == -TK_E_TRUNCATED ? TK_BLK_NOMAP : TK_BLK_BAD;
			break;
		}
		if (push_len(c, in.len) < 0)
			return -TK_E_NOMEM;
		c->decoded_bytes += in.len;
		b->last = b->next;
		b->next += in.len;
		b->ninsn++;
		code += in.len;
		avail = avail > in.len ? avail - in.len : 0;
		if (mode != TK_ISA_64)
			b->next = mode == TK_ISA_32 ? (uint32_t)b->next : (uint16_t)b->next;
		if (in.cls != TK_ISA_OTHER) {
			b->cls = in.cls;
			b->target = in.target;
			if (in.zero_call)
				b->flags |= TK_BLK_ZERO_CALL;
			break;
		}
		if (in.sys) {
			b->sys = in.sys;   /* the flow may stop after it (a TIP.PGD, PIP, VMCS) */
			break;
		}
		if (b->ninsn == MAX_BLOCK_INSNS)
			break;
		if (mode != TK_ISA_64)
			avail = 0;   /* wrapped addresses: look up again */
	}
	if (!b->ninsn)
		b->flags |= TK_BLK_EMPTY;
	return 0;
}

const struct tk_block *tk_bcache_get_slow(struct tk_bcache *c, uint64_t ip, int mode)
{
	struct tk_block b = { .start = ip, .last = ip, .next = ip, .mode = (uint8_t)mode,
			      .lens = (uint32_t)c->nlens };
	int rc = 0;

	if ((c->nblocks + 1) * 2 > c->mask) {
		if (grow_slots(c) < 0)
			return NULL;
	}
	if (c->share && (rc = share_get(c->share, c, &b)) < 0)
		return NULL;
	if (!rc) {
		if (decode_block(c, &b) < 0)
			return NULL;
		if (c->share)
			share_put(c->share, &b, c);
	}
	if (tk_sorted_has_u64(c->entries, c->nentries, ip))
		b.flags |= TK_BLK_ENTRY;
	if (c->nblocks == c->capblocks) {
		uint32_t cap = c->capblocks ? c->capblocks * 2 : 1024;
		struct tk_block *nb = grow_array(c->blocks, c->nblocks, cap, sizeof(*nb));

		if (!nb)
			return NULL;
		c->blocks = nb;
		struct tk_block_link *nl = grow_array(c->links, c->nblocks, cap, sizeof(*nl));

		if (!nl)
			return NULL;
		c->links = nl;
		c->capblocks = cap;
	}
	c->blocks[c->nblocks] = b;
	struct tk_block_link *l = &c->links[c->nblocks];

	*l = (struct tk_block_link){ .ninsn = (uint16_t)b.ninsn, .cls = b.cls, .flags = b.flags,
				     .start = b.start, .last_off = (uint16_t)(b.last - b.start),
				     .last_len = (uint8_t)(b.next - b.last), .mode = b.mode,
				     .target_rel = (int32_t)(b.target - b.next) };
	if (tk_bcache_target(c, c->nblocks) != b.target)
		l->flags |= TK_BLK_FAR;
	uint32_t h = block_hash(ip, mode) & c->mask;

	while (c->slots[h])
		h = (h + 1) & c->mask;
	c->slots[h] = ++c->nblocks;
	return &c->blocks[c->nblocks - 1];
}

uint32_t tk_bcache_index_slow(struct tk_bcache *c, uint64_t ip, int mode)
{
	const struct tk_block *b = tk_bcache_get_slow(c, ip, mode);

	return b ? (uint32_t)(b - c->blocks) : UINT32_MAX;
}
