/* The flow walker: blocks from the cache, outcomes from the oracle, events to a batch.
 * The oracle's next item is fetched eagerly, so an event bound to an IP (a STOP item) is
 * known before the walker passes that IP. */
#include <stdlib.h>
#include <string.h>

#include "flow/bcache.h"
#include "flow/share.h"
#include "tracekit/flow.h"
#include "tracekit/internal/util.h"

_Static_assert(sizeof(struct tk_block_link) == 32, "two links to a cache line");

#define RET_STACK 64               /* as deep as the hardware's compression stack */
/* Direct jumps and calls need no trace; a run this long of nothing else is an endless
 * loop (jmp .) or a wrong image, never compiled code: stop it with an error rather than
 * print millions of lines (the fuzzer's jmp-loop input took over 10 s at 1 << 22). */
#define MAX_BLOCKS_WITHOUT_TRACE (1u << 16)
#define EMITTED_RING 4096

/* Path cache (after libxdc): from a block's outgoing edge, a run of up to PATH_BITS
 * conditional outcomes always leads through the same blocks, so the walk looks the whole
 * run up once per TNT byte instead of stepping block by block. Used when no per-block
 * events are wanted (instruction counting, count mode). A path covers direct jumps,
 * fall-throughs and conditional branches; in count mode calls, returns and function
 * entries (it reports those) end it. It always ends right after a consumed outcome. */
#define PATH_BITS 8
#define PATH_MAX_BLOCKS 64
/* Outcomes that never repeat (a random walk) make every lookup a miss, and filling a
 * path costs more than walking it: after a window of PATH_WINDOW lookups with more than
 * a mode's limit of misses, walk block by block for a number of chances (see
 * path_window_end). */
#define PATH_WINDOW 128
/* Sizes and limits, measured. Paths through calls (counting) cover more code and repay
 * a larger table (libLLVM: 21% misses with 4 K slots, 12% with 16 K, 6% with 64 K; on
 * huge pages, and with each slot's next-but-one fetched ahead, 64 K is the fastest);
 * their misses come in bursts, and long rests after them cost libLLVM what the paths
 * gained, so a first rest is short and only rests in a row grow (a random walk's). In
 * count mode the larger table and the shorter rest were slower. */
#define PATH_LOG_CROSS 16
#define PATH_MISS_CROSS (PATH_WINDOW / 2)
#define PATH_REST_CROSS_FIRST 256
#define PATH_REST_CROSS 16384
#define PATH_LOG_COUNT 12
#define PATH_MISS_COUNT (PATH_WINDOW / 3)
#define PATH_REST_COUNT 65536

/* Without events (quiet), a path also runs through calls and returns. A return to a
 * call of the same path is a compressed return (a taken bit, as the walk would take it)
 * to a known place; calls not returned from within the path are pushed when it is used,
 * up to PATH_PUSHES of them. A return to an older call ends the path: its use pops the
 * return stack (end is then PATH_END_POP). Where its calls push onto a full stack, the
 * oldest entries go first, as many as pushing them one by one would drop (the path's
 * peak beyond the free room): a later return to one of them then fails as it would. */
#define PATH_PUSHES 2
#define PATH_END_POP UINT32_MAX

struct path_slot {
	uint64_t key;                  /* edge << 9 | outcomes with a stop bit above; 0 = empty */
	union {
		uint64_t hits;         /* count mode: uses not yet added to the blocks */
		uint32_t push[PATH_PUSHES];   /* quiet: blocks of the calls left on the stack */
	};
	uint32_t end;                  /* edge after the path: last block index << 1 | taken */
	uint32_t insns;
	uint16_t lead;                 /* direct jumps and calls before the first outcome */
	uint8_t nbits;                 /* outcomes the path consumes; 0: walk block by block */
	uint8_t npush;                 /* quiet: calls left on the stack */
	uint8_t peak;                  /* quiet: most calls of the path on the stack at once */
	uint8_t unused;
	uint16_t ahead;                /* counting: the slot of the path two after this one,
					  last time: fetched ahead (see run_paths) */
};

_Static_assert(sizeof(struct path_slot) == 32, "two slots to a cache line");
_Static_assert(PATH_LOG_CROSS <= 16, "ahead holds a slot index");

struct tk_flow {
	struct tk_bcache cache;
	struct tk_flow_q q;            /* pending oracle item */
	/* the block of each call on the stack and its mode: the return address is the
	 * block's next, and its link succ[1] leads to the block there, so a compressed
	 * return needs no hash lookup and reads no more than the link */
	uint32_t stack_call[RET_STACK];
	uint8_t stack_mode[RET_STACK];
	/* the return address (the call block's next), kept only while there are events: a
	 * return event needs it, and the call block is rarely still in the cache by then */
	uint64_t stack_ret[RET_STACK];
	unsigned top, depth;           /* ring buffer: top = next slot, depth <= RET_STACK */
	uint64_t time;
	uint32_t track;
	int quiet;                     /* no BLOCK/CALL/RETURN events (only counting) */
	int branches;                  /* TK_EV_BRANCH for each resolved branch */
	unsigned bind;                 /* enum tk_flow_bind: stop after such an instruction */
	int (*pgd_direct)(void *ctx, uint64_t target);   /* tk_flow_set_pgd_direct */
	void *pgd_ctx;
	int conds;                     /* count conditional outcomes (tk_flow_set_cond_counts) */
	uint64_t cond[2];              /* conditional branches not taken, taken */
	/* Block index of each TK_EV_BLOCK the walker emitted, in order: the printer takes
	 * them from here instead of looking each block up again (checked, so an event
	 * from elsewhere or an overrun only costs the lookup). Larger than a batch. */
	uint32_t emitted[EMITTED_RING];
	uint32_t emitted_wr, emitted_rd;
	/* Count mode: a block is reported as a TK_EV_BLOCK only when it is the first of a
	 * walk or starts a function (or is cut short); the others are counted in the cache
	 * (tk_block_link.execs) and their instructions go with the next block (its arg), call
	 * or return (its count) or as a TK_EV_INSNS ahead of any other event. */
	int count;
	int report_next;               /* report the next block */
	int via_call;                  /* the next block is a call's target: at a function
					  entry it is no tail call, so it need not be reported */
	uint64_t unsent;               /* instructions of unreported blocks not yet sent */
	struct path_slot *paths;       /* allocated on first use, for the mode then */
	unsigned path_log;             /* the table holds 1 << path_log slots */
	uint32_t path_miss_max, path_rest_len;   /* the mode's (see PATH_WINDOW) */
	uint32_t path_rest_first, path_rest_next;   /* rest lengths (see path_window_end) */
	uint32_t path_tries, path_misses, path_rest;  /* see PATH_WINDOW */
	/* counting: the slots of the last two paths taken (UINT32_MAX: none); the one
	 * two back learns where the next one is (path_slot.ahead) */
	uint32_t path_back[2];
	const uint64_t *count_entries; /* as last given to tk_flow_set_count_mode */
	size_t count_n;
	/* The indirect branch (or uncompressed return) whose target the next lookup finds,
	 * or UINT32_MAX. Such a block's succ[0] is otherwise unused: it keeps the last
	 * target seen there, checked against the new one, which saves the hash table's
	 * miss when the target repeats. Not a link: paths never follow it. */
	uint32_t jump_from;
	/* Such a block where the last walk was disabled (a syscall): the next walk starts
	 * with it as jump_from, and where tracing resumes is remembered as its target. */
	uint32_t resume_from;
	/* Per block (index < reach_cap), whether the direct flow from it meets a branch that
	 * takes trace (see block_reach): 0 not yet known, else REACH_*. */
	uint8_t *reach;
	uint32_t reach_cap;
	/* tk_flow_print_block: the hex digits of the upper 12 digits of addresses whose
	 * a >> 16 is hex_hi (UINT64_MAX: none yet); blocks mostly stay in a few pages */
	uint64_t hex_hi, hex_p0, hex_p1;
};

struct tk_flow *tk_flow_new(const struct tk_image *img, int *err)
{
	struct tk_flow *f = calloc(1, sizeof(*f));
	int rc;

	if (!f || !img) {
		free(f);
		if (err)
			*err = img ? -TK_E_NOMEM : -TK_E_INVAL;
		return NULL;
	}
	f->hex_hi = UINT64_MAX;
	if ((rc = tk_bcache_init(&f->cache, img)) < 0) {
		free(f);
		if (err)
			*err = rc;
		return NULL;
	}
	f->time = TK_TIME_NONE;
	f->jump_from = f->resume_from = UINT32_MAX;
	if (err)
		*err = 0;
	return f;
}

void tk_flow_free(struct tk_flow *f)
{
	if (!f)
		return;
	tk_bcache_fini(&f->cache);
	free(f->paths);
	free(f->reach);
	free(f);
}

void tk_flow_share_blocks(struct tk_flow *f, struct tk_bshare *s)
{
	f->cache.share = s;
}

void tk_flow_reset_stack(struct tk_flow *f)
{
	f->top = f->depth = 0;
}

void tk_flow_set_time(struct tk_flow *f, uint64_t time)
{
	f->time = time;
}

void tk_flow_set_track(struct tk_flow *f, uint32_t track)
{
	f->track = track;
}

