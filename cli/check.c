/* tracekit check: check a trace against its format's rules. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit check FILE...\n"
	"\n"
	"Report every violation of the format's rules with its line number or offset.\n"
	"Exit status 1 if any.\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	default:
		return cli_unsupported("check", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "check")))
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

const struct cli_command cli_cmd_check = {
	.name = "check",
	.summary = "check a trace against its format's rules",
	.usage = usage,
	.run = run,
};
