/* Writers for profiles and timelines. They see only profiles (tk_prof) and neutral events;
 * they never know which trace format the data came from. Output goes to a struct tk_buf
 * (a file descriptor or memory). */
#ifndef TRACEKIT_OUT_H
#define TRACEKIT_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/prof.h"
#include "tracekit/run.h"
#include "tracekit/symbolize.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- profile reports ----------------------------------------------------------------- */
enum tk_out_kind {
	TK_OUT_TEXT = 1,   /* table per function */
	TK_OUT_JSON,       /* functions, call paths, lines as one JSON object */
	TK_OUT_CSV,        /* table per function, one header line */
	TK_OUT_FOLDED,     /* "a;b;c N" lines for flamegraph.pl / speedscope */
	TK_OUT_PPROF,      /* pprof profile.proto, gzip-compressed */
	TK_OUT_SOURCE,     /* annotated source: each line with executions and instructions */
	TK_OUT_CALLTREE,   /* call hierarchy with call counts, indented */
	TK_OUT_LINES,      /* table per source line */
	TK_OUT_BLOCKS,     /* table per basic block */
	TK_OUT_CALLGRIND,  /* callgrind profile (callgrind_annotate, KCachegrind) */
};
/* "text", "json", "csv", "folded", "pprof", "source", "calltree", "lines", "blocks",
 * "callgrind";
 * returns 0 if unknown. */
TK_API enum tk_out_kind tk_out_kind_by_name(const char *name);
/* 0 if KIND's tables sort by KEY (NULL: the default), -TK_E_INVAL if not, without a
 * message; *KEYS (if not NULL) gets the keys KIND takes, for the caller's message. */
TK_API int tk_out_sort_check(enum tk_out_kind kind, const char *key, const char **keys);

/* Metric of folded stacks and pprof samples. */
enum tk_out_metric {
	TK_OUT_M_AUTO = 0,  /* instructions when the profile has any, else ticks, else calls */
	TK_OUT_M_INSNS, TK_OUT_M_TICKS, TK_OUT_M_CALLS,
};

struct tk_out_opts {
	size_t sz;                /* sizeof(struct tk_out_opts) */
	struct tk_sym *sym;       /* names and lines; NULL: addresses and ids print raw */
	const char *sort;         /* calls, incl, excl, insns, self-insns, name, max, median
				     (default: the metric's exclusive value) */
	uint64_t top;             /* at most this many rows; 0 = all */
	int threads;              /* per thread instead of merged */
	enum tk_out_metric metric;
	const char *source_root;  /* annotated source: prefix for relative file names */
	const char *track_label;  /* with threads: what a track is ("cpu", "core"); NULL:
				     "thread" */
	/* With threads: the id a track is shown by (XRay: the thread id, as
	 * tk_source_track_id gives it); NULL: the track number. */
	uint32_t (*track_id)(void *ctx, uint32_t track);
	void *track_ctx;
	/* The process TRACK ran in (tk_source_track_process: its pid, name and the symbols
	 * its functions are named from, NULL: SYM), CTX track_ctx; with threads, tables then
	 * show a pid and a comm column; without, a profile whose tracks have groups
	 * (tk_prof_track_group) names each function row and call path by it. A negative
	 * return (or NULL): the track has none. */
	int (*track_process)(void *ctx, uint32_t track, uint32_t *pid, char *comm, size_t n,
			     struct tk_sym **sym);
	int color;                /* text: colour the hot rows' % (ANSI, as perf report) */
};

TK_API int tk_out_profile(struct tk_buf *b, const struct tk_prof *p, enum tk_out_kind kind,
		   const struct tk_out_opts *opts);

/* Two profiles compared (tracekit diff). Make one for an output KIND (text, csv, json:
 * per function the calls, incl/excl time and instructions of A and B, B - A and its percent
 * of A; folded: "stack countA countB" lines, difffolded.pl's format), add profile A (side
 * 0) and B (side 1), each finished and named by its own symbols, then write. Functions and
 * stacks are matched by name, tracks merged; times are compared in ns when a side's clock
 * is known (then both must have one), else in ticks. */
struct tk_out_diff;
TK_API struct tk_out_diff *tk_out_diff_new(enum tk_out_kind kind, int *err);
TK_API int tk_out_diff_add(struct tk_out_diff *d, int side, const struct tk_prof *p,
			   struct tk_sym *sym);