void tk_flow_set_branch_events(struct tk_flow *f, int on)
{
	f->branches = on != 0;
}

void tk_flow_set_bind(struct tk_flow *f, unsigned bind)
{
	f->bind = bind;
}

void tk_flow_set_pgd_direct(struct tk_flow *f, int (*pgd_direct)(void *ctx, uint64_t target),
			    void *ctx)
{
	f->pgd_direct = pgd_direct;
	f->pgd_ctx = ctx;
}

static int flush_paths(struct tk_flow *f);

/* Whether a TIP.PGD without IP binds to a direct JMP or CALL to TARGET, as
 * tk_flow_set_pgd_direct says. (Out of line: the walk meets one rarely.) */
static __attribute__((noinline)) int pgd_binds_direct(const struct tk_flow *f, uint64_t target)
{
	return f->pgd_direct && f->pgd_direct(f->pgd_ctx, target);
}

/* Paths, after a change of what they may cross: gone, filled again on first use. */
static void drop_paths(struct tk_flow *f)
{
	free(f->paths);
	f->paths = NULL;
	for (uint32_t i = 0; i < f->cache.nblocks; i++)
		f->cache.links[i].flags &= (uint8_t)~(TK_BLK_NOPATH | TK_BLK_NOPATH << 1);
}

void tk_flow_set_flow_events(struct tk_flow *f, int on)
{
	if (f->quiet != !on) {
		(void)flush_paths(f);   /* nothing counted unless in count mode */
		f->quiet = !on;
		/* the return addresses were not kept while quiet */
		for (unsigned i = 0; i < RET_STACK; i++)
			f->stack_ret[i] = f->cache.nblocks > f->stack_call[i] ?
					  f->cache.blocks[f->stack_call[i]].next : 0;
		drop_paths(f);   /* they run through calls only when quiet */
	}
}

int tk_flow_set_count_mode(struct tk_flow *f, int on, const uint64_t *entries, size_t n)
{
	int rc;

	/* the same again (each chunk of a run): keep the cache as it is */
	if (f->count == (on != 0) && (!on || (f->count_entries == entries && f->count_n == n)))
		return 0;
	if ((rc = flush_paths(f)) < 0)
		return rc;
	f->count_entries = on ? entries : NULL;
	f->count_n = on ? n : 0;
	drop_paths(f);   /* they stop at function entries in count mode only */
	f->count = on != 0;
	return tk_bcache_set_entries(&f->cache, on ? entries : NULL, on ? n : 0);
}

int tk_flow_take_counts(struct tk_flow *f, tk_flow_count_fn fn, void *ctx)
{
	int rc = flush_paths(f);

	for (uint32_t i = 0; rc >= 0 && i < f->cache.nblocks; i++) {
		struct tk_block *b = &f->cache.blocks[i];
		uint64_t execs = b->execs + f->cache.links[i].execs;

		if (execs) {
			rc = fn(ctx, b->start, b->last, b->mode, execs, execs * b->ninsn);
			b->execs = 0;
			f->cache.links[i].execs = 0;
		}
	}
	return rc < 0 ? rc : 0;
}

void tk_flow_set_cond_counts(struct tk_flow *f, int on)
{
	f->conds = on != 0;
}

void tk_flow_take_cond(struct tk_flow *f, uint64_t *not_taken, uint64_t *taken)
{
	*not_taken = f->cond[0];
	*taken = f->cond[1];
	f->cond[0] = f->cond[1] = 0;
}

unsigned tk_flow_pending_tnt(const struct tk_flow *f)
{
	return f->q.kind == TK_FLOWQ_TNT ? f->q.ntnt : 0;
}

void tk_flow_clear_pending(struct tk_flow *f)
{
	f->q.kind = TK_FLOWQ_NONE;
}

uint64_t tk_flow_decoded_bytes(const struct tk_flow *f)
{
	return f->cache.decoded_bytes;
}

static inline void push_ret(struct tk_flow *f, uint32_t call_bi, int mode, uint64_t ret)
{
	f->stack_ret[f->top] = ret;
	f->stack_call[f->top] = call_bi;
	f->stack_mode[f->top] = (uint8_t)mode;
	f->top = (f->top + 1) % RET_STACK;
	if (f->depth < RET_STACK)
		f->depth++;
}

/* A return without a TNT bit (a TIP or TIP.PGD gives its target) still takes the top
 * entry off: the processor pops its stack on every near return, compressed or not (see
 * lib/formats/ipt/reencode.c). */
static inline void drop_ret(struct tk_flow *f)
{
	if (f->depth) {
		f->top = (f->top + RET_STACK - 1) % RET_STACK;
		f->depth--;
	}
}

/* The call block and mode of the top of the stack, popped. */
static inline int pop_ret(struct tk_flow *f, uint32_t *call_bi, int *mode)
{
	if (!f->depth)
		return -1;
	f->top = (f->top + RET_STACK - 1) % RET_STACK;
	f->depth--;
	*call_bi = f->stack_call[f->top];
	*mode = f->stack_mode[f->top];
	return 0;
}

/* One more execution of block BI in count mode (the link's count carries into the
 * block's). LINKS and BLOCKS are the cache's arrays, as the caller holds them. */
static inline void count_exec(struct tk_block_link *links, struct tk_block *blocks, uint32_t bi)
{
	if (__builtin_expect(!++links[bi].execs, 0))
		blocks[bi].execs += 1ull << 32;
}

/* The address block B's edge SLOT leads to: [0] fall-through or direct target, [1] the
 * taken side of a conditional branch or, for a call, the return address. */
static inline uint64_t succ_ip(const struct tk_block *b, unsigned slot)
{
	if (b->cls == TK_ISA_CALL || b->cls == TK_ISA_CALL_IND)
		return slot ? b->next : b->target;
	if (b->cls == TK_ISA_JCC)
		return slot ? b->target : b->next;
	return b->cls == TK_ISA_OTHER ? b->next : b->target;
}

static inline int put_event(struct tk_flow *f, struct tk_event_batch *out, unsigned kind,
			    uint64_t addr, uint64_t addr2, uint64_t count, uint64_t arg,
			    uint16_t flags)
{
	int rc = 0;
	struct tk_event *e;

	if (!(e = tk_event_batch_next(out, &rc)))
		return rc;
	e->time = f->time;
	e->addr = addr;
	e->addr2 = addr2;
	e->count = count;
	e->arg = arg;
	e->track = f->track;
	e->kind = (uint16_t)kind;
	e->flags = flags;
	return 0;
}

/* Count mode: the instructions of unreported blocks go out ahead of the next event. */
static int send_unsent(struct tk_flow *f, struct tk_event_batch *out)
{
	int rc = put_event(f, out, TK_EV_INSNS, 0, 0, f->unsent, 0, 0);

	f->unsent = 0;
	return rc;
}

int tk_flow_send_insns(struct tk_flow *f, struct tk_event_batch *out)
{
	return f->unsent ? send_unsent(f, out) : 0;
}

static inline int emit(struct tk_flow *f, struct tk_event_batch *out, unsigned kind,
		       uint64_t addr, uint64_t addr2, uint64_t count, uint64_t arg,
		       uint16_t flags)
{
	int rc;

	if (f->quiet && (kind == TK_EV_BLOCK || kind == TK_EV_CALL || kind == TK_EV_RETURN))
		return 0;
	if (f->unsent) {
		if (kind == TK_EV_CALL || kind == TK_EV_RETURN) {
			count = f->unsent;   /* calls and returns carry them */
			f->unsent = 0;
		} else if (kind == TK_EV_BLOCK) {
			arg = f->unsent;     /* and reported blocks (a tail call's entry) */
			f->unsent = 0;
		} else if ((rc = send_unsent(f, out)) < 0) {
			return rc;
		}
	}
	return put_event(f, out, kind, addr, addr2, count, arg, flags);
}

/* Where the direct flow from a block leads (block_reach): to a branch that takes trace (a
 * conditional branch, a return, an indirect branch or a far transfer), or to a dead end
 * before any: code missing from the image, code that does not decode, or a run of direct
 * jumps and calls that never ends (a loop such as jmp .). */
enum { REACH_BRANCH = 1, REACH_NOMAP, REACH_BAD, REACH_LOOP };

/* block_reach's walk (with CACHED, it stops at a block whose answer is known); *END the
 * block where it ends. */
static int reach_walk(struct tk_flow *f, uint32_t bi, int cached, uint32_t *end)
{
	uint32_t cur = bi;

	for (uint32_t step = 0; step <= MAX_BLOCKS_WITHOUT_TRACE; step++) {
		const struct tk_block_link *l = &f->cache.links[cur];
		uint64_t to;

		*end = cur;
		if (l->flags & TK_BLK_EMPTY)
			return l->flags & TK_BLK_BAD ? REACH_BAD : REACH_NOMAP;
		if (l->cls != TK_ISA_OTHER && l->cls != TK_ISA_JMP && l->cls != TK_ISA_CALL)
			return REACH_BRANCH;
		if (l->succ[0])
			return REACH_BRANCH;   /* linked: only edges that reach one are */
		if (cached && cur < f->reach_cap && f->reach[cur])
			return f->reach[cur];
		to = l->cls == TK_ISA_OTHER ? tk_link_next(l) : tk_bcache_target(&f->cache, cur);
		if ((cur = tk_bcache_index(&f->cache, to, l->mode)) == UINT32_MAX)
			return -TK_E_NOMEM;
		if (cur == bi)
			return REACH_LOOP;
	}
	return REACH_LOOP;
}

