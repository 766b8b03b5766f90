/* One interface for every input format, after libipt's decoder lifecycle (alloc, sync,
 * next, free) and uftrace's single reader that all its commands use:
 *
 *   tk_source_open     a file (or "-", compressed or not), its format detected (or given)
 *   tk_source_info     what it is: format, streams, tracks, clock, size
 *   tk_source_plan     its chunks, cut at the format's sync points (PSB, XRay buffers,
 *                      xtrace snapshots, ...): the unit of parallel (and later distributed)
 *                      work
 *   tk_source_run      every chunk decoded into a consumer's sinks (on the worker threads
 *                      the format can use), merged in input order
 *   tk_source_report   what was lost or skipped, as messages; whether data was lost
 *   tk_source_free
 *
 * Results that cut across formats (profiles, event streams) are built once, on top of this,
 * by the chunk runner (tracekit/run.h). Each format implements it in its own folder
 * (lib/formats/<f>/source.c); lib/formats/detect.c is the registry. */
#ifndef TRACEKIT_SOURCE_H
#define TRACEKIT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/event.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tk_source;
struct tk_flow;
struct tk_sym;

struct tk_source_opts {
	size_t sz;                    /* sizeof(struct tk_source_opts) */
	enum tk_format_id format;     /* TK_FMT_UNKNOWN: detect from the content */
	unsigned nthreads;            /* worker threads (0: all cores) */
	/* the program's code and symbols: FILE[:BASE] (ELF), FILE:ADDR (raw code) */
	const char *const *elf;
	size_t nelf;
	const char *const *raw;
	size_t nraw;
	const char *instr_map;        /* XRay: ELF or `llvm-xray extract` YAML, function names */
	const char *const *module_path;   /* branch traces: directories of moved modules */
	size_t nmodule_path;
	int only_tid;                 /* branch traces: only thread TID */
	uint32_t tid;
	int has_tsc_hz;               /* the TSC's ticks per second (0: the trace's, or ticks) */
	uint64_t tsc_hz;
	/* Intel PT timing (ptxed's options; 0: unknown or perf.data's) and chunk size */
	uint32_t mtc_freq, nom_freq, cpuid_15_eax, cpuid_15_ebx;
	size_t chunk_bytes;
	int quiet;                    /* errors only */
	tk_msg_fn msg;                /* messages naming the file (and offset); NULL: none */
	void *ctx;
	int no_demangle, short_names; /* names of the symbols (struct tk_sym_opts) */
	/* progress lines while tk_source_run decodes: bytes of the plan's chunks merged,
	 * percent, rate, ETA (tk_progress: rate-limited, none in the first second); NULL:
	 * none */
	tk_progress_fn progress;
	void *progress_ctx;
	/* The workers the plan is cut for (0: nthreads). XRay cuts its chunks by the workers
	 * that decode them; a job of N processes (shards, MPI ranks) of T threads each cuts
	 * them for N * T, and one process asked for the same plan gives the same result. */
	unsigned plan_workers;
	/* perf.data sessions: only these threads' trace (NULL: all); other inputs refuse
	 * one that keeps anything out (-TK_E_UNSUPPORTED), except branch traces' only_tid */
	const struct tk_thread_filter *filter;
	/* Intel PT: the processor as ptxed's --cpu FAMILY/MODEL[/STEPPING], whose errata are
	 * read (NULL: perf.data's CPUID header says; a raw trace has none) */
	const char *ipt_cpu;
	/* Intel PT: the address filter tracing ran with (NULL: none known) */
	const struct tk_ipt_addr_filter *ipt_addr_filter;
};

struct tk_source_info {
	enum tk_format_id format;
	const char *path;
	uint64_t size;                /* bytes of input */
	size_t nstreams;              /* separately decoded streams (perf.data queues, ...) */
	const char *track_label;      /* what an event's track is: "thread", "cpu", "core",
					 "queue"; NULL: the writer's default */
	struct tk_trace_clock clock;  /* ticks per second of event times (0: unknown) */
	/* the chunks are decoded one after another on the calling thread (their merge is
	 * the order of events itself) */
	int sequential;
	/* times come from time stamps between events (TK_PROF_SPARSE_TIME): a call with no
	 * stamp inside it has no measured duration */
	int sparse_time;
	/* merging the chunks' results in order is exact at every seam (XRay: an exit names
	 * its function): the format never asks for a chunk again (tk_chunk_consumer.redo).
	 * A format whose engine never calls redo must set it: else the profile runner's
	 * chunks keep their events for a seam judgement that never comes (lib/analysis/run.c) */
	int exact_seams;
	/* the events are function entries and exits only (XRay): no instructions, blocks or
	 * code addresses, so nothing per line or block */
	int functions_only;
};

