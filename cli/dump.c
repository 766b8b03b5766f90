/* tracekit dump: print every packet or record with its file offset. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit dump [OPTIONS] FILE...\n"
	"\n"
	"Print every packet, record or token of FILE with its offset.\n"
	"\n"
	"  --no-offset   do not print offsets\n"
	"  --lastip      (Intel PT) print reconstructed IPs\n"
	"  -q, --quiet   only check the input; print nothing but errors\n"
	"  -o FILE       write to FILE\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	default:
		return cli_unsupported("dump", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "dump")))
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

const struct cli_command cli_cmd_dump = {
	.name = "dump",
	.summary = "print every packet or record with its file offset",
	.usage = usage,
	.run = run,
};
