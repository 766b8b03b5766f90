/* Shared pieces of the tracekit command line: options, errors, exit statuses. The CLI uses
 * only the public headers in include/tracekit/ and the internal tier beside them
 * (include/tracekit/internal/). One file per command in cli/. */
#ifndef TRACEKIT_CLI_H
#define TRACEKIT_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "tracekit/internal/util.h"
#include "tracekit/tracekit.h"

/* Exit statuses (documented in README.md). */
enum {
	EXIT_CLEAN = 0,     /* finished, nothing lost */
	EXIT_SKIPPED = 1,   /* finished, but some input was skipped or lost (gaps, bad lines) */
	EXIT_USAGE = 2,     /* bad command line */
	EXIT_INPUT = 3,     /* input unreadable or of an unknown format */
	EXIT_OUTPUT = 4,    /* an output could not be written */
};

#define CLI_MAX_LIST 64

/* Every option of every command. A command ignores what it does not use; `tracekit help CMD`
 * lists the ones that matter to it. */
struct cli_opts {
	/* common */
	unsigned jobs;               /* -j N; 0 = all cores */
	const char *output;          /* -o FILE; NULL = stdout */
	const char *format;          /* --format NAME: override detection */
	const char *to;              /* --to FMT: output kind (text, json, csv, folded, ...) */
	int quiet;                   /* -q / --quiet */
	int progress;                /* 1 = on when stderr is a terminal (default), 0 = off */

	/* dump */
	int no_offset;               /* --no-offset */
	int lastip;                  /* --lastip */

	/* decode / profile: memory image and timing (ptxed's spelling) */
	const char *elf[CLI_MAX_LIST];   /* --elf FILE[:BASE] */
	int n_elf;
	const char *raw[CLI_MAX_LIST];   /* --raw FILE:ADDR */
	int n_raw;
	const char *module_path[CLI_MAX_LIST];   /* --module-path DIR (branch traces) */
	int n_module_path;
	int no_disasm;               /* --no-disasm */
	int stat;                    /* --stat */
	int time;                    /* --time */
	uint64_t mtc_freq;           /* --mtc-freq N */
	uint64_t nom_freq;           /* --nom-freq N */
	uint64_t cpuid_15_eax;       /* --cpuid-0x15.eax N */
	uint64_t cpuid_15_ebx;       /* --cpuid-0x15.ebx N */
	const char *cpu;             /* --cpu FAMILY/MODEL[/STEPPING] */
	int has_tsc_hz;              /* --tsc-hz N given: the TSC's rate for times (0: ticks) */
	uint64_t tsc_hz;

	/* profile / convert */
	const char *sort;            /* --sort KEY */
	uint64_t top;                /* --top N; 0 = all */
	int threads;                 /* --threads: per thread instead of merged */
	int stacks;                  /* --stacks */
	int lines;                   /* --lines: per source line */
	int source;                  /* --source: annotated source listing */
	const char *instr_map;       /* --instr-map BINARY|YAML */
	const char *time_window;     /* --time A:B */
	uint64_t max_events;         /* --max-events N; 0 = default cap */

	/* stats / convert for pipelines and slices */
	uint64_t window;             /* --window N */
	uint64_t slowest;            /* --slowest N */
	const char *cycles;          /* --cycles A:B */
	const char *slice;           /* --slice K:N */
	const char *shard;           /* --shard I/N: a partial result (cli/shard.c) */
	int mpi;                     /* --mpi: refused, with where MPI runs are (tracekit-mpi) */

	/* record */
	int rec_btrace;              /* --btrace */
	int rec_xray;                /* --xray */
	int rec_qemu;                /* --qemu */
	const char *xray_mode;       /* --xray-mode basic|fdr */
	const char *module[CLI_MAX_LIST]; /* --module PATH */
	int n_module;
	int has_tid;                 /* --tid N given */
	uint64_t tid;                /* --tid N: one thread of a multi-thread trace */
	int no_retcomp;              /* convert --to ipt: the recorded stream as it is */

