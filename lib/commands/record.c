/* tracekit record --btrace and --xray: run the program with the recorder (LD_PRELOAD of
 * libtkbtrace.so) or with XRay's runtime options, then collect and summarise its trace. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tracekit/internal/util.h"

/* ---- waiting for the program ----------------------------------------------------------- */

/* Bytes of trace the recorder has written so far: the file PATH, or every file in DIR. */
static uint64_t trace_bytes(const char *path, const char *dir)
{
	struct stat st;
	uint64_t n = 0;

	if (path)
		return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d)); ) {
		char f[PATH_MAX];
		snprintf(f, sizeof f, "%.2000s/%.1000s", dir, de->d_name);
		if (de->d_name[0] != '.' && stat(f, &st) == 0)
			n += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return n;
}

/* Wait for PID's end (*WS). With progress on (a terminal, or --progress), a line now and
 * then on how long it has run and the trace bytes written (trace_bytes(PATH, DIR)). */
static void wait_program(const struct tk_cmd *c, pid_t pid, int *ws, const char *path,
			 const char *dir)
{
	struct tk_progress pr;
	pid_t r;

	tk_cmd_progress_init(c, &pr, "recording", 0);
	while ((r = waitpid(pid, ws, pr.print ? WNOHANG : 0)) != pid) {
		if (r < 0 && errno != EINTR)
			break;
		if (r == 0) {
			usleep(50000);
			tk_progress_set(&pr, trace_bytes(path, dir));
		}
	}
	tk_progress_finish(&pr);
}

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

/* The program a trace is of: its first module's name (the executable, or the first module
 * traced with --module). */
static const char *program_name(const struct tk_btrace *bt)
{
	const struct tk_btrace_module *m = tk_btrace_module_count(bt) ? tk_btrace_module(bt, 0) : NULL;
	const char *slash = m && m->path ? strrchr(m->path, '/') : NULL;
	return !m || !m->path ? "?" : slash ? slash + 1 : m->path;
}

/* Summary of the written container on stderr; returns an exit status. */
static int btrace_summary(const struct tk_cmd *c, const char *file)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_input *in;
	const uint8_t *data;
	size_t len;
	int err = 0, status = TK_EXIT_CLEAN;

	if (tk_input_open(&in, file, NULL) < 0 || tk_input_map(in, &data, &len) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "record: the recorder wrote no trace (did the "
			  "preload library start?)");
		return TK_EXIT_INPUT;
	}
	tk_cmd_log_file(c, file);
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	tk_cmd_log_file(c, NULL);
	if (!bt) {
		CMD_ERROR(c, file, UINT64_MAX, "record: unreadable trace: %s", tk_strerror(err));
		tk_input_free(in);
		return TK_EXIT_INPUT;
	}
	const struct tk_btrace_info *bi = tk_btrace_info(bt);
	uint64_t bytes = 0, traps = 0, unresolved = 0, cut = 0;
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		bytes += t->stream_bytes;
		traps += t->traps;
		unresolved += t->unresolved;
		cut += t->ended && t->end_reason == TK_BTRACE_THREAD_CUT;
	}
	if (bi->refused) {
		CMD_ERROR(c, file, UINT64_MAX, "record: refused: %s", bi->refused_msg);
		status = TK_EXIT_INPUT;
	} else {
		if (!o->quiet)
			CMD_NOTE(c, file, "pid %u (%s), %zu thread(s), %llu branch traps, "
				"%llu bytes of PT packets%s", bi->pid, program_name(bt), tk_btrace_thread_count(bt),
				(unsigned long long)traps, (unsigned long long)bytes,
				bi->exec ? " (ends at exec)" : "");
		if (bi->ring && !o->quiet)
			CMD_NOTE(c, file, "a flight recorder's snapshot: each thread's last %llu bytes "
				 "of trace or more (whole pieces)", (unsigned long long)bi->ring);
		if (bi->size_limit && !o->quiet)
			CMD_NOTE(c, file, "recording stopped at --max-size %llu: the trace ends early",
				 (unsigned long long)bi->size_limit);
		if (bi->trigger_call && !o->quiet)
			CMD_NOTE(c, file, "the recording ends at call %llu of %s (--trigger), its "
				 "snapshot; the program went on untraced",
				 (unsigned long long)bi->trigger_call, TK_TEXT(bi->trigger_fn));
		if (bi->snapshot_signal && !o->quiet)
			CMD_NOTE(c, file, "the recording ends at signal %d (%s), its snapshot; the "
				 "program went on untraced", bi->snapshot_signal,
				 strsignal(bi->snapshot_signal));
		if (bi->signal && !o->quiet)
			CMD_NOTE(c, file, "the trace ends at signal %d (%s), which ended the "
				"program", bi->signal, strsignal(bi->signal));
		if (cut && !o->quiet)
			CMD_NOTE(c, file, "%llu thread(s) were running when the process "
				"ended: their trace stops there (cut)", (unsigned long long)cut);
		if (bi->fd_reopened)
			CMD_WARN(c, file, UINT64_MAX, "the program closed or replaced the trace's file "
				 "descriptor; the recorder reopened the trace file (%llu times)",
				 (unsigned long long)bi->fd_reopened);
		if (unresolved)
			CMD_WARN(c, file, UINT64_MAX, "%llu re-entries into traced code could not be placed "
				 "exactly (code before them is missing)", (unsigned long long)unresolved);
		if (!bi->complete)
			status = TK_EXIT_SKIPPED;
		int g = tk_cmd_gaps(c, file, tk_btrace_gaps(bt), "damaged record");
		if (g > status)
			status = g;
	}
	tk_btrace_free(bt);
	tk_input_free(in);
	return status;
}

