/* tracekit profile: calls per function, executions per line, call tree. A front-end: the
 * options make a source (tracekit/source.h), the runner (tracekit/run.h) builds the
 * profile, the shared writers print it. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/partial.h"
#include "tracekit/out.h"
#include "tracekit/run.h"
#include "tracekit/source.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit profile [OPTIONS] FILE...\n"
	"\n"
	"Profile a trace: per function, per call path and per source line.\n"
	"\n"
	"  --sort KEY      sort by a column of the table (its header's name)\n"
	"  --top N         only the first N rows\n"
	"  --threads       per thread instead of merged\n"
	"  --time A:B      only what ran in trace ticks [A, B) (calls clipped to the window)\n"
	"  -F, --function NAME|REGEX  only the stacks through NAME (what runs under it)\n"
	"  -N, --exclude NAME|REGEX   without NAME and what it calls\n"
	"  -D, --depth N   calls deeper than N folded into their caller at depth N\n"
	"  -t, --min-time DUR  without calls shorter than DUR (ns, us, ms, s)\n"
	"  --min-insns N   without calls of fewer than N instructions\n"
	"  --to FMT        text, json, csv, folded, pprof, callgrind, calltree, lines, blocks,\n"
	"                  source\n"
	"  --stacks        folded stacks (same as --to folded)\n"
	"  --lines         per source line (same as --to lines; needs --elf)\n"
	"  --source        annotated source listing (same as --to source; needs --elf)\n"
	"  --elf FILE[:BASE]  symbols and line tables of FILE loaded at BASE\n"
	"  -j N            threads (default: all cores)\n"
	"  --no-demangle   names as the binary has them (default: C++ and Rust demangled)\n"
	"  --short-names   names without template arguments and parameters\n"
	"  --color[=WHEN]  colour the hot rows' %: auto (default), always, never\n"
	"  -o FILE         write to FILE\n"
	"  --pid LIST, --comm NAME\n"
	"                  only those processes of a perf.data session (--tid N: a thread)\n"
	"  --shard I/N     the partial result of shard I of N (-o FILE; see tracekit merge)\n"
	"\n"
	"Intel PT: --elf/--raw give the code (ptxed's spelling); --elf also symbols and lines.\n"
	"A perf.data file brings its own code (the files the session mapped) and profiles\n"
	"each CPU's or thread's trace on a track of its own.\n"
	"XRay: the shared profile (--to text, csv, json, folded, pprof, calltree), or\n"
	"llvm-xray account's table with --to account / account-csv (count, min, median, 90p,\n"
	"99p, max, sum in seconds; --sort funcid|count|min|med|90p|99p|max|sum).\n"
	"\n"
	"xtrace: --elf PROGRAM[:BIAS] names functions and lines; --lines, --source; -j N\n"
	"splits at snapshot positions (same result as -j 1).\n";


/* CTX (may be NULL): an int counting the errors said */
static void log_to_stderr(void *ctx, enum tk_log_level level, const char *msg)
{
	if (ctx && level == TK_LOG_ERROR)
		++*(int *)ctx;
	cli_error(NULL, UINT64_MAX, "%s%s", level == TK_LOG_WARN ? "warning: " : "", msg);
}

struct tk_source_opts cli_source_opts(const struct tk_cmd_opts *o, const struct tk_format_info *fi)
{
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");

	return (struct tk_source_opts){
		.sz = sizeof(struct tk_source_opts), .format = fi->id, .nthreads = o->jobs,
		.elf = o->elf, .nelf = (size_t)o->n_elf, .raw = o->raw, .nraw = (size_t)o->n_raw,
		.instr_map = o->instr_map, .module_path = o->module_path,
		.nmodule_path = (size_t)o->n_module_path, .only_tid = o->has_tid, .tid = (uint32_t)o->tid,
		.has_tsc_hz = o->has_tsc_hz, .tsc_hz = o->tsc_hz,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0, .quiet = o->quiet,
		.msg = cli_msg, .no_demangle = o->no_demangle, .short_names = o->short_names,
		.progress = cli_progress(o),
		.plan_workers = o->plan_workers, .ipt_cpu = o->cpu_model,
		.ipt_addr_filter = &o->addr_filter,
		/* Intel PT: the threads asked for; others refuse --pid and --comm (branch traces
		 * keep their own --tid) */
		.filter = (tk_cmd_format_has(fi->id) & TK_CMD_HAS_PROCESSES) || o->npids || o->comm ||
			  o->ncpus ? &o->filter : NULL,
	};
}

