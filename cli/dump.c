/* tracekit dump: print every packet or record with its file offset (each format's dump
 * is its operation in lib/commands/). */
#include "cli.h"

static const char usage[] =
	"usage: tracekit dump [OPTIONS] FILE...\n"
	"\n"
	"Print every packet, record or token of FILE with its offset.\n"
	"\n"
	"  --no-offset   do not print offsets\n"
	"  -q, --quiet   only check the input; print nothing but errors\n"
	"  -o FILE       write to FILE\n"
	"  -j N          threads: chunks at once, the same output (Intel PT: 256 KiB cut at\n"
	"                PSBs, not with --lastip; XRay: 1 MiB of whole buffers, FDR version 2\n"
	"                on, or of basic-mode records; Kanata: 1 MiB of an uncompressed log;\n"
	"                xtrace: the stretches between snapshots)\n"
	"  --progress    progress also when stderr is no terminal\n"
	"  --no-progress none, also on a terminal\n"
	"  --time        Intel PT: the estimated TSC after each timing packet (ptdump's;\n"
	"                one thread, as the options below that track time or leave lines out)\n"
	"\n"
	"Intel PT streams print in ptdump's layout from the first PSB on; after a damaged\n"
	"packet the dump marks the offset and resumes at the next PSB. perf.data: each\n"
	"CPU's or thread's Intel PT in turn, under a line naming it. --time and --tcal track\n"
	"time as libipt does (MTC and CYC calibrated against TSC, TMA and CBR) and print its\n"
	"remarks between the lines, as \"[offset: ...]\".\n"
	"Branch traces (.tkbt): the header and every record with its file offset, then each\n"
	"thread's Intel PT stream as above (--tid N: one thread).\n"
	"XRay: every FDR metadata/function record or basic-mode record, in llvm-xray\n"
	"fdr-dump's notation, after one header line; damaged spots are marked <Error: ...>.\n"
	"Kanata: one line per command: line number, offset, the cycle it happens in, and the\n"
	"command as parsed (tabs, numbers normalised); bad lines are reported on stderr.\n"
	"\n"
	"Exit status: 0 clean; 1 input was skipped (decode errors); 3 unreadable input.\n";

static int run(struct tk_cmd_opts *o)
{
	if (o->time && o->tcal) {
		cli_error(NULL, UINT64_MAX, "dump: --time or --tcal, not both (one column)");
		return EXIT_USAGE;
	}
	return cli_run_op(o, "dump", TK_CMD_DUMP);
}

const struct cli_command cli_cmd_dump = {
	.name = "dump",
	.summary = "print every packet or record with its file offset",
	.usage = usage,
	.kind = TK_CMD_DUMP,
	.run = run,
	.takes = "no-offset time",
};
