/* Internal state of a profile (lib/analysis/prof.c). */
#ifndef TK_ANALYSIS_PROF_INTERNAL_H
#define TK_ANALYSIS_PROF_INTERNAL_H

#include "tracekit/internal/retset.h"
#include "tracekit/prof.h"

#define NONE32 UINT32_MAX
#define KIND_TRACK 3 /* a track's root node (not reported) */

/* A call-path node: one per distinct (parent, function). Exactly one cache line: the hot
 * path (lookups, calls, costs) touches only this; the tree links live in struct nlink. */
struct node {
	uint64_t key;             /* function id/address; serial for unknown levels */
	uint16_t kind;            /* enum tk_prof_key_kind or KIND_TRACK */
	uint8_t seam;             /* unknown level before the track's first gap: grafted by
				     merges (here, not in struct nlink: 16 bytes a node less to
				     zero and carry) */
	uint8_t spare;
	uint32_t parent;
	uint32_t func;            /* index into funcs, NONE32 for unknown/track nodes */
	uint32_t track;
	uint64_t calls, incl_ticks, excl_ticks, incl_insns, excl_insns;
};

_Static_assert(sizeof(struct node) == 64, "a node is one cache line");

/* A slot of the node table: the node and its tag (node_tag: never 0; 0 = empty slot). */
struct nslot {
	uint32_t node, tag;
};

struct nlink {
	uint64_t hint;            /* unknown levels: first code address seen there */
	uint32_t first_child, next_sibling;
};

_Static_assert(sizeof(struct nlink) == 16, "four links a cache line");

struct func {
	uint64_t key;
	uint32_t kind, track;
	uint64_t *big;            /* durations >= DUR_BIG, in order (rare: half the memory
				     traffic for the common case) */
	size_t nbig, cbig;
	uint64_t zeros;           /* durations of 0 ticks: counted, not logged (without
				     cycle-accurate timing, most calls end in the tick
				     they began: 97% of them in the Intel PT benches) */
};

#define DUR_BIG UINT32_MAX

/* COUNT durations of TICKS each of function FUNC. A profile loaded from partial results
 * keeps its durations as such runs (tk_prof.druns) rather than one log entry each: the
 * statistics read each function's set of durations, never their order. */
struct dval {
	uint64_t ticks, count;
	uint32_t func;
};

#define ENTRY_BITS ((size_t)1 << 16)

/* Durations of completed calls but those of 0 ticks (func.zeros counts them), in completion
 * order, as (func index << 32 | ticks) with ticks DUR_BIG meaning "the next of that
 * function's big[]". One sequential log instead of an array per function: a store per call
 * to one stream, not to hundreds. Chunks of DLOG_CHUNK entries (no copying as it grows). */
#define DLOG_CHUNK ((size_t)1 << 20)
#define DLOG_FIRST ((size_t)1 << 16)   /* a profile's first chunk (512 KiB, small pages) */
#define DLOG_SMALL ((size_t)1 << 12)
#define DLOG_SLICE ((size_t)1 << 16)   /* made writable at once (512 KiB) */

/* A chunk of huge pages shared by the pieces of the log cut from it (struct dchunk.share):
 * freed with the last piece. */
struct dshare {
	uint64_t *base;
	unsigned refs;
};

/* A chunk of the log. Chunks taken over from another profile by tk_prof_merge_take keep
 * that profile's function indexes: MAP (one of tk_prof.fmaps) translates them when the log
 * is read, so a merge moves the chunks instead of copying them. */
struct dchunk {
	uint64_t *v;
	size_t n;                 /* entries (the current chunk: tk_prof.dlog_n) */
	size_t cap;               /* entries it has room for */
	const uint32_t *map;      /* NULL: this profile's indexes */
	struct dshare *share;     /* not NULL: a piece of a shared chunk (V inside it) */
	uint8_t spilled;          /* DLOG_CHUNK entries mapped from a spill file, not malloc'd */
	uint8_t huge;             /* on huge pages (a DLOG_CHUNK, or a piece of one) */
};

