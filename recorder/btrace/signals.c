/* libtkbtrace.so: the program's own signal handlers (wrapped so a trap inside them is
 * recorded), fatal signals (the trace up to the crash), and non-local entries (longjmp,
 * C++ landing pads). */
#include "recorder.h"

/* ---- the program's own signal handlers ------------------------------------------------ */

/* A signal interrupts the thread at UC's RIP: if it is inside traced code, tracing stops
 * there (FUP with that IP + TIP.PGD), as Intel PT records an asynchronous event. Returns
 * the IP (0 if it was not inside). */
static uint64_t leave_at(struct tstate *ts, const ucontext_t *uc)
{
	uint64_t rip = 0;
	if (!ts->inside || !ts_enter(ts))
		return 0;
	if (ts->enc.len >= BUF_FLUSH_AT)
		flush_thread(ts);
	rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	rip = module_of(rip) ? island_ip(rip) : logical_ip(rip);
	maybe_psb(ts, rip);
	ptenc_ip(&ts->enc, PT_FUP, rip, 0);
	ptenc_ip(&ts->enc, PT_TIP_PGD, 0, 1);
	ts->inside = 0;
	ts_leave(ts);
	return rip;
}

/* Signal delivery is an asynchronous transfer the decoder cannot see: disable tracing at
 * the interrupted IP (FUP + TIP.PGD), run the handler (its code re-enables tracing when it
 * traps), and expect the thread back at the interrupted IP afterwards. */
void wrap_handler(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct tstate *ts = active ? thread_state() : NULL;
	struct sigaction *pa = &prog_action[sig];
	uint64_t all = ~0ull, old;
	uint64_t saved_resume = 0, interrupted = 0;
	int was_inside = 0;

	if (ts && ts->in_hit) {
		defer_signal(ts, sig, si);   /* a record is in progress (see tramp_hit) */
		return;
	}
	if (ts && foreign_task(ts))
		ts = NULL;
	if (ts) {
		rt_sigmask(SIG_BLOCK, &all, &old);
		was_inside = ts->inside;
		saved_resume = ts->resume;
		interrupted = leave_at(ts, uc);
		ts->resume = 0;
		rt_sigmask(SIG_SETMASK, &old, NULL);
	}
	struct tramp_tls saved_ttls = ttls;   /* the handler's trampolines must not clobber ours */
	if (pa->sa_flags & SA_SIGINFO)
		pa->sa_sigaction(sig, si, ucv);
	else if (pa->sa_handler != SIG_IGN && pa->sa_handler != SIG_DFL)
		pa->sa_handler(sig);
	ttls = saved_ttls;
	if (ts) {
		ts->inside = 0;
		uint64_t after = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
		ts->resume = !was_inside ? saved_resume : module_of(after) ? island_ip(after) : interrupted;
	}
}

/* ---- fatal signals: the trace up to the crash ----------------------------------------
 * Where a signal's default action would end the process (a crash, abort, ^C, a broken
 * pipe), the recorder's handler stands in for it: the buffers are written (the moments
 * before the crash are what the user most wants), the end is recorded with the signal,
 * and the signal is raised again with the default action and its own siginfo, so the
 * process ends as it would have (core dump, exit status). The program is told the action
 * is SIG_DFL; a handler it installs replaces this one. */
#define SIGBIT(s) (1ull << ((s) - 1))
static const uint64_t fatal_signals =
	SIGBIT(SIGHUP) | SIGBIT(SIGINT) | SIGBIT(SIGQUIT) | SIGBIT(SIGILL) | SIGBIT(SIGABRT) |
	SIGBIT(SIGBUS) | SIGBIT(SIGFPE) | SIGBIT(SIGUSR1) | SIGBIT(SIGSEGV) | SIGBIT(SIGUSR2) |
	SIGBIT(SIGPIPE) | SIGBIT(SIGALRM) | SIGBIT(SIGTERM) | SIGBIT(SIGXCPU) | SIGBIT(SIGXFSZ) |
	SIGBIT(SIGVTALRM) | SIGBIT(SIGPROF) | SIGBIT(SIGSYS);


