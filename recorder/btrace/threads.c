/* libtkbtrace.so: threads, fork, exec and exit: each thread's trace begins and ends
 * here, and the process's end is written once. */
#include "recorder.h"

/* ---- threads, fork, exec, exit ---------------------------------------------------------- */

struct start_arg {
	void *(*fn)(void *);
	void *arg;
};

static void thread_cleanup(void *unused)
{
	(void)unused;
	if (tls && active && ts_enter(tls)) {
		end_thread(tls);
		ts_leave(tls);
	}
}

static void *thread_start(void *p)
{
	struct start_arg a = *(struct start_arg *)p;
	void *ret;
	free(p);
	pthread_cleanup_push(thread_cleanup, NULL);
	ret = a.fn(a.arg);
	pthread_cleanup_pop(1);
	return ret;
}

/* A thread's stream ends when its start routine returns or it calls pthread_exit: the rest
 * (libc's start_thread) is untraced, unless libc is, and then it ends at the thread's exit
 * system call and the start routine is not wrapped. */
EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (!real_pthread_create)
		real_pthread_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
			dlsym(RTLD_NEXT, "pthread_create");
	struct start_arg *a = active && !exits_traced ? malloc(sizeof *a) : NULL;
	if (!a)
		return real_pthread_create(t, attr, fn, arg);
	a->fn = fn;
	a->arg = arg;
	int rc = real_pthread_create(t, attr, thread_start, a);
	if (rc)
		free(a);
	return rc;
}

/* CLOCK_MONOTONIC_RAW in ns (0 if unavailable): with the TSC read beside it at the start and
 * at the end, the reader measures the TSC's rate over the whole run (the kernel does not
 * tell user space its TSC frequency, and AMD has no CPUID leaf 0x15). No libc. */
static uint64_t mono_raw_ns(void)
{
	struct timespec t;
	if (rt_syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &t, 0, 0, 0, 0) != 0)
		return 0;
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The clock and the TSC at one moment: the TSC is read on both sides of the clock, and of a
 * few tries the one with the two TSC reads closest is kept (the TSC then the middle). A
 * thread preempted between the two reads (a loaded machine) would put that time into the
 * rate: 0.45 ms of it over a 0.2 s run is 0.2 % off. No libc. */
static void clock_and_tsc(uint64_t *ns, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;

	*ns = *tsc = 0;
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = __rdtsc(), n = mono_raw_ns(), t1 = __rdtsc();

		if (!n) {
			*tsc = t1;
			return;
		}
		if (t1 - t0 < best) {
			best = t1 - t0;
			*ns = n;
			*tsc = t0 + (t1 - t0) / 2;
		}
	}
}

/* Also run in a forked child from the trap handler: no libc. */
/* The clock and the TSC when the recorder started, before its analysis of the code: the
 * reader measures the TSC's rate from there, so a program that runs for less than the
 * 100 us the measure needs (a short test, a forked child that execs) still gets one. */
static uint64_t cal_ns, cal_tsc;

void clock_calibrate(void)
{
	clock_and_tsc(&cal_ns, &cal_tsc);
}

void write_header(uint32_t ppid)
{
	uint8_t h[TK_BTRACE_HEADER_SIZE];
	uint32_t v = call_times ? TK_BTRACE_VERSION : 1, hs = TK_BTRACE_HEADER_SIZE;
	uint32_t pid = (uint32_t)rt_getpid();
	uint64_t hz = 0, ns, tsc;

	clock_and_tsc(&ns, &tsc);

	memset(h, 0, sizeof h);
	memcpy(h, TK_BTRACE_MAGIC, 8);
	memcpy(h + 8, &v, 4);
	memcpy(h + 12, &hs, 4);
	memcpy(h + 16, &pid, 4);
	memcpy(h + 20, &ppid, 4);
	memcpy(h + 24, &hz, 8);
	memcpy(h + 32, &tsc, 8);
	memcpy(h + 40, &ns, 8);
	memcpy(h + 48, &ring_bytes, 8);
	memcpy(h + 56, &cal_tsc, 8);
	memcpy(h + 64, &cal_ns, 8);
	out_fd_check();
	if (rt_syscall(SYS_write, out_fd, h, sizeof h, 0, 0, 0) != (long)sizeof h)
		say("cannot write the trace header");
	for (int i = 0; i < nmodules; i++) {
		const struct module *m = &modules[i];
		uint8_t rec[24 + 4 + 64 + PATH_MAX];
		uint16_t plen = (uint16_t)rt_strlen(m->path);
		memcpy(rec, &m->bias, 8);
		memcpy(rec + 8, &m->start, 8);
		memcpy(rec + 16, &m->end, 8);
		memcpy(rec + 24, &plen, 2);
		rec[26] = (uint8_t)m->build_id_len;
		rec[27] = 0;
		memcpy(rec + 28, m->build_id, m->build_id_len);
		memcpy(rec + 28 + m->build_id_len, m->path, plen);
		put_rec(TK_BTRACE_REC_MODULE, 0, 0, rec, 28 + m->build_id_len + plen);
	}
}