/* The files an earlier followed recording left under the same name: a new run's would mix
 * with them. They are the recorder's own outputs (tracekit names them), so they go. */
static void remove_related(const struct tk_cmd *c, const char *base)
{
	char **rel;
	size_t n;

	if (tk_btrace_related(base, &rel, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (unlink(rel[i]) < 0 && errno != ENOENT)
			CMD_WARN(c, rel[i], UINT64_MAX, "cannot remove the previous recording's file: %s",
				 strerror(errno));
	tk_btrace_related_free(rel, n);
}

/* -o must not name the program record runs (nor the recorder): OUT is removed first, then
 * written by the program. 1 when refused, with the message. */
static int refuse_output(const struct tk_cmd *c, const char *out, const char *prog, const char *lib)
{
	const char *ins[] = { prog, lib };

	if (tk_outfile_same(out, ins, lib ? 2 : 1) < 0)
		return 0;
	CMD_ERROR(c, out, UINT64_MAX, "record: -o names the program to run (or the recorder): "
		  "refused, it would be overwritten");
	return 1;
}

/* record's exit status: its own when it failed (usage, input, output: 2 and up), else the
 * program's as a shell gives it (128 + N when signal N ended it, as uftrace does), and 1 when
 * the program succeeded but the trace lost data. */
/* A signal by number or name (USR2, SIGUSR2); 0 if none. */
static int signal_arg(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (end != s && !*end)
		return n > 0 && n < 65 && n != SIGKILL && n != SIGSTOP && n != SIGTRAP ? (int)n : 0;
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (int i = 1; i < 32; i++)
		if (sigabbrev_np(i) && !strcmp(sigabbrev_np(i), s))
			return i == SIGKILL || i == SIGSTOP || i == SIGTRAP ? 0 : i;
	return 0;
}

/* --trigger FUNCTION[:N]: the name into NAME, N (1 without it); 0 if malformed. A C++
 * name's `::` is part of the name. */
static uint64_t trigger_arg(const char *s, char *name, size_t size)
{
	const char *colon = strrchr(s, ':');
	uint64_t n = 1;
	size_t len = strlen(s);
	if (colon && colon > s && colon[-1] != ':' && colon[1]) {
		char *end;
		errno = 0;
		n = strtoull(colon + 1, &end, 10);
		if (*end || errno || colon[1] == '-' || colon[1] == '+')
			return 0;
		len = (size_t)(colon - s);
	}
	if (!len || len >= size || !n)
		return 0;
	memcpy(name, s, len);
	name[len] = 0;
	return n;
}

static int program_status(int own, int ws)
{
	if (own >= TK_EXIT_USAGE)
		return own;
	int prog = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 0;
	return prog ? prog : own;
}

int tk_cmd_record_btrace(const struct tk_cmd *c, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;

	(void)file, (void)in, (void)fi, (void)unused;
	const char *out = o->output ? o->output : "btrace.tkbt";
	char prog[PATH_MAX], lib[PATH_MAX], outabs[PATH_MAX], mods[8192] = "";
	const char *why;

	if (find_program(o->args[0], prog, sizeof prog) < 0) {
		CMD_ERROR(c, o->args[0], UINT64_MAX, "record: program not found or not executable");
		return TK_EXIT_USAGE;
	}
	if ((why = check_program(prog))) {
		CMD_ERROR(c, prog, UINT64_MAX, "record --btrace: %s", why);
		return TK_EXIT_INPUT;
	}
	if (find_recorder(lib, sizeof lib) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record --btrace: cannot find libtkbtrace.so (set "
			  "TK_BTRACE_LIB)");
		return TK_EXIT_INPUT;
	}
	/* The program may change directory: give it an absolute output path. */
	if (out[0] == '/') {
		snprintf(outabs, sizeof outabs, "%s", out);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd)) {
			CMD_ERROR(c, NULL, UINT64_MAX, "record: getcwd: %s", strerror(errno));
			return TK_EXIT_INPUT;
		}
		snprintf(outabs, sizeof outabs, "%.2000s/%.2000s", cwd, out);
	}
	if (refuse_output(c, outabs, prog, lib))
		return TK_EXIT_USAGE;
	int snap = o->snapshot_signal ? signal_arg(o->snapshot_signal) : 0;
	if (o->snapshot_signal && !snap) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: --snapshot-signal %s: not a signal the "
			  "recorder can catch", o->snapshot_signal);
		return TK_EXIT_USAGE;
	}
	char trig_fn[256];
	uint64_t trig_n = o->trigger ? trigger_arg(o->trigger, trig_fn, sizeof trig_fn) : 0;
	if (o->trigger && !trig_n) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: --trigger %s: expected FUNCTION or FUNCTION:N "
			  "(N a call count from 1)", o->trigger);
		return TK_EXIT_USAGE;
	}
	unlink(outabs);
	remove_related(c, outabs);
	for (int i = 0; i < o->n_module; i++) {
		size_t l = strlen(mods);
		snprintf(mods + l, sizeof mods - l, "%s%s", l ? ":" : "", o->module[i]);
	}

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: fork: %s", strerror(errno));
		return TK_EXIT_INPUT;
	}
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char pre[2 * PATH_MAX + 2];
		snprintf(pre, sizeof pre, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
		setenv("LD_PRELOAD", pre, 1);
		setenv("TK_BTRACE_OUT", outabs, 1);
		setenv("TK_BTRACE_MODULES", mods, 1);
		char num[24];
		if (o->ring) {
			snprintf(num, sizeof num, "%llu", (unsigned long long)o->ring);
			setenv("TK_BTRACE_RING", num, 1);
		}
		if (o->max_size) {
			snprintf(num, sizeof num, "%llu", (unsigned long long)o->max_size);
			setenv("TK_BTRACE_MAX_SIZE", num, 1);
		}
		if (snap) {
			snprintf(num, sizeof num, "%d", snap);
			setenv("TK_BTRACE_SNAPSHOT_SIGNAL", num, 1);
		}
		unsetenv("TK_BTRACE_TRIGGER");
		unsetenv("TK_BTRACE_TRIGGER_N");
		if (trig_n) {
			snprintf(num, sizeof num, "%llu", (unsigned long long)trig_n);
			setenv("TK_BTRACE_TRIGGER", trig_fn, 1);
			setenv("TK_BTRACE_TRIGGER_N", num, 1);
		}
		if (!o->no_follow) {
			/* this process becomes the program: it writes OUT, the others OUT.<pid>... */
			char root[24];
			snprintf(root, sizeof root, "%d", (int)getpid());
			setenv("TK_BTRACE_FOLLOW", "1", 1);
			setenv("TK_BTRACE_ROOT", root, 1);
		}
		execv(prog, o->args);
		CMD_NOTE(c, prog, "exec: %s", strerror(errno));
		_exit(127);
	}
	int ws = 0;
	signal(SIGINT, SIG_IGN);   /* ^C goes to the program; we still summarise */
	wait_program(c, pid, &ws, outabs, NULL);
	signal(SIGINT, SIG_DFL);
	if (!o->quiet) {
		if (WIFEXITED(ws))
			CMD_NOTE(c, NULL, "%s exited with status %d", o->args[0], WEXITSTATUS(ws));
		else if (WIFSIGNALED(ws))
			CMD_NOTE(c, NULL, "%s killed by signal %d (%s)", o->args[0], WTERMSIG(ws),
				strsignal(WTERMSIG(ws)));
	}
	int status = btrace_summary(c, outabs);
	char **rel;
	size_t nrel = 0;
	if (!o->no_follow && tk_btrace_related(outabs, &rel, &nrel) == 0) {
		for (size_t i = 0; i < nrel; i++)
			status = tk_cmd_max(status, btrace_summary(c, rel[i]));
		tk_btrace_related_free(rel, nrel);
	}
	return program_status(status, ws);
}