static int block_reach_slow(struct tk_flow *f, uint32_t bi)
{
	uint32_t end;
	int r;

	if ((r = reach_walk(f, bi, 1, &end)) < 0)
		return r;
	if (bi >= f->reach_cap) {
		uint32_t cap = f->cache.capblocks;
		uint8_t *n = realloc(f->reach, cap);

		if (!n)
			return -TK_E_NOMEM;
		memset(n + f->reach_cap, 0, cap - f->reach_cap);
		f->reach = n;
		f->reach_cap = cap;
	}
	f->reach[bi] = (uint8_t)r;
	return r;
}

/* Where the direct flow from block BI leads (REACH_*, cached), or -TK_E_NOMEM. The walker
 * links an edge only to a block that leads to a branch taking trace, so outcomes of a TNT
 * are never spent on a way that cannot use them. May grow the cache. */
static int block_reach(struct tk_flow *f, uint32_t bi)
{
	if (bi < f->reach_cap && f->reach[bi])
		return f->reach[bi];
	return block_reach_slow(f, bi);
}

/* The block of link L ends in a branch that takes trace: a conditional branch, a return,
 * an indirect branch or a far transfer. */
static inline int takes_trace(const struct tk_block_link *l)
{
	return !(l->flags & TK_BLK_EMPTY) &&
	       ((1u << TK_ISA_JCC | 1u << TK_ISA_RET | 1u << TK_ISA_JMP_IND |
		 1u << TK_ISA_CALL_IND | 1u << TK_ISA_FAR) >> l->cls & 1);
}

/* Outcomes of a TNT are pending and the flow is to enter block BI, from which no branch
 * that takes trace is in reach: the error that stops the walk before BI, and *FROM (where
 * code is missing, or the block). */
static int reach_error(struct tk_flow *f, uint32_t bi, uint64_t *from)
{
	uint32_t end = bi;
	int reach = f->reach[bi];   /* (block_reach answered for it) */

	if (reach == REACH_NOMAP)
		(void)reach_walk(f, bi, 0, &end);
	*from = f->cache.links[end].start;
	return reach == REACH_NOMAP ? -TK_E_NOMAP : -TK_E_BAD_FORMAT;
}

/* lookup_target's index of a block from which no branch that takes trace is in reach
 * (block_reach), with this bit set: outcomes of a TNT cannot be used that way. */
#define DEAD_END 0x80000000u

/* lookup_target past the remembered target: the index lookup, and the answer remembered
 * as FROM's target (FROM UINT32_MAX: none). */
static __attribute__((noinline)) uint32_t lookup_index(struct tk_flow *f, uint32_t from,
							uint64_t ip, int mode)
{
	uint32_t bi;
	int reach;

	if ((bi = tk_bcache_index(&f->cache, ip, mode)) == UINT32_MAX)
		return bi;
	if (!takes_trace(&f->cache.links[bi])) {
		if ((reach = block_reach(f, bi)) < 0)
			return UINT32_MAX;
		if (reach != REACH_BRANCH)
			return bi | DEAD_END;
	}
	if (from != UINT32_MAX)
		f->cache.links[from].succ[0] = bi + 1;
	return bi;
}

/* Index of the block at IP, the target of f->jump_from if that is set (see there), with
 * DEAD_END set if no branch that takes trace is in reach from it (an edge to it is never
 * linked, nor remembered as a target). UINT32_MAX when out of memory. */
static inline uint32_t lookup_target(struct tk_flow *f, uint64_t ip, int mode)
{
	uint32_t from = f->jump_from, bi;

	f->jump_from = UINT32_MAX;
	if (from != UINT32_MAX && (bi = f->cache.links[from].succ[0])) {
		const struct tk_block_link *l = &f->cache.links[bi - 1];

		if (l->start == ip && l->mode == mode)
			return bi - 1;
	}
	return lookup_index(f, from, ip, mode);
}

/* Address of instruction K (0-based) of block B, via the length array. */
static uint64_t insn_addr(const struct tk_bcache *c, const struct tk_block *b, uint32_t k)
{
	uint64_t a = b->start;

	for (uint32_t i = 0; i < k; i++)
		a += c->lens[b->lens + i];
	return a;
}

/* How many instructions of B lie before IP, if IP is an instruction boundary in B. */
static int insns_before(const struct tk_bcache *c, const struct tk_block *b, uint64_t ip,
			uint32_t *k)
{
	uint64_t a = b->start;

	for (uint32_t i = 0; i < b->ninsn; i++) {
		if (a == ip) {
			*k = i;
			return 1;
		}
		a += c->lens[b->lens + i];
	}
	return 0;
}

/* Block BI of the cache was walked, its first N instructions up to LAST. Count mode
 * counts it instead of reporting it when it can. */
static inline __attribute__((always_inline)) int
walked(struct tk_flow *f, struct tk_event_batch *out, uint32_t bi, uint64_t last, uint32_t n)
{
	struct tk_block *b = &f->cache.blocks[bi];
	int rc;

	if (f->quiet)
		return 0;
	int via_call = f->via_call;

	f->via_call = 0;
	if (f->count && !f->report_next && (!(b->flags & TK_BLK_ENTRY) || via_call) &&
	    n == b->ninsn) {
		count_exec(f->cache.links, f->cache.blocks, bi);
		f->unsent += n;
		return 0;
	}
	if ((rc = emit(f, out, TK_EV_BLOCK, b->start, last, n, 0, b->mode)) < 0)
		return rc;
	f->emitted[f->emitted_wr++ % EMITTED_RING] = bi;
	f->report_next = 0;
	return 0;
}

/* Next event slot of OUT with the fill level held in *N (the caller's register copy). */
static inline struct tk_event *next_slot(struct tk_flow *f, struct tk_event_batch *out,
					 size_t *n, uint32_t wr, int *rc)
{
	if (*n == TK_EVENT_BATCH) {
		/* the sink may print blocks: it reads the ring of emitted blocks */
		f->emitted_wr = wr;
		out->n = *n;
		if ((*rc = tk_event_batch_flush(out)) < 0)
			return NULL;
		*n = 0;
	}
	return &out->ev[(*n)++];
}

/* ---- the path cache ------------------------------------------------------------------- */

static inline uint32_t path_index(unsigned log, uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - log));
}

/* Paths through calls and returns: only without events (see PATH_PUSHES). */
static inline int paths_cross(const struct tk_flow *f)
{
	return f->quiet && !f->count;
}

static int alloc_paths(struct tk_flow *f)
{
	f->path_log = paths_cross(f) ? PATH_LOG_CROSS : PATH_LOG_COUNT;
	f->path_miss_max = paths_cross(f) ? PATH_MISS_CROSS : PATH_MISS_COUNT;
	f->path_rest_len = paths_cross(f) ? PATH_REST_CROSS : PATH_REST_COUNT;
	f->path_tries = f->path_misses = f->path_rest = 0;
	f->path_back[0] = f->path_back[1] = UINT32_MAX;
	f->path_rest_first = paths_cross(f) ? PATH_REST_CROSS_FIRST : PATH_REST_COUNT;
	f->path_rest_next = f->path_rest_first;
	f->paths = tk_calloc_huge((size_t)1 << f->path_log, sizeof(*f->paths));
	return f->paths ? 0 : -TK_E_NOMEM;
}

/* The key of the path from edge (PREV, SLOT) over the next outcomes of TNT (NTNT > 0
 * left), at most PATH_BITS of them */
static inline uint64_t path_key(uint32_t prev, int slot, uint64_t tnt, unsigned ntnt)
{
	unsigned k = ntnt < PATH_BITS ? ntnt : PATH_BITS;
	uint32_t pat = ((uint32_t)(tnt >> (ntnt - k)) & ((1u << k) - 1)) | 1u << k;

	return ((uint64_t)prev << 1 | (unsigned)slot) << 9 | pat;
}

/* Walk the path of KEY (edge and outcomes) through the cache's links. Without ADD: fill S
 * with its longest prefix that ends right after an outcome. With ADD: add ADD to the
 * executions of every block of the S->nbits outcomes' path (as filled before). */
