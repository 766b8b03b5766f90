/* Kanata pipeline logs (the Konata viewer's format): reader, checker, statistics, writer,
 * window cut and timeline export. */
#ifndef TRACEKIT_KANATA_H
#define TRACEKIT_KANATA_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/event.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 (0: not this format). */
TK_API int tk_kanata_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* ---- reader: one command per line ----------------------------------------------------- */
enum tk_kanata_kind {
	TK_KANATA_HEADER = 1,  /* "Kanata 0004": a = version */
	TK_KANATA_CYCLE_SET,   /* "C=": a = absolute cycle */
	TK_KANATA_CYCLE,       /* "C":  a = cycles elapsed */
	TK_KANATA_INSN,        /* "I":  id, a = id in simulator, b = thread */
	TK_KANATA_LABEL,       /* "L":  id, a = type, text (escapes such as \n kept verbatim) */
	TK_KANATA_STAGE_BEGIN, /* "S":  id, lane, text = stage */
	TK_KANATA_STAGE_END,   /* "E":  id, lane, text = stage */
	TK_KANATA_RETIRE,      /* "R":  id, a = retire id, b = 0 retire / 1 flush */
	TK_KANATA_DEP,         /* "W":  id = consumer, a = producer, b = type */
};

struct tk_kanata_cmd {
	enum tk_kanata_kind kind;
	int64_t id, a, b;
	const char *lane;      /* S/E: lane name as written (lanes are strings) */
	size_t lane_len;
	const char *text;      /* S/E: stage name; L: label text */
	size_t text_len;
	int64_t cycle;         /* the cycle this command happens in (after C / C=) */
	uint64_t line;         /* 1-based line number */
	uint64_t offset;       /* byte offset of the line in the (decompressed) input */
};

/* What the reader and the checker report. ERROR: the line was skipped; WARN: accepted. */
enum tk_kanata_diag_code {
	TK_KANATA_D_NO_HEADER = 1, /* first line is not "Kanata VERSION" */
	TK_KANATA_D_VERSION,       /* version other than 4 (read anyway) */
	TK_KANATA_D_UNKNOWN_CMD,   /* unknown command */
	TK_KANATA_D_SYNTAX,        /* missing field or bad number */
	TK_KANATA_D_LONG_LINE,     /* line longer than max_line: skipped in bounded memory */
	TK_KANATA_D_NEG_DELTA,     /* "C" with a negative (or zero-sized backwards) delta */
	TK_KANATA_D_CYCLE_BACK,    /* "C=" going back in time */
	TK_KANATA_D_UNKNOWN_ID,    /* id used before its "I" */
	TK_KANATA_D_ID_REUSED,     /* "I" for an id already used */
	TK_KANATA_D_AFTER_RETIRE,  /* command for an instruction after its "R" */
	TK_KANATA_D_RETIRE_TWICE,  /* "R" for an instruction already retired */
	TK_KANATA_D_END_NO_BEGIN,  /* "E" without a matching open "S" */
	TK_KANATA_D_DEP_RETIRED,   /* "W" whose consumer is already retired */
	TK_KANATA_D_DEP_PRODUCER,  /* "W" whose producer never appeared */
	TK_KANATA_D_BAD_TYPE,      /* "R" type other than 0/1, "L" type negative */
	TK_KANATA_D_IN_FLIGHT,     /* instructions without "R" at end of file (info) */
};

struct tk_kanata_diag {
	enum tk_log_level level;   /* TK_LOG_ERROR: line skipped; TK_LOG_WARN: accepted */
	enum tk_kanata_diag_code code;
	uint64_t line, offset;
	const char *msg;           /* without the line number */
};

struct tk_kanata_reader_opts {
	size_t sz;
	size_t max_line;   /* longer lines are skipped with a diagnostic; 0 = 16 MiB */
	int semantic;      /* 1: also track instructions and report id/order violations */
	/* Each command; returning < 0 stops the reader, which returns that value. */
	int (*cmd)(void *ctx, const struct tk_kanata_cmd *c);
	void (*diag)(void *ctx, const struct tk_kanata_diag *d);
	void *ctx;
	void *diag_ctx;    /* context for diag; NULL: ctx */
};

