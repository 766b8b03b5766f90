/* tracekit convert: convert a trace to another format. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
	"  -o FILE         write to FILE\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	default:
		return cli_unsupported("convert", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "convert")))
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

const struct cli_command cli_cmd_convert = {
	.name = "convert",
	.summary = "convert a trace to another format",
	.usage = usage,
	.run = run,
};
