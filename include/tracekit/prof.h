/* Profiles from neutral events: call stacks per track, per-function and per-call-path
 * statistics, per-block execution counts. A profile is a struct tk_sink, so a decoder feeds
 * it directly; chunk profiles merge exactly (tk_prof_merge).
 *
 * Call stacks. XRay-like traces give TK_EV_FUNC_ENTER / EXIT / TAIL_EXIT (addr = function id,
 * or an address when flags has TK_FN_ADDR); instruction-level traces give TK_EV_CALL (addr2 =
 * target = the function, arg = return address) and TK_EV_RETURN (addr2 = return target).
 * An exit pops down to the innermost frame of the same function (lost exits in between end
 * there too); an exit of a function that is not on the stack ends every frame and is an
 * orphan (the call began before the trace). A return pops down to the frame whose return address it goes to (longjmp, exceptions), or
 * one frame if none matches. An exit or return on an empty stack is an "orphan": the trace
 * (or chunk) began inside that call. Orphans are kept in order so that tk_prof_merge can end
 * the calls that the previous chunk left open (exact, except for a return that skips frames
 * of a chunk and lands in a frame of an earlier one: the chunk sees no matching frame and
 * ends one). TK_EV_GAP drops the track's stack: the calls
 * open at a gap are counted as truncated, never guessed.
 *
 * Code that runs between untraced code (instruction-level traces with IP filtering, a
 * branch recorder that traces one module): TK_EV_ENABLE at a function entry (see
 * tk_prof_opts.entries) pushes a frame for it, without a return address; a return pops it.
 * TK_EV_ENABLE at the return address of a frame (a call into untraced code came back) ends
 * the frames down to that one. An ENABLE elsewhere on an empty stack ends the unknown
 * level like an orphan return, so that a merge can match it with the previous chunk.
 *
 * Tail calls (instruction-level traces, with tk_prof_opts.entries): a TK_EV_BLOCK at a
 * function entry right after a TK_EV_BLOCK of the same track (a jump, no TK_EV_CALL) is a
 * call of that function, as valgrind's callgrind counts it. Its frame takes the return
 * address of the frame that jumped, and its return ends that frame too. Chunks still merge
 * exactly: a chunk that begins with such a block leaves the decision to tk_prof_merge.
 *
 * Time is in trace ticks (event.time); instructions are the sum of TK_EV_BLOCK counts. */
#ifndef TRACEKIT_PROF_H
#define TRACEKIT_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/event.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tk_prof;

enum tk_prof_flags {
	TK_PROF_NO_DURATIONS = 1, /* do not keep call durations (no min/median/p90/p99/max) */
	TK_PROF_NO_BLOCKS = 2,    /* do not count basic blocks */
	TK_PROF_WINDOW = 4,       /* count only what runs in ticks [window_begin, window_end) */
	TK_PROF_FILTER = 8,       /* uftrace's call filters (match, max_depth, min_ticks, ...) */
	TK_PROF_FOCUS = 16,       /* with TK_PROF_FILTER: match names focus functions */
	/* Times come from time stamps between the events (a branch trace's TSC packets), not
	 * with each event: a call whose start and end have the same time had no stamp inside
	 * it, so its duration was not measured (it is not 0): it counts in no duration
	 * statistic (ndur), and reports show a time of 0 as not measured. */
	TK_PROF_SPARSE_TIME = 32,
};

/* What tk_prof_opts.match says of a function. */
enum tk_prof_match {
	TK_PROF_MATCH_FOCUS = 1,   /* uftrace -F: only what runs under one of them counts */
	TK_PROF_MATCH_EXCLUDE = 2, /* uftrace -N: it and what it calls count nowhere */
};

