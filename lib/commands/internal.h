/* What the per-format command operations (lib/commands/<f>.c) share: messages through the
 * command's printer, its outputs, the code image and symbols from --elf/--raw, timelines. */
#ifndef TK_COMMANDS_INTERNAL_H
#define TK_COMMANDS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/internal/commands.h"
#include "tracekit/btrace.h"
#include "tracekit/gem5.h"
#include "tracekit/image.h"
#include "tracekit/ipt.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/isa.h"
#include "tracekit/kanata.h"
#include "tracekit/out.h"
#include "tracekit/perf.h"
#include "tracekit/symbolize.h"
#include "tracekit/xray.h"
#include "tracekit/xtrace.h"

#define CMD_ERROR(c, file, off, ...) tk_msg((c)->msg, (c)->ctx, TK_LOG_ERROR, file, off, __VA_ARGS__)
#define CMD_WARN(c, file, off, ...) tk_msg((c)->msg, (c)->ctx, TK_LOG_WARN, file, off, __VA_ARGS__)
/* "tracekit: FILE: text" (FILE NULL: "tracekit: text"), neither error nor warning */
#define CMD_NOTE(c, file, ...) tk_msg((c)->msg, (c)->ctx, TK_LOG_INFO, file, UINT64_MAX, __VA_ARGS__)

static inline int tk_cmd_max(int a, int b)
{
	return a > b ? a : b;
}

/* "FILE:LINE: error|warning: MSG" (the line-numbered readers: Kanata, gem5). */
void tk_cmd_line_msg(const struct tk_cmd *c, const char *file, uint64_t line, int is_error,
		     const char *msg);
/* The gap summary as a warning; TK_EXIT_SKIPPED if anything was lost, else 0. */
int tk_cmd_gaps(const struct tk_cmd *c, const char *file, const struct tk_gap_stats *g,
		const char *what);
/* Library log messages name FILE until tk_cmd_log_file(C, NULL). */
void tk_cmd_log_file(const struct tk_cmd *c, const char *file);
void tk_cmd_progress_init(const struct tk_cmd *c, struct tk_progress *p, const char *label,
			  uint64_t total);
/* IN mapped whole; TK_EXIT_INPUT after "cannot read: ..." (WHY NULL) or "WHY..." */
int tk_cmd_map(const struct tk_cmd *c, const char *file, struct tk_input *in,
	       const uint8_t **data, size_t *len);
/* The workers: -j N, else all cores. */
unsigned tk_cmd_jobs(const struct tk_cmd *c);
/* A timeline writer's own threads (tk_timeline_opts.nthreads) beside a decoder that keeps
 * -j's threads busy: one fewer, none at -j 2 (a formatter and a helper beside two
 * decoding threads made four busy threads on two cores). */
unsigned tk_cmd_writer_threads(const struct tk_cmd *c);

/* The memory image from --elf/--raw (ptxed's spelling); NULL after saying why. */
struct tk_image *tk_cmd_image_load(const struct tk_cmd *c);
/* The flow decoder's options from the command line: IMG, -j, timing. */
struct tk_ipt_flow_opts tk_cmd_flow_opts(const struct tk_cmd *c, const struct tk_image *img);
/* Symbols from --elf FILE[:BASE] (BIAS: FILE[:BIAS], the load bias); NULL with *STATUS
 * set after saying why. */
/* The symbolizer options of the command line (--no-demangle, --short-names). */
struct tk_sym_opts tk_cmd_sym_opts(const struct tk_cmd_opts *o);
struct tk_sym *tk_cmd_sym_open(const struct tk_cmd *c, int bias, int *status);

/* Timelines: --to perfetto|chrome (none: Perfetto), --time A:B (ticks), --max-events N. */
struct tk_cmd_timeline {
	struct tk_buf out;
	struct tk_timeline *tl;      /* feed it: tk_timeline_sink(ct.tl) */
	const struct tk_cmd *c;
};
int tk_cmd_timeline_open(const struct tk_cmd *c, struct tk_sym *sym, struct tk_trace_clock clock,
			 struct tk_cmd_timeline *ct);
int tk_cmd_timeline_close(struct tk_cmd_timeline *ct);
/* The timeline writer of TO with the command line's call filters (-F, -N, -D, --min-time,
 * --min-insns), writing to OUT (its threads: TO's nthreads, 0 for -j's); NULL after
 * saying why (*STATUS: the exit status). */
