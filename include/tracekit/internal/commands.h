/* What the tracekit command does with one input of each format: the per-format part of
 * info, dump, check, decode, stats and convert, behind one table (lib/commands/). The
 * command (cli/) parses the options into struct tk_cmd_opts, supplies its outputs and
 * message printer in struct tk_cmd, and asks tk_cmd_op for the format's operation; a
 * format without it has none (the command says so, once, for every format). Internal tier:
 * neither installed nor exported by libtracekit.so. */
#ifndef TRACEKIT_INTERNAL_COMMANDS_H
#define TRACEKIT_INTERNAL_COMMANDS_H

#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/ipt.h"
#include "tracekit/internal/util.h"

/* Exit statuses (README.md's table). */
enum {
	TK_EXIT_CLEAN = 0,     /* finished, nothing lost */
	TK_EXIT_SKIPPED = 1,   /* finished, but some input was skipped or lost */
	TK_EXIT_USAGE = 2,     /* bad command line */
	TK_EXIT_INPUT = 3,     /* input unreadable or of an unknown format */
	TK_EXIT_OUTPUT = 4,    /* an output could not be written */
	/* convert: the output asked for is a profile (the profile command's writers) */
	TK_EXIT_AS_PROFILE = 100,
};

#define TK_CMD_MAX_LIST 64

/* Every option of every command. A command ignores what it does not use; `tracekit help
 * CMD` lists the ones that matter to it (cli/options.c, each format's table). */
struct tk_cmd_opts {
	/* common */
	unsigned jobs;               /* -j N; 0 = all cores */
	unsigned plan_workers;       /* the plan's workers (tk_source_opts); shards: all of the job's */
	const char *output;          /* -o FILE; NULL = stdout */
	const char *format;          /* --format NAME: override detection */
	const char *to;              /* --to FMT: output kind (text, json, csv, folded, ...) */
	int quiet;                   /* -q / --quiet */
	int progress;                /* 1 = on when stderr is a terminal (default), 0 = off */

	/* dump */
	int no_offset;               /* --no-offset */
	int lastip;                  /* --lastip */
	int raw_bytes;               /* --raw-bytes (ptdump's --raw) */
	int exec_mode;               /* --exec-mode */
	int no_sync;                 /* --no-sync */
	int tcal, time_delta;        /* --tcal, --time-delta (with --time: ptdump's columns) */
	int no_tcal, no_wall_clock, keep_tcal_on_ovf;   /* ... and how they are tracked */
	int no_cyc, no_timing, no_pad;                  /* --no-cyc, --no-timing, --no-pad */

	/* decode / profile: memory image and timing (ptxed's spelling) */
	const char *elf[TK_CMD_MAX_LIST];   /* --elf FILE[:BASE] */
	int n_elf;
	const char *raw[TK_CMD_MAX_LIST];   /* --raw FILE:ADDR */
	int n_raw;
	const char *module_path[TK_CMD_MAX_LIST];   /* --module-path DIR (branch traces) */
	int n_module_path;
	int no_disasm;               /* --no-disasm */
	int stat;                    /* --stat */
	int time;                    /* --time */
	int iflags;                  /* --event:iflags */
	int event_ip;                /* --event:ip */
	uint64_t mtc_freq;           /* --mtc-freq N */
	uint64_t nom_freq;           /* --nom-freq N */
	uint64_t cpuid_15_eax;       /* --cpuid-0x15.eax N */
	uint64_t cpuid_15_ebx;       /* --cpuid-0x15.ebx N */
	struct tk_ipt_addr_filter addr_filter;   /* --filter:addrN_cfg, _a, _b */
	const char *cpu;             /* --cpu FAMILY/MODEL[/STEPPING] or LIST (no '/') */
	const char *cpu_model;       /* ... the first: the processor (its errata are read) */
	uint32_t cpus[2 * TK_CMD_MAX_LIST];   /* --cpu LIST: ranges (tk_thread_filter) */
	int ncpus;
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
	/* --pid LIST, --comm NAME and (Intel PT) --tid N: the threads to keep, as FILTER says
	   (cli_parse fills it) */
	uint32_t pids[TK_CMD_MAX_LIST];
	int npids;
	const char *comm;
	uint32_t tid32;
	struct tk_thread_filter filter;
	/* uftrace's call filters (tracekit/run.h, struct tk_run_filter) */
	const char *focus[TK_CMD_MAX_LIST];   /* -F/--function NAME|REGEX */
	int n_focus;
	const char *exclude[TK_CMD_MAX_LIST]; /* -N/--exclude NAME|REGEX */
	int n_exclude;
	uint64_t depth;              /* -D/--depth N; 0 = no limit */
	uint64_t min_ns;             /* --min-time DUR, in ns */
	uint64_t min_insns;          /* --min-insns N */
	int no_demangle;             /* --no-demangle: symbol names as the binary has them */
	int short_names;             /* --short-names: no template arguments, no parameters */
	int color;                   /* --color: colour the text report (auto resolved) */
	uint64_t max_events;         /* --max-events N; 0 = default cap */
	const char *shard;           /* profile --shard I/N: a partial result (cli/shard.c) */
	int mpi;                     /* profile --mpi: refused, saying where MPI runs are */

