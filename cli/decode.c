/* tracekit decode: reconstruct the executed instructions. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit decode [OPTIONS] FILE...\n"
	"\n"
	"Reconstruct every executed instruction from a trace and the program's code.\n"
	"\n"
	"  --elf FILE[:BASE]   load an ELF file into the memory image\n"
	"  --raw FILE:ADDR     load a raw code file at ADDR\n"
	"  --no-disasm         print only addresses\n"
	"  --stat              print counts only\n"
	"  --time              print the time of each event\n"
	"  -j N                decode with N threads (default: all cores)\n"
	"  -o FILE             write to FILE\n";

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	default:
		return cli_unsupported("decode", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "decode")))
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

const struct cli_command cli_cmd_decode = {
	.name = "decode",
	.summary = "reconstruct the executed instructions",
	.usage = usage,
	.run = run,
};
