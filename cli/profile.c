/* tracekit profile: calls per function, executions per line, call tree. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit profile [OPTIONS] FILE...\n"
	"\n"
	"Profile a trace: per function, per call path and per source line.\n"
	"\n"
	"  --sort KEY      sort by KEY\n"
	"  --top N         only the first N rows\n"
	"  --threads       per thread instead of merged\n"
	"  --to FMT        text, json, csv, folded, pprof\n"
	"  -j N            threads (default: all cores)\n"
	"  -o FILE         write to FILE\n"
	"  --elf FILE[:BIAS]  symbols and source lines of the traced program (xtrace)\n"
	"  --lines         per source line     --source  annotated source\n";

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
	if ((rc = cli_xtrace_open(o, file, in, fi, &x)))
		return rc;
	if (!x.insn) {
		cli_error(file, UINT64_MAX, "no instruction file beside this snapshot file");
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
	if ((rc = cli_xtrace_symbols(o, &sym))) {
		cli_xtrace_close(&x);
		return rc;
	}
	struct tk_prof_opts po = { .sz = sizeof po };
	if (!(p = tk_prof_new(&po, &err)) || (rc = cli_out_open(o, &out))) {
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
					  .threads = o->threads };
		if (o->lines)
			kind = TK_OUT_LINES;
		if (o->source)
			kind = TK_OUT_SOURCE;
		rc = tk_out_profile(&out, p, kind, &oo);
	}
	status = cli_out_close(&out);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "profile: %s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	int g = cli_xtrace_report(&x, file, &gaps);
	tk_prof_free(p);
	tk_sym_free(sym);
	cli_xtrace_close(&x);
	return status > g ? status : g;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_profile(o, file, in, fi);
	default:
		return cli_unsupported("profile", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "profile")))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = run_file(o, o->args[i], in, &fi);
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	return status;
}

const struct cli_command cli_cmd_profile = {
	.name = "profile",
	.summary = "calls per function, executions per line, call tree",
	.usage = usage,
	.run = run,
};
