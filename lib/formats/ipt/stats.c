/* Execution statistics of Intel PT streams (tracekit stats): every block the flow executed
 * is counted (in parallel: in each decoder's block cache, count mode, plus the few blocks it
 * still reports), and every conditional outcome by the decoder as it walks; the distinct
 * blocks are then decoded once for the instruction mix, memory operands, branch kinds and
 * code footprint, each weighted by its executions. All exact: nothing is sampled. */
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "isa/isa.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/internal/util.h"

_Static_assert(ZYDIS_CATEGORY_MAX_VALUE < TK_IPT_EXEC_NCAT, "categories fit");
_Static_assert(ZYDIS_ISA_EXT_MAX_VALUE < TK_IPT_EXEC_NEXT, "ISA extensions fit");

/* ---- a table of blocks: (image, first, last instruction, mode) -> executions ---------- */
struct xblock {
	uint64_t start, last;   /* start 0 and last 0: empty slot */
	uint64_t execs;
	uint32_t ninsn, mode;
	uint32_t space;         /* the image whose code it is (tk_ipt_exec_image's number) */
};

struct xtable {
	struct xblock *b;
	size_t mask, used;
};

static size_t xslot(const struct xtable *t, uint64_t start, uint64_t last, uint32_t mode,
		    uint32_t space)
{
	return (size_t)tk_hash64(start ^ (last << 20) ^ mode ^ ((uint64_t)space << 44)) & t->mask;
}

static int xgrow(struct xtable *t)
{
	size_t n = t->mask ? (t->mask + 1) * 2 : 1024;
	struct xblock *nb = calloc(n, sizeof(*nb)), *ob = t->b;
	size_t om = t->mask;

	if (!nb)
		return -TK_E_NOMEM;
	t->b = nb;
	t->mask = n - 1;
	for (size_t i = 0; ob && i <= om; i++) {
		if (!ob[i].start && !ob[i].last)
			continue;
		size_t s = xslot(t, ob[i].start, ob[i].last, ob[i].mode, ob[i].space);
		while (t->b[s].start || t->b[s].last)
			s = (s + 1) & t->mask;
		t->b[s] = ob[i];
	}
	free(ob);
	return 0;
}

/* EXECS more executions of the block of image SPACE; its slot is created when new. */
static int xadd(struct xtable *t, uint32_t space, uint64_t start, uint64_t last, uint32_t mode,
		uint32_t ninsn, uint64_t execs)
{
	if ((t->used + 1) * 2 > t->mask + 1 && xgrow(t) < 0)
		return -TK_E_NOMEM;
	size_t s = xslot(t, start, last, mode, space);
	for (;; s = (s + 1) & t->mask) {
		struct xblock *b = &t->b[s];

		if (b->start == start && b->last == last && b->mode == mode && b->space == space &&
		    (start || last)) {
			b->execs += execs;
			return 0;
		}
		if (!b->start && !b->last) {
			/* (a block at address 0 with its last there too is kept as 0..0: it
			 * cannot be told from an empty slot, and code at 0 is no user code) */
			if (!start && !last)
				return 0;
			*b = (struct xblock){ start, last, execs, ninsn, mode, space };
			t->used++;
			return 0;
		}
	}
}

/* ---- decoding: one table and the outcome counts per chunk ------------------------------ */
struct xpart {
	struct xtable blocks;
	uint32_t space;                /* the stream's image */
	uint64_t enables, disables, async_disables, interrupts;
	int err;
};

struct tk_ipt_exec {
	/* the images streams were decoded against (a perf.data session: one per process),
	   each block counted in its own: the same address in two is other code */
	const struct tk_image **imgs;
	size_t nimgs;
	uint32_t cur;                  /* the image of the stream being decoded */
	struct xtable blocks;          /* every stream's, merged */
	struct tk_ipt_exec_stats st;   /* counts of the events so far */
	struct xpart **parts;          /* per chunk of the stream being decoded */
	size_t nparts;
	size_t first, end;             /* the chunks decoded (tk_ipt_exec_range) ... */
	size_t base;                   /* ... numbered from the first stream's first */
	size_t decoded;                /* chunks of the current stream decoded */
	int flow_only;                 /* tk_ipt_exec_flow_only */
};

static int part_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct xpart *p = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];

		switch (e->kind) {
		case TK_EV_BLOCK:
			if ((p->err = xadd(&p->blocks, p->space, e->addr, e->addr2, e->flags,
					   (uint32_t)e->count, 1)) < 0)
				return p->err;
			break;
		case TK_EV_ENABLE:
			p->enables++;
			break;
		case TK_EV_DISABLE:
			if (e->flags & TK_IPT_DISABLE_END)
				break;   /* the end of the trace, no TIP.PGD */
			p->disables++;
			if (e->flags & TK_IPT_DISABLE_ASYNC)
				p->async_disables++;
			break;
		case TK_EV_INTERRUPT:
			p->interrupts++;
			break;
		default:
			break;
		}
	}
	return 0;
}