	/* positional arguments (files, or the command after `--` for record) */
	char **args;
	int nargs;
};

struct cli_command {
	const char *name;
	const char *summary;         /* one line for `tracekit help` */
	const char *usage;           /* full help text for `tracekit help CMD` */
	int (*run)(struct cli_opts *o);
};

/* Parse argv (after the command name) into O. Returns 0 or EXIT_USAGE (message printed). */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct cli_opts *o);

/* "tracekit: FILE: offset 0x...: message" on stderr. FILE and/or offset may be omitted
 * (NULL / UINT64_MAX). */
void cli_error(const char *file, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cli_warn(const char *file, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Open FILE and detect (or take --format) its format. On failure prints the documented
 * error and returns EXIT_INPUT. */
int cli_open(const struct cli_opts *o, const char *file, struct tk_input **in,
	     struct tk_format_info *fi);

/* Output: stdout or -o FILE, buffered. -o naming an input is refused (EXIT_USAGE); a file
 * is written under a temporary name and takes its place at cli_out_close, unless writing
 * failed. Both print their errors (naming the output) and return an exit status. */
int cli_out_open(const struct cli_opts *o, struct tk_buf *out);
int cli_out_close(struct tk_buf *out);
/* An output file of cli_out_open's kind (tk_outfile_open) for PATH; NULL after printing
 * why, with *STATUS set. */
struct tk_outfile *cli_outfile_open(const struct cli_opts *o, const char *path, int *status);

/* Print the gap summary on stderr; returns EXIT_SKIPPED if anything was lost, else 0. */
int cli_report_gaps(const char *file, const struct tk_gap_stats *g, const char *what);

/* Progress on stderr when it is a terminal and not disabled. */
void cli_progress_init(const struct cli_opts *o, struct tk_progress *p, const char *label,
		       uint64_t total);

/* Parse "A:B" (either side may be empty) into two numbers. */
int cli_parse_range(const char *s, uint64_t *a, uint64_t *b);
/* Parse a number: decimal, 0x hex. */
int cli_parse_u64(const char *s, uint64_t *v);

/* The command does not handle this format (yet): message and EXIT_INPUT. */
int cli_unsupported(const char *cmd, const char *file, const struct tk_format_info *fi);
/* Open each file of the command line, detect its format and call RUN_FILE; the worst exit
 * status wins, and one bad file does not stop the others. */
typedef int (*cli_run_file_fn)(struct cli_opts *o, const char *file, struct tk_input *in,
			       const struct tk_format_info *fi);
int cli_run_files(struct cli_opts *o, const char *cmd, cli_run_file_fn run_file);
/* Usage error when a command got no file. */
int cli_need_files(const struct cli_opts *o, const char *cmd);

/* xtrace: an instruction file and its snapshot file (found by name), mapped and opened
 * together (cli/xtrace_common.c). */
struct cli_xtrace {
	struct tk_input *in2;        /* the companion file, if opened here */
	const uint8_t *insn, *snap;
	size_t n, sn;
	const char *insn_path, *snap_path;
	struct tk_xtrace *t;
	struct tk_xtrace_name name;
	char other[4096];
	int insn_mapped;             /* insn is a read-only file mapping: pages may be given back */
};
int cli_xtrace_open(const struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi, struct cli_xtrace *x);
/* cli_xtrace_open for commands that walk instructions: a snapshot file alone is an error. */
int cli_xtrace_open_insn(const struct cli_opts *o, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi, struct cli_xtrace *x);
void cli_xtrace_close(struct cli_xtrace *x);
/* Statistics of every chunk, merged in order, with o->jobs threads. */
int cli_xtrace_stats(const struct cli_opts *o, struct cli_xtrace *x, struct tk_xtrace_stats *s,
		     struct tk_gap_stats *gaps, unsigned flags);
/* Gap summaries: snapshot-file problems, then instruction-file GAPS; returns the status. */
int cli_xtrace_report(struct cli_xtrace *x, const char *file, const struct tk_gap_stats *gaps);
/* Symbols from --elf FILE[:BIAS] (NULL without --elf); returns 0 or an exit status. */
int cli_xtrace_symbols(const struct cli_opts *o, struct tk_sym **out);
/* tracekit record --qemu (cli/record_qemu.c). */
/* Profiles and timelines (cli/analysis_out.c), for every format's profile/convert case. */
/* The source options (tracekit/source.h) of the command line, for FI's format. */
struct tk_source_opts cli_source_opts(const struct cli_opts *o, const struct tk_format_info *fi);
/* tracekit profile of one file (cli/profile.c; convert's profile outputs too). */
int cli_profile_file(struct cli_opts *o, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi);
struct tk_sym *cli_sym_open(const struct cli_opts *o, int *status); /* from --elf FILE[:BASE] */
enum tk_out_kind cli_profile_kind(const struct cli_opts *o);         /* --to, --source, ... */
int cli_profile_write(const struct cli_opts *o, const struct tk_prof *p, struct tk_sym *sym,
		      const char *track_label);
struct cli_timeline {
	struct tk_buf out;
	struct tk_timeline *tl;   /* feed it: tk_timeline_sink(ct.tl) */
};
/* --to perfetto|chrome, --time A:B (ticks), --max-events N, -o FILE. */
int cli_timeline_open(const struct cli_opts *o, struct tk_sym *sym, struct tk_trace_clock clock,
		      struct cli_timeline *ct);
int cli_timeline_close(struct cli_timeline *ct);

/* Intel PT flow (cli/decode.c): the memory image from --elf/--raw, and a whole trace into a
 * profile (chunks decoded on -j threads, merged in order). Returns an exit status. */
struct tk_image *cli_image_load(const struct cli_opts *o);
/* Add the --elf/--raw files to IMG; < 0 after printing an error. */
int cli_image_add_files(const struct cli_opts *o, struct tk_image *img);

/* Intel PT input (cli/ipt_common.c): the library's session (tk_perf_session: a raw
 * packet file is one stream, a perf.data file one per trace queue with the code its
 * mappings name) with the command line's options and its messages on stderr. */
#define cli_ipt tk_perf_session
#define cli_ipt_stream tk_perf_stream
/* Library messages naming a file and offset, printed as cli_error / cli_warn do. */
void cli_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	     const char *msg);
/* CODE 0: only the packets are wanted (dump): no image is built. */
int cli_ipt_open(struct cli_opts *o, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, int code, struct cli_ipt *x);
/* perf.data: the line that names stream I (its queue) ahead of its output. */
void cli_ipt_stream_header(struct tk_buf *out, const struct cli_ipt *x, size_t i);
void cli_ipt_close(struct cli_ipt *x);
/* Decoding is over: what was left out or skipped on stderr (for perf.data each queue's
 * gaps under its name: offsets are in that queue's trace), and the exit status. Streams
 * carry their own gaps in cli_ipt_stream.gaps. */
int cli_ipt_report(const struct cli_opts *o, const char *file, const struct cli_ipt *x,
		   const struct tk_ipt_flow_stats *st);
/* Add the mapped modules' symbols to SYM. */
int cli_ipt_add_symbols(const struct cli_ipt *x, struct tk_sym *sym);
/* The flow decoder's options from the command line: IMG, -j, --mtc-freq, --nom-freq,
 * --cpuid-0x15.eax/ebx. */
struct tk_ipt_flow_opts cli_ipt_flow_opts(const struct cli_opts *o, const struct tk_image *img);
/* perf.data: the TSC's ticks per second from perf's conversion to its clock (0: unknown,
 * a raw trace). */
#define cli_ipt_clock tk_perf_session_clock
/* The decoder's options for stream S of X: the command line's, its track and breaks. */
struct tk_ipt_flow_opts cli_ipt_stream_opts(const struct cli_ipt *x, const struct cli_ipt_stream *s);

/* Branch traces (.tkbt): the container, its modules in a memory image and in the
 * symbolizer (plus --elf/--raw). cli_btrace_events decodes the threads (--tid: one) into
 * SINK and returns an exit status, gaps reported. */
/* tk_btrace_open, its messages naming FILE */
/* STATUS raised to EXIT_SKIPPED when IN's compressed data was cut short. */
int cli_input_status(const struct tk_input *in, int status);
/* Library messages name FILE until cli_log_file(NULL). */
void cli_log_file(const char *file);
struct tk_btrace *cli_btrace_read(const char *file, const uint8_t *data, size_t len,
				  const struct tk_btrace_opts *opts, int *err);
struct cli_btrace {
	struct tk_btrace *bt;
	struct tk_image *img;
	struct tk_sym *sym;
	int missing;                /* recorded modules whose code could not be loaded */
};
/* The recorded modules of BT into IMG (and SYM, if not NULL), each from its recorded path
 * if that file has the recorded build-id, else from an --elf file or --module-path DIR
 * that has it; a module with no such file is named on stderr and left out (the trace in
 * it decodes as gaps). Returns how many were left out. */
int cli_btrace_modules(const struct cli_opts *o, const char *file, const struct tk_btrace *bt,
		       struct tk_image *img, struct tk_sym *sym);
int cli_btrace_open(const struct cli_opts *o, const char *file, struct tk_input *in,
		    struct cli_btrace *cb);
void cli_btrace_close(struct cli_btrace *cb);
/* After decoding threads of BT (their gaps: DECODED): the container's damage and theirs
 * reported together; the exit status, 1 also when the recording did not end. */
int cli_btrace_status(const char *file, const struct tk_btrace *bt,
		      const struct tk_gap_stats *decoded);
/* The TSC's rate: --tsc-hz, else as the recording gives it (0: unknown, times in ticks). */
struct tk_trace_clock cli_btrace_clock(const struct cli_opts *o, const struct cli_btrace *cb);
int cli_btrace_events(const struct cli_opts *o, const char *file, struct cli_btrace *cb,
		      struct tk_sink sink);

/* XRay (cli/xray_common.c): map the log, load --instr-map, index the buffers (NULL and
 * *status set after printing an error); after a walk, report orphan exits and gaps and
 * return the exit status. */
struct tk_xray;
struct tk_xray_map;
struct tk_xray *cli_xray_open(const struct cli_opts *o, const char *file, struct tk_input *in,
			      struct tk_xray_map **map, int *status);
int cli_xray_finish(const char *file, struct tk_xray *x);
/* The mapped input is a read-only mapping of a regular file (its pages can be given back). */
int cli_xray_release_ok(const char *file, struct tk_input *in);
/* `--to account`: the llvm-xray account table of P with X's clock and thread ids and MAP's
 * names (the rest of AO as given). */
int cli_xray_account(struct tk_buf *out, const struct tk_prof *p, const struct tk_xray *x,
		     const struct tk_xray_map *map, struct tk_out_account_opts *ao);

const struct cli_command *cli_find_command(const char *name);
extern const struct cli_command *const cli_commands[];

/* The commands (one file each). */
extern const struct cli_command cli_cmd_info, cli_cmd_dump, cli_cmd_decode, cli_cmd_profile,
	cli_cmd_stats, cli_cmd_check, cli_cmd_convert, cli_cmd_report, cli_cmd_record, cli_cmd_merge;

/* profile --shard I/N -o PART FILE... (cli/shard.c): the partial result of one shard;
 * cli_shard_build makes its bytes (*DATA malloc'd) and returns the exit status so far. */
int cli_shard_profile(struct cli_opts *o);
int cli_shard_build(struct cli_opts *o, uint32_t shard, uint32_t nshards, uint8_t **data,
		    size_t *len);
/* tracekit merge (cli/merge.c) of N partials given as bytes (DATA[i] malloc'd, taken;
 * NAMES[i] names them in messages): the output O asks for, and the exit status. */
int cli_merge_partials(struct cli_opts *o, const char *const *names, uint8_t **data,
		       const size_t *len, int n);

#endif
