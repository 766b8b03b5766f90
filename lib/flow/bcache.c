/* Block cache: straight-line runs of code classified once, looked up by start address. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "flow/bcache.h"
#include "tracekit/common.h"
#include "tracekit/internal/util.h"

#define MAX_BLOCK_INSNS 4096   /* cut very long straight runs: keeps lengths bounded */
/* a block's last instruction is within a link's 16-bit offset of its start */
_Static_assert((MAX_BLOCK_INSNS - 1) * TK_MAX_INSN_BYTES < 65536, "tk_block_link.last_off");

/* OLD (N elements of SIZE in use) of C grown to CAP elements, on huge pages once that is large
 * enough (tk_calloc_huge: the walker reads links, and less often blocks and slots, at
 * random; not for a share's); NULL when out of memory (OLD is then kept). realloc cannot keep
 * the alignment. */
static void *grow_array(const struct tk_bcache *c, void *old, size_t n, size_t cap, size_t size)
{
	void *m;

	if (c->plain || cap * size < TK_HUGE_FROM)
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
		/* a profile's entries come sorted, and a session switches process (and
		 * entries) at every context switch: sort only what is not */
		size_t i = 1;
		while (i < n && e[i - 1] <= e[i])
			i++;
		if (i < n)
			qsort(e, n, sizeof(*e), tk_cmp_u64);
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

static int grow_slots(struct tk_bcache *c)
{
	uint32_t mask = c->mask * 2 + 1;
	uint32_t *slots = c->plain ? calloc((size_t)mask + 1, sizeof(*slots))
				   : tk_calloc_huge((size_t)mask + 1, sizeof(*slots));

	if (!slots)
		return -TK_E_NOMEM;
	for (uint32_t i = 0; i < c->nblocks; i++) {
		const struct tk_block *b = &c->blocks[i];
		uint32_t h = (uint32_t)tk_hash64(b->start ^ (uint64_t)b->mode << 62) & mask;

		while (slots[h])
			h = (h + 1) & mask;
		slots[h] = i + 1;
	}
	free(c->slots);
	c->slots = slots;
	c->mask = mask;
	return 0;
}

/* N instruction lengths LEN added to C's; -TK_E_NOMEM. */
static int push_lens(struct tk_bcache *c, const uint8_t *len, size_t n)
{
	if (__builtin_expect(c->nlens + n > c->caplens, 0)) {
		size_t cap = c->caplens ? c->caplens : 65536;
		uint8_t *l;

		while (cap < c->nlens + n)
			cap *= 2;
		if (!(l = realloc(c->lens, cap)))
			return -TK_E_NOMEM;
		c->lens = l;
		c->caplens = cap;
	}
	for (size_t k = 0; k < n; k++)   /* a few bytes, mostly one (a decoded instruction) */
		c->lens[c->nlens++] = len[k];
	return 0;
}

/* The block at IP in MODE decoded from the image into *B, its instruction lengths added
 * to C's; -TK_E_NOMEM. */
static int decode_block(struct tk_bcache *c, uint64_t ip, int mode, struct tk_block *out)
{
	struct tk_block b = { .start = ip, .last = ip, .next = ip, .mode = (uint8_t)mode,
			      .lens = (uint32_t)c->nlens };
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
			code = tk_image_ptr(c->img, b.next, &avail);
			if (!code) {
				b.flags |= TK_BLK_NOMAP;
				break;
			}
		}
		p = code;
		n = avail;
		if (n < TK_MAX_INSN_BYTES) {
			int got = tk_image_read(c->img, b.next, tmp, sizeof(tmp));
			size_t m = got > 0 ? (size_t)got : 0;

			/* Bytes may continue in a following segment. */
			while (m < TK_MAX_INSN_BYTES) {
				int more = tk_image_read(c->img, b.next + m, tmp + m,
							 TK_MAX_INSN_BYTES - m);

				if (more <= 0)
					break;
				m += (size_t)more;
			}
			p = tmp;
			n = m;
		}
		rc = tk_isa_classify(&c->isa, mode, p, n, b.next, &in);
		if (rc < 0) {
			b.flags |= rc == -TK_E_TRUNCATED ? TK_BLK_NOMAP : TK_BLK_BAD;
			break;
		}
		if (push_lens(c, &in.len, 1) < 0)
			return -TK_E_NOMEM;
		c->decoded_bytes += in.len;
		b.last = b.next;
		b.next += in.len;
		b.ninsn++;
		code += in.len;
		avail = avail > in.len ? avail - in.len : 0;
		if (mode != TK_ISA_64)
			b.next = mode == TK_ISA_32 ? (uint32_t)b.next : (uint16_t)b.next;
		if (in.cls != TK_ISA_OTHER) {
			b.cls = in.cls;
			b.target = in.target;
			if (in.zero_call)
				b.flags |= TK_BLK_ZERO_CALL;
			break;
		}
		if (in.sys) {
			b.sys = in.sys;   /* the flow may stop after it (a TIP.PGD, PIP, VMCS) */
			break;
		}
		if (b.ninsn == MAX_BLOCK_INSNS)
			break;
		if (mode != TK_ISA_64)
			avail = 0;   /* wrapped addresses: look up again */
	}
	if (!b.ninsn)
		b.flags |= TK_BLK_EMPTY;
	*out = b;
	return 0;
}

