/* tracekit record: run a program and record its trace (each recorder is the record
 * operation of the format it writes, in lib/commands/). */
#include "cli.h"

static const char usage[] =
	"usage: tracekit record (--btrace | --xray | --qemu) [-o FILE] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD and record its execution.\n"
	"\n"
	"  -o FILE         output file (--btrace: default btrace.tkbt; --xray: default xray.log;\n"
	"                  --qemu: output directory, default .)\n"
	"  --progress      time run and trace bytes written, also when stderr is no terminal\n"
	"  --no-progress   none, also on a terminal\n"
	"\n"
	"--btrace writes a .tkbt container (default btrace.tkbt; a forked child writes\n"
	"FILE.<pid>) with every conditional branch, indirect jump/call and return of the traced\n"
	"modules; no Intel PT needed. --module PATH takes a path or a file name such as\n"
	"libm.so.6, not libc, which the recorder itself runs.\n"
	"\n"
	"Exit status (--btrace): 0 trace complete (also when a fatal signal such as SIGSEGV,\n"
	"SIGABRT or SIGINT ended the program: the trace ends there); 1 trace incomplete\n"
	"(program killed by SIGKILL, data lost); 2 usage; 3 the program cannot be recorded\n"
	"(static binary, own SIGTRAP handler).\n"
	"\n"
	"--xray sets XRAY_OPTIONS (and XRAY_BASIC_OPTIONS func_duration_threshold_us=0) so the\n"
	"runtime patches the sleds before main and logs in basic mode, then moves the log the\n"
	"runtime wrote to FILE. FDR mode cannot be started from the environment alone: the\n"
	"program must call __xray_log_init_mode(\"xray-fdr\", ...), __xray_patch(), and at the\n"
	"end __xray_log_finalize() and __xray_log_flushLog(); with --xray-mode fdr tracekit only\n"
	"points the log into its directory and collects it.\n"
	"\n"
	"--qemu writes xtrace.TIME.TID.hint9.xinsndata.bin per guest thread and, for the main\n"
	"thread, xtrace.TIME.TID.hint9.xsnapshot.bin with registers every 1M user instructions\n"
	"(taken from a second, deterministic run with -singlestep -d cpu,fpu). A third run\n"
	"(-d cpu) gives the main thread's STXR status, MRS/MSR values, DC ZVA addresses, NZCV\n"
	"after conditional selects and RNDR, and all GPRs after each syscall. If the program\n"
	"contains HINT #9, only instructions between its executions are collected.\n";

static int run(struct tk_cmd_opts *o)
{
	if (o->nargs < 1) {
		cli_error(NULL, UINT64_MAX, "record: no command to run (see: tracekit help record)");
		return EXIT_USAGE;
	}
	/* each recorder is the record operation of the format it writes */
	tk_cmd_fn op = tk_cmd_op((enum tk_format_id)o->record, TK_CMD_RECORD);
	if (!op) {
		cli_error(NULL, UINT64_MAX, "record: choose a recorder: --btrace, --xray or --qemu");
		return EXIT_USAGE;
	}
	return op(cli_cmd(o, "record"), NULL, NULL, NULL, NULL);
}

const struct cli_command cli_cmd_record = {
	.name = "record",
	.summary = "run a program and record its trace",
	.usage = usage,
	.kind = TK_CMD_RECORD,
	.run = run,
};