static int path_walk(struct tk_flow *f, uint64_t key, struct path_slot *s, uint64_t add)
{
	uint32_t prev = (uint32_t)(key >> 10), slot = (uint32_t)(key >> 9) & 1;
	uint32_t pat = (uint32_t)key & 511, k = 31 - (uint32_t)__builtin_clz(pat);
	uint32_t limit = add ? s->nbits : k, used = 0, insns = 0, lead = 0;
	uint32_t calls[PATH_PUSHES] = { 0 };   /* the path's calls not returned from */
	unsigned ncalls = 0, peak = 0;
	int cross = paths_cross(f);

	if (!add)
		*s = (struct path_slot){ .key = key };
	for (unsigned step = 0; step < PATH_MAX_BLOCKS && used < limit; step++) {
		uint32_t bi = f->cache.links[prev].succ[slot];

		if (bi) {
			bi--;
		} else {
			const struct tk_block *pb = &f->cache.blocks[prev];

			uint32_t jump_from = f->jump_from;

			f->jump_from = UINT32_MAX;   /* (a direct edge) */
			bi = lookup_target(f, succ_ip(pb, slot), pb->mode);
			f->jump_from = jump_from;
			if (bi == UINT32_MAX)
				return -TK_E_NOMEM;
			if (bi & DEAD_END)
				break;   /* no branch in reach: the walk stops before it */
			f->cache.links[prev].succ[slot] = bi + 1;
		}
		const struct tk_block_link *l = &f->cache.links[bi];
		unsigned cls = l->cls;

		if (cls == TK_ISA_CALL && cross && !(l->flags & TK_BLK_ZERO_CALL)) {
			if (ncalls == PATH_PUSHES)
				break;
			calls[ncalls++] = bi;
			peak = ncalls > peak ? ncalls : peak;
		} else if (cls == TK_ISA_CALL && cross) {
			cls = TK_ISA_JMP;   /* a call to the next instruction pushes nothing */
		} else if (cls == TK_ISA_RET && cross) {
			/* only as a taken bit */
			if (!((pat >> (k - 1 - used)) & 1))
				break;
		} else if (cls != TK_ISA_OTHER && cls != TK_ISA_JMP && cls != TK_ISA_JCC) {
			break;
		}
		if ((l->flags & TK_BLK_EMPTY) || (f->count && (l->flags & TK_BLK_ENTRY)))
			break;
		if (add)
			f->cache.blocks[bi].execs += add;
		insns += l->ninsn;
		prev = bi;
		slot = 0;
		if (cls == TK_ISA_JCC || cls == TK_ISA_RET) {
			int pops = 0;   /* a return to a call from before the path */

			if (cls == TK_ISA_JCC) {
				slot = (pat >> (k - 1 - used)) & 1;
			} else if (ncalls) {
				prev = calls[--ncalls];   /* on to the return site */
				slot = 1;
			} else {
				pops = 1;
			}
			if (!add) {
				s->nbits = (uint8_t)++used;
				s->insns = insns;
				s->end = pops ? PATH_END_POP : prev << 1 | slot;
				s->npush = (uint8_t)ncalls;
				s->peak = (uint8_t)peak;
				memcpy(s->push, calls, sizeof(calls));   /* (a constant size: no call) */
				if (used == 1)
					s->lead = (uint16_t)lead;
			} else {
				used++;
			}
			if (pops)
				break;
		} else if (cls != TK_ISA_OTHER && !used) {
			lead++;   /* a jump or a call */
		}
	}
	return 0;
}

/* Count mode: add the paths' uses to their blocks. */
static int flush_paths(struct tk_flow *f)
{
	if (!f->paths)
		return 0;
	for (uint32_t i = 0; i < 1u << f->path_log; i++) {
		struct path_slot *s = &f->paths[i];

		if (f->count && s->hits) {
			int rc = path_walk(f, s->key, s, s->hits);

			if (rc < 0)
				return rc;
			s->hits = 0;
		}
	}
	return 0;
}

/* A window of lookups is over: rest if it missed too often, each rest in a row twice
 * as long as the one before, up to the mode's length. */
static inline void path_window_end(struct tk_flow *f, uint32_t misses)
{
	if (misses > f->path_miss_max) {
		f->path_rest = f->path_rest_next;
		if (f->path_rest_next < f->path_rest_len)
			f->path_rest_next *= 2;
	} else {
		f->path_rest_next = f->path_rest_first;
	}
}

/* Whether to walk block by block this time (see PATH_WINDOW). */
static inline int path_rest(struct tk_flow *f)
{
	if (f->path_rest) {
		f->path_rest--;
		return 1;
	}
	if (++f->path_tries == PATH_WINDOW) {
		path_window_end(f, f->path_misses);
		f->path_tries = f->path_misses = 0;
	}
	return 0;
}

/* The slot of KEY, filled if it held another path. NULL when out of memory. */
static struct path_slot *path_get(struct tk_flow *f, uint64_t key)
{
	struct path_slot *s = &f->paths[path_index(f->path_log, key)];

	if (s->key == key)
		return s;
	if (f->count && s->hits && path_walk(f, s->key, s, s->hits) < 0)
		return NULL;
	return path_walk(f, key, s, 0) < 0 ? NULL : s;
}

/* A call or return event of the hot path, from link L's block to TO; it carries the
 * instructions of count mode's unreported blocks (*UNSENT) */
static inline void fill_transfer(struct tk_event *e, unsigned kind,
				 const struct tk_block_link *l, uint64_t to, uint64_t arg,
				 uint64_t time, uint32_t track, uint64_t *unsent)
{
	e->time = time;
	e->addr = tk_link_last(l);
	e->addr2 = to;
	e->count = *unsent;
	*unsent = 0;
	e->arg = arg;
	e->track = track;
	e->kind = (uint16_t)kind;
	e->flags = 0;
}

/* Counting (paths_cross): path after path from the edge (*PREVP, *SLOTP), which has
 * outcomes left and is not NOPATH, with the return stack and the rest counters in
 * registers. Returns 0 when the outcomes are used up, 1 when the walk must take the
 * next block alone (a path that cannot be taken, an edge without paths, a return to
 * another mode, a rest begun), < 0 on errors. As walk_tnt_as's general step would. */
static inline __attribute__((always_inline)) int
run_paths(struct tk_flow *f, struct path_slot *paths, int mode, const uint64_t *tntp,
	  unsigned *ntntp, uint32_t *prevp, int *slotp, uint64_t *ipp, uint32_t *idlep,
	  uint64_t *insnsp)
{
	struct tk_block_link *links = f->cache.links;
	uint64_t tnt = *tntp, insns = *insnsp;
	unsigned ntnt = *ntntp, top = f->top, depth = f->depth;
	uint32_t prev = *prevp, idle = *idlep, tries = f->path_tries, misses = f->path_misses;
	int slot = *slotp, stop = 1;
	uint32_t back1 = f->path_back[0], back2 = f->path_back[1];

	for (;;) {
		uint64_t key = path_key(prev, slot, tnt, ntnt);
		uint32_t at = path_index(PATH_LOG_CROSS, key);
		struct path_slot *s = &paths[at];

		if (++tries == PATH_WINDOW) {
			path_window_end(f, misses);   /* a rest from the next lookup on */
			tries = misses = 0;
		}
		if (s->key != key) {
			misses++;
			if (!(s = path_get(f, key))) {
				stop = -TK_E_NOMEM;
				break;
			}
			links = f->cache.links;
		}
		if (!s->nbits) {
			links[prev].flags |= (uint8_t)(TK_BLK_NOPATH << slot);
			break;
		}
		/* Each lookup waits for the one before (its key is that path's end), and
		 * the table does not stay in L1/L2: start loading the slot that came two
		 * paths after this one last time while this one and the next are used. */
		__builtin_prefetch(&paths[s->ahead]);
		if (back2 != UINT32_MAX)
			paths[back2].ahead = (uint16_t)at;
		back2 = back1;
		back1 = at;
		if (idle + s->lead > MAX_BLOCKS_WITHOUT_TRACE || (s->end == PATH_END_POP && !depth))
			break;
		/* calls pushing onto a full stack drop its oldest entries, as one by one */
		if (depth + s->peak > RET_STACK)
			depth = RET_STACK - s->peak;
		for (unsigned i = 0; i < s->npush; i++) {
			f->stack_call[top] = s->push[i];   /* (no return address: quiet) */
			f->stack_mode[top] = (uint8_t)mode;
			top = (top + 1) % RET_STACK;
		}
		depth += s->npush;   /* npush <= peak: within RET_STACK */
		insns += s->insns;
		if (s->end != PATH_END_POP) {
			prev = s->end >> 1;
			slot = (int)(s->end & 1);
		} else {
			uint32_t call_bi;

			top = (top + RET_STACK - 1) % RET_STACK;
			depth--;
			call_bi = f->stack_call[top];
			prev = f->stack_mode[top] == mode ? call_bi : UINT32_MAX;
			slot = 1;
			if (prev == UINT32_MAX)
				*ipp = f->cache.blocks[call_bi].next;
		}
		ntnt -= s->nbits;
		idle = 0;
		if (!ntnt) {
			stop = 0;
			break;
		}
		if (prev == UINT32_MAX || f->path_rest ||
		    ((links[prev].flags >> slot) & TK_BLK_NOPATH))
			break;
	}
	f->top = top;
	f->depth = depth;
	f->path_back[0] = back1;
	f->path_back[1] = back2;
	f->path_tries = tries;
	f->path_misses = misses;
	*ntntp = ntnt;
	*prevp = prev;
	*slotp = slot;
	*idlep = idle;
	*insnsp = insns;
	return stop;
}

/* The hot path: while the oracle hands out TNT bits, follow direct branches, conditional
 * branches and compressed returns with the walk's state in locals (the events written
 * through pointers would otherwise force every field to be reloaded); a TIP in the same
 * mode after the bits resolves its indirect branch or return here too. Stops before a
 * block it does not handle (no code, a far transfer, a branch the next item cannot
 * resolve) or at an item that is neither, leaving that to the general loop. While there is an
 * edge (*PREVP, *SLOTP) the position is that edge: the address is worked out only where
 * a link is missing and on return (a select on each outcome was a branch the CPU could
 * not predict). Returns < 0 on errors, 1 if the walk must end at the limit of blocks
 * without trace (*fromp set). QUIET and COUNT are f's, as constants where walk_tnt
 * makes a copy for them. */