/* A taken chunk's unused end, left to the profile it came from for its next log, when at
 * least this many entries: each chunk's profile else began a fresh chunk and left the last
 * huge page of its log mostly empty (libLLVM's profile -j 2: 30 chunks, ~20 huge pages
 * zeroed for nothing). */
#define DLOG_SPARE_MIN DLOG_SLICE

#define DLOG_IN_MEMORY ((size_t)256 << 20)  /* default of tk_prof_opts.durations_in_memory */

/* A slot of the function table: the key in the slot, so that a lookup (one per new call
 * path: a random walk's every call) loads one line, not the slot and then the function. */
struct fslot {
	uint64_t key;
	uint32_t track;
	uint32_t fk;              /* function index << 2 | kind (ADDR or ID); FSLOT_EMPTY */
};
#define FSLOT_EMPTY UINT32_MAX   /* kind 3: no function's */
#define FUNCS_MAX ((size_t)1 << 30)

static inline uint32_t fslot_fk(uint32_t func, uint32_t kind)
{
	return func << 2 | kind;
}

struct fmap {
	uint32_t *v;
	size_t n;
};

struct block {
	uint64_t start, end, execs, insns;
};

/* A slot of the block cache: the block's key and the executions counted since it came into
 * the slot (added to blocks[index] when it leaves, or by block_cache_flush). Two slots a
 * cache line, and a hit touches nothing else. A block longer than 2^32 bytes is never
 * cached (len cannot hold it). */
#define BLOCK_CACHE 4096          /* slots, direct-mapped by start address */
struct block_slot {
	uint64_t start;
	uint32_t len;             /* end - start */
	uint32_t index;           /* into blocks; meaningful while execs != 0 */
	uint64_t execs, insns;    /* not yet in blocks[index] */
};

struct frame {
	uint32_t node;
	uint8_t timed;
	uint8_t tail;             /* entered by a jump (tail call): its return ends the frame
				     below too, as callgrind's stack-pointer unwinding does */
	uint8_t outside;          /* entered outside the time window (or the filters' focus):
				     no duration logged */
	uint8_t match;            /* TK_PROF_FILTER: enum tk_prof_match bits of its function */
	uint8_t hidden;           /* TK_PROF_FILTER: not reported (excluded, too deep): its
				     costs stay in the frame below */
	uint8_t announced;        /* TK_PROF_FILTER: counts, said (tk_prof_opts.calls) */
	uint64_t ret;             /* return address (TK_EV_CALL; a tail call inherits the
				     caller's), 0 otherwise */
	uint64_t t_enter, i_enter;
	uint64_t child_ticks, child_insns;
	uint64_t t_obs;           /* TK_PROF_FILTER: the entry's own time (not cut) */
};

enum { FLOW_START = 0, FLOW_BLOCK, FLOW_OTHER };

enum { ORPH_EXIT = 1, ORPH_RETURN = 2, ORPH_ENABLE = 3 };
/* An exit/return on an empty stack before the track's first gap; a merge replays it on the
 * previous chunk's stack. */
struct orphan {
	uint32_t what;            /* ORPH_* */
	uint32_t keykind;         /* exit: TK_PROF_KEY_*; enable: bits 0-1, do_enable's
				     JUMPED_OUT (or JUMPED_UNKNOWN); above, its PENDING */
	uint64_t key;             /* exit: function; return, enable: target */
	uint64_t time, insns;     /* track clock and instruction counter at the orphan */
	uint64_t child_ticks, child_insns; /* completed at the base level since the last one */
	uint32_t level_node;      /* unknown level that this orphan ended */
};

