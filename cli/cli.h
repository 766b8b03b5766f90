/* Shared pieces of the tracekit command line: options, errors, exit statuses. The CLI uses
 * only the public headers in include/tracekit/ and the internal tier beside them
 * (include/tracekit/internal/). One file per command in cli/. */
#ifndef TRACEKIT_CLI_H
#define TRACEKIT_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "tracekit/internal/commands.h"
#include "tracekit/internal/util.h"
#include "tracekit/tracekit.h"

/* Exit statuses (documented in README.md). */
enum {
	EXIT_CLEAN = TK_EXIT_CLEAN,       /* finished, nothing lost */
	EXIT_SKIPPED = TK_EXIT_SKIPPED,   /* finished, but some input was skipped or lost */
	EXIT_USAGE = TK_EXIT_USAGE,       /* bad command line */
	EXIT_INPUT = TK_EXIT_INPUT,       /* input unreadable or of an unknown format */
	EXIT_OUTPUT = TK_EXIT_OUTPUT,     /* an output could not be written */
};


struct cli_command {
	const char *name;
	const char *summary;         /* one line for `tracekit help` */
	const char *usage;           /* help text for `tracekit help CMD`, before the formats' options */
	enum tk_cmd_kind kind;       /* which of the formats' options it takes */
	int (*run)(struct tk_cmd_opts *o);
	const char *to;              /* the --to values it takes, space-separated (completion) */
	/* The shared options it reads beyond those every command takes (-j, -o, -q, --format,
	 * --progress, --no-progress, --color, --help): long names, space-separated; "time"
	 * is --time alone (times on each line), "time-window" is --time A:B. The parser
	 * refuses the others, which it would ignore. */
	const char *takes;
};

/* `tracekit help CMD`: its usage, then the options the formats declare for it. */
void cli_help(const struct cli_command *cmd);
/* The options CMD takes, space-separated: those its usage names and those the formats
 * declare for it (completion). Returns the length written (truncated to N - 1). */
size_t cli_command_options(const struct cli_command *cmd, char *buf, size_t n);
/* `tracekit --completion bash|zsh`: the completion script, from the tables above. */
int cli_completion(const char *shell);
/* Parse argv (after the command name) into O. Returns 0 or EXIT_USAGE (message printed). */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct tk_cmd_opts *o);

/* "tracekit: FILE: offset 0x...: message" on stderr. FILE and/or offset may be omitted
 * (NULL / UINT64_MAX). */
