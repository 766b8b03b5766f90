/* tracekit decode: reconstruct the executed instructions (each format's listing is its
 * operation in lib/commands/). */
#include "cli.h"

static const char usage[] =
	"usage: tracekit decode [OPTIONS] FILE...\n"
	"\n"
	"Reconstruct every executed instruction from a trace and the program's code.\n"
	"\n"
	"  --elf FILE[:BASE]   load an ELF file into the memory image\n"
	"  --no-disasm         print only addresses\n"
	"  --stat              print counts only\n"
	"  --time              print the time of each event\n"
	"  -j N                decode with N threads (default: all cores)\n"
	"  -o FILE             write to FILE\n"
	"  --shard I/N         with --stat: the partial result of shard I of N (-o FILE;\n"
	"                      see tracekit merge)\n"
	"  --pid LIST, --comm NAME\n"
	"                      only those processes of a perf.data session (--tid N: a thread)\n"
	"\n"
	"Intel PT: one line per instruction (address, disassembly), events in brackets\n"
	"([enabled], [disabled], [overflow ...], [error: ...]). Decode errors resync at the\n"
	"next PSB; the exit status is then 1. A perf.data file (perf record -e intel_pt//)\n"
	"is read directly (or the directory of perf record --kcore or --threads): each CPU's\n"
	"or thread's trace in turn, the code from the files the session mapped; --elf\n"
	"vmlinux (no base) goes where the session's kernel ran.\n"
	"See docs/tracekit-decode.md.\n";

static int run(struct tk_cmd_opts *o)
{
	if (o->mpi)
		return cli_mpi_refused("decode --stat");
	if (o->shard && !o->stat) {
		cli_error(NULL, UINT64_MAX, "decode --shard: only the counts of --stat are a "
			  "partial result (a listing is the chunks' text in order)");
		return EXIT_USAGE;
	}
	if (o->shard)
		return cli_shard_write(o, TK_PARTIAL_DECODE_STAT);
	return cli_run_op(o, "decode", TK_CMD_DECODE);
}

const struct cli_command cli_cmd_decode = {
	.name = "decode",
	.summary = "reconstruct the executed instructions",
	.usage = usage,
	.kind = TK_CMD_DECODE,
	.run = run,
	.takes = "elf no-disasm stat time shard mpi pid comm",
};
