/* LLVM XRay logs: basic mode (versions 1-3) and FDR mode (versions 1-5), both byte orders.
 *
 * Three layers:
 *   - records: tk_xray_next() walks every record of the file with its offset (for dump);
 *   - the trace: tk_xray_open() indexes the file into thread buffers (FDR) or runs of one
 *     thread's records (basic), puts each thread's buffers in time order, and expands them
 *     into llvm-xray's records (struct tk_xray_rec) or neutral events (tk_xray_decode);
 *   - helpers: the instrumentation map (function id -> address -> name) and the llvm-xray
 *     YAML writer. (The `llvm-xray account` table is an output of the profile: tk_out_account.)
 * Memory is bounded by the number of buffers, never by the number of records. */
#ifndef TRACEKIT_XRAY_H
#define TRACEKIT_XRAY_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/event.h"
#include "tracekit/symbolize.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 (0: not this format). */
TK_API int tk_xray_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* ---- file header ---------------------------------------------------------------------- */
enum tk_xray_mode { TK_XRAY_BASIC = 0, TK_XRAY_FDR = 1 };

struct tk_xray_header {
	unsigned version;
	unsigned type;             /* enum tk_xray_mode */
	int constant_tsc, nonstop_tsc;
	int big_endian;
	uint64_t cycle_frequency;  /* Hz */
	uint64_t v1_buffer_size;   /* FDR version 1: bytes per thread buffer (free-form field) */
};

/* Parse the 32-byte header (byte order detected). 0 or -TK_E_BAD_FORMAT/-TK_E_TRUNCATED. */
TK_API int tk_xray_read_header(const uint8_t *p, size_t n, struct tk_xray_header *h);

/* ---- records ------------------------------------------------------------------------- */
enum tk_xray_kind {
	/* FDR metadata records: the number is the record kind in the file */
	TK_XRAY_NEW_BUFFER = 0, TK_XRAY_END_OF_BUFFER, TK_XRAY_NEW_CPU, TK_XRAY_TSC_WRAP,
	TK_XRAY_WALLTIME, TK_XRAY_CUSTOM, TK_XRAY_CALL_ARG, TK_XRAY_BUFFER_EXTENTS,
	TK_XRAY_TYPED, TK_XRAY_PID,
	TK_XRAY_FUNCTION = 16,     /* FDR 8-byte function record */
	TK_XRAY_BASIC_FUNCTION,    /* basic mode 32-byte record */
	TK_XRAY_BASIC_ARG,         /* basic mode argument record */
};

/* Function record types, as in the file. */
enum tk_xray_fn { TK_XRAY_ENTER = 0, TK_XRAY_EXIT = 1, TK_XRAY_TAIL_EXIT = 2, TK_XRAY_ENTER_ARGS = 3 };

/* One record as stored in the file. Fields not used by KIND are zero. */
struct tk_xray_record {
	uint64_t offset;           /* of the record's first byte */
	unsigned kind;             /* enum tk_xray_kind */
	unsigned size;             /* bytes, including a custom/typed payload */
	unsigned fn;               /* enum tk_xray_fn (function records) */
	int32_t func_id;
	uint32_t delta;            /* TSC delta (function records); signed for events: see sdelta */
	int32_t sdelta;            /* custom (v5) / typed event TSC delta */
	uint64_t tsc;              /* NewCPUId, TSCWrap, custom (v1-4), basic records */
	uint16_t cpu;
	int32_t tid, pid;
	uint64_t seconds;          /* WalltimeMarker */
	uint32_t nanos;
	uint64_t value;            /* CallArgument / basic arg / BufferExtents size */
	uint16_t event_type;       /* typed events */
	int32_t data_size;         /* custom/typed payload size as written */
	const uint8_t *data;       /* payload (points into the input) */
};

/* A forward walk over every record; on damage it reports the error and moves on to the
 * next buffer (FDR) or record (basic). */
struct tk_xray_cursor {
	const uint8_t *p;
	size_t n, off;
	struct tk_xray_header h;
	size_t buf_end;            /* end of the current FDR buffer (0: unknown) */
	size_t v1_buf_start;
	int in_buffer;
};

TK_API int tk_xray_cursor_init(struct tk_xray_cursor *c, const uint8_t *p, size_t n);
/* 1: *r filled; 0: end of input; < 0: damaged data at r->offset: *msg says what, and
 * *skipped how many bytes the cursor jumped over to resynchronise (it is ready for the next
 * call). */