/* Run CMD with XRay's environment, then move the newest log it wrote to -o FILE. */
int tk_cmd_record_xray(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;

	(void)file, (void)in, (void)fi, (void)unused;
	const char *mode = o->xray_mode ? o->xray_mode : "basic";
	const char *dest = o->output ? o->output : "xray.log";
	char dir[] = "/tmp/tracekit-xray-XXXXXX", opts[512], best[600] = "";

	if (strcmp(mode, "basic") && strcmp(mode, "fdr")) {
		CMD_ERROR(c, NULL, UINT64_MAX, "--xray-mode: basic or fdr, not '%s'", mode);
		return TK_EXIT_USAGE;
	}
	char prog[PATH_MAX];
	if (find_program(o->args[0], prog, sizeof prog) == 0 && refuse_output(c, dest, prog, NULL))
		return TK_EXIT_USAGE;
	if (!mkdtemp(dir)) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: cannot make a directory: %s", strerror(errno));
		return TK_EXIT_INPUT;
	}
	const char *user = getenv("XRAY_OPTIONS");
	snprintf(opts, sizeof opts, "%s xray_logfile_base=%s/xray-log. %s",
		 !strcmp(mode, "basic") ? "patch_premain=true xray_mode=xray-basic" : "patch_premain=false",
		 dir, user ? user : "");
	pid_t pid = fork();
	if (pid < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: fork: %s", strerror(errno));
		rmdir(dir);
		return TK_EXIT_INPUT;
	}
	if (pid == 0) {
		setenv("XRAY_OPTIONS", opts, 1);
		if (!getenv("XRAY_BASIC_OPTIONS"))
			setenv("XRAY_BASIC_OPTIONS", "func_duration_threshold_us=0", 1);
		execvp(o->args[0], o->args);
		CMD_NOTE(c, NULL, "record: cannot run '%s': %s", o->args[0], strerror(errno));
		_exit(127);
	}
	int ws = 0;
	wait_program(c, pid, &ws, NULL, dir);
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
	int status = TK_EXIT_CLEAN;
	if (!best[0]) {
		CMD_ERROR(c, NULL, UINT64_MAX,
			  "record: '%s' wrote no XRay log (is it built with -fxray-instrument?%s)",
			  o->args[0], !strcmp(mode, "fdr") ? " FDR mode needs the program's own init and flush calls" : "");
		status = TK_EXIT_INPUT;
	} else if (rename(best, dest) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: cannot move the log to %s: %s", dest, strerror(errno));
		status = TK_EXIT_INPUT;
	} else if (!o->quiet) {
		CMD_NOTE(c, NULL, "XRay %s log written to %s%s", mode, dest,
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
	if (status == TK_EXIT_CLEAN && WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
		status = TK_EXIT_INPUT;
	return status;
}