int is_fatal(int sig)
{
	return sig > 0 && sig < 65 && (fatal_signals & SIGBIT(sig));
}

void on_fatal(int sig, siginfo_t *si, void *ucv)
{
	struct tstate *ts = active ? tls : NULL;
	/* a fault raised by an instruction comes back if deferred: it is not */
	int sync = si->si_code > 0 && (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE);
	if (ts && ts->in_hit && !sync) {
		defer_signal(ts, sig, si);
		return;
	}
	if (active && !closed && !other_task()) {
		if (ts && !ts->in_hit && !ts->done)
			leave_at(ts, ucv);
		finish(END_SIGNAL, sig);
	}
	static const uint64_t dfl[4];   /* the kernel's struct sigaction: SIG_DFL */
	rt_syscall(SYS_rt_sigaction, sig, dfl, NULL, 8, 0, 0);
	rt_syscall(SYS_rt_tgsigqueueinfo, rt_getpid(), rt_gettid(), sig, si, 0, 0);
	/* delivered when this handler returns and the signal is unblocked */
}

/* --snapshot-signal: the trace ends here (every thread's ring or last piece written, this
 * thread's stream at the interrupted instruction) and the program goes on, untraced. */
int snapshot_sig;

void on_snapshot(int sig, siginfo_t *si, void *ucv)
{
	struct tstate *ts = active ? tls : NULL;
	if (ts && ts->in_hit) {
		defer_signal(ts, sig, si);
		return;
	}
	if (active && !closed && !other_task()) {
		if (ts && !ts->done)
			leave_at(ts, ucv);
		finish(END_SNAPSHOT, sig);
	}
}

/* Take SIGTRAP out of a signal set without libc's sigdelset, which may be traced: the
 * recorder's own calls would show in the program's trace. */
static void sigset_drop_trap(sigset_t *set)
{
	uint64_t w;
	memcpy(&w, set, 8);   /* glibc's sigset_t: signals 1-64 in its first word */
	w &= ~SIGBIT(SIGTRAP);
	memcpy(set, &w, 8);
}

/* The recorder's stand-in for the default action of a fatal signal. */
void fatal_action(struct sigaction *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sa_sigaction = on_fatal;
	sa->sa_flags = SA_SIGINFO | SA_ONSTACK;
	memset(&sa->sa_mask, 0xff, sizeof sa->sa_mask);
	sigset_drop_trap(&sa->sa_mask);
}