struct tk_kanata_counts {
	uint64_t lines, commands, bytes;
	uint64_t errors, warnings;   /* diagnostics by level */
	uint64_t insns, retired, flushed, in_flight;  /* in_flight: only with semantic */
	int64_t first_cycle, last_cycle;              /* first: after C= (0 without) */
	uint64_t first_cycle_line;                    /* line of that C= (0: none) */
	unsigned version;
};

struct tk_kanata_reader;

TK_API struct tk_kanata_reader *tk_kanata_reader_new(const struct tk_kanata_reader_opts *opts, int *err);
TK_API void tk_kanata_reader_free(struct tk_kanata_reader *r);
/* Feed bytes in any split; final = 1 on the last call (end of input). */
TK_API int tk_kanata_reader_feed(struct tk_kanata_reader *r, const char *p, size_t n, int final);
/* Read a whole input in bounded memory (streams .gz/.zst). */
TK_API int tk_kanata_reader_run(struct tk_kanata_reader *r, struct tk_input *in);
TK_API const struct tk_kanata_counts *tk_kanata_reader_counts(const struct tk_kanata_reader *r);

/* Message text for a diagnostic code. */
TK_API const char *tk_kanata_diag_name(enum tk_kanata_diag_code code);

/* ---- statistics ------------------------------------------------------------------------ */
#define TK_KANATA_NAME_MAX 64

struct tk_kanata_latency {
	uint64_t count, sum, max;
	uint64_t p50, p99;       /* exact below 1024 cycles, above within 1/64 (bucket top) */
};

struct tk_kanata_stage_stats {
	char lane[TK_KANATA_NAME_MAX];
	char stage[TK_KANATA_NAME_MAX];
	uint64_t occupancy;      /* cycles spent in the stage summed over instructions */
	struct tk_kanata_latency lat;
};

struct tk_kanata_thread_stats {
	int64_t thread;
	uint64_t insns, retired, flushed;
};

struct tk_kanata_slow {
	int64_t id, sim_id, thread;
	int64_t begin, end;      /* cycles of I and R */
	int flushed;
	char label[160];         /* type-0 label, truncated */
};

struct tk_kanata_stats_opts {
	size_t sz;
	uint64_t window;         /* IPC window in cycles; 0 = no windows */
	uint64_t slowest;        /* keep the N slowest retired instructions */
	unsigned jobs;           /* parse in parallel when > 1 (mapped input only); beyond 256
				  * diagnostics in one 8 MiB chunk, diag gets each without its text
				  * (but with keep_diags) */
	void (*diag)(void *ctx, const struct tk_kanata_diag *d);
	void *ctx;
	uint64_t chunk_bytes;    /* the parallel chunks' size (0: 8 MiB; tests make it small) */
	/* jobs > 1: set to the bytes merged as chunks merge, in order (NULL: none; read in
	 * order, the input's own progress shows, tk_input_progress) */
	struct tk_progress *progress;
	/* jobs > 1: every diagnostic to diag with its text, however many a chunk has (kept
	 * until the chunk's turn: memory grows with a chunk's diagnostics); not in shards */
	int keep_diags;
	/* only the counts and the diagnostics (tracekit check): no latencies, occupancy,
	 * threads, windows or slowest instructions, and none of their cost */
	int counts_only;
};

struct tk_kanata_stats {
	struct tk_kanata_counts counts;
	uint64_t cycles;         /* last_cycle - first_cycle (C= honoured) */
	uint64_t konata_last_rid;    /* Konata's IPC: last retire id / last cycle without C= */
	uint64_t konata_last_cycle;
	int have_rid;
	struct tk_kanata_latency insn_lat;      /* I to R of retired instructions */
	uint64_t stall_cycles;   /* lane "1" occupancy */
	size_t nstages;
	struct tk_kanata_stage_stats *stages;   /* in order of first appearance */
	size_t nthreads;
	struct tk_kanata_thread_stats *threads; /* sorted by thread id */
	size_t nwindows;
	uint64_t *window_retired;               /* retired per window of opts.window cycles */
	size_t nslow;
	struct tk_kanata_slow *slow;            /* slowest first */
	const char *converted_from;  /* set by the caller: the format name of the log this
					Kanata log was converted from ("gem5"); NULL: none */
};

/* Read IN and compute statistics; *st is filled (free with tk_kanata_stats_free). */
TK_API int tk_kanata_stats_compute(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
			    struct tk_kanata_stats *st);
