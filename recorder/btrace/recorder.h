/* The software branch recorder's shared state and the functions its files call across:
 * btrace.c (buffers, lookups, trampolines, the trap handler), signals.c (the program's
 * handlers, fatal signals, non-local entries), threads.c (threads, fork, exec, exit) and
 * startup.c (modules, symbols, CTIs, patching). Everything here is hidden: the library
 * exports only its interposers. */
#ifndef TK_RECORDER_BTRACE_RECORDER_H
#define TK_RECORDER_BTRACE_RECORDER_H

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <asm/prctl.h>
#include <linux/membarrier.h>
#include <x86intrin.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "tracekit/internal/eh_frame_hdr.h"
#include "cti.h"
#include "ptenc.h"
#include "reloc.h"
#include "rt.h"
#include "tracekit/internal/util.h"

#define EXPORT __attribute__((visibility("default")))
#define BUF_CAP (64 * 1024)
#define BUF_FLUSH_AT (BUF_CAP - 256)
#define PSB_EVERY 4096
#define WALK_LIMIT 4096
#define MAX_MODULES 16

struct module {
	char path[PATH_MAX];
	uint64_t bias;
	uint64_t start, end;          /* executable range (run-time addresses) */
	uint64_t map_lo, map_hi;      /* all loaded segments */
	uint64_t seg_lo[8], seg_hi[8];   /* each loaded segment's file contents (the data scan) */
	int nseg;
	uint8_t *orig;                /* copy of the original code bytes of [start, end) */
	uint16_t *imap;               /* per byte of [start, end): the instruction there (IM_*) */
	uint64_t eh_frame_hdr;        /* PT_GNU_EH_FRAME (run-time), for function starts */
	uint64_t eh_frame_hdr_size;   /* its p_memsz: the table is read no further */
	uint8_t build_id[64];
	unsigned build_id_len;
};

struct tstate {
	struct ptenc enc;
	size_t psb_pos;              /* enc.len at the last PSB; (size_t)-1 forces one */
	int inside;                  /* the decoder is following this thread's code */
	uint64_t resume;             /* where the thread probably re-enters traced code */
	/* Resume points of the untraced calls still in progress while a callback runs (qsort
	 * calling a comparator): the comparator's return to qsort restores the outer one. */
	uint64_t outer_resume[16];
	unsigned nouter;
	int tid;
	int done;
	uint32_t seq;
	uint64_t traps, reentries, unresolved;
	uint64_t traps_long;         /* traps at CTIs of 5 bytes or more (trampoline candidates) */
	uint64_t tramp_hits;         /* CTIs recorded by a trampoline, without a trap */
	uint64_t traps_first;        /* traps that were their CTI's first (warm-up) */
	uint64_t kind_traps[16];     /* traps by CTI kind (+8: jcc rel8), for TK_BTRACE_DEBUG */
	volatile int in_hit;         /* recording from a trampoline (signals are not blocked) */
	volatile int muted;          /* the recorder's own libc calls: their CTIs are not recorded */
	/* Signals that arrived while in_hit, handled when the record is whole (redeliver). */
	uint64_t deferred;
	siginfo_t deferred_info[65];
	/* Who writes this thread's buffer: LOCK_OWNER while the thread records (written by the
	 * thread only), ENDED once a thread that ended the process has taken it (ts_take: it
	 * was flushed, nothing more is recorded). */
	int lock;
	int ended;
	uint64_t end_reason;         /* TK_BTRACE_THREAD_* of its THREAD_END record */
	int born;                    /* has recorded once (a new thread's entry: see birth_site) */
	/* A clone of this thread that shares this state (no TLS of its own) may run before the
	 * thread itself records again: its records are told apart by the thread id. */
	int clone_pending;           /* CLONE_SHARED or CLONE_COPY, cleared by the thread */
	int check_tid;               /* a clone shares memory and runs concurrently: always check */
	struct tstate *next;
	uint8_t *ring;               /* --ring: the last ring_pieces pieces (RING_SLOT each) */
	uint32_t ring_from;          /* pieces before this one are written (exec) or not kept */
	uint8_t buf[BUF_CAP + PTENC_MAX_PACKET * 2];
};
/* A ring slot: u32 length, u32 sequence number, the piece. */
#define RING_SLOT (8 + BUF_CAP + PTENC_MAX_PACKET * 2)