TK_API int tk_xray_next(struct tk_xray_cursor *c, struct tk_xray_record *r, const char **msg,
		 uint64_t *skipped);

/* ---- the trace ------------------------------------------------------------------------- */
/* The record llvm-xray builds (XRayRecord), one per function/custom/typed record. */
enum tk_xray_rec_type {
	TK_XRAY_R_ENTER = 0, TK_XRAY_R_EXIT, TK_XRAY_R_TAIL_EXIT, TK_XRAY_R_ENTER_ARG,
	TK_XRAY_R_CUSTOM, TK_XRAY_R_TYPED
};
struct tk_xray_rec {
	uint64_t tsc;
	uint64_t offset;           /* file offset of the record */
	int32_t func_id;
	uint32_t tid, pid;
	uint16_t cpu;
	uint16_t rec_type;         /* "type" in YAML: 0, or the last typed event's type */
	uint8_t type;              /* enum tk_xray_rec_type */
	uint8_t orphan;            /* an exit without its enter in this thread's stream */
	uint16_t nargs;
	const uint64_t *args;      /* valid during the callback */
	const uint8_t *data;       /* custom/typed payload */
	uint32_t data_len;
	uint32_t thread;           /* index into the thread table */
};

struct tk_xray_thread_info {
	uint32_t tid, pid;
	uint64_t buffers, records;
	uint64_t first_tsc, last_tsc;
	uint64_t orphan_exits;     /* exits whose enters are not in the log (wrapped away) */
};

struct tk_xray_stats {
	uint64_t buffers, records, function_records, custom_events, typed_events, call_args;
	uint64_t orphan_exits;
	uint64_t first_tsc, last_tsc;
	uint64_t cpus;             /* distinct CPU ids seen */
	struct tk_gap_stats gaps;
};

struct tk_xray_opts {
	size_t sz;
	unsigned nthreads;         /* decode workers; 0/1 = calling thread */
	int32_t max_func_id;       /* > 0: ids above it are corrupt (from the instrumentation map) */
	int release_input;         /* DATA is a read-only file mapping: give its pages back
				      after use (madvise), so memory does not grow with the log */
	unsigned plan_workers;     /* tk_xray_chunks cuts chunks for this many workers
				      (0: nthreads) */
	const struct tk_input *in; /* DATA's input, or NULL: when it is a plain file, the
				      index reads buffer heads with tk_input_pread instead
				      of faulting in a page of DATA for each */
	uint64_t hold_bytes;       /* tk_xray_decode with workers: at most this many bytes
				      of records a chunk (0: 256 KiB); smaller for tests of
				      the seams */
};

struct tk_xray;
/* Index DATA (which must outlive the handle). Damage found while indexing is reported
 * through tk_log and counted in the gap statistics. */
TK_API struct tk_xray *tk_xray_open(const uint8_t *data, size_t len, const struct tk_xray_opts *opts,
			     int *err);
TK_API void tk_xray_free(struct tk_xray *x);
TK_API const struct tk_xray_header *tk_xray_header(const struct tk_xray *x);
TK_API size_t tk_xray_thread_count(const struct tk_xray *x);
TK_API const struct tk_xray_thread_info *tk_xray_thread(const struct tk_xray *x, size_t i);
/* The earliest base TSC a buffer (FDR) or record run (basic) of the log begins with, from
 * the index (no decoding): the trace's start, for times written relative to it. 0 if
 * no buffer gives one. */
TK_API uint64_t tk_xray_first_tsc(const struct tk_xray *x);
/* Counts filled by the last full walk (tk_xray_walk / tk_xray_decode / tk_xray_yaml). */
TK_API const struct tk_xray_stats *tk_xray_stats(const struct tk_xray *x);

/* Visit every expanded record: thread after thread (in the order of the thread table),
 * each thread's buffers in time order. Returning < 0 from CB stops the walk. CB NULL:
 * the counts only (tk_xray_stats), decoded in chunks on the log's threads (opts.nthreads). */
typedef int (*tk_xray_rec_fn)(void *ctx, const struct tk_xray_rec *r);
TK_API int tk_xray_walk(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx);
/* The same records merged across threads by TSC (stable: llvm-xray's record order). */
TK_API int tk_xray_walk_sorted(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx);

/* Neutral events, thread after thread; track = thread index. Buffers decode in parallel
 * (opts.nthreads); the events are the same for any number of workers.
 * FUNC_* addr = function id; FUNC_ARG arg = value; CUSTOM data/count; TYPED data/count,
 * flags = event type; GAP arg = offset, count = bytes, flags = reason. */