static enum tk_out_kind profile_kind(const struct tk_cmd_opts *o)
{
	if (o->to)
		return tk_out_kind_by_name(o->to);
	if (o->source)
		return TK_OUT_SOURCE;
	if (o->lines)
		return TK_OUT_LINES;
	if (o->stacks)
		return TK_OUT_FOLDED;
	return TK_OUT_TEXT;
}

/* A track's id as users know it (XRay: the thread id), from the source. */
static uint32_t source_track_id(void *ctx, uint32_t track)
{
	return tk_source_track_id(ctx, track);
}

/* A thread's process (perf.data sessions), from the source. */
static int source_track_process(void *ctx, uint32_t track, uint32_t *pid, char *comm, size_t n,
				struct tk_sym **sym)
{
	return tk_source_track_process(ctx, track, pid, comm, n, sym);
}

/* The filters of the command line (--time A:B, ...), parsed once for every profile output.
 * Returns 0 or EXIT_USAGE (said). */
int cli_run_filter(const struct tk_cmd_opts *o, struct tk_run_filter *f)
{
	*f = (struct tk_run_filter){ .sz = sizeof *f };
	if (o->time_window) {
		if (tk_cmd_parse_range(o->time_window, &f->time_begin, &f->time_end) < 0 ||
		    f->time_end <= f->time_begin) {
			cli_error(NULL, UINT64_MAX, "--time: expected A:B with A < B (trace ticks), "
				  "got '%s'", o->time_window);
			return EXIT_USAGE;
		}
		f->time = 1;
		if (f->time_end == UINT64_MAX)
			f->time_end = 0;
	}
	tk_cmd_call_filter(o, f);
	return 0;
}

int cli_time_refused(const char *file, const struct tk_format_info *fi,
		     const struct tk_run_filter *f, const struct tk_prof *p)
{
	struct tk_prof_summary sum;
	if (!f->time || tk_prof_summary(p, &sum) < 0 || !sum.events ||
	    sum.time_first != TK_TIME_NONE)
		return 0;
	/* nothing to select by: refused rather than the whole trace's profile */
	cli_error(file, UINT64_MAX, "--time: this %s has no timestamps to select by",
		  tk_format_description(fi->id));
	return 1;
}

/* Why tk_run_prof_new_filtered(F) failed with ERR, said; the exit status. */
int cli_filter_error(const char *file, const struct tk_format_info *fi,
		     const struct tk_run_filter *f, int err)
{
	if (err == -TK_E_UNSUPPORTED && f->min_ns) {
		cli_error(file, UINT64_MAX, "--min-time: this %s has no clock (use --min-insns)",
			  tk_format_description(fi->id));
		return EXIT_USAGE;
	}
	if (err == -TK_E_INVAL && (f->nfocus || f->nexclude)) {
		cli_error(NULL, UINT64_MAX, "-F/-N: a pattern is not an extended regular expression");
		return EXIT_USAGE;
	}
	cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
	return EXIT_INPUT;
}

int (*cli_profile_take)(const struct tk_prof *p, const struct tk_out_opts *oo);