int open_output(const char *path)
{
	struct rt_buf b = { out_cur, 0, sizeof out_cur };
	rt_puts(&b, path);
	return out_fd_settle(rt_syscall(SYS_openat, AT_FDCWD, path,
					O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644, 0, 0));
}

/* A forked child (thread ME, now TID) writes its own trace, OUT.<pid>, from its next branch
 * on: from fork()'s handler when libc is untraced, from its first record after the fork
 * system call when libc is traced (and then fork()'s handler finds it done). */
void child_switch(struct tstate *me, int tid)
{
	char path[PATH_MAX + 16];
	struct rt_buf b = { path, 0, sizeof path };
	int pid = rt_getpid();

	if (!active || pid == out_pid)
		return;
	out_pid = pid;
	fd_reopened = 0;
	exec_gen = 0;   /* a new process: its first exec is its .1 */
	if (out_fd >= 0)
		rt_syscall(SYS_close, out_fd, 0, 0, 0, 0, 0);
	rt_puts(&b, out_path);
	rt_puts(&b, ".");
	rt_putu(&b, (uint64_t)pid);
	out_fd = open_output(path);
	if (out_fd < 0) {
		active = 0;
		return;
	}
	threads = NULL;
	ts_lock_setup();   /* the child's own registration */
	if (me) {
		/* The parent's pending bytes are the parent's to write. */
		me->next = NULL;
		me->enc.len = 0;
		me->enc.ntnt = 0;
		me->enc.tnt = 0;
		me->psb_pos = (size_t)-1;
		me->tid = tid;
		me->seq = 0;
		me->ring_from = 0;
		me->traps = me->reentries = me->unresolved = me->traps_long = me->tramp_hits = me->traps_first = 0;
		me->clone_pending = 0;
		me->lock = LOCK_FREE;
		me->ended = 0;
		threads = me;
	}
	write_header((uint32_t)rt_syscall(SYS_getppid, 0, 0, 0, 0, 0, 0));
}

void after_fork_child(void)
{
	child_switch(tls, rt_gettid());
}

/* N/ALL as a percentage with three decimals (the goal after warm-up is under 0.1%). */
static void put_pct(struct rt_buf *b, uint64_t n, uint64_t all)
{
	uint64_t pm = all ? (n * 100000 + all / 2) / all : 0;
	rt_putu(b, pm / 1000);
	rt_puts(b, ".");
	for (uint64_t d = 100; d; d /= 10)
		rt_putu(b, pm / d % 10);
	rt_puts(b, "%");
}

/* TK_BTRACE_DEBUG: where the traps went, by CTI kind, over all threads (at exit, maybe from
 * the trap handler: no libc). */
static void say_kinds(void)
{
	static const char *const names[16] = { [CTI_JCC] = "jcc rel32", [CTI_JCC + 8] = "jcc rel8",
		[CTI_JCXZ] = "jrcxz", [CTI_LOOP] = "loop", [CTI_JMP_IND] = "jmp indirect",
		[CTI_CALL_IND] = "call indirect", [CTI_RET] = "ret", [CTI_SYSCALL] = "syscall" };
	uint64_t n[16] = { 0 }, tramp = 0, all = 0, first = 0;
	char msg[200];
	struct rt_buf b;
	for (struct tstate *ts = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); ts; ts = ts->next) {
		for (int k = 0; k < 16; k++)
			n[k] += ts->kind_traps[k], all += ts->kind_traps[k];
		tramp += ts->tramp_hits;
		first += ts->traps_first;
	}
	for (int k = 0; k < 16; k++)
		if (n[k] && names[k]) {
			b = (struct rt_buf){ msg, 0, sizeof msg };
			rt_puts(&b, names[k]);
			rt_puts(&b, ": ");
			rt_putu(&b, n[k]);
			rt_puts(&b, " traps (");
			put_pct(&b, n[k], all);
			rt_puts(&b, " of traps)");
			say(msg);
		}
	b = (struct rt_buf){ msg, 0, sizeof msg };
	rt_putu(&b, nrelocated);
	rt_puts(&b, " of ");
	rt_putu(&b, nctis);
	rt_puts(&b, " trapped CTIs relocated at start-up; trampoline hits ");
	rt_putu(&b, tramp);
	rt_puts(&b, "; ");
	put_pct(&b, all, all + tramp);
	rt_puts(&b, " of recorded CTIs trapped, ");
	put_pct(&b, all - first, all + tramp);
	rt_puts(&b, " after warm-up (");
	rt_putu(&b, first);
	rt_puts(&b, " traps were their CTI's first)");
	say(msg);
}