static int exec_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct tk_ipt_exec *x = ctx;
	struct xpart *p;

	if (i >= x->nparts)
		return -TK_E_INTERNAL;
	if (x->base + i < x->first || x->base + i >= x->end)
		return TK_CHUNK_SKIP;   /* another shard's */
	if (!(p = calloc(1, sizeof(*p))))
		return -TK_E_NOMEM;
	__atomic_fetch_add(&x->decoded, 1, __ATOMIC_RELAXED);
	p->space = x->cur;
	x->parts[i] = p;
	*sink = (struct tk_sink){ part_events, p };
	if (x->flow_only) {
		tk_flow_set_flow_events(flow, 0);   /* as decode --stat: no block described */
		return 0;
	}
	tk_flow_set_cond_counts(flow, 1);
	/* blocks counted in the walker's cache (no function entries: no tail calls to see) */
	return tk_flow_set_count_mode(flow, 1, NULL, 0);
}

static int exec_block(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		      uint64_t insns)
{
	struct tk_ipt_exec *x = ctx;

	return xadd(&x->blocks, x->cur, start, last, (uint32_t)mode, (uint32_t)(insns / execs),
		    execs);
}

/* A decoder is done: the blocks and outcomes it counted over all its chunks into the
 * total. */
static int exec_done(void *ctx, struct tk_flow *flow)
{
	struct tk_ipt_exec *x = ctx;
	uint64_t not_taken, taken;

	tk_flow_take_cond(flow, &not_taken, &taken);
	x->st.cond_taken += taken;
	x->st.cond_not_taken += not_taken;
	return tk_flow_take_counts(flow, exec_block, x);
}

/* A chunk's counts into the total (they add up in any order; merged in order anyway). */
static int exec_merge(void *ctx, size_t i)
{
	struct tk_ipt_exec *x = ctx;
	struct xpart *p = x->parts[i];
	int rc = 0;

	if (!p)
		return 0;
	for (size_t s = 0; p->blocks.b && s <= p->blocks.mask && rc >= 0; s++) {
		const struct xblock *b = &p->blocks.b[s];

		if (b->start || b->last)
			rc = xadd(&x->blocks, b->space, b->start, b->last, b->mode, b->ninsn,
				  b->execs);
	}
	x->st.enables += p->enables;
	x->st.disables += p->disables;
	x->st.async_disables += p->async_disables;
	x->st.interrupts += p->interrupts;
	free(p->blocks.b);
	free(p);
	x->parts[i] = NULL;
	return rc;
}

struct tk_ipt_exec *tk_ipt_exec_new(const struct tk_image *img, int *err)
{
	struct tk_ipt_exec *x = calloc(1, sizeof(*x));

	if (!x || !img || tk_ipt_exec_image(x, img) < 0) {
		if (x)
			free(x->imgs);
		free(x);
		if (err)
			*err = img ? -TK_E_NOMEM : -TK_E_INVAL;
		return NULL;
	}
	x->end = SIZE_MAX;
	return x;
}

int tk_ipt_exec_image(struct tk_ipt_exec *x, const struct tk_image *img)
{
	size_t i = 0;

	while (i < x->nimgs && x->imgs[i] != img)
		i++;
	if (i < x->nimgs)
		return (int)i;
	const struct tk_image **more = x->nimgs < INT32_MAX ?
		realloc(x->imgs, (x->nimgs + 1) * sizeof *more) : NULL;
	if (!more)
		return -TK_E_NOMEM;
	x->imgs = more;
	x->imgs[x->nimgs] = img;
	return (int)x->nimgs++;
}

size_t tk_ipt_exec_nimages(const struct tk_ipt_exec *x)
{
	return x->nimgs;
}

void tk_ipt_exec_range(struct tk_ipt_exec *x, size_t first, size_t count)
{
	x->first = first;
	x->end = count > SIZE_MAX - first ? SIZE_MAX : first + count;
}

void tk_ipt_exec_flow_only(struct tk_ipt_exec *x)
{
	x->flow_only = 1;
}

void tk_ipt_exec_free(struct tk_ipt_exec *x)
{
	if (!x)
		return;
	free(x->blocks.b);
	free(x->imgs);
	free(x);
}