#define UNMATCHED_KEPT 16
struct track {
	uint32_t id;
	uint32_t root;
	struct frame *st;
	size_t depth, cap;
	uint64_t insns;           /* instructions executed on this track so far */
	uint64_t t_last, t_first;
	uint64_t t_min, t_max;    /* over timed events (t_min UINT64_MAX, t_max 0 if none) */
	/* the unknown level below the stack */
	uint32_t base_node;
	uint32_t hint_node;       /* a level whose hint is known set: while it is not
				     base_node, blocks at depth 0 look at base_node's hint */
	uint64_t level_i_start, level_t_start;
	uint64_t base_child_ticks, base_child_insns;
	/* replayable orphans, and the state at the first gap */
	struct orphan *orph;
	size_t norph, corph;
	size_t norph_enable;      /* of them ORPH_ENABLE (not counted as orphans) */
	int gapped;
	uint32_t gap_level_node;
	uint64_t gap_insns, gap_time, gap_child_ticks, gap_child_insns;
	struct tk_retset rets;    /* its frames' return addresses (retset.h) */
	/* tail calls: a block at a function entry right after a block (no call in between) */
	uint8_t flow;             /* FLOW_*: the last control-flow event on this track */
	uint8_t head_pending;     /* the first one was a block at head_entry: a tail call if
				     the previous chunk ended with a block (tk_prof_merge) */
	uint64_t head_entry, head_time;
	uint8_t untimed;          /* t_first or level_t_start is TK_TIME_NONE */
	uint8_t outside;          /* TK_PROF_WINDOW: the last time seen is outside the window */
	uint8_t head_outside;     /* head_time was outside the window */
	/* TK_PROF_FILTER: focus and excluded frames on the stack; ticks cut out of the clock
	 * (spent where nothing counts), the last event time before cutting */
	uint32_t nfocus, nexcluded;
	uint64_t t_cut, t_raw;
	uint64_t t_obs;           /* the last event's own time (tk_prof_opts.calls) */
	size_t settled;           /* frames below this are announced or do not count */
	uint64_t off_at;          /* where tracing last stopped (TK_EV_DISABLE), 0 if on */
	uint8_t off_known;        /* a disable, enable or gap seen: off_at is this track's */
	/* targets of returns that matched no open call while there were some: in a chunk's
	 * profile, maybe calls of the chunks before (tk_prof_seam_exact) */
	uint64_t unmatched[UNMATCHED_KEPT];
	size_t nunmatched;        /* distinct targets; more than UNMATCHED_KEPT: any may be */
	uint8_t cyc_on;           /* TK_EV_CYCLES: counting since the last one */
	uint64_t cyc_mark;        /* insns at the last TK_EV_CYCLES */
};

/* Cycles of a call-path node (TK_EV_CYCLES) and the instructions they took: kept apart
 * from struct node (one cache line), and only once a trace has cycles. */
struct node_cyc {
	uint64_t cycles, insns;
};

/* The function entries, sorted and unique, and a filter of them: built once and shared by
 * the profiles made with tk_prof_new_like (a chunk each: sorting 100k entries of a large
 * library per chunk cost more than some chunks' events). */
struct entry_set {
	uint64_t *v;
	size_t n;
	uint64_t *bits;           /* ENTRY_BITS-bit filter of hashed entries (no false negatives) */
	uint64_t *slots;          /* the nonzero entries, open addressing at most half full
				     (0: empty); a large library's entries saturate the filter,
				     and a binary search of them cost 150 instructions */
	size_t slot_mask;
	int refs;                 /* atomic */
};

/* A track's own entries (a process's, in a trace of several: tk_prof_track_entries). */
struct track_entries {
	uint32_t track;
	struct entry_set *es;
};