	/* stats / convert for pipelines and slices */
	uint64_t window;             /* --window N */
	uint64_t slowest;            /* --slowest N */
	uint64_t kanata_chunk;       /* TK_KANATA_CHUNK: Kanata's parallel chunk size (tests) */
	const char *cycles;          /* --cycles A:B */
	const char *slice;           /* --slice K:N */

	/* record */
	int record;                  /* --btrace, --xray, --qemu: the format the recorder writes */
	const char *xray_mode;       /* --xray-mode basic|fdr */
	const char *module[TK_CMD_MAX_LIST]; /* --module PATH */
	int n_module;
	int no_follow;               /* --no-follow: programs it starts run untraced */
	uint64_t ring;               /* --ring SIZE: a flight recorder, each thread's last SIZE bytes */
	uint64_t max_size;           /* --max-size SIZE: stream bytes written at most */
	const char *snapshot_signal; /* --snapshot-signal SIG: the recording ends there */
	const char *trigger;         /* --trigger FUNCTION[:N]: ... at the function's Nth call */
	int has_tid;                 /* --tid N given */
	uint64_t tid;                /* --tid N: one thread of a multi-thread trace */
	int no_retcomp;              /* convert --to ipt: the recorded stream as it is */

	/* positional arguments (files, or the command after `--` for record) */
	char **args;
	int nargs;
};

/* The command's side: its options, how it prints messages, opens outputs, shows progress. */
struct tk_cmd {
	struct tk_cmd_opts *o;
	const char *name;            /* the command: "dump", "convert", ... */
	/* messages: TK_LOG_ERROR and TK_LOG_INFO print as "tracekit: FILE: offset 0x..: msg",
	 * TK_LOG_WARN with "warning: " first */
	tk_msg_fn msg;
	void *ctx;
	/* an output: PATH, or NULL for -o FILE / standard output; both return an exit status
	 * after saying what went wrong */
	int (*out_open)(const struct tk_cmd *c, const char *path, struct tk_buf *out);
	int (*out_close)(struct tk_buf *out);
	/* an output file beside the others (never one of the inputs, nor of ALSO) */
	struct tk_outfile *(*outfile_open)(const struct tk_cmd *c, const char *path,
					   const char *const *also, size_t nalso, int *status);
	/* progress lines (NULL: none) */
	void (*progress)(void *ctx, const char *line);
	/* stats as a partial result (tracekit stats --shard, merge); NULL: the whole */
	struct tk_cmd_part *part;
};

/* One input's statistics as a partial result (tracekit/partial.h). A shard: the
 * operation decodes shard SHARD of NSHARDS of the input's chunks (tk_partial_shard_of
 * by size), sets NCHUNKS, FIRST, COUNT and DATA (malloc'd, LEN bytes) and writes nothing.
 * A merge (NLOAD > 0): the shards' bytes LOAD[] are added instead of decoding, and the
 * whole is written; the shards' messages about the data are theirs to repeat, but not the
 * closing summary of what was lost: a shard sets LOST to its decoding's and SUMMARY while
 * it prints its own, the merge prints one from the shards' LOST added up. */
struct tk_cmd_part {
	uint32_t shard, nshards;
	uint32_t nchunks, first, count;
	uint8_t *data;
	size_t len;
	struct tk_losses lost;
	int summary;
	const struct tk_cmd_part_bytes {
		const char *path;            /* the partial file (for messages) */
		const uint8_t *data;
		size_t len;
		uint64_t at;                 /* DATA's offset in it */
	} *load;
	size_t nload;
};

/* The losses a command's closing summary tells: OWN (its decoding's), or in a merge the
 * shards' sum. A shard's summary is marked (part->summary) until tk_cmd_summary_end, so
 * that the merge does not repeat it but prints its own. */