struct tk_timeline *tk_cmd_timeline_new(const struct tk_cmd *c, const char *file, struct tk_buf *out,
					struct tk_timeline_opts *to, int *status);

/* convert to WHAT ("--to xray-yaml", "--slice"), neither a timeline nor a profile:
 * TK_EXIT_USAGE after saying so where --time A:B, a call filter or --max-events was given
 * (they shape timelines and profiles), else 0. */
int tk_cmd_convert_plain(const struct tk_cmd *c, const char *what);

/* --to of stats: TK_STATS_*, or 0 after saying why. */
int tk_cmd_stats_format(const struct tk_cmd *c);
/* Instruction-flow statistics (Intel PT, branch traces) written to the output. */
int tk_cmd_exec_stats_out(const struct tk_cmd *c, const char *file, const char *what,
			  const char *name, const char *unit, size_t n,
			  const struct tk_ipt_exec_stats *s);

/* Statistics as a partial result (c->part): a merge adds the shards' bytes to X; a shard
 * saves X's. 0, or an exit status after saying what is wrong. */
int tk_cmd_exec_load(const struct tk_cmd *c, struct tk_ipt_exec *x);
int tk_cmd_exec_save(const struct tk_cmd *c, const char *file, const struct tk_ipt_exec *x);
/* The same for any statistics: LOAD each of the shards' bytes (CTX its own; E says what is
 * wrong where), and the status of a save that returned RC. */
struct tk_partial_error;
typedef int (*tk_cmd_part_loader)(void *ctx, const uint8_t *data, size_t len,
				  struct tk_partial_error *e);
int tk_cmd_part_load(const struct tk_cmd *c, tk_cmd_part_loader load, void *ctx);
int tk_cmd_part_saved(const struct tk_cmd *c, const char *file, int rc);

/* Intel PT pieces the branch traces share (ipt.c): one stream in ptdump's layout (PROG
 * advanced by its bytes: the caller's, over all the streams it dumps), the
 * listing's flags (--no-disasm, --time, --stat), a stream written again with return
 * compression against IMG (its decoder's gaps into GAPS). */
int tk_cmd_ipt_dump_stream(const struct tk_cmd *c, const char *file, const uint8_t *pt,
			   size_t n, struct tk_progress *prog, struct tk_buf *out,
			   struct tk_gap_stats *gaps);
/* The same, RELEASE_READ: PT lies in the input file's mapping, its pages given back as the
 * dump goes; ERRATA: the processor's (enum tk_ipt_erratum); TIMING: the timing parameters
 * for the time columns (a perf session's, perf.data's filled in; NULL: the options'); FO
 * (NULL: none): the stream's flow options, for where it lies in the input file. */
struct tk_perf_session_opts;
struct tk_ipt_flow_opts;
int tk_cmd_ipt_dump_stream_in(const struct tk_cmd *c, const char *file, const uint8_t *pt,
			      size_t n, int release_read, uint32_t errata,
			      const struct tk_perf_session_opts *timing,
			      const struct tk_ipt_flow_opts *fo, struct tk_progress *prog,
			      struct tk_buf *out, struct tk_gap_stats *gaps);
unsigned tk_cmd_text_flags(const struct tk_cmd *c);
int tk_cmd_reencode(const struct tk_cmd *c, const char *file, const struct tk_image *img,
		    const uint8_t *pt, size_t n, struct tk_buf *out, struct tk_gap_stats *gaps);

/* tracekit record: the recorders, as the operations of the formats they write. */
int tk_cmd_record_btrace(const struct tk_cmd *c, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi, struct tk_buf *unused);
int tk_cmd_record_xray(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_buf *unused);
int tk_cmd_record_qemu(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_buf *out);

/* The options of the formats (each format's file declares its own). */
#define CMD_FIELD(f) offsetof(struct tk_cmd_opts, f)
extern const struct tk_cmd_option tk_cmd_ipt_options[], tk_cmd_btrace_options[],
	tk_cmd_xray_options[], tk_cmd_xtrace_options[], tk_cmd_kanata_options[],
	tk_cmd_gem5_options[];

/* The formats' operations (the registry, registry.c, names them). */
extern const tk_cmd_fn tk_cmd_ipt[TK_CMD__COUNT], tk_cmd_btrace[TK_CMD__COUNT],
	tk_cmd_xray[TK_CMD__COUNT], tk_cmd_xtrace[TK_CMD__COUNT], tk_cmd_kanata[TK_CMD__COUNT],
	tk_cmd_gem5[TK_CMD__COUNT];

#endif
