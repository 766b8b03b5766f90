/* What a format implements for the source interface (tracekit/source.h); the registry in
 * lib/formats/detect.c names each format's ops. */
#ifndef TRACEKIT_INTERNAL_SOURCE_H
#define TRACEKIT_INTERNAL_SOURCE_H

#include "tracekit/source.h"
#include "tracekit/xtrace.h"

struct tk_source {
	const struct tk_source_ops *ops;
	struct tk_source_opts o;
	struct tk_source_info info;
	struct tk_input *in;
	int borrowed;                 /* IN is the caller's (tk_source_open_input) */
	const uint8_t *data;          /* the input, mapped */
	size_t len;
	struct tk_sym *sym;           /* made on first use (tk_source_symbols) */
	struct tk_sym **psym;         /* ... and each process's (tk_source_track_process) */
	size_t npsym;
	void *state;                  /* the format's */
	char *path;
	tk_log_fn prev_log;           /* the log callback before the source's own */
	void *prev_log_ctx;
	const char *log_file;         /* library log messages are about this file */
	struct tk_losses added;       /* other processes' runs' (tk_source_add_losses) */
};

struct tk_source_ops {
	/* fill s->state and s->info (format, path and size are set) */
	int (*open)(struct tk_source *s);
	/* names of the code into SYM (which holds the --elf files' already) */
	int (*symbols)(struct tk_source *s, struct tk_sym *sym);
	int (*plan)(struct tk_source *s, struct tk_chunk **chunks, size_t *n);
	int (*run)(struct tk_source *s, const struct tk_chunk_consumer *c);
	/* what was lost: the run's (LOSSES) and what tk_source_add_losses added */
	int (*report)(struct tk_source *s);
	/* what the run lost (tk_source_losses) */
	void (*losses)(struct tk_source *s, struct tk_losses *l);
	void (*close)(struct tk_source *s);
	/* optional: the id users know for TRACK (default: TRACK) */
	uint32_t (*track_id)(const struct tk_source *s, uint32_t track);
	/* optional: tk_source_track_process, the process as an index (*PROC) whose names
	 * PROC_SYMBOLS adds to SYM (which holds the --elf files' already) */
	int (*track_process)(struct tk_source *s, uint32_t track, uint32_t *pid, char *comm,
			     size_t n, size_t *proc);
	int (*proc_symbols)(struct tk_source *s, size_t proc, struct tk_sym *sym);
	/* the symbols need no DWARF (XRay: function ids, names from the map) */
	int no_dwarf;
	/* --elf FILE:N gives the load bias N (xtrace), not the base address */
	int elf_bias;
};

/* The registry (detect.c): the ops of format ID, NULL if it has none. */
const struct tk_source_ops *tk_source_ops_of(enum tk_format_id id);

/* Message helpers for the formats' sources. */
#define TK_SRC_WARN(s, file, ...) \
        tk_msg((s)->o.msg, (s)->o.ctx, TK_LOG_WARN, file, UINT64_MAX, __VA_ARGS__)
#define TK_SRC_ERROR(s, file, off, ...) \
        tk_msg((s)->o.msg, (s)->o.ctx, TK_LOG_ERROR, file, off, __VA_ARGS__)
/* One chunk per stream (PLAN for formats that decode each stream whole). */
int tk_source_plan_streams(struct tk_source *s, struct tk_chunk **chunks, size_t *n);
/* Run the chunks of the plan on the pool (WORK: decode chunk I into SINK, its gaps into
 * GAPS; REDO decodes again), for formats whose chunks are independent byte ranges. */
typedef int (*tk_source_chunk_fn)(struct tk_source *s, size_t i, struct tk_sink sink,
				  struct tk_gap_stats *gaps);
int tk_source_run_pool(struct tk_source *s, size_t nchunks, tk_source_chunk_fn decode,
		       const struct tk_chunk_consumer *c, struct tk_gap_stats *gaps);

/* An xtrace pair as the xtrace source opens it: the instruction file and its snapshot file
 * (the companion found by name; either may be PATH, mapped at DATA), both mapped, and the
 * trace over them. Library messages about them go to MSG naming the file (a process-wide
 * log callback is set: the caller restores its own). A snapshot file without its
 * instruction file opens (INSN NULL: info and dump read it); the source refuses it. */
struct tk_xtrace_pair {
	const char *path;             /* as given */
	struct tk_input *in2;         /* the companion file, if opened */
	const uint8_t *insn, *snap;
	size_t n, sn;
	const char *insn_path, *snap_path;
	char other[4096];
	struct tk_xtrace *t;
	struct tk_xtrace_name name;
	int release;                  /* insn is a file mapping: read chunks' pages may go back */
	tk_msg_fn msg;
	void *ctx;
};
int tk_xtrace_pair_open(struct tk_xtrace_pair *p, const char *path, int snapfile,
			struct tk_input *in, const uint8_t *data, size_t len, tk_msg_fn msg,
			void *ctx);
void tk_xtrace_pair_close(struct tk_xtrace_pair *p);

extern const struct tk_source_ops tk_source_ipt, tk_source_xray, tk_source_xtrace,
	tk_source_btrace, tk_source_kanata;

#endif
