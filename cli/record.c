/* tracekit record: run a program and record its trace. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
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
	"  --btrace        software branch trace of an unmodified x86-64 binary (no Intel PT\n"
	"                  needed): every conditional branch, indirect jump/call and return of\n"
	"                  the traced modules; writes a .tkbt container (default btrace.tkbt;\n"
	"                  a forked child writes FILE.<pid>)\n"
	"  --module PATH   (--btrace) trace this loaded module; repeatable; 'main' is the\n"
	"                  executable, which is the default\n"
	"  --xray          run an XRay-instrumented program and collect its log\n"
	"  --qemu          run an AArch64 program under qemu-aarch64 and write xtrace files\n"
	"  --xray-mode M   (--xray) basic (default) or fdr\n"
	"  -o FILE         output file (--btrace: default btrace.tkbt; --xray: default xray.log;\n"
	"                  --qemu: output directory, default .)\n"
	"\n"
	"Exit status (--btrace): 0 trace complete; 1 trace incomplete (program killed, data\n"
	"lost); 2 usage; 3 the program cannot be recorded (static binary, own SIGTRAP handler).\n"
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

/* ---- --btrace -------------------------------------------------------------------------- */

/* CMD as execvp would find it. */
static int find_program(const char *cmd, char *path, size_t n)
{
	if (strchr(cmd, '/')) {
		snprintf(path, n, "%s", cmd);
		return access(path, X_OK);
	}
	const char *env = getenv("PATH");
	char dirs[4096];
	snprintf(dirs, sizeof dirs, "%s", env ? env : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, n, "%s/%s", *d ? d : ".", cmd);
		if (access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* 0: dynamically linked x86-64 ELF (or a script); else a message. */
static const char *check_program(const char *path)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, &eh, sizeof eh) : -1;
	const char *why = NULL;

	if (n >= 2 && !memcmp(&eh, "#!", 2))
		goto out;   /* a script: its interpreter is what runs and is traced */
	if (n < (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
		why = "not an ELF executable";
		goto out;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		why = "not an x86-64 program";
		goto out;
	}
	why = "statically linked: the recorder is a preload library and cannot enter it";
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != sizeof ph)
			break;
		if (ph.p_type == PT_INTERP)
			why = NULL;
	}
out:
	if (fd >= 0)
		close(fd);
	return why;
}

/* The preload library: $TK_BTRACE_LIB, beside the build's tracekit, or installed. */
static int find_recorder(char *path, size_t n)
{
	const char *env = getenv("TK_BTRACE_LIB");
	char self[PATH_MAX];
	ssize_t len;

	if (env && *env) {
		snprintf(path, n, "%s", env);
		return access(path, R_OK);
	}
	if ((len = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
		return -1;
	self[len] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	const char *tries[] = { "/recorder/btrace/libtkbtrace.so", "/../lib/tracekit/libtkbtrace.so",
				"/../lib/x86_64-linux-gnu/tracekit/libtkbtrace.so" };
	for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
		snprintf(path, n, "%s%s", self, tries[i]);
		if (access(path, R_OK) == 0)
			return 0;
	}
	return -1;
}

/* Summary of the written container on stderr; returns an exit status. */
static int btrace_summary(const struct cli_opts *o, const char *file)
{
	struct tk_input *in;
	const uint8_t *data;
	size_t len;
	int err = 0, status = EXIT_CLEAN;

	if (tk_input_open(&in, file, NULL) < 0 || tk_input_map(in, &data, &len) < 0) {
		cli_error(file, UINT64_MAX, "record: the recorder wrote no trace (did the "
			  "preload library start?)");
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "record: unreadable trace: %s", tk_strerror(err));
		tk_input_free(in);
		return EXIT_INPUT;
	}
	const struct tk_btrace_info *bi = tk_btrace_info(bt);
	uint64_t bytes = 0, traps = 0, unresolved = 0;
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		bytes += t->stream_bytes;
		traps += t->traps;
		unresolved += t->unresolved;
	}
	if (bi->refused) {
		cli_error(file, UINT64_MAX, "record: refused: %s", bi->refused_msg);
		status = EXIT_INPUT;
	} else {
		if (!o->quiet)
			fprintf(stderr, "tracekit: %s: pid %u, %zu thread(s), %llu branch traps, "
				"%llu bytes of PT packets%s\n", file, bi->pid, tk_btrace_thread_count(bt),
				(unsigned long long)traps, (unsigned long long)bytes,
				bi->exec ? " (ends at exec)" : "");
		if (unresolved)
			cli_warn(file, UINT64_MAX, "%llu re-entries into traced code could not be placed "
				 "exactly (code before them is missing)", (unsigned long long)unresolved);
		if (!bi->complete)
			status = EXIT_SKIPPED;
		int g = cli_report_gaps(file, tk_btrace_gaps(bt), "damaged record");
		if (g > status)
			status = g;
	}
	tk_btrace_free(bt);
	tk_input_free(in);
	return status;
}

static int record_btrace(struct cli_opts *o)
{
	const char *out = o->output ? o->output : "btrace.tkbt";
	char prog[PATH_MAX], lib[PATH_MAX], outabs[PATH_MAX], mods[8192] = "";
	const char *why;

	if (find_program(o->args[0], prog, sizeof prog) < 0) {
		cli_error(o->args[0], UINT64_MAX, "record: program not found or not executable");
		return EXIT_USAGE;
	}
	if ((why = check_program(prog))) {
		cli_error(prog, UINT64_MAX, "record --btrace: %s", why);
		return EXIT_INPUT;
	}
	if (find_recorder(lib, sizeof lib) < 0) {
		cli_error(NULL, UINT64_MAX, "record --btrace: cannot find libtkbtrace.so (set "
			  "TK_BTRACE_LIB)");
		return EXIT_INPUT;
	}
	/* The program may change directory: give it an absolute output path. */
	if (out[0] == '/') {
		snprintf(outabs, sizeof outabs, "%s", out);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd)) {
			cli_error(NULL, UINT64_MAX, "record: getcwd: %s", strerror(errno));
			return EXIT_INPUT;
		}
		snprintf(outabs, sizeof outabs, "%.2000s/%.2000s", cwd, out);
	}
	unlink(outabs);
	for (int i = 0; i < o->n_module; i++) {
		size_t l = strlen(mods);
		snprintf(mods + l, sizeof mods - l, "%s%s", l ? ":" : "", o->module[i]);
	}

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_error(NULL, UINT64_MAX, "record: fork: %s", strerror(errno));
		return EXIT_INPUT;
	}
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char pre[2 * PATH_MAX + 2];
		snprintf(pre, sizeof pre, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
		setenv("LD_PRELOAD", pre, 1);
		setenv("TK_BTRACE_OUT", outabs, 1);
		setenv("TK_BTRACE_MODULES", mods, 1);
		execv(prog, o->args);
		fprintf(stderr, "tracekit: %s: exec: %s\n", prog, strerror(errno));
		_exit(127);
	}
	int ws;
	signal(SIGINT, SIG_IGN);   /* ^C goes to the program; we still summarise */
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	signal(SIGINT, SIG_DFL);
	if (!o->quiet) {
		if (WIFEXITED(ws))
			fprintf(stderr, "tracekit: %s exited with status %d\n", o->args[0], WEXITSTATUS(ws));
		else if (WIFSIGNALED(ws))
			fprintf(stderr, "tracekit: %s killed by signal %d (%s)\n", o->args[0], WTERMSIG(ws),
				strsignal(WTERMSIG(ws)));
	}
	return btrace_summary(o, outabs);
}


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
	if (o->rec_btrace)
		return record_btrace(o);
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