struct tk_prof_opts {
	size_t sz;                   /* sizeof(struct tk_prof_opts) */
	unsigned flags;              /* enum tk_prof_flags */
	struct tk_trace_clock clock; /* ticks per second when known (reports convert) */
	/* Function entry points (run-time addresses, any order; copied), e.g. from
	 * tk_sym_entries. Tracing that resumes (TK_EV_ENABLE) at one of them is a call from
	 * untraced code (libc calling main, a callback): it starts a frame for that function,
	 * which its return ends. A jump to one of them is a tail call (see above). Without
	 * them such code runs in the unknown level. */
	const uint64_t *entries;
	size_t nentries;
	/* Threads tk_prof_funcs may use for the duration statistics of a large profile
	 * (0 or 1: the calling thread only). Above 1, a profile with many call paths also
	 * has a helper thread prepare the memory they grow into. The results are the same
	 * for any count. */
	unsigned nthreads;
	/* Call durations kept in memory (bytes; 0: 256 MiB). Beyond that the duration log
	 * lives in an unlinked temporary file in $TMPDIR (or /tmp), mapped while it is
	 * written and read, so memory stays bounded whatever the trace's length. */
	size_t durations_in_memory;
	/* With TK_PROF_WINDOW: the profile of what ran in ticks [window_begin, window_end),
	 * as a timeline clipped to it draws the calls. Every event still moves the call
	 * stacks; times are clipped to the window (a call running at its start begins there,
	 * one running at its end ends there), instructions, blocks, calls and durations count
	 * only from events inside it. An event without a time is where its track's last time
	 * was (before the first one: inside if window_begin is 0). Blocks must come as events
	 * (tk_prof_add_block counts are not windowed). */
	uint64_t window_begin, window_end;
	/* With TK_PROF_FILTER, the calls uftrace's filters keep, decided on the call stack as
	 * the events come (so a chunk's profile cannot be merged: tk_run_profile feeds one
	 * profile in order). MATCH (NULL: none; called once per function) returns
	 * enum tk_prof_match bits. With TK_PROF_FOCUS, only what runs while a focus function is
	 * on the stack counts (the frames below it keep their place in the paths, their calls are not
	 * counted). Exclude: the function and what it calls count nowhere, not even in its
	 * callers' inclusive costs. Frames deeper than MAX_DEPTH (0: no limit; the outermost
	 * is depth 1) are not reported: what they run stays in the self cost of their
	 * ancestor at MAX_DEPTH. A call of less than MIN_TICKS ticks (timed calls) or
	 * MIN_INSNS instructions is not reported either: what it ran stays in its caller's
	 * self cost (its callees, smaller, are dropped too). Times are of what counts (the
	 * time outside the focus, or in excluded calls, is cut out of each track's clock). */
	int (*match)(void *ctx, uint64_t key, uint32_t kind);
	void *match_ctx;
	void (*match_free)(void *ctx);   /* called by tk_prof_free (NULL: not) */
	uint32_t max_depth;
	uint64_t min_ticks, min_insns;
	/* With TK_PROF_FILTER: told of each call the profile counts (NULL calls: not), for
	 * outputs that draw calls (a filtered timeline holds the same calls). BEGIN once the
	 * call is sure to count: at its entry, or with MIN_TICKS / MIN_INSNS once it has run
	 * that long (a call announced counts, whatever its end); END when it ends (a return, an
	 * exit, a gap, the end of the trace). Per track in nested order; times are the events'
	 * own (not the filters' cut clock; TK_TIME_NONE before a track's first time). */
	struct tk_prof_calls {
		int (*begin)(void *ctx, uint32_t track, uint64_t key, uint32_t kind, uint64_t time);
		int (*end)(void *ctx, uint32_t track, uint64_t time);
		void *ctx;
	} calls;
};

TK_API struct tk_prof *tk_prof_new(const struct tk_prof_opts *opts, int *err);
/* A new, empty profile with P's options (for the next chunk of the same stream). */
TK_API struct tk_prof *tk_prof_new_like(const struct tk_prof *p, int *err);
TK_API void tk_prof_free(struct tk_prof *p);
/* Empty P again, as tk_prof_new_like(P) would make it, keeping its memory: the next chunk's
 * profile needs its tables grown and faulted in no more. Returns 0. */