static inline __attribute__((always_inline)) int
walk_tnt_as(struct tk_flow *f, struct tk_flow_q *q, const struct tk_flow_oracle *o,
	    struct tk_event_batch *out, int mode, uint64_t *ipp, uint32_t *prevp, int *slotp,
	    uint32_t *idlep, uint64_t *insnsp, uint64_t *fromp, const int quiet, const int count,
	    const int conds)
{
	uint64_t ip = *ipp, tnt = q->tnt, insns = 0, time = f->time, unsent = f->unsent;
	uint64_t cond_all = 0, cond_taken = 0;   /* conditional outcomes used here */
	unsigned ntnt = q->ntnt;
	uint32_t prev = *prevp, idle = *idlep, wr = f->emitted_wr, track = f->track;
	int slot = *slotp, rc = 0;
	int report_next = f->report_next, via_call = f->via_call;
	size_t n = out->n;
	struct tk_block *blocks = f->cache.blocks;
	struct tk_block_link *links = f->cache.links;
	struct path_slot *paths = NULL;   /* only when blocks are not reported one by one */
	struct tk_event *e;
	/* as paths_cross(f), constant where quiet and count are */
	const int cross = quiet && !count;

	if (quiet || count) {
		if (!f->paths && alloc_paths(f) < 0)
			return -TK_E_NOMEM;
		paths = f->paths;
	}
	for (;;) {
		uint32_t bi;

		/* (no lookup from an edge whose path ends before any outcome: a call or a
		 * return right after a branch, 40% of the lookups in libc code) */
		if (cross && prev != UINT32_MAX && ntnt &&
		    !((links[prev].flags >> slot) & TK_BLK_NOPATH)) {
			if (f->path_rest) {
				f->path_rest--;   /* resting (see PATH_WINDOW): this block alone */
			} else {
				int stop = run_paths(f, paths, mode, &tnt, &ntnt, &prev, &slot, &ip,
						     &idle, &insns);

				if (stop < 0) {
					rc = stop;
					break;
				}
				blocks = f->cache.blocks;
				links = f->cache.links;
				if (!stop)
					goto used_up;
			}
		} else if (count && prev != UINT32_MAX && !report_next && ntnt &&
			   !((links[prev].flags >> slot) & TK_BLK_NOPATH) && !path_rest(f)) {
			uint64_t key = path_key(prev, slot, tnt, ntnt);
			struct path_slot *s = &paths[path_index(PATH_LOG_COUNT, key)];

			if (s->key != key) {
				f->path_misses++;
				if (!(s = path_get(f, key))) {
					rc = -TK_E_NOMEM;
					break;
				}
				blocks = f->cache.blocks;
				links = f->cache.links;
			}
			if (s->nbits && idle + s->lead <= MAX_BLOCKS_WITHOUT_TRACE) {
				insns += s->insns;
				s->hits++;
				unsent += s->insns;
				prev = s->end >> 1;
				slot = (int)(s->end & 1);
				ntnt -= s->nbits;
				/* count mode's paths end at calls and returns: every outcome
				   is a conditional branch's */
				if (conds) {
					cond_taken += (unsigned)__builtin_popcount(
						(uint32_t)(tnt >> ntnt) & ((1u << s->nbits) - 1));
					cond_all += s->nbits;
				}
				idle = 0;
				via_call = 0;
				if (ntnt)
					continue;
				goto used_up;
			}
			if (!s->nbits)
				links[prev].flags |= (uint8_t)(TK_BLK_NOPATH << slot);
		}
		if (prev != UINT32_MAX && links[prev].succ[slot]) {
			bi = links[prev].succ[slot] - 1;
		} else {
			if (prev != UINT32_MAX)
				ip = succ_ip(&blocks[prev], (unsigned)slot);
			bi = lookup_target(f, ip, mode);
			if (__builtin_expect(bi >= DEAD_END, 0)) {
				if (bi == UINT32_MAX) {
					rc = -TK_E_NOMEM;
					break;
				}
				bi &= ~DEAD_END;
				if (ntnt) {
					/* no use for the outcomes that way: stop before it */
					rc = reach_error(f, bi, fromp);
					break;
				}
				blocks = f->cache.blocks;
				links = f->cache.links;
			} else {
				blocks = f->cache.blocks;
				links = f->cache.links;
				if (prev != UINT32_MAX)
					links[prev].succ[slot] = bi + 1;
			}
		}
		const struct tk_block_link *l = &links[bi];
		unsigned cls = l->cls, ninsn = l->ninsn;

		if (!ntnt) {
			/* A TIP is next (see used_up): direct flow up to the indirect branch
			 * or return it resolves, taken below as the general loop would. */
			if ((l->flags & TK_BLK_EMPTY) ||
			    (cls != TK_ISA_OTHER && cls != TK_ISA_JMP && cls != TK_ISA_CALL &&
			     cls != TK_ISA_RET && cls != TK_ISA_JMP_IND && cls != TK_ISA_CALL_IND))
				break;
		} else if ((l->flags & TK_BLK_EMPTY) ||
			   (cls != TK_ISA_OTHER && cls != TK_ISA_JMP && cls != TK_ISA_CALL &&
			    cls != TK_ISA_JCC && cls != TK_ISA_RET)) {
			break;
		} else if (cls == TK_ISA_RET && (!((tnt >> (ntnt - 1)) & 1) || !f->depth)) {
			break;
		}
		if (count && !report_next && (!(l->flags & TK_BLK_ENTRY) || via_call)) {
			count_exec(links, blocks, bi);
			unsent += ninsn;
		} else if (!quiet) {
			if (!(e = next_slot(f, out, &n, wr, &rc)))
				break;
			blocks = f->cache.blocks;    /* printing may have grown the cache */
			links = f->cache.links;
			l = &links[bi];
			e->time = time;
			e->addr = l->start;
			e->addr2 = tk_link_last(l);
			e->count = ninsn;
			e->arg = unsent;             /* count mode: the blocks before it */
			unsent = 0;
			e->track = track;
			e->kind = TK_EV_BLOCK;
			e->flags = l->mode;
			f->emitted[wr++ % EMITTED_RING] = bi;
			report_next = 0;
		}
		insns += ninsn;
		prev = bi;
		slot = 0;
		via_call = cls == TK_ISA_CALL;
		if (cls == TK_ISA_OTHER)
			continue;
		if (cls == TK_ISA_JMP || cls == TK_ISA_CALL) {
			if (cls == TK_ISA_CALL) {
				if (quiet) {
					if (!(links[bi].flags & TK_BLK_ZERO_CALL))
						push_ret(f, bi, mode, 0);
					goto call_done;
				}
				if (!(links[bi].flags & TK_BLK_ZERO_CALL))
					push_ret(f, bi, mode, tk_link_next(&links[bi]));
				if (!(e = next_slot(f, out, &n, wr, &rc)))
					break;
				blocks = f->cache.blocks;
				links = f->cache.links;
				l = &links[bi];
				fill_transfer(e, TK_EV_CALL, l, tk_bcache_target(&f->cache, bi),
					      tk_link_next(l), time, track, &unsent);
			}
call_done:
			if (++idle > MAX_BLOCKS_WITHOUT_TRACE) {
				*fromp = tk_link_last(&links[bi]);
				rc = 1;
				break;
			}
			continue;
		}
		if (!ntnt) {
			/* the pending TIP's return, indirect jump or indirect call */
			if (cls == TK_ISA_CALL_IND) {
				push_ret(f, bi, mode, quiet ? 0 : tk_link_next(&links[bi]));
				via_call = 1;
			} else if (cls == TK_ISA_RET) {
				drop_ret(f);
			}
			if (!quiet && cls != TK_ISA_JMP_IND) {
				if (!(e = next_slot(f, out, &n, wr, &rc)))
					break;
				blocks = f->cache.blocks;
				links = f->cache.links;
				l = &links[bi];
				if (cls == TK_ISA_CALL_IND)
					fill_transfer(e, TK_EV_CALL, l, q->ip, tk_link_next(l), time,
						      track, &unsent);
				else
					fill_transfer(e, TK_EV_RETURN, l, q->ip, 0, time, track,
						      &unsent);
			}
			ip = q->ip;
			f->jump_from = bi;
			prev = UINT32_MAX;
			idle = 0;
			goto used_up;
		}
		/* a conditional branch or a compressed return: one TNT bit */
		int taken = (tnt >> --ntnt) & 1;

		idle = 0;
		if (cls == TK_ISA_JCC) {
			slot = taken;
			if (conds) {
				cond_taken += (unsigned)taken;
				cond_all++;
			}
		} else {
			uint32_t call_bi = 0;
			int call_mode = 0;

			pop_ret(f, &call_bi, &call_mode);   /* depth checked above */
			/* the return site hangs off the call's block (same mode: it was
			 * looked up in the call's) */
			prev = call_mode == mode ? call_bi : UINT32_MAX;
			slot = 1;
			if (!quiet)
				ip = f->stack_ret[f->top];   /* as popped */
			else if (prev == UINT32_MAX)
				ip = blocks[call_bi].next;
			if (quiet)
				goto ret_done;
			if (!(e = next_slot(f, out, &n, wr, &rc)))
				break;
			blocks = f->cache.blocks;    /* printing may have grown the cache */
			links = f->cache.links;
			fill_transfer(e, TK_EV_RETURN, &links[bi], ip, 0, time, track, &unsent);
		}
ret_done:
		if (ntnt)
			continue;
used_up:
		/* packet used up: the next item (it may publish events and the time) */
		q->kind = TK_FLOWQ_NONE;
		q->ntnt = 0;
		f->emitted_wr = wr;
		f->unsent = unsent;   /* the oracle may send them (tk_flow_send_insns) */
		out->n = n;
		if ((rc = o->next(o->ctx, q)) < 0)
			break;
		unsent = f->unsent;
		n = out->n;
		time = f->time;
		track = f->track;
		blocks = f->cache.blocks;
		if (q->kind != TK_FLOWQ_TNT) {
			/* a TIP in the same mode is taken here, not in the general loop
			 * (a quarter of the packets in libLLVM's trace) */
			if (q->kind != TK_FLOWQ_TIP || q->mode >= 0 || f->bind)
				break;
			ntnt = 0;
			continue;
		}
		tnt = q->tnt;
		ntnt = q->ntnt;
		if (__builtin_expect(f->bind, 0))
			break;   /* an event binds to an instruction ahead: the general loop */
	}
	if (q->kind == TK_FLOWQ_TNT) {
		q->tnt = tnt;
		q->ntnt = ntnt;
		if (!ntnt)
			q->kind = TK_FLOWQ_NONE;
	}
	f->emitted_wr = wr;
	f->unsent = unsent;
	f->report_next = report_next;
	f->via_call = via_call;
	if (conds) {
		f->cond[0] += cond_all - cond_taken;
		f->cond[1] += cond_taken;
	}
	out->n = n;
	*ipp = prev != UINT32_MAX ? succ_ip(&f->cache.blocks[prev], (unsigned)slot) : ip;
	*prevp = prev;
	*slotp = slot;
	*idlep = idle;
	*insnsp += insns;
	return rc;
}