/* The same, named as tk_out_profile names P's rows with O (its sym, and its track_process:
 * a session of several processes, each function by its own process's symbols) */
TK_API int tk_out_diff_add_opts(struct tk_out_diff *d, int side, const struct tk_prof *p,
				const struct tk_out_opts *o);
struct tk_out_diff_opts {
	size_t sz;                /* sizeof(struct tk_out_diff_opts) */
	const char *sort;         /* a column: function, or METRIC_a|_b|_diff|_pct (default:
				     the absolute change of exclusive instructions, else time,
				     else calls); _diff and _pct by absolute value */
	uint64_t top;             /* at most this many rows; 0 = all */
	const char *name_a, *name_b; /* what A and B are (the text and JSON headers) */
};
/* 0 when KEY (NULL: the default) is a sort key of tk_out_diff_write; *KEYS: their list. */
TK_API int tk_out_diff_sort_check(const char *key, const char **keys);
TK_API int tk_out_diff_write(struct tk_buf *b, struct tk_out_diff *d, const struct tk_out_diff_opts *o);
TK_API void tk_out_diff_free(struct tk_out_diff *d);
/* ---- the `llvm-xray account` table ----------------------------------------------------- */
/* Per function keyed by id (TK_PROF_KEY_ID) with call durations: count, min, median, 90p,
 * 99p, max and sum in seconds, laid out as `llvm-xray account` prints them. */
struct tk_out_account_opts {
	size_t sz;                /* sizeof(struct tk_out_account_opts) */
	int sort_key;             /* tk_out_account_sort_key(); 0 = by function id */
	uint64_t top;             /* at most this many rows; 0 = all */
	int csv;
	int per_thread;
	uint64_t ticks_per_sec;   /* the profile's clock; 0: ticks are printed as seconds */
	/* Name of function ID (NULL or a NULL result: "#ID"); the thread id a row of TRACK
	 * shows with PER_THREAD (NULL: TRACK). CTX is passed to both. */
	const char *(*func_name)(void *ctx, int32_t id);
	uint32_t (*thread_id)(void *ctx, uint32_t track);
	void *ctx;
};
/* funcid (0), count, min, med, 90p, 99p, max, sum (7), also median and calls; -1 if unknown. */
TK_API int tk_out_account_sort_key(const char *name);
TK_API int tk_out_account(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_account_opts *opts);

/* ---- timelines (streaming sinks) ----------------------------------------------------- */
enum tk_timeline_kind {
	TK_TIMELINE_PERFETTO = 1, /* Perfetto TracePacket protobuf stream */
	TK_TIMELINE_CHROME,       /* Chrome trace-event JSON (begin/end pairs) */
};
/* "perfetto", "chrome"; 0 if unknown. */
TK_API enum tk_timeline_kind tk_timeline_kind_by_name(const char *name);

struct tk_timeline_opts {
	size_t sz;                /* sizeof(struct tk_timeline_opts) */
	enum tk_timeline_kind kind;
	struct tk_sym *sym;       /* slice names; NULL: "0x..." / "#id" */
	struct tk_trace_clock clock; /* ticks -> ns when known; else 1 tick = 1 ns */
	uint64_t time_begin;      /* window [begin, end) in ticks; end 0 = no limit */
	uint64_t time_end;
	uint64_t max_events;      /* at most this many slices begun; 0 = 10 million */
	const char *process_name; /* name of the process track (default "trace") */
	/* Pipeline events (TK_EV_INSN_BEGIN .. TK_EV_FLUSH): the name of stage number STAGE and
	 * of its lane (*lane, may stay NULL); NULL callback or result: "stage N", "lane N".
	 * Once a stage has a name, it and the strings stay the same until the timeline is
	 * freed (the timeline keeps them per stage). */
	const char *(*stage_name)(void *ctx, unsigned stage, const char **lane);
	void *stage_ctx;
	/* Chrome JSON: times are written relative to this tick (the trace's start: JSON
	 * readers hold numbers as doubles, which a TSC in microseconds overflows), and it is
	 * kept as otherData.time_origin_ticks; earlier times are written as 0. 0: absolute. */
	uint64_t time_origin;
	/* uftrace's call filters (tk_run_filter: -F, -N, -D, --min-time, --min-insns; its
	 * time window is time_begin/time_end above): the calls go through the profile builder
	 * (tk_run_filter_prof) and the slices are exactly the calls its profile counts. NULL or
	 * no call filter: every call. */
	const struct tk_run_filter *filter;
	/* > 1: the slices are formatted (and written to the output) on a thread of their own
	 * while the events are read, and a producer that holds chunks (tk_timeline_sink's
	 * prepare) has their pass done on its workers and their bytes on nthreads - 1 helper
	 * threads; the same bytes. The output's buffer is then the writer's until
	 * tk_timeline_finish (or tk_timeline_free). */
	unsigned nthreads;
	/* Nonzero with nthreads <= 1: a producer that holds chunks still has their pass done
	 * on its workers (tk_timeline_sink's prepare), and each chunk's bytes are made at its
	 * turn on the thread that feeds the timeline. For producers whose decoding is light
	 * beside the pass (XRay's), so that two threads do the work at -j 2, not four. */
	int prepare;
};