TK_API int tk_prof_reset(struct tk_prof *p);

/* Feed events. Returns 0 or -TK_E_NOMEM. */
TK_API int tk_prof_events(struct tk_prof *p, const struct tk_event *ev, size_t n);
/* A sink that calls tk_prof_events. */
TK_API struct tk_sink tk_prof_sink(struct tk_prof *p);

/* Executions of a basic block (first instruction START, last LAST) that the producer
 * counted instead of sending one TK_EV_BLOCK each (tk_flow_set_count_mode; their
 * instructions came as TK_EV_INSNS events): the block table and the summary count them as
 * those events would. Order does not matter. */
TK_API int tk_prof_add_block(struct tk_prof *p, uint64_t start, uint64_t last, uint64_t execs,
		      uint64_t insns);
/* Many such counts at once (as N calls of tk_prof_add_block, but faster on a large table:
 * the lookups of the next ones are under way while one is counted). */
struct tk_prof_block_count {
	uint64_t start, last, execs, insns;
};
TK_API int tk_prof_add_blocks(struct tk_prof *p, const struct tk_prof_block_count *v, size_t n);
/* Track TRACK's own function entries (copied), instead of the options' for it: in a trace
 * of several processes, each thread's process's (whose code may lie where another
 * process has other functions). Before the track's first event; the profiles made with
 * tk_prof_new_like after it share them. */
TK_API int tk_prof_track_entries(struct tk_prof *p, uint32_t track, const uint64_t *entries,
				 size_t n);
/* Track TRACK's code is GROUP's (1, 2, ...: one process's image; 0, the default: the
 * options' symbols). Function rows merged over tracks (tk_prof_funcs without per_thread)
 * fold only rows of the same group, so that two programs' functions at one address stay
 * apart; such a row's track is the first of its group's tracks, whose names are its. */
TK_API int tk_prof_track_group(struct tk_prof *p, uint32_t track, uint32_t group);
/* 1 if some track has a group (tk_prof_track_group) */
TK_API int tk_prof_grouped(const struct tk_prof *p);
/* The function entries of P's options, sorted and unique (*N of them). */
TK_API const uint64_t *tk_prof_entries(const struct tk_prof *p, size_t *n);
/* The flags of P's options (enum tk_prof_flags). */
TK_API unsigned tk_prof_flags(const struct tk_prof *p);

/* Add FROM (the profile of the events right after INTO's, e.g. the next chunk) into INTO:
 * counts add, FROM's orphans end INTO's open calls in order, FROM's open calls continue on
 * INTO's stacks. Merging the profiles of consecutive chunks gives exactly the profile of the
 * whole stream, unless tk_prof_seam_exact says otherwise. FROM is not changed. */
TK_API int tk_prof_merge(struct tk_prof *into, const struct tk_prof *from);
/* 0 when merging FROM into INTO would not give the profile of the whole stream: a return
 * in FROM matched none of FROM's open calls (it ended only the innermost, as a return that
 * matches no call does) and one of INTO's open calls holds its target (in one pass it would
 * have ended every call above that one: longjmp, exceptions). FROM's events must then go
 * to INTO itself. 1 otherwise. Either may err towards 0 (a few such returns are kept). */
TK_API int tk_prof_seam_exact(const struct tk_prof *into, const struct tk_prof *from);
/* The same, but FROM's data may move into INTO instead of being copied (the call
 * durations are not copied): afterwards FROM may only be freed, or emptied by
 * tk_prof_reset for the next chunk (its next durations may then go into memory it shares
 * with INTO: either may be freed first). */
TK_API int tk_prof_merge_take(struct tk_prof *into, struct tk_prof *from);

/* End of input: calls still open are ended at the last time seen on their track (counted
 * as open_at_end). Call once, after the last events/merge and before reading results. */
TK_API int tk_prof_finish(struct tk_prof *p);

/* ---- results ----------------------------------------------------------------------- */

