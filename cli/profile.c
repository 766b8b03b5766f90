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
	"  --to FMT        text, json, csv, folded, pprof, calltree, lines, blocks, source\n"
	"  --stacks        folded stacks (same as --to folded)\n"
	"  --lines         per source line (same as --to lines; needs --elf)\n"
	"  --source        annotated source listing (same as --to source; needs --elf)\n"
	"  --elf FILE[:BASE]  symbols and line tables of FILE loaded at BASE\n"
	"  -j N            threads (default: all cores)\n"
	"  -o FILE         write to FILE\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
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