struct tk_losses tk_cmd_summary_begin(const struct tk_cmd *c, const struct tk_losses *own);
void tk_cmd_summary_end(const struct tk_cmd *c);

/* A number: decimal, or 0x hex (0, or -1 if not one). */
int tk_cmd_parse_u64(const char *s, uint64_t *v);
/* "A:B", either side may be empty (A 0, B UINT64_MAX). */
int tk_cmd_parse_range(const char *s, uint64_t *a, uint64_t *b);

/* What a command does with one input of one format; OUT: info's output (NULL for the
 * others, which open their own). Returns an exit status. */
typedef int (*tk_cmd_fn)(const struct tk_cmd *c, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi, struct tk_buf *out);
enum tk_cmd_kind {
	TK_CMD_INFO,      /* what the reader knows, after the line naming format and size */
	TK_CMD_DUMP,      /* every packet or record with its offset */
	TK_CMD_CHECK,     /* every violation of the format's rules */
	TK_CMD_DECODE,    /* the instruction listing */
	TK_CMD_STATS,     /* statistics */
	TK_CMD_CONVERT,   /* the format's conversions (TK_EXIT_AS_PROFILE: a profile output) */
	TK_CMD_RECORD,    /* run the program in c->o->args, writing a trace of this format */
	TK_CMD_PROFILE,   /* none: the profile runs the format's source (tracekit/run.h) */
	TK_CMD_REPORT,    /* the HTML page of a format without a source (with one: the CLI's) */
	TK_CMD__COUNT
};
/* The format's operation (NULL: the format has none). */
tk_cmd_fn tk_cmd_op(enum tk_format_id id, enum tk_cmd_kind kind);

/* The format is text read as a stream in bounded memory (a pipe of it is never held
 * whole: what needs its size reads it to the end). */
int tk_cmd_streamed(enum tk_format_id id);
/* The format's stats (DECODE_STAT: decode --stat's counts) can be a partial result
 * (struct tk_cmd_part; the decode operation makes and merges those with o->stat). */
int tk_cmd_stats_partial(enum tk_format_id id, int decode_stat);

/* An option a format declares (the command line's common options are the CLI's own):
 * `tracekit help CMD` lists it under the format, the option parser stores it. */
enum tk_cmd_opt_kind {
	TK_OPT_FLAG,      /* int field set to VALUE (0: 1) */
	TK_OPT_U64,       /* uint64_t field; GIVEN (if not 0): an int field set to 1 */
	TK_OPT_STRING,    /* const char * field */
	TK_OPT_LIST,      /* const char *[TK_CMD_MAX_LIST] field; GIVEN: its int count */
};
struct tk_cmd_option {
	const char *name;            /* the long option, without "--" */
	const char *arg;             /* its argument in help ("N", "DIR"); NULL: none */
	const char *help;            /* what it does, one line */
	unsigned commands;           /* TK_CMD_BIT(kind) of the commands that take it */
	enum tk_cmd_opt_kind kind;
	size_t field, given;         /* offsetof(struct tk_cmd_opts, ...) */
	int value;
};
#define TK_CMD_BIT(kind) (1u << (kind))
/* The I-th table of format options (ended by a NULL name) and its TITLE; NULL after the
 * last. */
const struct tk_cmd_option *tk_cmd_option_table(size_t i, const char **title);
/* Input of format ID takes the formats' option NAME in commands of KIND (a gem5 log:
 * Kanata's too). */
int tk_cmd_format_takes(enum tk_format_id id, enum tk_cmd_kind kind, const char *name);
/* What format ID's input has, for the shared options about it (the CLI refuses one the
 * input has nothing for): TK_CMD_HAS_CALLS code or calls (not a pipeline log: --elf, the
 * call filters, --pid and --comm refused as for code, profiles); TK_CMD_HAS_TIME_COLUMNS
 * times that decode and dump print with --time; TK_CMD_HAS_PROCESSES processes' threads
 * and CPUs' traces (--pid, --comm, --cpu LIST; Intel PT, whose session says where a raw
 * trace has none). */
enum { TK_CMD_HAS_CALLS = 1, TK_CMD_HAS_TIME_COLUMNS = 2, TK_CMD_HAS_PROCESSES = 4 };
unsigned tk_cmd_format_has(enum tk_format_id id);

struct tk_run_filter;
/* uftrace's call filters of the command line (-F, -N, -D, --min-time, --min-insns) into F
 * (the other fields kept). */
void tk_cmd_call_filter(const struct tk_cmd_opts *o, struct tk_run_filter *f);

#endif
