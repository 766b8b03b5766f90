/* Block cache: straight-line runs of code classified once, looked up by start address. */
#include <stdlib.h>
#include <string.h>

#include "flow/bcache.h"
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

static int grow_slots(struct tk_bcache *c)
{
	uint32_t mask = c->mask * 2 + 1;
	uint32_t *slots = tk_calloc_huge((size_t)mask + 1, sizeof(*slots));

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

static int push_len(struct tk_bcache *c, uint8_t len)
{
	if (c->nlens == c->caplens) {
		size_t cap = c->caplens ? c->caplens * 2 : 65536;
		uint8_t *l = realloc(c->lens, cap);

		if (!l)
			return -TK_E_NOMEM;
		c->lens = l;
		c->caplens = cap;
	}
	c->lens[c->nlens++] = len;
	return 0;
}

const struct tk_block *tk_bcache_get_slow(struct tk_bcache *c, uint64_t ip, int mode)
{
	struct tk_block b = { .start = ip, .last = ip, .next = ip, .mode = (uint8_t)mode,
			      .lens = (uint32_t)c->nlens };
	const uint8_t *code = NULL;
	size_t avail = 0;

	if ((c->nblocks + 1) * 2 > c->mask) {
		if (grow_slots(c) < 0)
			return NULL;
	}
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
		if (push_len(c, in.len) < 0)
			return NULL;
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
	uint32_t h = (uint32_t)tk_hash64(ip ^ (uint64_t)mode << 62) & c->mask;

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
