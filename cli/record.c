/* tracekit record: run a program and record its trace. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit record (--btrace | --xray | --qemu) [-o FILE] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD and record its execution.\n"
	"\n"
	"  --btrace        software branch trace of an unmodified x86-64 binary\n"
	"  --xray          run an XRay-instrumented program and collect its log\n"
	"  --qemu          run an AArch64 program under qemu-aarch64 and write xtrace files\n"
	"  --xray-mode M   (--xray) basic (default) or fdr\n"
	"  -o FILE         output file (--xray: default xray.log; --qemu: output directory,\n"
	"                  default .)\n"
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
	"(taken from a second, deterministic run with -singlestep -d cpu,fpu). If the program\n"
	"contains HINT #9, only instructions between its executions are collected.\n";

/* Run CMD with XRay's environment, then move the newest log it wrote to -o FILE. */
static int record_xray(struct cli_opts *o)
{
	const char *mode = o->xray_mode ? o->xray_mode : "basic";
	const char *dest = o->output ? o->output : "xray.log";
	char dir[] = "/tmp/tracekit-xray-XXXXXX", opts[512], best[600] = "";

	if (strcmp(mode, "basic") && strcmp(mode, "fdr")) {
		cli_error(NULL, UINT64_MAX, "--xray-mode: basic or fdr, not '%s'", mode);
		return EXIT_USAGE;
	}
	if (!mkdtemp(dir)) {
		cli_error(NULL, UINT64_MAX, "record: cannot make a directory: %s", strerror(errno));
		return EXIT_INPUT;
	}
	const char *user = getenv("XRAY_OPTIONS");
	snprintf(opts, sizeof opts, "%s xray_logfile_base=%s/xray-log. %s",
		 !strcmp(mode, "basic") ? "patch_premain=true xray_mode=xray-basic" : "patch_premain=false",
		 dir, user ? user : "");
	pid_t pid = fork();
	if (pid < 0) {
		cli_error(NULL, UINT64_MAX, "record: fork: %s", strerror(errno));
		rmdir(dir);
		return EXIT_INPUT;
	}
	if (pid == 0) {
		setenv("XRAY_OPTIONS", opts, 1);
		if (!getenv("XRAY_BASIC_OPTIONS"))
			setenv("XRAY_BASIC_OPTIONS", "func_duration_threshold_us=0", 1);
		execvp(o->args[0], o->args);
		fprintf(stderr, "tracekit: record: cannot run '%s': %s\n", o->args[0], strerror(errno));
		_exit(127);
	}
	int ws = 0;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	/* the runtime names logs BASE + program + random suffix; take the newest */
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t newest = 0;
	int nlogs = 0;
	while (d && (de = readdir(d))) {
		char path[600];
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (stat(path, &st) == 0 && (!best[0] || st.st_mtime >= newest)) {
			newest = st.st_mtime;
			snprintf(best, sizeof best, "%s", path);
		}
		nlogs++;
	}
	if (d)
		closedir(d);
	int status = EXIT_CLEAN;
	if (!best[0]) {
		cli_error(NULL, UINT64_MAX,
			  "record: '%s' wrote no XRay log (is it built with -fxray-instrument?%s)",
			  o->args[0], !strcmp(mode, "fdr") ? " FDR mode needs the program's own init and flush calls" : "");
		status = EXIT_INPUT;
	} else if (rename(best, dest) < 0) {
		cli_error(NULL, UINT64_MAX, "record: cannot move the log to %s: %s", dest, strerror(errno));
		status = EXIT_INPUT;
	} else if (!o->quiet) {
		fprintf(stderr, "tracekit: XRay %s log written to %s%s\n", mode, dest,
			nlogs > 1 ? " (the newest of several)" : "");
	}
	/* leave nothing behind */
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		char path[600];
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	if (status == EXIT_CLEAN && WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
		status = EXIT_INPUT;
	return status;
}

static int run(struct cli_opts *o)
{
	if (o->nargs < 1) {
		cli_error(NULL, UINT64_MAX, "record: no command to run (see: tracekit help record)");
		return EXIT_USAGE;
	}
	if (o->rec_qemu)
		return cli_record_qemu(o);
	if (o->rec_xray)
		return record_xray(o);
	cli_error(NULL, UINT64_MAX, "record: choose a recorder: --btrace, --xray or --qemu");
	return EXIT_USAGE;
}

const struct cli_command cli_cmd_record = {
	.name = "record",
	.summary = "run a program and record its trace",
	.usage = usage,
	.run = run,
};