void cli_error(const char *file, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cli_warn(const char *file, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Open FILE and detect (or take --format) its format. On failure prints the documented
 * error and returns EXIT_INPUT. */
int cli_open(const struct tk_cmd_opts *o, const char *file, struct tk_input **in,
	     struct tk_format_info *fi);

/* Output: stdout or -o FILE, buffered. -o naming an input is refused (EXIT_USAGE); a file
 * is written under a temporary name and takes its place when the command ends
 * (cli_outputs_end), unless writing failed or the command's status is worse than
 * EXIT_SKIPPED. Both print their errors (naming the output) and return an exit status. */
int cli_out_open(const struct tk_cmd_opts *o, struct tk_buf *out);
int cli_out_close(struct tk_buf *out);
/* The command ends with STATUS: rename the outputs it wrote into place (status 0 or 1) or
 * remove them. Returns STATUS, or EXIT_OUTPUT if a rename failed (said). */
int cli_outputs_end(int status);
/* An output file of cli_out_open's kind (tk_outfile_open) for PATH; NULL after printing
 * why, with *STATUS set. */
struct tk_outfile *cli_outfile_open(const struct tk_cmd_opts *o, const char *path, int *status);


/* The command does not handle this format (yet): message and EXIT_INPUT. */
int cli_unsupported(const char *cmd, const char *file, const struct tk_format_info *fi);
/* Open each file of the command line, detect its format and call RUN_FILE; the worst exit
 * status wins, and one bad file does not stop the others. */
typedef int (*cli_run_file_fn)(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
			       const struct tk_format_info *fi);
int cli_run_files(struct tk_cmd_opts *o, const char *cmd, cli_run_file_fn run_file);
/* Usage error when a command got no file. */
int cli_need_files(const struct tk_cmd_opts *o, const char *cmd);

/* The command's side of the per-format operations (tracekit/internal/commands.h): the
 * options, its message printer, outputs and progress. */
/* Progress lines on stderr when --progress, or by default when it is a terminal and not
 * -q; NULL: none. */
tk_progress_fn cli_progress(const struct tk_cmd_opts *o);
const struct tk_cmd *cli_cmd(struct tk_cmd_opts *o, const char *name);
/* cli_run_files with the formats' operation KIND (a format without one: cli_unsupported;
 * a conversion to a profile output: cli_profile_file). */
/* --pid, --comm or --cpu LIST given for an input without processes or CPUs: a message,
 * EXIT_USAGE; else 0. */
int cli_filter_refused(const struct tk_cmd_opts *o, const char *file,
		       const struct tk_format_info *fi);
/* A format's option given on the command line that FI's format does not take (say, Intel
 * PT's --raw for an XRay log): a message, EXIT_USAGE; else 0. */
int cli_format_opts_refused(const char *file, const struct tk_format_info *fi);
/* From now on such an option is only noted (diff: its two inputs share the options), and
 * cli_format_opts_untaken refuses, with a message and EXIT_USAGE, one that no input's
 * format took (else 0). */
void cli_format_opts_defer(void);
int cli_format_opts_untaken(const char *cmd);
int cli_run_op(struct tk_cmd_opts *o, const char *cmd, enum tk_cmd_kind kind);
/* Library messages naming a file and offset, printed as cli_error / cli_warn do. */
void cli_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	     const char *msg);
/* STATUS raised to EXIT_SKIPPED when IN's compressed data was cut short. */
int cli_input_status(const struct tk_input *in, int status);

/* Profiles (cli/profile.c; convert's profile outputs too): the source options of the
 * command line for FI's format, one file's profile. */
struct tk_source_opts cli_source_opts(const struct tk_cmd_opts *o, const struct tk_format_info *fi);
/* 0, or EXIT_INPUT after a message: FI's input has nothing to profile (no source, or a
 * pipeline log's, which has no calls). */
int cli_profile_unsupported(const char *file, const struct tk_format_info *fi);
/* EXIT_USAGE after saying so where --sort or --top is given for an output without rows
 * to order or cut (folded, pprof, callgrind), else 0. */
int cli_table_opts_refused(const struct tk_cmd_opts *o);
/* An output of O that source S cannot fill (per line or block of a trace of function
 * entries and exits): a message naming FILE, EXIT_USAGE; else 0. */
int cli_profile_output_refused(const struct tk_cmd_opts *o, const char *file,
			       const struct tk_format_info *fi, struct tk_source *s);
int cli_profile_file(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi);

const struct cli_command *cli_find_command(const char *name);
extern const struct cli_command *const cli_commands[];

/* The commands (one file each). */
extern const struct cli_command cli_cmd_info, cli_cmd_dump, cli_cmd_decode, cli_cmd_profile,
	cli_cmd_stats, cli_cmd_check, cli_cmd_convert, cli_cmd_report, cli_cmd_record, cli_cmd_merge,
	cli_cmd_diff;

/* XRay's function names (from SYM) and thread ids (from S) for the account and latency
 * tables: CTX of cli_xray_func_name and cli_xray_thread_id. */
struct cli_xray_names {
	struct tk_source *s;
	struct tk_sym *sym;
	char name[256];
};
const char *cli_xray_func_name(void *ctx, int32_t id);
uint32_t cli_xray_thread_id(void *ctx, uint32_t track);

/* The command line's filters (--time A:B, ...) for tk_run_prof_new_filtered; 0 or
 * EXIT_USAGE (said). */
int cli_run_filter(const struct tk_cmd_opts *o, struct tk_run_filter *f);
/* After a run of F's finished profile P: 1 after saying so when F's --time window had
 * nothing to select by (a trace without times), else 0. */
int cli_time_refused(const char *file, const struct tk_format_info *fi,
		     const struct tk_run_filter *f, const struct tk_prof *p);
int cli_filter_error(const char *file, const struct tk_format_info *fi,
		     const struct tk_run_filter *f, int err);
/* P (finished) in the output O asks for (--to, --sort, --top, ...); an exit status. */
int cli_profile_write(const struct tk_cmd_opts *o, const struct tk_prof *p, struct tk_sym *sym,
		      struct tk_source *s);
/* Set (diff): cli_profile_write hands each profile to it instead (an exit status). */
extern int (*cli_profile_take)(const struct tk_prof *p, const struct tk_out_opts *oo);
/* --to TO is llvm-xray account's table (account, account-csv); cli_profile_account
 * writes P (finished) as it. */
int cli_is_account(const char *to);
int cli_profile_account(const struct tk_cmd_opts *o, const char *file, const struct tk_prof *p,
			struct tk_sym *sym, struct tk_source *s);
/* profile|stats --shard I/N -o PART FILE... (cli/shard.c): the partial result of one
 * shard; cli_shard_build makes its bytes (*DATA malloc'd) for COMMAND (enum
 * tk_partial_command) and returns the exit status so far; SHOW_SUMMARY: print the
 * shard's closing summary of what it lost (the merge prints the whole input's). */
int cli_shard_write(struct tk_cmd_opts *o, int command);
/* File PATH's bytes into *DATA (malloc'd); an exit status after saying why not. */
int cli_read_whole(const char *path, uint8_t **data, size_t *len);
/* --mpi given to tracekit NAME: where MPI runs are (EXIT_USAGE). */
int cli_mpi_refused(const char *name);
/* nanoseconds spent saving this process's chunk profiles and loading partials' (the
 * serialising a job adds: tracekit-mpi's TK_MPI_TIMES) */
extern uint64_t cli_save_ns, cli_load_ns;
/* The options a partial records (those that decide the result and the plan: see
 * cli/shard.c's shard_options), from R, parsed from the record, into O. */
void cli_opts_take_recorded(struct tk_cmd_opts *o, const struct tk_cmd_opts *r);
int cli_shard_build(struct tk_cmd_opts *o, int command, uint32_t shard, uint32_t nshards,
		    int show_summary, uint8_t **data, size_t *len);
/* tracekit merge (cli/merge.c) of N partials given as bytes (DATA[i] malloc'd, taken;
 * NAMES[i] names them in messages): the output O asks for, and the exit status (the
 * shards' too). REPEAT: print the messages the shards recorded about damaged data (not
 * when the shards' stderr reaches the user already, as tracekit-mpi's does). */
int cli_merge_partials(struct tk_cmd_opts *o, const char *const *names, uint8_t **data,
		       const size_t *len, int n, int repeat);

#endif
