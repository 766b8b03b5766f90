/* tracekit profile: calls per function, executions per line, call tree. Each format's handler is one case below; the work is in the library. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include <string.h>

#include "tracekit/xray.h"
#include "tracekit/out.h"

static const char usage[] =
	"usage: tracekit profile [OPTIONS] FILE...\n"
	"\n"
	"Profile a trace: per function, per call path and per source line.\n"
	"\n"
	"  --sort KEY      sort by KEY\n"
	"  --top N         only the first N rows\n"
	"  --threads       per thread instead of merged\n"
	"  --to FMT        text, json, csv, folded, pprof, calltree, lines, blocks, source\n"
	"  --stacks        folded stacks (same as --to folded)\n"
	"  --lines         per source line (same as --to lines; needs --elf)\n"
	"  --source        annotated source listing (same as --to source; needs --elf)\n"
	"  --elf FILE[:BASE]  symbols and line tables of FILE loaded at BASE\n"
	"  --instr-map F   (XRay) ELF binary or `llvm-xray extract` YAML: function names\n"
	"  --tid N         (btrace) only this thread\n"
	"  --module-path DIR  (btrace) a recorded module that moved: DIR/NAME with its\n"
	"                  build-id (so does an --elf FILE)\n"
	"  --tsc-hz N      (Intel PT, btrace) TSC ticks per second for times in us (0: ticks)\n"
	"  -j N            threads (default: all cores)\n"
	"  -o FILE         write to FILE\n"
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


/* xtrace: blocks, calls and returns from the instruction stream, per chunk in parallel. */
static int xtrace_profile(struct cli_opts *o, const char *file, struct tk_input *in,
			  const struct tk_format_info *fi)
{
	struct cli_xtrace x;
	struct tk_gap_stats gaps = { 0 };
	struct tk_sym *sym = NULL;
	struct tk_prof *p = NULL;
	struct tk_buf out;
	int rc, err = 0, status;
	enum tk_out_kind kind = o->to ? tk_out_kind_by_name(o->to) : TK_OUT_TEXT;
	if (!kind) {
		cli_error(NULL, UINT64_MAX, "profile: unknown --to '%s'", o->to);
		return EXIT_USAGE;
	}
	if ((rc = cli_xtrace_open_insn(o, file, in, fi, &x)))
		return rc;
	if ((rc = cli_xtrace_symbols(o, &sym))) {
		cli_xtrace_close(&x);
		return rc;
	}
	/* --elf's function entries: tail calls and calls from untraced code, as for PT */
	if (!(p = cli_prof_new(o, sym, NULL, &err)) || (rc = cli_out_open(o, &out))) {
		if (!p)
			cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		tk_sym_free(sym);
		cli_xtrace_close(&x);
		return p ? rc : EXIT_INPUT;
	}
	rc = cli_xtrace_profile(o, &x, p, &gaps);
	if (rc >= 0)
		rc = tk_prof_finish(p);
	if (rc >= 0) {
		struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym, .sort = o->sort, .top = o->top,
					  .threads = o->threads,
					  .track_label = x.name.hint == 13 ? "core" : "thread" };
		if (o->lines)
			kind = TK_OUT_LINES;
		if (o->source)
			kind = TK_OUT_SOURCE;
		rc = tk_out_profile(&out, p, kind, &oo);
	}
	status = cli_out_close(&out);
	if (rc < 0 && status != EXIT_OUTPUT) {
		cli_error(file, UINT64_MAX, "profile: %s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	int g = cli_xtrace_report(&x, file, &gaps);
	tk_prof_free(p);
	tk_sym_free(sym);
	cli_xtrace_close(&x);
	return status > g ? status : g;
}




/* Per-chunk profiles (built on the decode workers) merged in order into one. */
struct xray_prof_ctx {
	struct tk_prof_opts po;
	struct tk_prof *total;
};

static int xray_prof_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	struct xray_prof_ctx *c = ctx;
	int err;
	(void)chunk;
	struct tk_prof *p = tk_prof_new(&c->po, &err);
	if (!p)
		return err;
	*sink = tk_prof_sink(p);
	*consumer = p;
	return 0;
}

static int xray_prof_merge(void *ctx, size_t chunk, void *consumer)
{
	struct xray_prof_ctx *c = ctx;
	(void)chunk;
	if (!c->total) {
		c->total = consumer;
		return 0;
	}
	/* the chunk's durations move into the total, not copied */
	int rc = tk_prof_merge_take(c->total, consumer);
	tk_prof_free(consumer);
	return rc;
}

/* XRay: decode (in parallel) into the shared profile, report with the shared writers;
 * --to account / account-csv gives llvm-xray account's table. */
