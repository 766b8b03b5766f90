/* tracekit record: run a program and record its trace. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit record (--btrace | --xray | --qemu) [-o FILE] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD and record its execution.\n"
	"\n"
	"  --btrace        software branch trace of an unmodified x86-64 binary\n"
	"  --xray          run an XRay-instrumented program and collect its log\n"
	"  --qemu          run an AArch64 program under qemu-aarch64 and write xtrace files\n"
	"  -o FILE         output file (--qemu: output directory, default .)\n"
	"\n"
	"--qemu writes xtrace.TIME.TID.hint9.xinsndata.bin per guest thread and, for the main\n"
	"thread, xtrace.TIME.TID.hint9.xsnapshot.bin with registers every 1M user instructions\n"
	"(taken from a second, deterministic run with -singlestep -d cpu,fpu). If the program\n"
	"contains HINT #9, only instructions between its executions are collected.\n";

static int run(struct cli_opts *o)
{
	if (o->nargs < 1) {
		cli_error(NULL, UINT64_MAX, "record: no command to run (see: tracekit help record)");
		return EXIT_USAGE;
	}
	if (o->rec_qemu)
		return cli_record_qemu(o);
	cli_error(NULL, UINT64_MAX, "record: choose a recorder: --btrace, --xray or --qemu");
	return EXIT_USAGE;
}

const struct cli_command cli_cmd_record = {
	.name = "record",
	.summary = "run a program and record its trace",
	.usage = usage,
	.run = run,
};