int tk_ipt_exec_add(struct tk_ipt_exec *x, const uint8_t *buf, size_t len,
		    const struct tk_ipt_flow_opts *opts, struct tk_ipt_flow_stats *one)
{
	struct tk_ipt_flow_opts o = *opts;
	struct tk_ipt_flow_stats fs = { 0 };
	int64_t n;
	int rc;

	if (!o.image)
		o.image = x->imgs[0];
	if ((rc = tk_ipt_exec_image(x, o.image)) < 0)
		return rc;
	x->cur = (uint32_t)rc;
	if ((n = tk_ipt_flow_chunks(buf, len, &o, NULL, 0)) < 0)
		return (int)n;
	x->nparts = (size_t)n;
	x->decoded = 0;
	if (!(x->parts = calloc(x->nparts ? x->nparts : 1, sizeof(*x->parts))))
		return -TK_E_NOMEM;
	struct tk_ipt_flow_consumer c = { .sz = sizeof c, .begin = exec_begin, .merge = exec_merge,
					  .done = exec_done, .ctx = x };

	rc = tk_ipt_flow_decode(buf, len, &o, &c, &fs);
	for (size_t i = 0; i < x->nparts; i++)
		if (x->parts[i]) {
			free(x->parts[i]->blocks.b);
			free(x->parts[i]);
		}
	free(x->parts);
	x->parts = NULL;
	x->base += (size_t)n;
	if (x->first || x->end != SIZE_MAX)
		fs.chunks = x->decoded;   /* a shard's own: the shards' add up to the plan's */
	tk_ipt_flow_stats_add(&x->st.flow, &fs);
	if (one)
		*one = fs;
	return rc;
}

/* ---- what a partial result holds (tracekit/partial.h: tk_partial_exec_save/load) ----- */
int tk_ipt_exec_blocks(const struct tk_ipt_exec *x,
		       int (*fn)(void *ctx, const struct tk_ipt_exec_block *b), void *ctx)
{
	int rc = 0;

	for (size_t s = 0; x->blocks.b && s <= x->blocks.mask && rc >= 0; s++) {
		const struct xblock *b = &x->blocks.b[s];

		if (b->start || b->last)
			rc = fn(ctx, &(struct tk_ipt_exec_block){ b->start, b->last, b->execs,
								  b->ninsn, b->mode, b->space });
	}
	return rc;
}

int tk_ipt_exec_add_block(struct tk_ipt_exec *x, const struct tk_ipt_exec_block *b)
{
	if (b->image >= x->nimgs)
		return -TK_E_INVAL;
	return xadd(&x->blocks, b->image, b->start, b->last, b->mode, b->ninsn, b->execs);
}

size_t tk_ipt_exec_nblocks(const struct tk_ipt_exec *x)
{
	return x->blocks.used;
}

const struct tk_ipt_exec_stats *tk_ipt_exec_counts(const struct tk_ipt_exec *x)
{
	return &x->st;
}

void tk_ipt_exec_add_counts(struct tk_ipt_exec *x, const struct tk_ipt_exec_stats *s)
{
	tk_ipt_flow_stats_add(&x->st.flow, &s->flow);
	x->st.cond_taken += s->cond_taken;
	x->st.cond_not_taken += s->cond_not_taken;
	x->st.enables += s->enables;
	x->st.disables += s->disables;
	x->st.async_disables += s->async_disables;
	x->st.interrupts += s->interrupts;
}

/* The instructions of block B from the image, each counted B->execs times. */
static int count_block(struct tk_ipt_exec *x, const ZydisDecoder *dec, const struct tk_isa *isa,
		       const struct xblock *b, struct tk_u64set *insns, struct tk_u64set *lines)
{
	struct tk_ipt_exec_stats *st = &x->st;
	const struct tk_image *img = x->imgs[b->space];
	uint64_t ip = b->start;
	int rc;

	for (uint32_t k = 0; k < b->ninsn; k++) {
		uint8_t code[ZYDIS_MAX_INSTRUCTION_LENGTH];
		ZydisDecodedInstruction in;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		size_t have = 0;
		const uint8_t *p = tk_image_ptr(img, ip, &have);

		if (!p || have < sizeof code) {
			/* near the end of a segment: as many bytes as there are */
			int got = tk_image_read(img, ip, code, sizeof code);

			have = got > 0 ? (size_t)got : 0;
			p = code;
		}
		if (!have || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(dec, p, have, &in, ops))) {
			st->undecoded += b->execs * (b->ninsn - k);
			return 0;
		}
		st->category[in.meta.category] += b->execs;
		st->isa_ext[in.meta.isa_ext] += b->execs;
		int rd = 0, wr = 0;
		for (unsigned o = 0; o < in.operand_count_visible; o++)
			if (ops[o].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    ops[o].mem.type != ZYDIS_MEMOP_TYPE_AGEN) {
				rd |= (ops[o].actions & ZYDIS_OPERAND_ACTION_MASK_READ) != 0;
				wr |= (ops[o].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) != 0;
			}
		st->mem_read += rd ? b->execs : 0;
		st->mem_write += wr ? b->execs : 0;
		if ((rc = tk_u64set_add(insns, ip)) < 0)
			return rc;
		for (uint64_t l = ip >> 6; l <= (ip + in.length - 1) >> 6; l++)
			if ((rc = tk_u64set_add(lines, l)) < 0)
				return rc;
		if (k + 1 == b->ninsn) {
			/* what ends the block: its branch (or nothing, where a block was cut) */
			struct tk_isa_insn cls;

			if (tk_isa_classify(isa, (int)b->mode, p, have, ip, &cls) == 0 &&
			    cls.cls < TK_IPT_EXEC_NKIND)
				st->kind[cls.cls] += b->execs;
		}
		ip += in.length;
	}
	return 0;
}