TK_API int tk_xray_decode(struct tk_xray *x, struct tk_sink sink);

/* The same events, decoded in chunks of buffers on opts.nthreads workers, each chunk into
 * its own consumer: BEGIN (on a worker) makes the consumer of chunk I and its sink; MERGE
 * (on the calling thread, in chunk order) takes it, e.g. tk_prof_merge into a total.
 * BEGIN may return TK_CHUNK_SKIP: the chunk is not decoded, and orphan exits are no
 * longer counted (the call depths it would have left are unknown).
 * Chunks start only at buffers that need no state from earlier ones, so every chunk's
 * events are exact; calls open across chunk ends are for the consumer's merge. */
struct tk_xray_chunk_ops {
	int (*begin)(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer);
	int (*merge)(void *ctx, size_t chunk, void *consumer);
};
TK_API int tk_xray_decode_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx);
/* The chunks tk_xray_decode_chunks makes: *N, and with BEGIN not NULL (N of room each)
 * the record bytes of each (its first buffer's start, its last buffer's end) and the
 * thread (index) of its first buffer. */
TK_API int tk_xray_chunks(const struct tk_xray *x, uint64_t *begin, uint64_t *end, uint32_t *thread,
		   size_t *n);

/* ---- instrumentation map ---------------------------------------------------------------- */
struct tk_xray_map;
/* From an ELF binary with an xray_instr_map section, or a YAML map from `llvm-xray extract`. */
TK_API struct tk_xray_map *tk_xray_map_load(const char *path, int *err);
TK_API void tk_xray_map_free(struct tk_xray_map *m);
TK_API int32_t tk_xray_map_max_id(const struct tk_xray_map *m);
/* Function address of ID (0 if unknown) and its symbol (NULL if unknown). */
TK_API uint64_t tk_xray_map_addr(const struct tk_xray_map *m, int32_t id);
TK_API const char *tk_xray_map_name(const struct tk_xray_map *m, int32_t id);

/* ---- writers ------------------------------------------------------------------------------ */
/* llvm-xray convert --output-format=yaml (records sorted by TSC, as it does by default);
 * MAP (may be NULL) symbolises "function". */
TK_API int tk_xray_yaml(struct tk_xray *x, const struct tk_xray_map *map, struct tk_buf *out);
struct tk_xray_yaml_opts {
	size_t sz;
	unsigned nthreads;         /* 0: the log's (tk_xray_opts); more than 1: the records
				      are taken off the merge in blocks, formatted at once
				      (when its buffers average 512 bytes or more, or
				      block_records is set) */
	size_t block_records;      /* records per block (0: 16384) */
};
/* tk_xray_yaml with options: the same text for any nthreads and block size. */
TK_API int tk_xray_yaml_with(struct tk_xray *x, const struct tk_xray_map *map, struct tk_buf *out,
			     const struct tk_xray_yaml_opts *opts);

/* Hand the map's names (or addresses) to a symboliser for the shared writers. */
TK_API int tk_xray_map_to_sym(const struct tk_xray_map *map, struct tk_sym *sym);

/* tracekit dump: every record with its offset. Returns the number of damaged spots.
 * RELEASE_INPUT: DATA is a read-only file mapping whose pages may be given back. */
TK_API long tk_xray_dump(const uint8_t *data, size_t len, int no_offset, int release_input,
		  struct tk_buf *out, struct tk_gap_stats *gaps);
/* tk_xray_dump, setting PROGRESS (NULL: none) to the bytes dumped as it goes. */
TK_API long tk_xray_dump_progress(const uint8_t *data, size_t len, int no_offset,
				  int release_input, struct tk_buf *out, struct tk_gap_stats *gaps,
				  struct tk_progress *progress);

struct tk_xray_dump_opts {
	size_t sz;
	int no_offset, release_input;
	struct tk_progress *progress;   /* set to the bytes dumped as it goes (NULL: none) */
	/* threads: the log is dumped in chunks of whole buffers (FDR version 2 on) or records
	 * (basic mode) at once, the same text and messages; version 1 reads in order */
	unsigned nthreads;
	size_t chunk_bytes;             /* 0: 1 MiB */
	struct tk_input *input;         /* the file DATA maps: the chunks' plan reads it with
					   pread (NULL: from DATA) */
};
TK_API long tk_xray_dump_with(const uint8_t *data, size_t len, const struct tk_xray_dump_opts *o,
			      struct tk_buf *out, struct tk_gap_stats *gaps);

#ifdef __cplusplus
}
#endif
#endif