TK_API void tk_kanata_stats_free(struct tk_kanata_stats *st);
/* Statistics in shards (docs/formats/partial.md, "Kanata statistics"): the sizes of the
 * chunks the input is parsed in (*SIZES malloc'd; none for a compressed input, which the
 * merge reads in order); a shard's chunks [FIRST, FIRST + COUNT) parsed, as bytes (*DATA
 * malloc'd; the chunks before FIRST are only scanned for their cycles and lines); and the
 * shards' bytes merged in chunk order into what tk_kanata_stats_compute gives, diagnostics
 * delivered to the options' callback in the same order. IN: the same input, unread; at the
 * end of the merge the input is read in order where one process would (an id reused across
 * chunks). merge_add: on bad bytes, -TK_E_BAD_FORMAT with *ERR_AT (their offset) and MSG. */
TK_API int tk_kanata_stats_chunks(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
				  uint64_t **sizes, size_t *n);
TK_API int tk_kanata_stats_shard(struct tk_input *in, const struct tk_kanata_stats_opts *opts,
				 size_t first, size_t count, uint8_t **data, size_t *len);
struct tk_kanata_stats_merge;
TK_API struct tk_kanata_stats_merge *tk_kanata_stats_merge_new(const struct tk_kanata_stats_opts *opts,
							       struct tk_input *in, int *err);
TK_API int tk_kanata_stats_merge_add(struct tk_kanata_stats_merge *m, const uint8_t *data,
				     size_t len, uint64_t *err_at, char *msg, size_t msg_cap);
TK_API int tk_kanata_stats_merge_end(struct tk_kanata_stats_merge *m, struct tk_kanata_stats *st);
TK_API void tk_kanata_stats_merge_free(struct tk_kanata_stats_merge *m);
/* The IPC window the shards were made with (their options decide the merge's). */
TK_API uint64_t tk_kanata_stats_merge_window(const struct tk_kanata_stats_merge *m);
/* Same on a buffer (tests, fuzzing). */
TK_API int tk_kanata_stats_buf(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			struct tk_kanata_stats *st);

/* ---- writer: the API a simulator calls ------------------------------------------------- */
/* Writes the plain four-column form Konata reads. Time only moves forward: tk_kanata_w_cycle
 * with a delta, or tk_kanata_w_cycle_to with an absolute cycle >= the current one. Commands
 * for unknown or retired instructions are refused with -TK_E_BAD_STATE. */
struct tk_kanata_writer;

TK_API struct tk_kanata_writer *tk_kanata_writer_new(struct tk_buf *out, int64_t start_cycle, int *err);
TK_API void tk_kanata_writer_free(struct tk_kanata_writer *w);
TK_API int tk_kanata_w_cycle(struct tk_kanata_writer *w, int64_t delta);
TK_API int tk_kanata_w_cycle_to(struct tk_kanata_writer *w, int64_t cycle);
TK_API int tk_kanata_w_insn(struct tk_kanata_writer *w, int64_t id, int64_t sim_id, int64_t thread);
TK_API int tk_kanata_w_label(struct tk_kanata_writer *w, int64_t id, int type, const char *text, size_t n);
TK_API int tk_kanata_w_stage(struct tk_kanata_writer *w, int64_t id, const char *lane, const char *stage);
TK_API int tk_kanata_w_stage_end(struct tk_kanata_writer *w, int64_t id, const char *lane, const char *stage);
TK_API int tk_kanata_w_retire(struct tk_kanata_writer *w, int64_t id, int64_t retire_id, int flush);
TK_API int tk_kanata_w_dep(struct tk_kanata_writer *w, int64_t consumer, int64_t producer, int type);
/* Write one parsed command (used by conversions and round trips). */
TK_API int tk_kanata_w_cmd(struct tk_kanata_writer *w, const struct tk_kanata_cmd *c);
TK_API int64_t tk_kanata_w_now(const struct tk_kanata_writer *w);