/* A function: XRay function id (TK_PROF_KEY_ID) or code address (entry point). */
enum tk_prof_key_kind {
	TK_PROF_KEY_ADDR = 0,
	TK_PROF_KEY_ID = 1,
	TK_PROF_KEY_UNKNOWN = 2, /* the unknown caller of a stack that began mid-call;
				    key = first code address seen there (0 if none;
				    in tk_prof_funcs, 0 if its levels differ) */
};

struct tk_prof_summary {
	uint64_t events;          /* events consumed */
	uint64_t blocks;          /* TK_EV_BLOCK events */
	uint64_t insns;           /* instructions (sum of block counts) */
	uint64_t calls;           /* enters + calls */
	uint64_t returns;         /* exits + returns that ended a frame */
	uint64_t orphans;         /* exits/returns with an empty stack, not resolved by a merge */
	uint64_t unmatched;       /* frames ended by an exit of a function below them (lost exits) */
	uint64_t truncated;       /* calls dropped open by a gap */
	uint64_t open_at_end;     /* calls still open at tk_prof_finish */
	uint64_t unwound;         /* frames ended by a resume in a function below them
				     (longjmp, exceptions: untraced code unwound them) */
	uint64_t gaps;            /* TK_EV_GAP events */
	uint64_t time_first, time_last; /* TK_TIME_NONE if no timed event */
	uint32_t tracks;
	struct tk_trace_clock clock;
};
TK_API int tk_prof_summary(const struct tk_prof *p, struct tk_prof_summary *s);

struct tk_prof_func {
	uint64_t key;             /* function id or address */
	uint32_t kind;            /* enum tk_prof_key_kind */
	uint32_t track;           /* with per_thread; else 0, or a track of the row's group
				     (tk_prof_track_group) */
	uint64_t calls;           /* calls that began (or were resolved) in the trace */
	uint64_t incl_ticks, excl_ticks;  /* inclusive counts each recursion once */
	uint64_t incl_insns, excl_insns;
	uint64_t ndur;            /* completed calls with a known duration */
	uint64_t dur_min, dur_median, dur_p90, dur_p99, dur_max, dur_sum; /* ticks */
	/* Intel PT with CYC packets: the core cycles of the CYC packets read while the
	 * function ran, and the instructions they took (IPC = cyc_insns / cycles);
	 * tk_prof_has_cycles says whether the trace had any */
	uint64_t cycles, cyc_insns;
};
/* 1 if the profile counted cycles (TK_EV_CYCLES), so that IPC can be shown */
TK_API int tk_prof_has_cycles(const struct tk_prof *p);
/* Per-function table (per track when per_thread), unsorted. *out is malloc'd (free()). */
TK_API int tk_prof_funcs(const struct tk_prof *p, int per_thread, struct tk_prof_func **out, size_t *n);

/* Call paths: visited depth first, parents before children. FRAMES[0..depth) is the path
 * from the root (outermost first); stats are of the last frame on this path. */
struct tk_prof_frame {
	uint64_t key;
	uint32_t kind;            /* enum tk_prof_key_kind */
};
struct tk_prof_path_stats {
	uint32_t track;
	uint64_t calls, incl_ticks, excl_ticks, incl_insns, excl_insns;
};
typedef int (*tk_prof_path_fn)(void *ctx, const struct tk_prof_frame *frames, size_t depth,
			       const struct tk_prof_path_stats *st);
/* Returns 0 or the first negative value returned by FN. */
TK_API int tk_prof_walk_paths(const struct tk_prof *p, tk_prof_path_fn fn, void *ctx);

/* Executed basic blocks (merged over tracks), unsorted; *out is malloc'd (free()). */
struct tk_prof_block {
	uint64_t start, end;      /* first and last instruction address */
	uint64_t execs;           /* times the block was entered */
	uint64_t insns;           /* instructions executed in it */
};
TK_API int tk_prof_blocks(const struct tk_prof *p, struct tk_prof_block **out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