/* Calls (CALL/RETURN, FUNC_ENTER/EXIT) become nested slices on a track per event track.
 * Pipeline events become one slice per instruction, from TK_EV_INSN_BEGIN to TK_EV_RETIRE or
 * TK_EV_FLUSH (named by its TK_TYPED_INSN_LABEL label, else "#id"; " (flushed)" appended
 * to flushed ones, " (in flight)" to those still open at the finish), with its stages as
 * slices nested inside: instructions in flight together take different rows, and each
 * (thread, row, lane) is a track (Perfetto: grouped under a track per thread; Chrome: a
 * process per thread, a thread per row and lane). Pipeline slices are written when the
 * instruction ends, so memory grows with the instructions in flight, not the trace. */
struct tk_timeline;
/* Writes to B, which must stay valid until tk_timeline_free. */
TK_API struct tk_timeline *tk_timeline_new(struct tk_buf *b, const struct tk_timeline_opts *opts, int *err);
TK_API struct tk_sink tk_timeline_sink(struct tk_timeline *t);
TK_API int tk_timeline_events(struct tk_timeline *t, const struct tk_event *ev, size_t n);
/* Name a track (thread); before its first event or at any time for Chrome output. */
TK_API int tk_timeline_track_name(struct tk_timeline *t, uint32_t track, const char *name);
/* TRACK is a thread of process PID (not 0) named PNAME: its track goes under that process's
 * (Perfetto process and thread descriptors with their pids; Chrome's pid and process_name),
 * before its first event. */
TK_API int tk_timeline_track_process(struct tk_timeline *t, uint32_t track, uint32_t pid,
				     const char *pname);
/* End open slices at the last time seen, write the trailer. */
TK_API int tk_timeline_finish(struct tk_timeline *t);
/* Slices written, and slices left out by the window or the cap. */
TK_API uint64_t tk_timeline_slices(const struct tk_timeline *t, uint64_t *dropped);
TK_API void tk_timeline_free(struct tk_timeline *t);

/* ---- statistics as text, JSON or CSV (lib/output/stats.c) ------------------------------ */
enum tk_stats_format { TK_STATS_TEXT = 1, TK_STATS_JSON, TK_STATS_CSV };
/* "text" (or NULL), "json", "csv"; 0 if unknown. */
TK_API enum tk_stats_format tk_stats_format_by_name(const char *name);
struct tk_kanata_stats;
struct tk_ipt_exec_stats;
struct tk_xtrace_stats;
/* Kanata pipeline statistics of FILE (WINDOW: the IPC windows' cycles, 0: none). CSV is
 * one table: the windows with a window, else the slowest instructions if any, else the
 * stages. */
TK_API void tk_out_kanata_stats(struct tk_buf *b, enum tk_stats_format to, const char *file,
			 const struct tk_kanata_stats *st, uint64_t window);
/* The statistics of an Intel PT flow (S, from NSTREAMS streams of WHAT, each a UNIT;
 * FORMAT is JSON's "format" member). */
TK_API void tk_out_exec_stats(struct tk_buf *b, enum tk_stats_format to, const char *file,
		       const char *what, const char *format, const char *unit, size_t nstreams,
		       const struct tk_ipt_exec_stats *s);