/* TK_BTRACE_DEBUG=4: the sites that trapped most, as module offsets (objdump finds them):
 * count, kind, length, and the function's start (no libc: may run in the trap handler). */
static void say_sites(void)
{
	static const char *const names[] = { [CTI_JCC] = "jcc", [CTI_JCXZ] = "jrcxz", [CTI_LOOP] = "loop",
		[CTI_JMP_IND] = "jmp indirect", [CTI_CALL_IND] = "call indirect", [CTI_RET] = "ret",
		[CTI_SYSCALL] = "syscall" };
	uint32_t floor = UINT32_MAX;   /* the count of the last one said: each round the next below */
	size_t last = SIZE_MAX;
	for (int round = 0; round < 40; round++) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < nctis; i++) {
			uint32_t n = site_traps[i];
			if (!n || n > floor || (n == floor && i <= last) ||
			    (best != SIZE_MAX && n <= site_traps[best]))
				continue;
			best = i;
		}
		if (best == SIZE_MAX)
			return;
		floor = site_traps[best];
		last = best;
		const struct cti *c = &ctis[best];
		const struct module *m = module_of(c->addr);
		long f = last_le(fn_start, nfns, c->addr);
		const char *base = m ? m->path : "?";
		for (const char *q = base; *q; q++)
			if (*q == '/')
				base = q + 1;
		char msg[256];
		struct rt_buf b = { msg, 0, sizeof msg };
		rt_puts(&b, "trap site ");
		rt_puts(&b, base);
		rt_puts(&b, "+");
		rt_putx(&b, c->addr - (m ? m->bias : 0));
		rt_puts(&b, ": ");
		rt_putu(&b, floor);
		rt_puts(&b, " traps, ");
		rt_puts(&b, c->kind < sizeof names / sizeof names[0] && names[c->kind] ? names[c->kind] : "other");
		rt_puts(&b, " of ");
		rt_putu(&b, c->len);
		rt_puts(&b, " bytes, function at ");
		rt_putx(&b, f >= 0 ? fn_start[f] - (m ? m->bias : 0) : 0);
		say(msg);
	}
}

static volatile int finishing;   /* a thread is writing the process's end */

/* The process's trace ends (HOW: END_*; SIG: the fatal signal). The other threads may be
 * running traced code: each buffer is taken from its thread between two records (ts_take)
 * and written whole, its trace marked as cut there. A thread that cannot be taken (its
 * record does not end) keeps its last piece, and the reader says it has no end record. */
