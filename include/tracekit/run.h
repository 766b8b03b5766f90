/* The chunk runner: a source's chunks (tracekit/source.h) decoded on the worker threads
 * into partial results that merge in input order, call stacks repaired at the seams once
 * for every format. Commands and programs are front-ends: options -> source -> runner ->
 * writer (tracekit/out.h). */
#ifndef TRACEKIT_RUN_H
#define TRACEKIT_RUN_H

#include "tracekit/event.h"
#include "tracekit/prof.h"
#include "tracekit/source.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An empty profile for S's events: its clock, the function entries of its symbols (calls
 * from untraced code and tail calls start frames), S's worker count for the durations. */
TK_API struct tk_prof *tk_run_prof_new(struct tk_source *s, int *err);

/* What a profile keeps of a source's events (the command line's filters, written once). */
struct tk_run_filter {
	size_t sz;                    /* sizeof(struct tk_run_filter) */
	/* only what runs in trace ticks [time_begin, time_end) (end 0: no end), clipped as a
	 * timeline clips its calls (tk_prof_opts.window_begin) */
	int time;
	uint64_t time_begin, time_end;
	/* uftrace's call filters (tk_prof_opts, TK_PROF_FILTER): functions named (as the
	 * symbols show them, demangled or not) by FOCUS (-F) or EXCLUDE (-N), each a name or,
	 * when it holds one of .[]()*+?{}|^$\, an extended regular expression found anywhere
	 * in the name; MAX_DEPTH (-D, 0: none); calls shorter than MIN_NS nanoseconds
	 * (--min-time; needs the trace's clock) or MIN_INSNS instructions dropped. */
	const char *const *focus;
	size_t nfocus;
	const char *const *exclude;
	size_t nexclude;
	uint32_t max_depth;
	uint64_t min_ns, min_insns;
	/* with a call filter: told of each call the profile counts (tk_prof_opts.calls) */
	struct tk_prof_calls calls;
};
/* Whether F holds a call filter (the runner then feeds one profile in order). */
TK_API int tk_run_filter_calls(const struct tk_run_filter *f);
/* A profile of F's call filters (not its time window) for events that do not come from a
 * source's runner (a timeline writer's): of a trace with SYM's functions (their entries,
 * as tk_run_prof_new_filtered takes them) and CLOCK. Its F->calls say the calls that
 * pass. Errors as tk_run_prof_new_filtered's. */
TK_API struct tk_prof *tk_run_filter_prof(const struct tk_run_filter *f, struct tk_sym *sym,
					  struct tk_trace_clock clock, int *err);
/* tk_run_prof_new, keeping only what F lets through (NULL: everything). tk_run_profile
 * then sends the flow formats' blocks as events (exact, slower) where F needs their
 * times, and with call filters the chunks' events, decoded in parallel, to the one
 * profile in input order (the filters decide on the whole call stack). -TK_E_INVAL for a
 * bad regular expression, -TK_E_UNSUPPORTED for MIN_NS without the trace's clock. */
TK_API struct tk_prof *tk_run_prof_new_filtered(struct tk_source *s, const struct tk_run_filter *f,
						int *err);

/* Every chunk of S, each into a partial profile of TOTAL's kind on a worker, merged into
 * TOTAL in input order. A chunk whose merge would not give the one-pass profile (a return
 * ending calls of the chunks before it: longjmp, exceptions; tk_prof_seam_exact) is
 * decoded again straight into TOTAL where the format can. TOTAL is not finished. */
TK_API int tk_run_profile(struct tk_source *s, struct tk_prof *total);

/* A part of the plan (a shard, tracekit/partial.h): only chunks [FIRST, FIRST + COUNT)
 * are decoded, each merged into TOTAL as tk_run_profile does; into the merged profiles of
 * the chunks before, that gives what tk_run_profile would (a seam tk_prof_seam_exact
 * refuses, repaired). With KEEP, each chunk's profile goes to KEEP instead (in order, on
 * the calling thread; emptied after it returns), to be merged elsewhere in the same order
 * as tk_run_profile merges it, and TOTAL receives only what belongs to no chunk (the block
 * counts of the instruction-flow walkers; everything, for a sequential source).
 * NO_BLOCKS: the walkers' block counts are dropped (counted once already). */
struct tk_run_part {
	size_t sz;                    /* sizeof(struct tk_run_part) */
	size_t first, count;
	int (*keep)(void *ctx, size_t chunk, const struct tk_prof *p);
	void *ctx;
	int no_blocks;
};
TK_API int tk_run_profile_part(struct tk_source *s, struct tk_prof *total,
			       const struct tk_run_part *part);

/* tk_run_profile, and each chunk's events also to a sink of the caller's, merged in input
 * order: what one pass gives besides the profile (the HTML report's timeline). BEGIN (on a
 * worker, before chunk I) supplies the chunk's sink; MERGE (on the calling thread, in
 * chunk order) gets its context back once the chunk is decoded; DROP gets it instead when
 * the run stops before that. A chunk decoded again for the profile (seam repair) is not
 * sent again: the sink sees every chunk's events once. The events are the profile's: an
 * instruction-flow format counts blocks in its walker (TK_EV_INSNS, and the instructions
 * before a call or return in its count), it does not report them one by one. */
struct tk_run_tee {
	size_t sz;                    /* sizeof(struct tk_run_tee) */
	int (*begin)(void *ctx, size_t chunk, struct tk_sink *sink);
	int (*merge)(void *ctx, size_t chunk, void *chunk_ctx);
	void (*drop)(void *ctx, void *chunk_ctx);
	void *ctx;
};
TK_API int tk_run_profile_tee(struct tk_source *s, struct tk_prof *total,
			      const struct tk_run_tee *tee);

/* Every event of S, in input order, to SINK (chunks decoded in parallel are held until
 * their turn). */
TK_API int tk_run_events(struct tk_source *s, struct tk_sink sink);

#ifdef __cplusplus
}
#endif
#endif