/* ---- neutral events ------------------------------------------------------------------- */
/* Decode into struct tk_event batches (event.h): TK_EV_INSN_BEGIN (addr = id, arg = thread,
 * addr2 = id in the simulator), its type-0 label as TK_EV_TYPED with TK_TYPED_INSN_LABEL
 * (just before its RETIRE/FLUSH, or at the end for instructions still in flight),
 * TK_EV_STAGE_BEGIN / TK_EV_STAGE_END (addr = id, arg = stage number, flags = lane number;
 * names from tk_kanata_decoder_stage), TK_EV_RETIRE (arg = retire id), TK_EV_FLUSH,
 * TK_EV_DEPENDENCY (addr = consumer, addr2 = producer, arg = type), and TK_EV_GAP for a
 * skipped line (arg = byte offset, count = 1 line, flags = TK_GAP_DECODE_ERROR). time is
 * the cycle minus the log's first cycle (commands before it count as 0); track is the thread
 * (low 32 bits). A stage's END comes before the BEGIN of the stage that closes it. */
struct tk_kanata_decoder;
TK_API struct tk_kanata_decoder *tk_kanata_decoder_new(struct tk_sink sink, int *err);
TK_API void tk_kanata_decoder_free(struct tk_kanata_decoder *d);
TK_API int tk_kanata_decode(struct tk_kanata_decoder *d, struct tk_input *in);
/* tk_kanata_decode of a plain file on JOBS threads: chunks of CHUNK_BYTES (0: 1 MiB) parsed
 * at once, then merged in order on the calling thread, which alone calls the sink. The
 * sink gets the same events in the same order as with one thread. PROGRESS (may be NULL)
 * follows the merge. */
TK_API void tk_kanata_decoder_set_jobs(struct tk_kanata_decoder *d, unsigned jobs,
				       size_t chunk_bytes, struct tk_progress *progress);
/* The same from bytes in memory (a log made in memory, e.g. by tk_gem5_to_kanata), fed in
 * pieces that end anywhere; FINAL on the last. */
TK_API int tk_kanata_decode_bytes(struct tk_kanata_decoder *d, const char *p, size_t n, int final);
/* Stage NUMBER's name and lane name (NULL if unknown). */
TK_API const char *tk_kanata_decoder_stage(const struct tk_kanata_decoder *d, unsigned number,
				    const char **lane);
TK_API const struct tk_kanata_counts *tk_kanata_decoder_counts(const struct tk_kanata_decoder *d);
TK_API const struct tk_gap_stats *tk_kanata_decoder_gaps(const struct tk_kanata_decoder *d);

/* ---- conversions ----------------------------------------------------------------------- */
struct tk_kanata_conv_opts {
	size_t sz;
	int64_t cycle_from, cycle_to;   /* cut: keep instructions alive in [from, to) */
	void (*diag)(void *ctx, const struct tk_kanata_diag *d);
	void *ctx;
	int from_first;                 /* cut: from and to count from the log's first cycle
					   (its C=), as the decoder's times do */
};

/* Rewrite IN normalised (read -> write). */
TK_API int tk_kanata_rewrite(struct tk_input *in, struct tk_buf *out, const struct tk_kanata_conv_opts *o);
/* Keep the instructions that are alive somewhere in [cycle_from, cycle_to), renumbered from 0,
 * as a valid log Konata opens; instructions still in flight at cycle_to are flushed there. */
TK_API int tk_kanata_cut(struct tk_input *in, struct tk_buf *out, const struct tk_kanata_conv_opts *o);
/* Timelines (Chrome JSON, Perfetto): tk_kanata_decoder_* into the shared writer (out.h). */

/* dump's line for command C (no offset with NO_OFFSET): line, offset, cycle, the command
 * as parsed (tabs, numbers normalised). */
TK_API void tk_kanata_cmd_text(struct tk_buf *b, const struct tk_kanata_cmd *c, int no_offset);

struct tk_kanata_dump_opts {
	size_t sz;
	unsigned jobs;              /* threads: an uncompressed file of two chunks or more is
				       parsed in chunks at once; the same output for any count */
	size_t chunk_bytes;         /* 0: 4 MiB */
	int no_offset, quiet;       /* quiet: no text, the diagnostics only */
	void (*diag)(void *ctx, const struct tk_kanata_diag *d);   /* in line order */
	void *ctx;
	struct tk_progress *progress;
};

/* Every command of IN as tk_kanata_cmd_text's lines onto OUT; N: the reader's counts
 * (lines, commands, errors, warnings). */
TK_API int tk_kanata_dump(struct tk_input *in, const struct tk_kanata_dump_opts *o, struct tk_buf *out,
			  struct tk_kanata_counts *n);

#ifdef __cplusplus
}
#endif
#endif