void finish(int how, int sig)
{
	uint64_t traps = total_traps_of_dead, nthreads = 0;
	struct tstate *me = tls;
	int f = 0;
	if (!active || closed)
		return;
	if (!__atomic_compare_exchange_n(&finishing, &f, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		/* another thread ends the process: let it write the end before this one exits */
		for (int i = 0; i < 100000 && __atomic_load_n(&finishing, __ATOMIC_ACQUIRE) && !closed; i++)
			rt_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
		return;
	}
	for (struct tstate *ts = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); ts; ts = ts->next) {
		traps += ts->traps;
		nthreads++;
		if (ts->done)
			continue;
		if (ts == me) {
			/* a fatal signal inside this thread's own record: that piece is torn */
			if (__atomic_load_n(&ts->lock, __ATOMIC_ACQUIRE) == LOCK_OWNER)
				continue;
			ts->end_reason = how == END_SIGNAL || how == END_SNAPSHOT || how == END_TRIGGER ?
					 TK_BTRACE_THREAD_SIGNAL :
					 TK_BTRACE_THREAD_EXITED;
		} else {
			if (!ts_take(ts))
				continue;
			ts->end_reason = TK_BTRACE_THREAD_CUT;
		}
		end_thread(ts);
	}
	if (debug)
		say_kinds();
	if (site_traps)
		say_sites();
	uint64_t ns, tsc;

	clock_and_tsc(&ns, &tsc);   /* as in the header */
	if (how != END_EXEC) {
		/* --trigger: the call's number in place of a signal's, then the function's name */
		uint64_t st[8 + 8] = { traps, nctis, nthreads, how == END_SIGNAL ? TK_BTRACE_END_SIGNAL :
				       how == END_SNAPSHOT ? TK_BTRACE_END_SNAPSHOT :
				       how == END_TRIGGER ? TK_BTRACE_END_TRIGGER : TK_BTRACE_END_EXIT,
				       tsc, ns, (uint64_t)sig, fd_reopened };
		size_t n = 8 * 8;
		if (how == END_TRIGGER) {
			size_t len = rt_strlen(trigger_name);
			len = len < 63 ? len : 63;
			memcpy(st + 8, trigger_name, len);
			n += (len + 8) / 8 * 8;   /* NUL-terminated */
		}
		put_rec(TK_BTRACE_REC_PROCESS_END, 0, 0, st, (uint32_t)n);
		closed = 1;
	} else {
		uint64_t st[2] = { tsc, ns };
		put_rec(TK_BTRACE_REC_EXEC, 0, 0, st, sizeof st);
		/* if exec fails, the threads go on with fresh pieces */
		for (struct tstate *ts = threads; ts; ts = ts->next) {
			ts->done = 0;
			ts->end_reason = 0;
			__atomic_store_n(&ts->ended, 0, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&finishing, 0, __ATOMIC_RELEASE);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Is the loaded object NAME (as the loader lists it; REAL its resolved path) the module the
 * user asked for? A path names one file; a bare name such as libc.so.6 matches the file
 * name the loader used or the file it resolves to. */
int is_wanted(const char *want, const char *name, const char *real)
{
	if (!strchr(want, '/'))
		return !strcmp(base_name(name), want) || !strcmp(base_name(real), want);
	char wreal[PATH_MAX];
	return realpath(want, wreal) && !strcmp(wreal, real);
}

static int loaded_now(struct dl_phdr_info *info, size_t size, void *data)
{
	char path[PATH_MAX];
	(void)size;
	return info->dlpi_name && info->dlpi_name[0] && realpath(info->dlpi_name, path) &&
	       is_wanted(data, info->dlpi_name, path);
}

/* Modules requested but loaded only later (dlopen) are not traced: say so at the end, by
 * name, so that an empty trace of them is not mistaken for code that never ran. */
static void report_late_modules(void)
{
	for (int i = 0; i < npending; i++)
		if (dl_iterate_phdr(loaded_now, pending[i]))
			say2("module ", pending[i], " was loaded after start-up (dlopen); it is not "
			     "traced: only modules loaded with the program can be");
}

/* While the recorder itself calls libc from the program's thread (bookkeeping in the
 * interposers and at exit), nothing is recorded: that code is not the program's. */
static int mute_self(void)
{
	struct tstate *ts = active ? tls : NULL;
	if (!ts)
		return -1;
	int was = ts->muted;
	ts->muted = 1;
	return was;
}

static void unmute_self(int was)
{
	if (was >= 0 && tls)
		tls->muted = was;
}

/* With libc traced, the process's trace ends at the exit_group system call (after this
 * destructor, stdio's flush at exit and _exit run, and are recorded). */
__attribute__((destructor)) static void btrace_fini(void)
{
	if (active && !closed) {
		int was = mute_self();
		report_late_modules();
		unmute_self(was);
	}
	if (!exits_traced)
		finish(END_EXIT, 0);
}

/* Is this a child that shares or copies the parent's recorder state without a trace of its
 * own (a vfork child, a clone made past libc's fork)? Its exit or exec ends nothing. */
int other_task(void)
{
	return active && ((tls && foreign_task(tls)) || rt_getpid() != out_pid);
}

/* vfork: the child runs in the parent's memory, on its thread state, until it execs or
 * exits. Marked before the call, the child's branches are not recorded into the parent's
 * stream, and its _exit or exec does not end the parent's trace (foreign_task). vfork
 * returns twice on one stack, so the interposer is a tail jump: a frame of its own would
 * be overwritten by the child before the parent returns through it. */
void tk_btrace_before_vfork(void);
__attribute__((visibility("hidden"))) void *tk_btrace_real_vfork;

__attribute__((visibility("hidden"), used)) void tk_btrace_before_vfork(void)
{
	if (!tk_btrace_real_vfork)
		tk_btrace_real_vfork = dlsym(RTLD_NEXT, "vfork");
	struct tstate *ts = active ? thread_state() : NULL;
	if (ts && !ts->done && !foreign_task(ts))
		ts->clone_pending = CLONE_SHARED;
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"\tsub $8, %rsp\n"                         /* keep the ABI's 16-byte alignment */
	"\tcall tk_btrace_before_vfork\n"
	"\tadd $8, %rsp\n"
	"\tjmp *tk_btrace_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");

EXPORT void _exit(int status)
{
	if (!other_task())
		finish(END_EXIT, 0);
	rt_syscall(SYS_exit_group, status, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}

/* Exec replaces the image: flush, then start the new program untraced. */
static char **strip_env(char *const envp[])
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	char **e = malloc((n + 1) * sizeof *e);
	size_t k = 0;
	if (!e)
		return (char **)envp;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], "LD_PRELOAD=", 11) && strncmp(envp[i], "TK_BTRACE_", 10))
			e[k++] = envp[i];
	e[k] = NULL;
	return e;
}