struct tk_prof {
	struct tk_prof_opts opts;
	struct entry_set *eset;   /* NULL: no entries */
	struct track_entries *tsets;   /* tracks whose entries are not eset's */
	size_t ntsets;
	struct track_group { uint32_t track, group; } *tgroups;   /* tk_prof_track_group */
	size_t ntgroups;
	/* the entries of the track of the last event (get_track), for the hot paths */
	const uint64_t *entries;
	size_t nentries;
	const uint64_t *entry_bits;
	const uint64_t *entry_slots;
	size_t entry_slot_mask;
	struct node *nodes;       /* 64-byte aligned */
	struct nlink *links;      /* parallel to nodes */
	size_t clinks;            /* room in links (nodes' until a growth fails half-way) */
	struct node_cyc *cyc;     /* parallel to nodes up to ncyc; NULL: no cycles */
	size_t ncyc;
	size_t nnodes, cnodes;
	struct nslot *node_map;   /* open addressing: (parent, key, kind) -> node */
	size_t node_mask;
	unsigned node_shift;      /* node_slot: 32 - log2(slots) */
	struct tk_ahead *ahead;   /* the helper preparing the nodes' memory (prof_table.c's
				     node_ahead), NULL: none */
	size_t ahead_at;          /* nnodes at which node_ahead runs next */
	size_t populated;         /* nodes up to which the helper was asked to populate */
	uint8_t no_ahead;         /* a chunk's profile: it grows on its worker, no helper */
	size_t rehash_split;      /* old node tables from this many slots are copied on two
				     threads (REHASH_SPLIT; tests set it lower) */
	size_t slots_min;         /* node-table slots from which they are loaded ahead
				     (SLOTS_AHEAD_MIN; TK_PROF_SLOTS_MIN for tests) */
	struct {                  /* tk_prof_events' node-table slots loaded ahead (prof.c) */
		size_t off;       /* events left before windows begin again */
		size_t nnodes;    /* nnodes when the last window began (SIZE_MAX: none) */
		size_t calls;     /* ... and the calls it guessed would make a node each */
		size_t made, guessed;   /* over the windows since the last judgement */
		unsigned windows;
	} slots;
	struct func *funcs;
	size_t nfuncs, cfuncs;
	struct dchunk *dlog;      /* duration log chunks */
	size_t ndlog, cdlog;
	uint64_t *dlog_cur;       /* the last chunk, NULL after a take */
	size_t dlog_n, dlog_cap;  /* entries in it and its writable part (equal: dlog_more) */
	size_t dlog_end;          /* its size */
	size_t dlog_heap;         /* bytes of malloc'd chunks */
	/* its durations, taken by a merge, had outgrown the first chunk: after a reset the log
	 * starts with a large chunk (a chunk's profile used again for the next chunk) */
	uint8_t dlog_grew;
	struct dchunk dlog_spare; /* where its next log begins (V NULL: none): a piece of a
				     chunk a merge took from it, whose memory the taker shares */
	int spill_fd;             /* the spill file + 1 (0: none yet) */
	uint64_t spill_off;       /* its size */
	struct dval *druns;       /* durations as runs (loaded partials), besides the log */
	size_t ndruns, cdruns;
	uint32_t *dhash;          /* counting: (func, ticks) -> its entry of druns, or NONE32 */
	size_t dhash_mask;
	uint8_t counting;         /* durations counted into druns, not logged (prof_count_durations) */
	struct fmap *fmaps;       /* function index maps of taken chunks */
	size_t nfmaps, cfmaps;
	struct fslot *func_map;   /* open addressing: (track, key, kind) -> function */
	size_t func_mask;
	struct block *blocks;
	size_t nblocks, cblocks;
	uint32_t *block_map;
	size_t block_mask;
	struct track *tracks;
	size_t ntracks, ctracks;
	uint32_t last_track;      /* index of the track of the previous event */
	struct block_slot *block_cache; /* direct-mapped start address -> block and its
					   counts not yet in blocks (block_cache_flush) */
	uint64_t serial;          /* keys of unknown-level nodes */
	struct tk_prof_summary sum;
	uint64_t final_orphans;
	int outside;              /* the current event is outside the window (or the filters'
				     focus): nothing counts */
	int win_outside;          /* outside the window itself */
	/* TK_PROF_FILTER: enum tk_prof_match of each function met (open addressing, key 0 of
	   kind ADDR never asked: 0 bits) */
	struct match_slot { uint64_t key; uint32_t kind, bits; } *match;
	size_t match_mask, nmatch;
	int finished;
	int nomem;
};

/* Entries in chunk C of P's duration log. */
/* Give a spilled chunk's pages back (its data stays in the file, which the kernel may
 * write out): read or written, it no longer counts towards the process's memory. */
