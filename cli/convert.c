/* tracekit convert: convert a trace to another format (each format's conversions are its
 * operation in lib/commands/; profile outputs are the profile command's). */
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
	"                  branch trace (btrace): ipt, one thread's raw Intel PT stream as\n"
	"                  hardware with return compression writes it (a return to its call is\n"
	"                  a TNT bit, not a TIP); same flow, profile and times as the trace\n"
	"  --no-demangle   names as the binary has them (default: C++ and Rust demangled)\n"
	"  --short-names   names without template arguments and parameters\n"
	"  -o FILE         write to FILE\n"
	"  --pid LIST, --comm NAME\n"
	"                  only those processes of a perf.data session (--tid N: a thread)\n"
	"\n"
	"Kanata pipeline logs:\n"
	"  --to kanata     normalised Kanata (the four-column form Konata reads)\n"
	"  --to perfetto   Perfetto protobuf, --to chrome (or json) Chrome JSON: a slice per\n"
	"                  instruction with its stages nested, tracks per thread, row and lane;\n"
	"                  1 cycle = 1 us from the first cycle; --cycles A:B clips to that window\n"
	"gem5 O3PipeView text:\n"
	"  --to kanata     Kanata log (F Dc Rn Ds Is Cm Rt), sorted by seqNum; CPUs named in a\n"
	"                  debug prefix (\"system.cpu1:\") become Kanata threads (1)\n"
	"  --to perfetto|chrome, --cycles A:B  as for the Kanata log it converts to\n"
	"Traces with calls (a slice per call, per thread):\n"
	"  --to perfetto   Perfetto protobuf trace (ui.perfetto.dev, trace_processor)\n"
	"  --to chrome     Chrome trace-event JSON\n"
	"  --time A:B      only calls running in ticks [A, B) (clipped to the window)\n"
	"  -F/-N NAME, -D N, -t/--min-time DUR, --min-insns N\n"
	"                  call filters: only the calls the filtered profile counts\n"
	"  --max-events N  at most N slices (default 10 million)\n"
	"  --elf FILE[:BASE]  slice names from FILE's symbols\n"
	"  --to folded, --to pprof  the profile's (tracekit profile), also with --time and\n"
	"                  the call filters\n"
	"LLVM XRay logs:\n"
	"  --to xray-yaml  llvm-xray convert -f yaml, record for record (the default); -j N\n"
	"                  formats blocks of the merged records at once, the same bytes\n"
	"  --to chrome     Chrome trace-event JSON, --to perfetto Perfetto protobuf: a slice per\n"
	"                  call on a track per thread (shared timeline writer)\n"
	"Intel PT raw stream (--elf FILE[:BASE], --raw FILE:ADDR give the code):\n"
	"  --to ipt        the same flow again, with return compression\n"
	"Intel PT in perf.data:\n"
	"  --to ipt -o F   each queue's raw stream (F, or F.cpuN / F.threadN), losses as OVF;\n"
	"                  the code's --elf arguments (tracekit decode, ptxed) on stderr\n"
	"Kunpeng xtrace (instruction or snapshot file; the other is found by name):\n"
	"  --to perfetto   Perfetto timeline of calls (also: chrome); --elf FILE names them;\n"
	"                  time is the instruction number\n";

static int run(struct tk_cmd_opts *o)
{
	/* the profile's table options only where convert writes a profile (--to folded, pprof) */
	if ((o->sort || o->top || o->threads) &&
	    (!o->to || tk_timeline_kind_by_name(o->to) || !tk_out_kind_by_name(o->to))) {
		cli_error(NULL, UINT64_MAX, "convert: --sort, --top and --threads are for a profile "
			  "output (--to folded, pprof), not --to %s", o->to ? o->to : "(none)");
		return EXIT_USAGE;
	}
	return cli_run_op(o, "convert", TK_CMD_CONVERT);
}

const struct cli_command cli_cmd_convert = {
	.name = "convert",
	.summary = "convert a trace to another format",
	.usage = usage,
	.kind = TK_CMD_CONVERT,
	.run = run,
	.to = "perfetto chrome json folded pprof kanata ipt xray-yaml",
	.takes = "to elf time-window sort top threads no-demangle short-names pid comm "
		 "function exclude depth min-time min-insns max-events",
};