/* Following: ENVP as it is, but for our exec marker, which tells the new program that it
 * is this process's next one (trace_name), so it does not write over this trace. */
static char **mark_exec(char *const envp[])
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	char **e = malloc((n + 2) * sizeof *e), *mark = malloc(48);
	size_t k = 0;
	if (!e || !mark) {
		free(e);
		free(mark);
		return strip_env(envp);   /* not followed rather than overwritten */
	}
	snprintf(mark, 48, "TK_BTRACE_EXEC=%d:%u", (int)rt_getpid(), exec_gen + 1);
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], "TK_BTRACE_EXEC=", 15))
			e[k++] = envp[i];
	e[k++] = mark;
	e[k] = NULL;
	return e;
}

/* Not in a vfork child that shares our state (with libc traced, it is known): its exec
 * does not end the parent's trace, and with FOLLOW its program is a new process's. */
static char **exec_prepare(char *const envp[])
{
	if (other_task())
		return follow ? (char **)envp : strip_env(envp);
	int was = mute_self();
	char **e = follow ? mark_exec(envp) : strip_env(envp);
	unmute_self(was);
	finish(END_EXEC, 0);
	return e;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	if (!real_execve)
		real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
	return real_execve(path, argv, exec_prepare(envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!real_execvpe)
		real_execvpe = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execvpe");
	return real_execvpe(file, argv, exec_prepare(envp));
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* The list forms call execve inside libc, past the interposers: collect and forward. */
#define MAX_EXEC_ARGS 4096
static int collect(const char *arg0, va_list ap, char **argv, char ***envp)
{
	int n = 0;
	argv[n++] = (char *)arg0;
	while (arg0 && n < MAX_EXEC_ARGS) {
		char *a = va_arg(ap, char *);
		argv[n++] = a;
		if (!a)
			break;
	}
	if (n >= MAX_EXEC_ARGS) {
		errno = E2BIG;
		return -1;
	}
	if (envp)
		*envp = va_arg(ap, char **);
	return 0;
}

EXPORT int execl(const char *path, const char *arg, ...)
{
	static char *argv[MAX_EXEC_ARGS];
	va_list ap;
	va_start(ap, arg);
	int rc = collect(arg, ap, argv, NULL);
	va_end(ap);
	return rc < 0 ? rc : execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	static char *argv[MAX_EXEC_ARGS];
	va_list ap;
	va_start(ap, arg);
	int rc = collect(arg, ap, argv, NULL);
	va_end(ap);
	return rc < 0 ? rc : execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	static char *argv[MAX_EXEC_ARGS];
	char **envp;
	va_list ap;
	va_start(ap, arg);
	int rc = collect(arg, ap, argv, &envp);
	va_end(ap);
	return rc < 0 ? rc : execve(path, argv, envp);
}