void dlog_release(const struct dchunk *d, size_t entries);
/* Give chunk D's memory back (a shared chunk's when D was its last piece). */
void dchunk_free(const struct dchunk *d);

/* What tk_prof_seam_exact can say of FROM so far: 0 it is exact whatever comes before (no
 * return to a target that none of its calls made), 2 it is not unless the profile before
 * has no call open (more such targets than it keeps), 1 it depends. */
int prof_seam_doubt(const struct tk_prof *from);

/* Add CYCLES cycles and the INSNS instructions they took to node N. */
int prof_add_cycles(struct tk_prof *p, uint32_t n, uint64_t cycles, uint64_t insns);

/* N durations of TICKS (> 0) each of function FUNC, as a run (a loaded partial's). */
int prof_add_run(struct tk_prof *p, uint32_t func, uint64_t ticks, uint64_t n);
/* Every duration of P, its log's and its runs', as distinct (KEY, ticks) values with their
 * counts (KEY in dval.func: the function's index, or MAP[index] when MAP is given), sorted
 * by key then ticks, in *OUT (malloc'd). */
int prof_duration_values(const struct tk_prof *p, const uint32_t *map, struct dval **out, size_t *n);
/* Subtrees that tk_prof_funcs's walkers have handed to one another in this process (tests:
 * the split happened). */
size_t prof_walk_handed(void);
/* qsort's order of struct dval: by function, then ticks */
int prof_dval_cmp(const void *a, const void *b);

static inline size_t dlog_len(const struct tk_prof *p, size_t c)
{
	return p->dlog[c].v == p->dlog_cur ? p->dlog_n : p->dlog[c].n;
}

/* ---- the tables (prof_table.c): slow paths out of line, the per-event hits inline ------ */

#define PROF_HOT static inline __attribute__((always_inline))

int prof_grow(void **p, size_t *cap, size_t need, size_t elem);
void prof_nodes_expect(struct tk_prof *p, size_t more);
uint32_t prof_get_func(struct tk_prof *p, uint32_t track, uint64_t key, uint32_t kind);
uint32_t prof_get_child_slow(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			     uint32_t track, uint64_t h);
/* get_child for a node the caller found missing, whose function (index into funcs) it
 * knows already: a merge's graft, whose FROM functions are INTO's by then. FUNC
 * PROF_FUNC_LOOKUP: looked up as get_child does. */
#define PROF_FUNC_LOOKUP (NONE32 - 2)
uint32_t prof_make_child(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind,
			 uint32_t track, uint32_t func);
int prof_count_block_slow(struct tk_prof *p, uint64_t start, uint64_t end, uint64_t count);
struct block *prof_get_block(struct tk_prof *p, uint64_t start, uint64_t end);
int prof_add_blocks(struct tk_prof *p, const struct tk_prof_block_count *v, size_t n);
void prof_block_cache_flush(struct tk_prof *p);
/* 0 while P has counted no block (its cache is the shared empty one). */
int prof_block_cache_used(const struct tk_prof *p);
/* Room for more entries in the duration log (a new chunk, or more of this one made writable). */
int prof_dlog_more(struct tk_prof *p);
/* From now on P (and the profiles made like it) counts each distinct duration of a
 * function in druns as its calls end instead of logging every one: for a profile that is
 * saved, never finished (a shard's chunk), so that saving it reads no log. */
void prof_count_durations(struct tk_prof *p);
int prof_dhash_grow(struct tk_prof *p);
/* Bytes of log the profile keeps in memory before it spills; a chunk in the spill file. */
size_t prof_dlog_budget(const struct tk_prof *p);
uint64_t *prof_spill_chunk(struct tk_prof *p);

/* On every call: one multiplication; the high half mixes every bit of the input, the low
 * half (the table slot) gets it folded in, and the node table keeps the high half as tag. */
static inline uint64_t node_hash(uint32_t parent, uint64_t key, uint32_t kind)
{
	uint64_t h = (key ^ ((uint64_t)parent << 32 | kind)) * 0x9e3779b97f4a7c15ULL;
	return h ^ h >> 32;
}