/* The instruction map: at start-up, every instruction of a traced module is decoded once
 * (with Zydis, in the linear sweep) and described in 16 bits at the offset of its first
 * byte, so that the trap handler follows code without a decoder (Zydis calls libc):
 * bits 0-3 length (0: no instruction starts here), 4-5 class, 6 direct jump with rel8,
 * 7 nothing falls through after it (jmp, ret, ud2, hlt), 8-15 its RSP change as int8
 * (IM_RSP_UNKNOWN, or IM_RSP_BIG: look it up in big_rsp_*). */
#define IM_LEN 0x0f
#define IM_JMP 0x10
#define IM_CALL 0x20
#define IM_STOP 0x30        /* any other control transfer, and system calls */
#define IM_CLASS 0x30
#define IM_REL8 0x40
#define IM_ENDS 0x80
#define IM_RSP_UNKNOWN (-128)
#define IM_RSP_BIG 127
#define LOCK_FREE 0
#define LOCK_OWNER 1
#define CLONE_SHARED 1   /* the clone shares memory (vfork, posix_spawn): not recorded */
/* Where a thread is in trampoline code, for a signal that interrupts it: each path stores
 * its code + 1 (fs-relative, no flags touched); tramp_hit clears it once recorded. */
struct tramp_tls {
	uint32_t code_plus1;
	uint64_t dest;
};
#define END_EXIT 0
#define END_EXEC 1
#define END_SIGNAL 2
#define END_SNAPSHOT 3   /* --snapshot-signal: the trace ends, the program goes on */
#define END_TRIGGER 4    /* --trigger: the same at the function's Nth call */

/* A jump written at start-up: the `jmp rel32` at a window's start (LEN 5), or for a CTI
 * with no window, a `jmp rel8` in its place (LEN 2) to an island, 5 bytes of never-executed
 * padding nearby that hold the `jmp rel32` to its trampoline (ISLAND). */
struct window {
	uint64_t at;
	uint8_t jmp[5];
	uint8_t len;
	uint8_t island;
};
extern void *tk_btrace_real_vfork;
extern struct module modules[MAX_MODULES];
extern int nmodules;
extern struct cti *ctis;
extern size_t nctis;
extern uint32_t *cti_hash;
extern size_t cti_hash_mask;
extern size_t nfns;
extern uint64_t *ret_sites;
extern uint64_t *ret_calls;
extern size_t ntj;
extern int nplt;
extern size_t nret_sites;
extern ZydisDecoder decoder;
extern int out_fd;
extern char out_path[PATH_MAX];
extern int follow;
extern unsigned exec_gen;
extern int debug;
extern struct tstate *threads;
extern struct sigaction prog_action[65];
extern uint64_t total_traps_of_dead;
extern char pending[MAX_MODULES][PATH_MAX];
extern int npending;
extern size_t nrelocated;
extern uint32_t *site_traps;
extern uint8_t *cti_trapped;
extern uint32_t *cti_slot;
extern int out_pid;
extern int exits_traced;
extern uint64_t *big_rsp_addr;
extern uint64_t *big_rsp_delta;
extern size_t nbig_rsp;
extern int err_fd;
extern uint64_t ring_pieces;     /* --ring: pieces kept per thread (0: all written) */
extern uint64_t ring_bytes;      /* --ring SIZE as given */
extern uint64_t max_size;        /* --max-size: stream bytes written at most (0: no limit) */
extern uint64_t trigger_at;      /* --trigger: the function's entry (0: none) */
extern uint64_t trigger_n;       /* the call that ends the recording */
extern const char *trigger_name;
extern int call_times;           /* a TSC at every transfer (version 2); TK_BTRACE_CALL_TIMES=0: not */
extern char out_cur[PATH_MAX + 16];
extern int out_fd_floor;
extern int32_t ttls_fs_off;
extern int tramps_on;
extern struct window *windows;
extern size_t nwindows;
int island_install(size_t i, uint64_t island);
uint64_t island_ip(uint64_t rip);
int tail_install(size_t i, const struct reloc_insn *pre, int n);
void paths_link(int m);
size_t start_tramps(struct window *jumps, size_t *n);
extern volatile int active, closed;
extern __thread struct tstate *tls __attribute__((tls_model("initial-exec")));
extern int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
extern int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
extern int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
extern int (*real_execve)(const char *, char *const[], char *const[]);
extern int (*real_execvpe)(const char *, char *const[], char *const[]);
extern __thread struct tramp_tls ttls __attribute__((tls_model("initial-exec")));
extern uint64_t *fn_start, *fn_end;
extern uint64_t *tj_target, *tj_src;
extern uint64_t plt_lo[MAX_MODULES * 4], plt_hi[MAX_MODULES * 4];
extern uint64_t fd_reopened;
extern uint64_t err_dev, err_ino;