/* walk_tnt_as compiled for counting (decode --stat), for count mode (profile) and for
 * count mode with conditional outcomes (stats) on their own: each loop then keeps its state
 * in registers, and profile pays nothing for the outcomes (4% of libc's time). Inlined into
 * its one caller: as a call of its own, 2 % more instructions (decode --stat of the walk). */
static inline __attribute__((always_inline)) int
walk_tnt(struct tk_flow *f, struct tk_flow_q *q, const struct tk_flow_oracle *o,
	 struct tk_event_batch *out, int mode, uint64_t *ipp, uint32_t *prevp, int *slotp,
	 uint32_t *idlep, uint64_t *insnsp, uint64_t *fromp)
{
	if (f->quiet && !f->count)
		return walk_tnt_as(f, q, o, out, mode, ipp, prevp, slotp, idlep, insnsp, fromp,
				   1, 0, 0);
	if (!f->quiet && f->count && !f->conds)
		return walk_tnt_as(f, q, o, out, mode, ipp, prevp, slotp, idlep, insnsp, fromp,
				   0, 1, 0);
	if (!f->quiet && f->count)
		return walk_tnt_as(f, q, o, out, mode, ipp, prevp, slotp, idlep, insnsp, fromp,
				   0, 1, 1);
	return walk_tnt_as(f, q, o, out, mode, ipp, prevp, slotp, idlep, insnsp, fromp,
			   f->quiet, f->count, f->conds);
}

/* At the end of the trace, events held for an instruction ahead (TK_FLOW_BIND_AT_END):
 * the walk goes on to it, as they say it ran (libipt binds them so). */
static int walk_at_end(const struct tk_flow *f)
{
	return (f->bind & TK_FLOW_BIND_AT_END) &&
	       (f->bind & (TK_FLOW_BIND_PAGING | TK_FLOW_BIND_VMCS | TK_FLOW_BIND_PTWRITE));
}

/* A block ending in this class needs the trace to go on past its last instruction. */
static int needs_trace(uint8_t cls)
{
	return cls == TK_ISA_JCC || cls == TK_ISA_RET || cls == TK_ISA_JMP_IND ||
	       cls == TK_ISA_CALL_IND || cls == TK_ISA_FAR;
}

/* Walking on to bind a held event at the end of the trace (walk_at_end), block BI ends in
 * a branch that needs trace: the block ran, its branch too (the event's instruction comes
 * after it), but where the branch went only the trace could say. Out of line: rare. */
static __attribute__((noinline)) int end_at_branch(struct tk_flow *f, struct tk_event_batch *out,
						   uint32_t bi, uint64_t *ip,
						   struct tk_flow_result *res)
{
	const struct tk_block *b = &f->cache.blocks[bi];
	int rc = walked(f, out, bi, b->last, b->ninsn);

	if (rc < 0)
		return rc;
	b = &f->cache.blocks[bi];   /* (a printing sink may grow the cache) */
	res->insns += b->ninsn;
	*ip = res->from = b->next;
	return TK_FLOW_ENDED;
}

/* Whether the walk from IP gets to TARGET (an instruction boundary) through straight code
 * and direct jumps and calls, within BDM64_STEPS instructions (libipt's bound), without
 * taking trace: q.jump_ok's test. 1, 0, or -TK_E_NOMEM. May grow the cache. Out of line:
 * only for an abort on a processor with BDM64. */
#define BDM64_STEPS 0x100
static __attribute__((noinline)) int reaches_straight(struct tk_flow *f, uint64_t ip, int mode,
						       uint64_t target)
{
	for (uint32_t steps = 0; steps < BDM64_STEPS;) {
		uint32_t bi = tk_bcache_index(&f->cache, ip, mode), k;

		if (bi == UINT32_MAX)
			return -TK_E_NOMEM;
		const struct tk_block *b = &f->cache.blocks[bi];
		if (b->flags & TK_BLK_EMPTY)
			return 0;
		if (insns_before(&f->cache, b, target, &k))
			return steps + k <= BDM64_STEPS;
		steps += b->ninsn;
		if (b->cls == TK_ISA_OTHER)
			ip = b->next;
		else if (b->cls == TK_ISA_JMP || b->cls == TK_ISA_CALL)
			ip = b->target;
		else
			return 0;
	}
	return 0;
}

/* BDM64: the walk went from the branch that ends block FROM to IP at once. Its branch
 * event, still in OUT, says so where a branch can (a conditional one to its target, an
 * indirect one to anywhere): a re-encoding then writes what this decoding read. */
static void bdm64_branch(struct tk_flow *f, struct tk_event_batch *out, uint32_t from, uint64_t ip)
{
	const struct tk_block *b = &f->cache.blocks[from];
	struct tk_event *e = out->n ? &out->ev[out->n - 1] : NULL;

	if (!e || e->kind != TK_EV_BRANCH || e->addr != b->last)
		return;
	if (!(e->flags & TK_BR_CONDITIONAL)) {
		e->addr2 = ip;
	} else if (ip == b->target) {
		e->addr2 = ip;
		e->flags |= TK_BR_TAKEN;
	}
}

/* The walk is to enter block BI at *IP and stop at f->q's STOP: where the stop lies in
 * the block, its instructions before it walked (TK_FLOW_STOPPED); right after a branch
 * (PREV: the block walked last, UINT32_MAX if none or unknown) with the stop's jump_ok,
 * at the stop at once if nothing that takes no trace leads there (BDM64, as libipt reads
 * it: the branch went there); else STOP_LATER. Out of line: a stop is one event's. */
#define STOP_LATER 1000
static __attribute__((noinline)) int stop_in_block(struct tk_flow *f, struct tk_event_batch *out,
						    uint32_t bi, uint32_t prev, int mode, uint64_t *ip,
						    struct tk_flow_result *res)
{
	struct tk_flow_q *q = &f->q;
	const struct tk_block *b = &f->cache.blocks[bi];
	uint32_t k;
	int rc;

	if (q->ip > b->start && q->ip <= b->last && insns_before(&f->cache, b, q->ip, &k)) {
		if ((rc = walked(f, out, bi, insn_addr(&f->cache, b, k - 1), k)) < 0)
			return rc;
		res->insns += k;
		*ip = q->ip;
		q->kind = TK_FLOWQ_NONE;
		return TK_FLOW_STOPPED;
	}
	if (!q->jump_ok || !res->insns || prev == UINT32_MAX ||
	    f->cache.blocks[prev].cls == TK_ISA_OTHER)
		return STOP_LATER;
	if ((rc = reaches_straight(f, *ip, mode, q->ip)) != 0)
		return rc < 0 ? rc : STOP_LATER;
	if (f->branches)
		bdm64_branch(f, out, prev, q->ip);
	*ip = q->ip;
	q->kind = TK_FLOWQ_NONE;
	return TK_FLOW_STOPPED;
}

int tk_flow_walk(struct tk_flow *f, uint64_t *ipp, int *modep, const struct tk_flow_oracle *o,
		 struct tk_event_batch *out, struct tk_flow_result *res)
{
	struct tk_flow_q *q = &f->q;
	uint64_t ip = *ipp;
	int mode = *modep;
	uint32_t idle = 0, prev = UINT32_MAX;
	int prev_slot = 0, rc;

