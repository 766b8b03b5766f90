/* tracekit check: check a trace against its format's rules (each format's check is its
 * operation in lib/commands/). */
#include "cli.h"

static const char usage[] =
	"usage: tracekit check [OPTIONS] FILE...\n"
	"\n"
	"Report every violation of the format's rules with its line number or offset.\n"
	"Exit status 1 if any.\n"
	"\n"
	"  -j N            threads (default: all cores; Kanata logs not compressed: the same\n"
	"                  report, read in parallel chunks)\n"
	"\n"
	"Kanata logs: prints FILE:LINE: error|warning: message for every violation (unknown\n"
	"command, bad number, id used before I, id reused, negative cycle delta, C= going back,\n"
	"R twice, command after R, E without S, W on a retired consumer or with an unknown\n"
	"producer, header version other than 4), then a summary line.\n"
	"\n"
	"gem5 O3PipeView: the same for its records as the conversion to Kanata reads them\n"
	"(malformed records, stages without a fetch, seqNums seen twice or out of the window).\n";

static int run(struct tk_cmd_opts *o)
{
	return cli_run_op(o, "check", TK_CMD_CHECK);
}

const struct cli_command cli_cmd_check = {
	.name = "check",
	.summary = "check a trace against its format's rules",
	.usage = usage,
	.kind = TK_CMD_CHECK,
	.run = run,
};