void say2(const char *a, const char *b, const char *c);
void say(const char *msg);
int out_fd_settle(long fd);
void out_fd_check(void);
void put_rec(int type, uint32_t tid, uint32_t seq, const void *p, uint32_t n);
void *rec_alloc(size_t n)   /* zeroed, 16-aligned */;
void rec_free(void *p, size_t n);
long last_le(const uint64_t *a, size_t n, uint64_t key);
int rsp_effect(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops, int64_t *d);
int in_plt(uint64_t a);
void flush_thread(struct tstate *ts);
void end_thread(struct tstate *ts);
int ts_take(struct tstate *ts);
void ts_lock_setup(void);
void fixed_segments_setup(void);
extern int ts_fence;
struct tstate *thread_state(void);
int maybe_psb(struct tstate *ts, uint64_t ip);
int foreign_task(struct tstate *ts);
void defer_signal(struct tstate *ts, int sig, const siginfo_t *si);
uint8_t *map_near(int m, size_t size);
void tramp_setup(int m);
int reloc_install(const struct cti *c, size_t i, const struct reloc_insn *pre, int n,
		  const struct reloc_insn *suf, int nsuf);
uint64_t logical_ip(uint64_t rip);
long trigger_setup(void);
void trigger_patch(void);
void end_thread(struct tstate *ts);

/* rt_sigprocmask, done on the interrupted context's mask (the kernel restores it when the
 * handler returns): as the system call would, except that SIGTRAP is never blocked (a
 * blocked int3 trap kills the process; libc blocks all signals around clone, raise and
 * posix_spawn). Returns the system call's result. */
void on_trap(int sig, siginfo_t *si, void *ucv);
void wrap_handler(int sig, siginfo_t *si, void *ucv);
int is_fatal(int sig);
void on_fatal(int sig, siginfo_t *si, void *ucv);
void on_snapshot(int sig, siginfo_t *si, void *ucv);
extern int snapshot_sig;
void fatal_action(struct sigaction *sa);
void refuse(const char *why);
void resolve_nonlocal(void);
void clock_calibrate(void);
void write_header(uint32_t ppid);
int open_output(const char *path);
void child_switch(struct tstate *me, int tid);
void after_fork_child(void);
void finish(int how, int sig);
int is_wanted(const char *want, const char *name, const char *real);
int other_task(void);

static inline const struct cti *cti_find(uint64_t addr)
{
	size_t i = tk_hash64(addr) & cti_hash_mask;
	for (;;) {
		uint32_t v = cti_hash[i];
		if (!v)
			return NULL;
		if (ctis[v - 1].addr == addr)
			return &ctis[v - 1];
		i = (i + 1) & cti_hash_mask;
	}
}
static inline const struct module *module_of(uint64_t addr)
{
	for (int i = 0; i < nmodules; i++)
		if (addr >= modules[i].start && addr < modules[i].end)
			return &modules[i];
	return NULL;
}
/* The thread takes its own buffer for a record; fails inside a record of its own (a signal
 * handler) or once the process's end has taken it. Dekker's mutual exclusion with ts_take,
 * whose side pays for the fence: it runs membarrier(), a barrier on every thread of the
 * process, so this side needs none (a locked instruction here drained the store buffer at
 * every record, about a tenth of a record's time). Without membarrier, ts_fence. */
static inline int ts_enter(struct tstate *ts)
{
	if (__atomic_load_n(&ts->lock, __ATOMIC_RELAXED) != LOCK_FREE)
		return 0;
	__atomic_store_n(&ts->lock, LOCK_OWNER, __ATOMIC_RELAXED);
	if (ts_fence)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ts->ended, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&ts->lock, LOCK_FREE, __ATOMIC_RELAXED);
		return 0;
	}
	return 1;
}
static inline void ts_leave(struct tstate *ts)
{
	__atomic_store_n(&ts->lock, LOCK_FREE, __ATOMIC_RELEASE);
}

#endif