/* Block B of another cache (its lengths at FROM_LENS) as a block of C, its lengths added
 * to C's, into *OUT; -TK_E_NOMEM. Not counted in C's decoded_bytes: C did not decode it. */
static int copy_block(struct tk_bcache *c, const struct tk_block *b, const uint8_t *from_lens,
		      struct tk_block *out)
{
	const uint8_t *l = from_lens + b->lens;

	*out = *b;
	out->lens = (uint32_t)c->nlens;
	out->flags &= (uint8_t)~TK_BLK_ENTRY;   /* C's entries decide */
	out->execs = 0;
	return push_lens(c, l, b->ninsn);
}

/* Index of the block at IP in MODE in C, UINT32_MAX if it has none (nothing decoded). */
static uint32_t find_block(const struct tk_bcache *c, uint64_t ip, int mode)
{
	uint32_t h = (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62) & c->mask;
	uint32_t s;

	while ((s = c->slots[h])) {
		const struct tk_block_link *l = &c->links[s - 1];

		if (l->start == ip && l->mode == mode)
			return s - 1;
		h = (h + 1) & c->mask;
	}
	return UINT32_MAX;
}

/* Block B (its lengths already in C's) added to C with its link, marked if it starts at
 * one of C's entries. NULL when out of memory. */
static const struct tk_block *add_block(struct tk_bcache *c, const struct tk_block *from)
{
	struct tk_block b = *from;

	if ((c->nblocks + 1) * 2 > c->mask) {
		if (grow_slots(c) < 0)
			return NULL;
	}
	if (tk_sorted_has_u64(c->entries, c->nentries, b.start))
		b.flags |= TK_BLK_ENTRY;
	if (c->nblocks == c->capblocks) {
		uint32_t cap = c->capblocks ? c->capblocks * 2 : 1024;
		struct tk_block *nb = grow_array(c, c->blocks, c->nblocks, cap, sizeof(*nb));

		if (!nb)
			return NULL;
		c->blocks = nb;
		struct tk_block_link *nl = grow_array(c, c->links, c->nblocks, cap, sizeof(*nl));

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
	uint32_t h = (uint32_t)tk_hash64(b.start ^ (uint64_t)b.mode << 62) & c->mask;

	while (c->slots[h])
		h = (h + 1) & c->mask;
	c->slots[h] = ++c->nblocks;
	return &c->blocks[c->nblocks - 1];
}

struct tk_bshare {
	pthread_mutex_t lock;   /* held for lookups and copies only, not while decoding */
	struct tk_bcache c;     /* no entries: each cache marks its own */
};

struct tk_bshare *tk_bshare_new(const struct tk_image *img, int *err)
{
	struct tk_bshare *s = calloc(1, sizeof(*s));
	int rc = s ? tk_bcache_init(&s->c, img) : -TK_E_NOMEM;

	if (rc < 0) {
		free(s);
		*err = rc;
		return NULL;
	}
	s->c.plain = 1;
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

void tk_bshare_free(struct tk_bshare *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	tk_bcache_fini(&s->c);
	free(s);
}

void tk_bcache_share(struct tk_bcache *c, struct tk_bshare *s)
{
	c->share = s;
}

const struct tk_block *tk_bcache_get_slow(struct tk_bcache *c, uint64_t ip, int mode)
{
	struct tk_bshare *s = c->share;
	struct tk_block b;

	if (s) {
		pthread_mutex_lock(&s->lock);
		uint32_t i = find_block(&s->c, ip, mode);
		int rc = i == UINT32_MAX ? 0 : copy_block(c, &s->c.blocks[i], s->c.lens, &b);
		pthread_mutex_unlock(&s->lock);
		if (i != UINT32_MAX)
			return rc < 0 ? NULL : add_block(c, &b);
	}
	if (decode_block(c, ip, mode, &b) < 0)
		return NULL;
	if (s) {
		struct tk_block t;

		/* another cache may have published it meanwhile: the same block */
		pthread_mutex_lock(&s->lock);
		if (find_block(&s->c, ip, mode) == UINT32_MAX &&
		    copy_block(&s->c, &b, c->lens, &t) == 0)
			(void)add_block(&s->c, &t);   /* out of memory there: only not shared */
		pthread_mutex_unlock(&s->lock);
	}
	return add_block(c, &b);
}

uint32_t tk_bcache_index_slow(struct tk_bcache *c, uint64_t ip, int mode)
{
	const struct tk_block *b = tk_bcache_get_slow(c, ip, mode);

	return b ? (uint32_t)(b - c->blocks) : UINT32_MAX;
}
