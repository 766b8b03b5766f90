/* tracekit stats: statistics of a trace (each format's are its operation in
 * lib/commands/). */
#include "cli.h"
#include "tracekit/partial.h"

static const char usage[] =
	"usage: tracekit stats [OPTIONS] FILE...\n"
	"\n"
	"Statistics of a trace.\n"
	"\n"
	"  --to FMT        text, json, csv\n"
	"  -j N            threads (default: all cores)\n"
	"  -o FILE         write to FILE\n"
	"  --shard I/N     the partial result of shard I of N (-o FILE; see tracekit merge;\n"
	"                  Intel PT, perf.data, branch traces, xtrace)\n"
	"\n"
	"Intel PT (raw stream with --elf/--raw, or perf.data):\n"
	"  instructions, the mix by instruction category and ISA extension, branches\n"
	"  (conditional taken / not taken, jumps, calls, returns, indirect, far), memory\n"
	"  operands, footprint (distinct blocks, instructions, 64-byte code lines), trace\n"
	"  events; exact, from the whole flow (perf.data: each thread over its process's\n"
	"  code, as decode reads it; --pid, --tid, --comm, --cpu LIST select threads)\n"
	"\n"
	"Branch traces (.tkbt, record --btrace): the same, over the recorded modules\n"
	"\n"
	"Kanata pipeline logs:\n"
	"  Cycles honour C= (cycles = last cycle - first cycle); Konata's own IPC (last retire\n"
	"  id / last cycle, C= ignored) is shown beside it. Exit status 1 if lines were skipped.\n"
	"\n"
	"gem5 O3PipeView: Kanata's statistics of the log it converts to, converted as read\n";

static int run(struct tk_cmd_opts *o)
{
	if (o->mpi)
		return cli_mpi_refused("stats");
	if (o->shard)
		return cli_shard_write(o, TK_PARTIAL_STATS);
	return cli_run_op(o, "stats", TK_CMD_STATS);
}

const struct cli_command cli_cmd_stats = {
	.name = "stats",
	.summary = "statistics of a trace",
	.usage = usage,
	.kind = TK_CMD_STATS,
	.run = run,
	.to = "text json csv",
	.takes = "to elf shard mpi pid comm",
};
