/* tracekit stats: statistics of a trace. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit stats [OPTIONS] FILE...\n"
	"\n"
	"Statistics of a trace.\n"
	"\n"
	"  --to FMT        text, json, csv\n"
	"  -j N            threads (default: all cores)\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	default:
		return cli_unsupported("stats", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "stats")))
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

const struct cli_command cli_cmd_stats = {
	.name = "stats",
	.summary = "statistics of a trace",
	.usage = usage,
	.run = run,
};