	res->from = 0;
	res->insns = 0;
	f->jump_from = f->resume_from;
	f->resume_from = UINT32_MAX;
	f->report_next = f->count;
	f->via_call = 0;
	if (f->depth) {
		/* Tracing resumes where the call on top of the stack returns (a call that
		 * left the traced code, through a PLT stub: 97% of libLLVM's resumes): the
		 * call block's link leads there. The stack is not popped; the return was
		 * not traced. (The disabling block's last target found 42% of them.) */
		unsigned t = (f->top + RET_STACK - 1) % RET_STACK;
		uint32_t cb = f->stack_call[t];

		if (f->stack_mode[t] == mode && cb < f->cache.nblocks &&
		    tk_link_next(&f->cache.links[cb]) == ip) {
			prev = cb;
			prev_slot = 1;
			f->jump_from = UINT32_MAX;
		}
	}
	for (;;) {
		if (q->kind == TK_FLOWQ_NONE && (rc = o->next(o->ctx, q)) < 0)
			goto out;
		if (q->kind == TK_FLOWQ_TNT && q->ntnt && !f->branches && !f->bind) {
			rc = walk_tnt(f, q, o, out, mode, &ip, &prev, &prev_slot, &idle,
				      &res->insns, &res->from);
			if (rc) {
				if (rc > 0)
					rc = -TK_E_LIMIT;
				goto out;
			}
			if (q->kind == TK_FLOWQ_NONE && (rc = o->next(o->ctx, q)) < 0)
				goto out;
		}
		if ((q->kind == TK_FLOWQ_STOP && q->ip == ip) ||
		    (q->kind == TK_FLOWQ_STEP && !q->ntnt)) {
			q->kind = TK_FLOWQ_NONE;
			rc = TK_FLOW_STOPPED;
			goto out;
		}
		if (q->kind == TK_FLOWQ_END && !walk_at_end(f)) {
			/* The trace ends: nothing says the instruction at ip ran (libipt
			 * stops here too, ptxed's "end of trace"). */
			res->from = ip;
			rc = TK_FLOW_ENDED;
			goto out;
		}

		/* Follow the link from the previous block when there is one: no hash
		 * lookup on the hot path. */
		uint32_t bi;

		if (prev != UINT32_MAX && f->cache.links[prev].succ[prev_slot]) {
			bi = f->cache.links[prev].succ[prev_slot] - 1;
		} else {
			bi = lookup_target(f, ip, mode);
			if (__builtin_expect(bi >= DEAD_END, 0)) {
				if (bi == UINT32_MAX) {
					rc = -TK_E_NOMEM;
					goto out;
				}
				bi &= ~DEAD_END;
				if (q->kind == TK_FLOWQ_TNT && q->ntnt) {
					/* no use for the outcomes that way: stop before it */
					rc = reach_error(f, bi, &res->from);
					goto out;
				}
			} else if (prev != UINT32_MAX) {
				f->cache.links[prev].succ[prev_slot] = bi + 1;
			}
		}
		/* valid until the next lookup (the cache may grow) */
		const struct tk_block *b = &f->cache.blocks[bi];

		if (b->flags & TK_BLK_EMPTY) {
			rc = b->flags & TK_BLK_BAD ? -TK_E_BAD_OPCODE : -TK_E_NOMAP;
			res->from = ip;
			goto out;
		}
		if (__builtin_expect(q->kind == TK_FLOWQ_END, 0) && needs_trace(b->cls)) {
			rc = end_at_branch(f, out, bi, &ip, res);
			goto out;
		}
		if (q->kind == TK_FLOWQ_STEP && q->ntnt < b->ninsn) {
			uint32_t k = q->ntnt;   /* > 0: checked above */

			if ((rc = walked(f, out, bi, insn_addr(&f->cache, b, k - 1), k)) < 0)
				goto out;
			res->insns += k;
			ip = insn_addr(&f->cache, &f->cache.blocks[bi], k);
			q->kind = TK_FLOWQ_NONE;
			q->ntnt = 0;
			rc = TK_FLOW_STOPPED;
			goto out;
		}
		if (__builtin_expect(q->kind == TK_FLOWQ_STOP, 0)) {
			rc = stop_in_block(f, out, bi, prev, mode, &ip, res);
			if (rc != STOP_LATER)
				goto out;
			b = &f->cache.blocks[bi];   /* (the cache may have grown) */
		}
		prev = UINT32_MAX;

		int needs = b->cls == TK_ISA_JCC || b->cls == TK_ISA_RET || b->cls == TK_ISA_JMP_IND ||
			    b->cls == TK_ISA_CALL_IND || b->cls == TK_ISA_FAR;

		if (needs && (q->kind == TK_FLOWQ_STOP || q->kind == TK_FLOWQ_STEP)) {
			/* The branch cannot be followed. Like libipt, the branch itself is
			 * reported: it was executed, only its outcome is unknown. */
			if ((rc = walked(f, out, bi, b->last, b->ninsn)) < 0)
				goto out;
			b = &f->cache.blocks[bi];
			res->insns += b->ninsn;
			res->from = b->last;
			ip = b->last;
			rc = -TK_E_BAD_FORMAT;
			goto out;
		}
		if ((rc = walked(f, out, bi, b->last, b->ninsn)) < 0)
			goto out;
		b = &f->cache.blocks[bi];    /* a printing sink may have grown the cache */
		res->insns += b->ninsn;
		if (q->kind == TK_FLOWQ_STEP)
			q->ntnt -= b->ninsn;

		switch (b->cls) {
		case TK_ISA_OTHER:
			if (b->sys == TK_ISA_SYS_MOV_CR3 && q->kind == TK_FLOWQ_PGD && !q->has_ip) {
				/* a TIP.PGD without IP binds to a MOV CR3 (libipt too) */
				q->kind = TK_FLOWQ_NONE;
				res->from = b->last;
				ip = 0;
				rc = TK_FLOW_DISABLED;
				goto out;
			}
			ip = b->next;
			prev = bi, prev_slot = 0;
			if ((b->sys == TK_ISA_SYS_MOV_CR3 && (f->bind & TK_FLOW_BIND_PAGING)) ||
			    (b->sys == TK_ISA_SYS_VMPTRLD && (f->bind & TK_FLOW_BIND_VMCS)) ||
			    (b->sys == TK_ISA_SYS_PTWRITE && (f->bind & TK_FLOW_BIND_PTWRITE))) {
				res->from = b->last;
				rc = TK_FLOW_BOUND;
				goto out;
			}
			break;
		case TK_ISA_JMP:
		case TK_ISA_CALL:
			if (b->cls == TK_ISA_CALL) {
				if (!(b->flags & TK_BLK_ZERO_CALL))
					push_ret(f, bi, mode, b->next);
				if ((rc = emit(f, out, TK_EV_CALL, b->last, b->target, 0, b->next,
					       0)) < 0)
					goto out;
				f->via_call = 1;
			}
			if (q->kind == TK_FLOWQ_PGD &&
			    (q->has_ip ? q->ip == b->target : pgd_binds_direct(f, b->target))) {
				q->kind = TK_FLOWQ_NONE;
				res->from = b->last;
				ip = q->has_ip ? b->target : 0;
				rc = TK_FLOW_DISABLED;
				goto out;
			}
			ip = b->target;
			prev = bi, prev_slot = 0;
			if (++idle > MAX_BLOCKS_WITHOUT_TRACE) {
				res->from = b->last;
				rc = -TK_E_LIMIT;
				goto out;
			}
			continue;
		case TK_ISA_JCC:
			if (q->kind == TK_FLOWQ_TNT) {
				int taken = (q->tnt >> --q->ntnt) & 1;

				if (!q->ntnt)
					q->kind = TK_FLOWQ_NONE;
				ip = taken ? b->target : b->next;
				prev = bi, prev_slot = taken;
				idle = 0;
				if (f->conds)
					f->cond[taken]++;
				if (f->branches &&
				    (rc = emit(f, out, TK_EV_BRANCH, b->last, ip, 0, 0,
					       TK_BR_CONDITIONAL | (taken ? TK_BR_TAKEN : 0))) < 0)
					goto out;
				continue;
			}
			if (q->kind == TK_FLOWQ_PGD) {
				q->kind = TK_FLOWQ_NONE;
				res->from = b->last;
				ip = q->has_ip ? q->ip : 0;
				rc = TK_FLOW_DISABLED;
				goto out;
			}
			res->from = b->last;
			rc = -TK_E_BAD_FORMAT;
			goto out;
		case TK_ISA_RET:
			if (q->kind == TK_FLOWQ_TNT) {
				uint32_t call_bi;
				int call_mode;

				/* checked before the outcome is used: an error names its packet */
				if (!((q->tnt >> (q->ntnt - 1)) & 1) ||
				    pop_ret(f, &call_bi, &call_mode) < 0) {
					res->from = b->last;
					rc = -TK_E_BAD_FORMAT;
					goto out;
				}
				if (!--q->ntnt)
					q->kind = TK_FLOWQ_NONE;
				ip = f->cache.blocks[call_bi].next;
				if (call_mode == mode)
					prev = call_bi, prev_slot = 1;
			} else if (q->kind == TK_FLOWQ_TIP) {
				drop_ret(f);
				ip = q->ip;
				if (q->mode >= 0)
					mode = q->mode;
				q->kind = TK_FLOWQ_NONE;
				f->jump_from = bi;
			} else {
				drop_ret(f);
				/* A return that leaves the traced code is still a return (the
				 * profile ends the frame of a function entered from outside);
				 * like a call that leaves, it is reported before the disable. */
				if (q->kind == TK_FLOWQ_PGD &&
				    (rc = emit(f, out, TK_EV_RETURN, b->last, q->has_ip ? q->ip : 0, 0, 0, 0)) < 0)
					goto out;
				goto disable_or_fail;
			}
			if ((rc = emit(f, out, TK_EV_RETURN, b->last, ip, 0, 0, 0)) < 0)
				goto out;
			idle = 0;
			continue;
		default:   /* indirect jump/call, far transfer */
			if (q->kind == TK_FLOWQ_TNT && o->deferred_tip) {
				/* the processor may send the TIP after the TNT of the
				 * branches that follow (libipt takes it too) */
				struct tk_flow_q t = { .mode = -1 };

				if ((rc = o->deferred_tip(o->ctx, &t)) < 0) {
					res->from = b->last;
					goto out;
				}
				b = &f->cache.blocks[bi];    /* events may have grown the cache */
				ip = t.ip;
				if (t.mode >= 0)
					mode = t.mode;
			} else if (q->kind != TK_FLOWQ_TIP) {
				goto disable_or_fail;
			} else {
				ip = q->ip;
				if (q->mode >= 0)
					mode = q->mode;
				q->kind = TK_FLOWQ_NONE;
			}
			f->jump_from = bi;
			idle = 0;
			if (f->branches &&
			    (rc = emit(f, out, TK_EV_BRANCH, b->last, ip, 0, 0,
				       TK_BR_INDIRECT | TK_BR_TAKEN)) < 0)
				goto out;
			b = &f->cache.blocks[bi];    /* the sink may have grown the cache */
			if (b->cls == TK_ISA_CALL_IND) {
				push_ret(f, bi, mode, b->next);
				if ((rc = emit(f, out, TK_EV_CALL, b->last, ip, 0, b->next, 0)) < 0)
					goto out;
				f->via_call = 1;
			}
			if (b->cls == TK_ISA_FAR && f->bind) {
				res->from = b->last;
				rc = TK_FLOW_BOUND;
				goto out;
			}
			continue;
		}
		continue;
disable_or_fail:
		res->from = b->last;
		if (q->kind == TK_FLOWQ_PGD) {
			ip = q->has_ip ? q->ip : 0;
			q->kind = TK_FLOWQ_NONE;
			rc = TK_FLOW_DISABLED;
			f->resume_from = bi;   /* an indirect branch, return or far transfer */
		} else {
			rc = -TK_E_BAD_FORMAT;
		}
		goto out;
	}
out:
	if (f->unsent) {
		/* what ran before the walk stopped comes before what stopped it */
		int frc = send_unsent(f, out);

		if (frc < 0 && rc >= 0)
			rc = frc;
	}
	*ipp = ip;
	*modep = mode;
	return rc;
}