/* The profile P of source S (its tracks' label and ids) as the options ask. */
int cli_profile_write(const struct tk_cmd_opts *o, const struct tk_prof *p, struct tk_sym *sym,
		      struct tk_source *s)
{
	enum tk_out_kind kind = profile_kind(o);
	struct tk_buf out;
	int rc;
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym, .sort = o->sort, .top = o->top,
				  .threads = o->threads, .track_label = tk_source_info(s)->track_label,
				  .track_id = source_track_id, .track_ctx = s,
				  .track_process = source_track_process, .color = o->color };
	if (cli_profile_take)
		return cli_profile_take(p, &oo);
	if (!kind) {
		cli_error(NULL, UINT64_MAX, "--to: unknown output '%s' (text, json, csv, folded, pprof, "
			  "callgrind, source, calltree, lines, blocks)", o->to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	int said = 0;   /* the writer's reasons (--sort cycles of a trace without them) */
	tk_set_log(log_to_stderr, &said);
	rc = tk_out_profile(&out, p, kind, &oo);
	tk_set_log(log_to_stderr, NULL);
	int crc = cli_out_close(&out);
	if (rc < 0 && crc != EXIT_OUTPUT) {   /* a failed write: cli_out_close said so */
		if (!said)
			cli_error(NULL, UINT64_MAX, "cannot write the profile: %s", tk_strerror(rc));
		return rc == -TK_E_INVAL ? EXIT_USAGE : EXIT_INPUT;
	}
	return crc;
}

/* --to account / account-csv: llvm-xray account's table of an XRay log's profile. */
int cli_is_account(const char *to)
{
	return to && (!strcmp(to, "account") || !strcmp(to, "account-csv"));
}

/* XRay's function names and thread ids from the source, for the account and latency
 * tables (profile --to account, report). */
const char *cli_xray_func_name(void *ctx, int32_t id)
{
	struct cli_xray_names *c = ctx;

	return tk_sym_func_name(c->sym, (uint64_t)(uint32_t)id, c->name, sizeof c->name);
}

uint32_t cli_xray_thread_id(void *ctx, uint32_t track)
{
	return tk_source_track_id(((struct cli_xray_names *)ctx)->s, track);
}

/* P (finished) as llvm-xray account's table (--to account, account-csv); an exit status. */
int cli_profile_account(const struct tk_cmd_opts *o, const char *file, const struct tk_prof *p,
			struct tk_sym *sym, struct tk_source *s)
{
	struct cli_xray_names ac = { s, sym, "" };
	struct tk_out_account_opts ao = { .sz = sizeof ao, .sort_key = tk_out_account_sort_key(o->sort),
					  .top = o->top, .csv = !strcmp(o->to, "account-csv"),
					  .per_thread = o->threads,
					  .ticks_per_sec = tk_source_info(s)->clock.ticks_per_second,
					  .func_name = cli_xray_func_name, .thread_id = cli_xray_thread_id,
					  .ctx = &ac };
	struct tk_buf out;
	int rc;

	if ((rc = cli_out_open(o, &out)) != 0)
		return rc;
	if ((rc = tk_out_account(&out, p, &ao)) < 0)
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
	int crc = cli_out_close(&out);
	return rc < 0 ? EXIT_INPUT : crc;
}

int cli_profile_output_refused(const struct tk_cmd_opts *o, const char *file,
			       const struct tk_format_info *fi, struct tk_source *s)
{
	enum tk_out_kind kind = cli_is_account(o->to) ? TK_OUT_TEXT : profile_kind(o);

	if (!tk_source_info(s)->functions_only ||
	    (kind != TK_OUT_LINES && kind != TK_OUT_BLOCKS && kind != TK_OUT_SOURCE))
		return 0;
	/* an empty table would read as "nothing ran" */
	cli_error(file, UINT64_MAX, "%s input records function entries and exits only: "
		  "per-line, per-block and source outputs need an instruction trace",
		  tk_format_description(fi->id));
	return EXIT_USAGE;
}

int cli_profile_unsupported(const char *file, const struct tk_format_info *fi)
{
	/* a Kanata log has a source (report's pipeline section), but no calls to profile: its
	 * table was one "[unknown]" row of ticks */
	if (!(tk_cmd_format_has(fi->id) & TK_CMD_HAS_CALLS)) {
		cli_error(file, UINT64_MAX, "%s input has no code or calls to profile (tracekit "
			  "stats and report read it)", tk_format_description(fi->id));
		return EXIT_INPUT;
	}
	return tk_source_supported(fi->id) ? 0 : cli_unsupported("profile", file, fi);
}

int cli_table_opts_refused(const struct tk_cmd_opts *o)
{
	enum tk_out_kind kind = cli_is_account(o->to) ? TK_OUT_TEXT : profile_kind(o);
	/* stacks and samples have no row order; pprof and callgrind keep every function */
	int no_order = kind == TK_OUT_FOLDED || kind == TK_OUT_PPROF || kind == TK_OUT_CALLGRIND;
	int no_top = kind == TK_OUT_PPROF || kind == TK_OUT_CALLGRIND;

	if ((o->sort && no_order) || (o->top && no_top)) {
		cli_error(NULL, UINT64_MAX, "%s: --to %s has no rows to %s (text, csv, json, calltree, "
			  "lines, blocks, source and account have)", o->sort && no_order ? "--sort" : "--top",
			  o->to ? o->to : "folded", o->sort && no_order ? "order" : "cut");
		return EXIT_USAGE;
	}
	return 0;
}

/* Options -> source -> runner -> writer, for every format with a source. */
int cli_profile_file(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi)
{
	int account = cli_is_account(o->to), key = account ? tk_out_account_sort_key(o->sort) : 0;
	enum tk_out_kind kind = account ? TK_OUT_TEXT : profile_kind(o);
	struct tk_source_opts so = cli_source_opts(o, fi);
	struct tk_source *s;
	struct tk_prof *p;
	struct tk_sym *sym;
	struct tk_run_filter filter;
	int rc, err = 0, status;

	if ((rc = cli_run_filter(o, &filter)))
		return rc;
	if ((rc = cli_profile_unsupported(file, fi)))
		return rc;
	if (!kind || key < 0) {
		if (!kind)
			cli_error(NULL, UINT64_MAX, "--to: unknown output '%s' (text, json, csv, folded, "
				  "pprof, callgrind, source, calltree, lines, blocks, account, account-csv)", o->to);
		else
			cli_error(NULL, UINT64_MAX, "--sort: unknown key '%s' (funcid, count, min, med, "
				  "90p, 99p, max, sum)", o->sort);
		return EXIT_USAGE;
	}
	const char *keys;
	if ((rc = cli_table_opts_refused(o)))
		return rc;
	if (!account && tk_out_sort_check(kind, o->sort, &keys) < 0) {
		cli_error(NULL, UINT64_MAX, "--sort: unknown key '%s' (%s)", o->sort, keys);
		return EXIT_USAGE;
	}
	if ((rc = tk_source_open_input(&s, file, in, &so)) < 0)
		/* threads asked of an input without them: the command line's fault */
		return rc == -TK_E_UNSUPPORTED && tk_thread_filter_on(so.filter) ? EXIT_USAGE
										 : EXIT_INPUT;
	if ((rc = cli_profile_output_refused(o, file, fi, s))) {
		tk_source_free(s);
		return rc;
	}
	if (!(sym = tk_source_symbols(s, &err)) || !(p = tk_run_prof_new_filtered(s, &filter, &err))) {
		status = sym ? cli_filter_error(file, fi, &filter, err) : EXIT_INPUT;
		tk_source_free(s);
		return status;
	}
	if ((rc = tk_run_profile(s, p)) >= 0)
		rc = tk_prof_finish(p);
	status = tk_source_report(s) ? EXIT_SKIPPED : EXIT_CLEAN;
	if (rc >= 0 && cli_time_refused(file, fi, &filter, p)) {
		status = EXIT_USAGE;
	} else if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		status = EXIT_INPUT;
	} else if (account) {
		rc = cli_profile_account(o, file, p, sym, s);
		status = rc > status ? rc : status;
	} else {
		rc = cli_profile_write(o, p, sym, s);
		status = rc > status ? rc : status;
	}
	tk_prof_free(p);
	tk_source_free(s);
	return status;
}

static int run(struct tk_cmd_opts *o)
{
	if (o->mpi)
		return cli_mpi_refused("profile");
	struct tk_run_filter f;
	if (o->shard && (o->time_window || (!cli_run_filter(o, &f) && tk_run_filter_calls(&f)))) {
		/* a partial keeps no window or filter state for its open calls */
		cli_error(NULL, UINT64_MAX, "--shard: not with --time A:B or call filters (profile "
			  "them in one run)");
		return EXIT_USAGE;
	}
	if (o->shard)
		return cli_shard_write(o, TK_PARTIAL_PROFILE);
	return cli_run_files(o, "profile", cli_profile_file);
}

const struct cli_command cli_cmd_profile = {
	.name = "profile",
	.summary = "calls per function, executions per line, call tree",
	.usage = usage,
	.kind = TK_CMD_PROFILE,
	.run = run,
	.to = "text json csv folded pprof callgrind calltree lines blocks source account account-csv",
	.takes = "to elf time-window sort top threads stacks lines source no-demangle "
		 "short-names shard mpi pid comm function exclude depth min-time "
		 "min-insns",
};