/* The statistics of an xtrace instruction file PATH (BYTES long, NCHUNKS chunks). */
TK_API void tk_out_xtrace_stats(struct tk_buf *b, enum tk_stats_format to, const char *path,
			 size_t bytes, size_t nchunks, const struct tk_xtrace_stats *s);

/* ---- the HTML report (lib/output/report.c) ------------------------------------------ */
/* One self-contained page (inline CSS, JS and data; nothing from the network) of what a
 * trace's results show: a summary, a flame graph, the function table (the rows of
 * tk_out_profile's CSV), source heat, a timeline overview, XRay latency percentiles and,
 * for pipeline events, IPC over time, stage latencies, the slowest instructions and a
 * pipeline diagram of a window. Every part is a summary of bounded size, whatever the
 * trace's: the page stays under TK_REPORT_MAX_BYTES. Feed it a finished profile
 * (tk_report_profile) and events, in either order: the profile's own run's
 * (tk_run_profile_tee with tk_report_tee: one pass over the trace) or any events
 * (tk_report_sink); then write it. */
#define TK_REPORT_MAX_BYTES (8u << 20)
#define TK_REPORT_TOP 500            /* function table rows; the rest summed in one row */
#define TK_REPORT_BINS 600           /* timeline and IPC columns */
#define TK_REPORT_LANES 32           /* timeline lanes; more tracks are summed in one */
#define TK_REPORT_WINDOW 2000        /* pipeline diagram: instructions at most */
#define TK_REPORT_SLOWEST 100        /* slowest instructions listed */

struct tk_report_opts {
	size_t sz;                /* sizeof(struct tk_report_opts) */
	const char *title;        /* the input's name */
	const char *format;       /* its format's name */
	uint64_t size;            /* its bytes */
	const char *track_label;  /* what a track is ("thread", "cpu"); NULL: "thread" */
	struct tk_sym *sym;       /* names and lines; NULL: addresses and ids print raw */
	uint64_t top;             /* function table rows (0: TK_REPORT_TOP) */
	/* XRay-like profiles (functions keyed by id): the account table's names and thread
	 * ids (tk_out_account_opts) */
	const char *(*func_name)(void *ctx, int32_t id);
	uint32_t (*thread_id)(void *ctx, uint32_t track);
	void *ctx;
	/* pipeline events: stage names (as tk_timeline_opts) and the diagram's window:
	 * instructions alive somewhere in cycles [window_begin, window_end) counted from the
	 * log's first cycle (window_end 0: the first TK_REPORT_WINDOW instructions) */
	const char *(*stage_name)(void *ctx, unsigned stage, const char **lane);
	void *stage_ctx;
	uint64_t window_begin, window_end;
	/* the timeline of a profile's --time window: events in trace ticks [time_begin,
	 * time_end) only (time_end 0: no end) */
	uint64_t time_begin, time_end;
};
struct tk_report;
TK_API struct tk_report *tk_report_new(const struct tk_report_opts *opts, int *err);
TK_API void tk_report_free(struct tk_report *r);
/* The profile's parts: summary, flame graph, function table, source heat (with line
 * tables), account table (functions keyed by id). P must be finished; it is not kept. */
TK_API int tk_report_profile(struct tk_report *r, const struct tk_prof *p);
/* Events: calls and instructions binned per track over time (the timeline, where the
 * events have times), pipeline events into the pipeline parts. */
TK_API struct tk_sink tk_report_sink(struct tk_report *r);
/* For tk_run_profile_tee: each chunk's calls and instructions binned apart, on the
 * workers, and added up in order: the timeline from the profile's own pass. */
TK_API struct tk_run_tee tk_report_tee(struct tk_report *r);
/* With call filters (tk_run_filter.calls): the timeline bins the calls the filtered
 * profile counts, instead of the tee's events (which the filters do not see). */
TK_API struct tk_prof_calls tk_report_calls(struct tk_report *r);
TK_API int tk_report_events(struct tk_report *r, const struct tk_event *ev, size_t n);
/* A line for the summary's "what was lost" list (a decoder's message). */
TK_API int tk_report_note(struct tk_report *r, const char *msg);
/* The page. Returns 0 or -TK_E_*. */
TK_API int tk_report_write(struct tk_report *r, struct tk_buf *b);

#ifdef __cplusplus
}
#endif
#endif