void refuse(const char *why)
{
	say(why);
	put_rec(TK_BTRACE_REC_REFUSED, (uint32_t)rt_gettid(), 0, why, (uint32_t)rt_strlen(why));
	_exit(127);
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	if (!real_sigaction)
		real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (!active || sig <= 0 || sig >= 65 || sig == SIGKILL || sig == SIGSTOP)
		return real_sigaction(sig, act, oldact);
	if (sig == SIGTRAP) {
		if (oldact) {
			memset(oldact, 0, sizeof *oldact);
			oldact->sa_handler = SIG_DFL;
		}
		if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN)
			refuse("the program installs its own SIGTRAP handler, which the branch "
			       "recorder needs; it cannot be recorded (trace discarded)");
		return 0;
	}
	struct sigaction prev = prog_action[sig];
	int rc = 0;
	if (act) {
		struct sigaction mine = *act;
		sigset_drop_trap(&mine.sa_mask);
		if (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN) {
			mine.sa_sigaction = wrap_handler;
			mine.sa_flags |= SA_SIGINFO;
		} else if (act->sa_handler == SIG_DFL && is_fatal(sig)) {
			fatal_action(&mine);
		}
		struct sigaction kept = prog_action[sig];
		prog_action[sig] = *act;
		rc = real_sigaction(sig, &mine, NULL);
		if (rc < 0) {
			prog_action[sig] = kept;
			return rc;
		}
	}
	if (oldact) {
		if (prev.sa_handler == NULL && prev.sa_flags == 0)
			real_sigaction(sig, NULL, oldact);   /* never set by the program */
		else
			*oldact = prev;
		if (oldact->sa_sigaction == on_fatal || oldact->sa_sigaction == on_snapshot)
			memset(oldact, 0, sizeof *oldact);   /* SIG_DFL, as far as the program knows */
	}
	return rc;
}

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sa.sa_flags = SA_RESTART;
	if (sigaction(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static int fix_mask(int how, const sigset_t *set, sigset_t *copy)
{
	if (!set || how == SIG_UNBLOCK)
		return 0;
	*copy = *set;
	sigset_drop_trap(copy);   /* a blocked int3 trap would kill the process */
	return 1;
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;
	if (fix_mask(how, set, &copy))
		set = &copy;
	long rc = rt_syscall(SYS_rt_sigprocmask, how, set, old, 8, 0, 0);
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	return 0;
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;
	if (!real_pthread_sigmask)
		real_pthread_sigmask = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "pthread_sigmask");
	if (fix_mask(how, set, &copy))
		set = &copy;
	return real_pthread_sigmask(how, set, old);
}

/* ---- non-local entries: longjmp and C++ landing pads ------------------------------------
 * Both jump from library code into the middle of a traced function, where no trap marks
 * the spot; the code from there to the next trapped CTI would otherwise have to be placed
 * by guessing (entry_of). The library calls that perform them know the exact address:
 * longjmp reads it from the jmp_buf, the C++ personality routine hands it to the unwinder
 * through _Unwind_SetIP. Both are called through the PLT, so they can be interposed; the
 * address becomes the thread's resume point, which entry_of tries first. */

static void expect_entry(uint64_t ip)
{
	struct tstate *ts;
	if (!active || !module_of(ip) || !(ts = thread_state()) || ts->inside)
		return;
	ts->resume = ip;
}

/* glibc's x86-64 jmp_buf: rbx rbp r12 r13 r14 r15 rsp pc, with rbp, rsp and pc mangled as
 * rol(value ^ guard, 0x11), the pointer guard being at fs:0x30 (tcbhead_t). A value that
 * does not demangle into traced code is ignored (the guess of entry_of stays). */
static void expect_longjmp(const void *env)
{
	uint64_t pc, guard;
	memcpy(&pc, (const uint8_t *)env + 7 * 8, 8);
	__asm__("movq %%fs:0x30, %0" : "=r"(guard));
	pc = (pc >> 0x11 | pc << (64 - 0x11)) ^ guard;
	expect_entry(pc);
}

/* Resolved at start-up: longjmp may be called from a signal handler, where dlsym may not. */
static void (*real_longjmp[4])(struct __jmp_buf_tag *, int);
static const char *const longjmp_names[4] = { "longjmp", "_longjmp", "siglongjmp", "__longjmp_chk" };
static void (*real_setip)(void *, uintptr_t);

void resolve_nonlocal(void)
{
	for (int i = 0; i < 4; i++)
		real_longjmp[i] = (void (*)(struct __jmp_buf_tag *, int))dlsym(RTLD_NEXT, longjmp_names[i]);
	real_setip = (void (*)(void *, uintptr_t))dlsym(RTLD_NEXT, "_Unwind_SetIP");
}

#define LONGJMP_WRAPPER(name, i)                                                           \
	EXPORT __attribute__((noreturn)) void name(struct __jmp_buf_tag env[1], int val)   \
	{                                                                                  \
		if (!real_longjmp[i])                                                      \
			resolve_nonlocal();                                                \
		expect_longjmp(env);                                                       \
		real_longjmp[i](env, val);                                                 \
		__builtin_unreachable();                                                   \
	}
LONGJMP_WRAPPER(longjmp, 0)
LONGJMP_WRAPPER(_longjmp, 1)
LONGJMP_WRAPPER(siglongjmp, 2)
LONGJMP_WRAPPER(__longjmp_chk, 3)

/* libgcc_s is loaded by C++ programs before they can throw, but maybe after start-up. */
EXPORT void _Unwind_SetIP(void *context, uintptr_t ip)
{
	if (!real_setip)
		resolve_nonlocal();
	expect_entry(ip);
	real_setip(context, ip);
}