/* Open PATH ("-": standard input). Returns 0, or -TK_E_* after a message (through
 * opts->msg) saying why; -TK_E_UNKNOWN_FORMAT, -TK_E_UNSUPPORTED when the format has no
 * source (yet). */
TK_API int tk_source_open(struct tk_source **out, const char *path, const struct tk_source_opts *opts);
/* The same for an input the caller opened (and frees after tk_source_free). */
TK_API int tk_source_open_input(struct tk_source **out, const char *path, struct tk_input *in,
			 const struct tk_source_opts *opts);
TK_API void tk_source_free(struct tk_source *s);
TK_API const struct tk_source_info *tk_source_info(const struct tk_source *s);
/* The id users know for an event track (XRay: the thread id of the thread table's
 * TRACK-th thread; the others: TRACK itself). */
TK_API uint32_t tk_source_track_id(const struct tk_source *s, uint32_t track);
/* The process event track TRACK ran in (perf.data sessions split by thread): its pid,
 * the thread's name into COMM (N bytes, terminated; perf's are 15 at most) and the names
 * of that process's code (owned by the source; NULL when they cannot be loaded).
 * -TK_E_NOT_FOUND when the input has no processes or TRACK is not known. */
TK_API int tk_source_track_process(struct tk_source *s, uint32_t track, uint32_t *pid,
				   char *comm, size_t n, struct tk_sym **sym);
/* The worker threads the source decodes on. */
TK_API unsigned tk_source_threads(const struct tk_source *s);
/* The names of the code (the --elf files' symbols and lines, and those of the modules the
 * trace names); owned by the source. NULL with *err set when they cannot be loaded. */
TK_API struct tk_sym *tk_source_symbols(struct tk_source *s, int *err);

/* A chunk: a byte range of one stream that decodes on its own, starting at a sync point. */
struct tk_chunk {
	uint32_t stream;              /* the stream (perf.data queue; 0 for one-stream inputs) */
	uint32_t track;               /* its events' track */
	uint64_t begin, end;          /* bytes of the stream ([0, 0): the whole stream) */
};
/* The chunks tk_source_run makes, in input order (*CHUNKS malloc'd: free()). */
TK_API int tk_source_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n);

/* The one chunk protocol. BEGIN runs on a worker before chunk I is decoded and supplies
 * its sink (FLOW: the instruction-flow walker decoding it, for tk_flow_set_count_mode;
 * NULL for formats without one). MERGE runs on the calling thread, strictly in chunk order.
 * REDO (optional, where the format can decode a chunk again): before MERGE(I), with SINK
 * NULL: 1 if chunk I must be decoded again (its events were right, merging them is not:
 * tk_prof_seam_exact), 0 if not; if 1, called again with SINK to receive the second
 * decoding. DONE (optional): each flow walker once at the end, for what it gathered over
 * all its chunks (tk_flow_take_counts). The first negative return stops the run.
 * BEGIN may return TK_CHUNK_SKIP: chunk I is not decoded (a shard of the plan that another
 * process decodes: TK_CHUNK_SKIP, event.h); its MERGE still comes, in order.
 * CALLER_DECODES (optional, 0 by default): no chunk's decoding waits for a merge (nor for
 * anything a merge hands on), so the calling thread may decode chunks too while the next
 * merge's chunk is not ready: one worker thread fewer, and no sleep between merges.
 * SZ: sizeof the struct as the caller was built with, so that it can grow; it must cover
 * the members up to CTX (else -TK_E_INVAL), and members past it are read only when it
 * covers them. */
struct tk_chunk_consumer {
	size_t sz;
	int (*begin)(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink);
	int (*merge)(void *ctx, size_t chunk);
	int (*redo)(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink);
	int (*done)(void *ctx, struct tk_flow *flow);
	void *ctx;
	int caller_decodes;
};
/* Decode every chunk of the plan into C. Returns 0 or -TK_E_* (a consumer's error, or the
 * input could not be decoded at all); damaged data is not an error: it is a TK_EV_GAP and
 * counted for tk_source_report. */
TK_API int tk_source_run(struct tk_source *s, const struct tk_chunk_consumer *c);
/* After a run: what was lost or skipped, as messages (with what tk_source_add_losses
 * added); 1 if data was lost, else 0. */
TK_API int tk_source_report(struct tk_source *s);
/* What this process's run lost (a shard's share of the input's losses), and what other
 * processes' runs of the same input lost, for tk_source_report to count as its own. */
TK_API void tk_source_losses(struct tk_source *s, struct tk_losses *l);
TK_API void tk_source_add_losses(struct tk_source *s, const struct tk_losses *l);

/* The registry: the formats with a source (for help texts and tests). */
TK_API int tk_source_supported(enum tk_format_id id);

#ifdef __cplusplus
}
#endif
#endif