int tk_ipt_exec_finish(struct tk_ipt_exec *x, struct tk_ipt_exec_stats *out)
{
	static const ZydisMachineMode mm[TK_ISA__MODES] = {
		ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_MACHINE_MODE_LEGACY_16
	};
	static const ZydisStackWidth sw[TK_ISA__MODES] = {
		ZYDIS_STACK_WIDTH_64, ZYDIS_STACK_WIDTH_32, ZYDIS_STACK_WIDTH_16
	};
	ZydisDecoder dec[TK_ISA__MODES];
	struct tk_u64set insns = { 0 }, lines = { 0 };
	struct tk_isa isa;
	int rc = 0;

	tk_isa_init(&isa);
	for (int m = 0; m < TK_ISA__MODES; m++)
		ZydisDecoderInit(&dec[m], mm[m], sw[m]);
	x->st.insns = x->st.block_execs = 0;
	memset(x->st.category, 0, sizeof x->st.category);
	memset(x->st.isa_ext, 0, sizeof x->st.isa_ext);
	memset(x->st.kind, 0, sizeof x->st.kind);
	x->st.mem_read = x->st.mem_write = x->st.undecoded = 0;
	x->st.distinct_insns = x->st.code_lines = 0;
	/* the blocks image by image (a counting sort of their slots): the footprint is each
	   image's distinct addresses, added up */
	size_t nslots = x->blocks.b ? x->blocks.mask + 1 : 0;
	size_t *from = calloc(x->nimgs + 1, sizeof *from);
	size_t *order = malloc((x->blocks.used ? x->blocks.used : 1) * sizeof *order);
	if (!from || !order) {
		free(from);
		free(order);
		return -TK_E_NOMEM;
	}
	for (size_t s = 0; s < nslots; s++)
		if (x->blocks.b[s].start || x->blocks.b[s].last)
			from[x->blocks.b[s].space + 1]++;
	for (size_t i = 0; i < x->nimgs; i++)
		from[i + 1] += from[i];
	for (size_t s = 0; s < nslots; s++)
		if (x->blocks.b[s].start || x->blocks.b[s].last)
			order[from[x->blocks.b[s].space]++] = s;
	/* (from[i] is now where image i + 1's begin) */
	for (size_t i = 0, k = 0; i < x->nimgs && rc >= 0; i++) {
		for (; k < from[i] && rc >= 0; k++) {
			const struct xblock *b = &x->blocks.b[order[k]];

			x->st.insns += b->execs * b->ninsn;
			x->st.block_execs += b->execs;
			if (b->mode < TK_ISA__MODES)
				rc = count_block(x, &dec[b->mode], &isa, b, &insns, &lines);
		}
		x->st.distinct_insns += insns.n;
		x->st.code_lines += lines.n;
		tk_u64set_free(&insns);
		tk_u64set_free(&lines);
	}
	free(from);
	free(order);
	x->st.distinct_blocks = x->blocks.used;
	*out = x->st;
	return rc;
}

const char *tk_ipt_exec_category_name(unsigned i)
{
	return i <= ZYDIS_CATEGORY_MAX_VALUE ? ZydisCategoryGetString((ZydisInstructionCategory)i)
					     : NULL;
}

const char *tk_ipt_exec_isa_ext_name(unsigned i)
{
	return i <= ZYDIS_ISA_EXT_MAX_VALUE ? ZydisISAExtGetString((ZydisISAExt)i) : NULL;
}