static int xray_profile(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_xray_map *map;
	struct tk_buf out;
	int status = 0, rc, err;
	const char *to = o->stacks ? "folded" : o->to ? o->to : "text";
	int account = !strcmp(to, "account") || !strcmp(to, "account-csv");
	enum tk_out_kind kind = account ? TK_OUT_TEXT : tk_out_kind_by_name(to);
	int key = account ? tk_out_account_sort_key(o->sort) : 0;

	if (!kind || key < 0) {
		if (!kind)
			cli_error(NULL, UINT64_MAX, "profile: unknown output '%s' (text, csv, json, folded, pprof, calltree, account, account-csv)", to);
		else
			cli_error(NULL, UINT64_MAX, "--sort: unknown key '%s' (funcid, count, min, med, 90p, 99p, max, sum)", o->sort);
		return EXIT_USAGE;
	}
	struct tk_xray *x = cli_xray_open(o, file, in, &map, &status);
	if (!x)
		return status;
	struct xray_prof_ctx pc = { .po = { .sz = sizeof pc.po,
					    .clock = { tk_xray_header(x)->cycle_frequency },
					    .nthreads = o->jobs ? o->jobs : tk_cpu_count() } };
	struct tk_prof *p = tk_prof_new(&pc.po, &err);
	struct tk_sym_opts so = { .sz = sizeof so, .no_dwarf = 1 };
	struct tk_sym *sym = p ? tk_sym_new(&so, &err) : NULL;
	if (!sym || (rc = cli_out_open(o, &out))) {
		if (p && sym)
			status = rc;
		else
			cli_error(file, UINT64_MAX, "%s", tk_strerror(err)), status = EXIT_INPUT;
		tk_sym_free(sym);
		tk_prof_free(p);
		tk_xray_free(x);
		tk_xray_map_free(map);
		return status;
	}
	static const struct tk_xray_chunk_ops ops = { xray_prof_begin, xray_prof_merge };
	/* The first chunk's profile becomes the total: merging it into an empty one would
	 * copy it (twice the memory at -j 1). Only pprof's sample order follows the order in
	 * which call paths were created, which a merge makes the same for any -j: there P
	 * takes every chunk. Otherwise P stays for a log without buffers. */
	if (kind == TK_OUT_PPROF && !account)
		pc.total = p;
	rc = tk_xray_decode_chunks(x, &ops, &pc);
	if (pc.total && pc.total != p) {
		tk_prof_free(p);
		p = pc.total;
	}
	if (rc >= 0)
		rc = tk_prof_finish(p);
	if (rc >= 0 && map)
		rc = tk_xray_map_to_sym(map, sym);
	if (rc >= 0 && account) {
		struct tk_out_account_opts ao = { .sz = sizeof ao, .sort_key = key, .top = o->top,
						   .csv = !strcmp(to, "account-csv"),
						   .per_thread = o->threads };
		rc = cli_xray_account(&out, p, x, map, &ao);
	} else if (rc >= 0) {
		struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym, .sort = o->sort, .top = o->top,
					  .threads = o->threads };
		rc = tk_out_profile(&out, p, kind, &oo);
	}
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	int wrc = cli_out_close(&out);
	if (wrc > status)
		status = wrc;
	rc = cli_xray_finish(file, x);
	tk_sym_free(sym);
	tk_prof_free(p);
	tk_xray_free(x);
	tk_xray_map_free(map);
	return rc > status ? rc : status;
}

/* Branch trace: every thread's PT stream through the flow decoder into one profile,
 * symbolised with the recorded modules. */
static int profile_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct cli_btrace cb;
	int status = cli_btrace_open(o, file, in, &cb);
	if (status)
		return status;
	status = cli_btrace_profile(o, file, &cb);
	cli_btrace_close(&cb);
	return status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_profile(o, file, in, fi);
	case TK_FMT_IPT:
	case TK_FMT_PERF:
		return cli_ipt_profile_out(o, file, in, fi);
	case TK_FMT_TKBT:
		return profile_btrace(o, file, in);
	case TK_FMT_XRAY:
		return xray_profile(o, file, in);
	default:
		return cli_unsupported("profile", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	/* a profile of a time window is not built: refused rather than ignored */
	if (o->time_window) {
		cli_error(NULL, UINT64_MAX, "profile: --time A:B is not supported (it selects the "
			  "calls of a timeline: convert --to perfetto|chrome --time A:B)");
		return EXIT_USAGE;
	}
	return cli_run_files(o, "profile", run_file);
}

const struct cli_command cli_cmd_profile = {
	.name = "profile",
	.summary = "calls per function, executions per line, call tree",
	.usage = usage,
	.run = run,
};