struct print_ctx {
	struct tk_flow *f;
	struct tk_buf *out;
	int mode, disasm;
};

static void print_one(void *vctx, uint64_t addr, unsigned len)
{
	struct print_ctx *pc = vctx;
	struct tk_buf *out = pc->out;

	tk_buf_hex(out, addr, 16);
	if (pc->disasm) {
		uint8_t code[16];
		char text[256];
		int n = tk_image_read(pc->f->cache.img, addr, code, len);

		if (n == (int)len &&
		    tk_isa_format(&pc->f->cache.isa, pc->mode, code, len, addr, text,
				  sizeof(text)) > 0) {
			tk_buf_put(out, "  ", 2);
			tk_buf_puts(out, text);
		}
	}
	tk_buf_putc(out, '\n');
}

int tk_flow_block_insns(struct tk_flow *f, const struct tk_event *blk,
			void (*fn)(void *ctx, uint64_t addr, unsigned len), void *ctx)
{
	int mode = blk->flags < TK_ISA__MODES ? blk->flags : 0;
	const struct tk_block *b = tk_bcache_get(&f->cache, blk->addr, mode);
	uint64_t a;

	if (!b || b->ninsn < blk->count)
		return -TK_E_INVAL;
	a = b->start;
	for (uint32_t i = 0; i < blk->count; i++) {
		unsigned len = f->cache.lens[b->lens + i];

		fn(ctx, a, len);
		a += len;
	}
	return 0;
}

/* Eight hex digits of the low 32 bits of V as they are laid out in memory (little-endian
 * host): each nibble spread into a byte, then '0'..'9' / 'a'..'f' without a branch. */
static inline uint64_t hex8(uint64_t v)
{
	uint64_t t = v & 0xffffffffu;

	t = (t | t << 16) & 0x0000ffff0000ffffull;
	t = (t | t << 8) & 0x00ff00ff00ff00ffull;
	t = (t | t << 4) & 0x0f0f0f0f0f0f0f0full;
	t = __builtin_bswap64(t);      /* most significant digit first in memory */
	return t + 0x3030303030303030ull +
	       (((t + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull) * 0x27;
}

/* "00".."ff" as 16-bit words in memory order */
static const uint16_t hex_pairs[256] = {
#define HD(d) ((d) < 10 ? '0' + (d) : 'a' + (d) - 10)
#define HP(n) (uint16_t)(HD((n) >> 4) | HD((n) & 15) << 8)
#define HP4(n) HP(n), HP(n + 1), HP(n + 2), HP(n + 3)
#define HP16(n) HP4(n), HP4(n + 4), HP4(n + 8), HP4(n + 12)
	HP16(0x00), HP16(0x10), HP16(0x20), HP16(0x30), HP16(0x40), HP16(0x50), HP16(0x60),
	HP16(0x70), HP16(0x80), HP16(0x90), HP16(0xa0), HP16(0xb0), HP16(0xc0), HP16(0xd0),
	HP16(0xe0), HP16(0xf0),
#undef HP16
#undef HP4
#undef HP
#undef HD
};

/* "AAAAAAAAAAAAAAAA\n" at D for address A whose upper 12 digits are P0 (8) and P1 (4,
 * the low half); returns the end. */
static inline char *hex_line(char *d, uint64_t p0, uint64_t p1, uint64_t a)
{
	uint64_t w = p1 | (uint64_t)hex_pairs[(a >> 8) & 0xff] << 32 |
		     (uint64_t)hex_pairs[a & 0xff] << 48;

	memcpy(d, &p0, 8);
	memcpy(d + 8, &w, 8);
	d[16] = '\n';
	return d + 17;
}

int tk_flow_print_block(struct tk_flow *f, struct tk_buf *out, const struct tk_event *blk,
			int disasm)
{
	int mode = blk->flags < TK_ISA__MODES ? blk->flags : 0;

	if (!disasm) {
		/* Hot path for --no-disasm: no callback per instruction. */
		const struct tk_block *b = NULL;
		uint64_t a;

		if (f->emitted_wr - f->emitted_rd > EMITTED_RING)
			f->emitted_rd = f->emitted_wr - EMITTED_RING;
		/* this event's block, or the next one if an event was not printed */
		for (int k = 0; k < 2 && f->emitted_rd + k != f->emitted_wr; k++) {
			uint32_t bi = f->emitted[(f->emitted_rd + k) % EMITTED_RING];

			if (bi < f->cache.nblocks && f->cache.blocks[bi].start == blk->addr &&
			    f->cache.blocks[bi].mode == mode) {
				b = &f->cache.blocks[bi];
				f->emitted_rd += (uint32_t)k + 1;
				break;
			}
		}
		if (!b)
			b = tk_bcache_get(&f->cache, blk->addr, mode);

		if (!b || b->ninsn < blk->count)
			return -TK_E_INVAL;
		if (tk_buf_reserve(out, 17 * blk->count) < 0)
			return out->err;
		a = b->start;
		{
			const uint8_t *lens = f->cache.lens + b->lens;
			const uint32_t n = blk->count;   /* (a local: the stores below may alias blk) */
			char *d = out->data + out->len;
			/* the upper 12 digits: from registers, the low 4 from a byte-pair table */
			if ((a >> 16) != f->hex_hi) {
				f->hex_hi = a >> 16;
				f->hex_p0 = hex8(a >> 32);
				f->hex_p1 = hex8(a) & 0xffffffffu;
			}
			uint64_t p0 = f->hex_p0, p1 = f->hex_p1;

			if ((b->start >> 16) == (b->last >> 16)) {
				/* the whole block in one 64 KiB page (nearly always): the upper
				 * digits are the same for every line */
				for (uint32_t i = 0; i < n; i++) {
					d = hex_line(d, p0, p1, a);
					a += lens[i];
				}
			} else {
				for (uint32_t i = 0; i < n; i++) {
					p0 = hex8(a >> 32);
					p1 = hex8(a) & 0xffffffffu;
					d = hex_line(d, p0, p1, a);
					a += lens[i];
				}
			}
			out->len = (size_t)(d - out->data);
		}
		return 0;
	}
	struct print_ctx pc = { f, out, mode, disasm };

	return tk_flow_block_insns(f, blk, print_one, &pc);
}