static inline uint64_t func_hash(uint32_t track, uint64_t key, uint32_t kind)
{
	return tk_hash64(key * 31 + ((uint64_t)track << 8 | kind));
}

static inline uint64_t block_hash(uint64_t start, uint64_t end)
{
	return tk_hash64(start ^ (end * 0x9e3779b97f4a7c15ULL));
}

/* Node-table slots (8 MiB) from which tk_prof_events loads the next calls' slots ahead. */
#define SLOTS_AHEAD_MIN ((size_t)1 << 20)

/* The tag of a node's hash in the table: never 0, the tag of an empty slot. */
static inline uint32_t node_tag(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1;
}

/* A node's first slot: the top bits of its tag, so that growing the table reads the old
 * table in order and writes the new one nearly in order (slot s goes to 2s or 2s + 1),
 * without loading any node (from the hash's low bits it was a load of every node and a
 * random write: 6-7 % of the PT random walk's profile). Nodes of one first slot share
 * those bits; the tag's other bits still tell them apart. */
static inline size_t node_slot(const struct tk_prof *p, uint64_t h)
{
	return (size_t)((uint32_t)(h >> 32) >> p->node_shift);
}

/* The child of PARENT for (key, kind), created when missing. One table serves every
 * lookup: its tags (the high half of the hash) spare loading nodes that are not it, and
 * it is at most half full, so the first slot is nearly always the one. (A direct-mapped
 * cache in front of it missed on one call in 20 on the instruction-level bench's 30k call
 * paths: each miss cost a slot, a wrong node, the table and the node.) */
PROF_HOT uint32_t get_child(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind, uint32_t track)
{
	uint64_t h = node_hash(parent, key, kind);
	/* the table always exists (tk_prof_new fails without it) */
	const struct nslot *e = &p->node_map[node_slot(p, h)];
	if (__builtin_expect(e->tag == node_tag(h), 1)) {
		const struct node *n = &p->nodes[e->node];
		if (__builtin_expect(n->key == key && n->parent == parent && n->kind == kind, 1))
			return e->node;
	}
	return prof_get_child_slow(p, parent, key, kind, track, h);
}

static inline size_t block_slot(uint64_t start)
{
	return (size_t)(start ^ start >> 12) & (BLOCK_CACHE - 1);
}

PROF_HOT int count_block(struct tk_prof *p, uint64_t start, uint64_t end, uint64_t count)
{
	struct block_slot *c = &p->block_cache[block_slot(start)];
	if (__builtin_expect(c->start == start && c->len == end - start, 1)) {
		c->execs++;
		c->insns += count;
		return 0;
	}
	return prof_count_block_slow(p, start, end, count);
}

/* Move a slot's counts into its block. */
static inline void block_slot_flush(struct tk_prof *p, struct block_slot *c)
{
	if (c->execs) {
		p->blocks[c->index].execs += c->execs;
		p->blocks[c->index].insns += c->insns;
		c->execs = c->insns = 0;
	}
}

/* P's hot entry fields from E (NULL: none). */
static inline void use_entry_set(struct tk_prof *p, const struct entry_set *e)
{
	p->entries = e ? e->v : NULL;
	p->nentries = e ? e->n : 0;
	p->entry_bits = e ? e->bits : NULL;
	p->entry_slots = e ? e->slots : NULL;
	p->entry_slot_mask = e ? e->slot_mask : 0;
}

/* The entries of track ID: its own, else the profile's. */
static inline const struct entry_set *track_entry_set(const struct tk_prof *p, uint32_t id)
{
	for (size_t i = 0; i < p->ntsets; i++)
		if (p->tsets[i].track == id)
			return p->tsets[i].es;
	return p->eset;
}

static inline size_t entry_bit(uint64_t addr)
{
	return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 48) & (ENTRY_BITS - 1);
}

static inline size_t entry_slot(uint64_t addr)
{
	return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 32);
}

#endif
