/* libtkbtrace.so: a software branch recorder preloaded into an unmodified x86-64 program
 * (after Btrace3 on SPARC, seed 003). At start-up it finds every control-transfer
 * instruction (CTI) in the selected modules, keeps a compact copy of each, and replaces the
 * ones whose outcome a flow decoder cannot know (conditional branches, indirect jumps and
 * calls, returns) with int3. The SIGTRAP handler emulates the original instruction on the
 * saved context, records its outcome as Intel PT packets in a per-thread buffer and resumes
 * at the emulated next RIP. The code stays patched for the life of the process, so threads
 * need no coordination beyond their own buffers.
 *
 * Environment (set by `tracekit record --btrace`): TK_BTRACE_OUT output path,
 * TK_BTRACE_MODULES colon-separated module paths (empty: the main executable). */
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
#include <x86intrin.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "tracekit/internal/eh_frame_hdr.h"
#include "cti.h"
#include "ptenc.h"
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
	uint64_t kind_traps[16];     /* traps by CTI kind (+8: jcc rel8), for TK_BTRACE_DEBUG */
	volatile int in_hit;         /* recording from a trampoline (signals are not blocked) */
	volatile int muted;          /* the recorder's own libc calls: their CTIs are not recorded */
	/* Signals that arrived while in_hit, handled when the record is whole (redeliver). */
	uint64_t deferred;
	siginfo_t deferred_info[65];
	/* Who writes this thread's buffer: LOCK_FREE, LOCK_OWNER (the thread, recording) or
	 * LOCK_ENDED (a thread that ended the process flushed it: nothing more is recorded). */
	int lock;
	uint64_t end_reason;         /* TK_BTRACE_THREAD_* of its THREAD_END record */
	int born;                    /* has recorded once (a new thread's entry: see birth_site) */
	/* A clone of this thread that shares this state (no TLS of its own) may run before the
	 * thread itself records again: its records are told apart by the thread id. */
	int clone_pending;           /* CLONE_SHARED or CLONE_COPY, cleared by the thread */
	int check_tid;               /* a clone shares memory and runs concurrently: always check */
	struct tstate *next;
	uint8_t buf[BUF_CAP + PTENC_MAX_PACKET * 2];
};

/* Start-up data, read-only once patched. */
static struct module modules[MAX_MODULES];
static int nmodules;
static struct cti *ctis;              /* trapped CTIs */
static size_t nctis;
static uint32_t *cti_hash;            /* open addressing: index + 1, 0 = empty */
static size_t cti_hash_mask;
static uint64_t *fn_start, *fn_end;   /* sorted function ranges */
static size_t nfns;
static uint64_t *ret_sites;           /* sorted return addresses of all calls */
static uint64_t *ret_calls;           /* the call instruction of each */
static uint64_t *tj_target, *tj_src;  /* direct jumps into PLT slots (tail calls), by target */
static size_t ntj;
static uint64_t plt_lo[MAX_MODULES * 4], plt_hi[MAX_MODULES * 4];
static int nplt;
static size_t nret_sites;
static ZydisDecoder decoder;

static int out_fd = -1;
static uint64_t fd_reopened;          /* times the trace file was reopened (out_fd_check) */
static char out_path[PATH_MAX];
static volatile int active, closed;
static int debug;                     /* TK_BTRACE_DEBUG: explain unresolved re-entries */
static struct tstate *threads;        /* all thread states, pushed lock-free */
static __thread struct tstate *tls __attribute__((tls_model("initial-exec")));
static struct sigaction prog_action[65];   /* the program's own handlers, by signal */
static uint64_t total_traps_of_dead;
static char pending[MAX_MODULES][PATH_MAX];   /* requested modules not loaded at start-up */
static int npending;
static size_t nrelocated;             /* CTIs whose window was relocated at start-up */

static int out_pid;                   /* the process that owns out_fd */
/* libc is traced: its exit system calls are trapped, so threads and the process end there
 * (not when a thread's start routine returns, nor in the destructor) */
static int exits_traced;
/* Addresses just after a clone/clone3 system call seen in traced code: a new thread (with
 * its own TLS, so a fresh state) starts at one of them. */
static uint64_t birth_site[8];
static unsigned nbirth;
/* Big RSP changes (sub rsp, 0x1000) of straight-line instructions, for the walk (IM_RSP_BIG). */
static uint64_t *big_rsp_addr;
static uint64_t *big_rsp_delta;     /* int64_t values */
static size_t nbig_rsp;

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);

/* ---- small async-signal-safe helpers (no libc: see rt.h) --------------------------------- */

static long sys_write_all(int fd, const struct iovec *iov, int n)
{
	/* O_APPEND keeps each record contiguous even with threads and forked children. */
	return rt_syscall(SYS_writev, fd, iov, n, 0, 0, 0);
}

/* The recorder's messages go to a private duplicate of the stderr the program started
 * with (made at start-up, high and close-on-exec): not to whatever the program later puts
 * on descriptor 2, nor lost when it closes it. */
static int err_fd = 2;
static uint64_t err_dev, err_ino;   /* what it was: a program that closes it frees its number */

static void say2(const char *a, const char *b, const char *c)
{
	struct stat st;
	if ((err_dev | err_ino) && (rt_syscall(SYS_fstat, err_fd, &st, 0, 0, 0, 0) != 0 ||
				    st.st_dev != err_dev || st.st_ino != err_ino))
		return;   /* closed, and maybe the number of another file now (even the trace's) */
	static const char pfx[] = "tracekit btrace: ";
	struct iovec iov[5] = { { (void *)pfx, sizeof pfx - 1 }, { (void *)a, rt_strlen(a) },
				{ (void *)b, rt_strlen(b) }, { (void *)c, rt_strlen(c) }, { (void *)"\n", 1 } };
	sys_write_all(err_fd, iov, 5);
}

static void say(const char *msg)
{
	say2(msg, "", "");
}

/* ---- the trace's file descriptor, kept out of the program's reach -------------------
 * Programs close every descriptor they did not open (a loop up to 1024, closefrom), or put
 * /dev/null over them (daemons): the trace's descriptor sits high (near the descriptor
 * limit, where the program's own are unlikely), and before each write the recorder checks
 * that it still is the trace file (its device and inode); if not, it reopens the file by
 * name (without truncating: records are appended) and counts it for the end record, so
 * the trace goes on and `record` says what happened. */
static char out_cur[PATH_MAX + 16];   /* the file out_fd should be: this process's trace */
static uint64_t out_dev, out_ino;
static int out_fd_floor;              /* the lowest descriptor the trace may have */
static volatile int out_fd_busy;

/* FD moved to out_fd_floor or above (close-on-exec), its identity noted; -1 if FD < 0. */
static int out_fd_settle(long fd)
{
	struct stat st;
	if (fd < 0)
		return -1;
	long high = out_fd_floor > 0 ? rt_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, out_fd_floor, 0, 0, 0) : -1;
	if (high >= 0) {
		rt_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
		fd = high;
	}
	if (rt_syscall(SYS_fstat, fd, &st, 0, 0, 0, 0) == 0) {
		out_dev = st.st_dev;
		out_ino = st.st_ino;
	}
	return (int)fd;
}

static int out_fd_is_trace(void)
{
	struct stat st;
	return rt_syscall(SYS_fstat, out_fd, &st, 0, 0, 0, 0) == 0 && st.st_dev == out_dev &&
	       st.st_ino == out_ino;
}

static void out_fd_check(void)
{
	if (out_fd < 0 || out_fd_is_trace())
		return;
	while (__atomic_exchange_n(&out_fd_busy, 1, __ATOMIC_ACQUIRE))
		rt_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
	if (out_fd >= 0 && !out_fd_is_trace()) {
		/* not closed: the descriptor may be the program's now */
		uint64_t dev = out_dev, ino = out_ino;
		int fd = out_fd_settle(rt_syscall(SYS_openat, AT_FDCWD, out_cur, O_WRONLY | O_APPEND | O_CLOEXEC, 0, 0, 0));
		if (fd >= 0 && out_dev == dev && out_ino == ino) {
			out_fd = fd;
			if (!fd_reopened++)
				say("the program closed or replaced the trace's file descriptor; the trace "
				    "file was reopened");
		} else {
			if (fd >= 0)
				rt_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
			out_fd = -1;
			say("the program closed or replaced the trace's file descriptor, and the trace "
			    "file cannot be opened again (gone, or no descriptor free); recording stops");
		}
	}
	__atomic_store_n(&out_fd_busy, 0, __ATOMIC_RELEASE);
}

static void put_rec(int type, uint32_t tid, uint32_t seq, const void *p, uint32_t n)
{
	uint8_t h[TK_BTRACE_REC_HEADER];
	static const uint8_t zeros[8];
	uint32_t magic = TK_BTRACE_REC_MAGIC, sum = tk_btrace_checksum(p, n);
	uint16_t t = (uint16_t)type, flags = 0;

	if (out_fd < 0)
		return;
	memcpy(h, &magic, 4);
	memcpy(h + 4, &t, 2);
	memcpy(h + 6, &flags, 2);
	memcpy(h + 8, &tid, 4);
	memcpy(h + 12, &n, 4);
	memcpy(h + 16, &sum, 4);
	memcpy(h + 20, &seq, 4);
	struct iovec iov[3] = { { h, sizeof h }, { (void *)p, n }, { (void *)zeros, (8 - n % 8) % 8 } };
	out_fd_check();
	if (sys_write_all(out_fd, iov, 3) == -EBADF) {   /* closed since the check */
		out_fd_check();
		sys_write_all(out_fd, iov, 3);
	}
}

/* ---- memory of its own -----------------------------------------------------------------
 * The recorder never allocates from the program's heap: malloc's state (arenas, bins, the
 * break) stays as the program alone leaves it, so that a traced malloc runs as it would
 * without the recorder. Start-up data comes from mmap, in 1 MiB chunks or one mapping for a
 * large block; only large blocks are ever given back. Start-up only (one thread). */
#define REC_CHUNK (1u << 20)

static void *rec_map(size_t n)
{
	long p = rt_syscall(SYS_mmap, NULL, (n + 4095) & ~(size_t)4095, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p < 0 && p > -4096 ? NULL : (void *)p;
}

static void *rec_alloc(size_t n)   /* zeroed, 16-aligned */
{
	static uint8_t *cur;
	static size_t left;
	n = (n + 15) & ~(size_t)15;
	if (n >= REC_CHUNK / 2)
		return rec_map(n);
	if (n > left) {
		if (!(cur = rec_map(REC_CHUNK)))
			return NULL;
		left = REC_CHUNK;
	}
	void *r = cur;
	cur += n;
	left -= n;
	return r;
}

static void rec_free(void *p, size_t n)
{
	if (p && ((n + 15) & ~(size_t)15) >= REC_CHUNK / 2)
		rt_syscall(SYS_munmap, p, (n + 4095) & ~(size_t)4095, 0, 0, 0, 0);
}

/* ---- lookups ---------------------------------------------------------------------- */

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

/* Index of the last element <= key in a sorted array, or -1. */
static long last_le(const uint64_t *a, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a[mid] <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/* How an instruction moves RSP: *d gets the change; returns 0 if it cannot say. */
static int rsp_effect(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops, int64_t *d)
{
	*d = 0;
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
		*d = -(int64_t)(in->operand_width / 8);
		return 1;
	case ZYDIS_MNEMONIC_POP:
		if (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && ops[0].reg.value == ZYDIS_REGISTER_RSP)
			return 0;
		*d = in->operand_width / 8;
		return 1;
	case ZYDIS_MNEMONIC_SUB:
	case ZYDIS_MNEMONIC_ADD:
		if (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && ops[0].reg.value == ZYDIS_REGISTER_RSP) {
			if (ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
				return 0;
			*d = in->mnemonic == ZYDIS_MNEMONIC_ADD ? ops[1].imm.value.s : -ops[1].imm.value.s;
			return 1;
		}
		break;
	case ZYDIS_MNEMONIC_LEA:
		if (ops[0].reg.value == ZYDIS_REGISTER_RSP) {
			if (ops[1].mem.base != ZYDIS_REGISTER_RSP || ops[1].mem.index != ZYDIS_REGISTER_NONE)
				return 0;
			*d = ops[1].mem.disp.value;
			return 1;
		}
		break;
	default:
		break;
	}
	for (unsigned i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER && (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    (ops[i].reg.value == ZYDIS_REGISTER_RSP || ops[i].reg.value == ZYDIS_REGISTER_ESP ||
		     ops[i].reg.value == ZYDIS_REGISTER_SP))
			return 0;
	return 1;
}

/* The instruction map: at start-up, every instruction of a traced module is decoded once
 * (with Zydis, in the linear sweep) and described in 16 bits at the offset of its first
 * byte, so that the trap handler follows code without a decoder (Zydis calls libc):
 * bits 0-3 length (0: no instruction starts here), 4-5 class, 6 direct jump with rel8,
 * 7 nothing falls through after it (jmp, ret, ud2, hlt), 8-15 its RSP change as int8
 * (IM_RSP_UNKNOWN, or IM_RSP_BIG: look it up in big_rsp_*). */
#define IM_LEN 0x0f
#define IM_STRAIGHT 0x00
#define IM_JMP 0x10
#define IM_CALL 0x20
#define IM_STOP 0x30        /* any other control transfer, and system calls */
#define IM_CLASS 0x30
#define IM_REL8 0x40
#define IM_ENDS 0x80
#define IM_RSP_UNKNOWN (-128)
#define IM_RSP_BIG 127

static inline uint16_t imap_at(const struct module *m, uint64_t ip)
{
	return m->imap[ip - m->start];
}

/* Target of the direct jump or call E at IP (its displacement ends the instruction). */
static uint64_t imap_target(const struct module *m, uint64_t ip, uint16_t e)
{
	unsigned len = e & IM_LEN;
	const uint8_t *end = m->orig + (ip - m->start) + len;
	int32_t rel;
	if (e & IM_REL8) {
		rel = (int8_t)end[-1];
	} else {
		memcpy(&rel, end - 4, 4);
	}
	return ip + len + (uint64_t)(int64_t)rel;
}

/* RSP change of the straight-line instruction E at IP; 0 if unknown. */
static int imap_rsp(uint64_t ip, uint16_t e, int64_t *d)
{
	int8_t v = (int8_t)(e >> 8);
	if (v == IM_RSP_UNKNOWN) {
		*d = 0;
		return 0;
	}
	if (v != IM_RSP_BIG) {
		*d = v;
		return 1;
	}
	long k = last_le(big_rsp_addr, nbig_rsp, ip);
	if (k < 0 || big_rsp_addr[k] != ip) {
		*d = 0;
		return 0;
	}
	*d = (int64_t)big_rsp_delta[k];
	return 1;
}

/* Would a decoder starting at FROM reach TO without passing a trapped CTI? It follows
 * straight-line code, direct jumps and direct calls, exactly as a PT flow decoder does
 * between packets. *DELTA gets RSP at FROM minus RSP at TO (*DELTA_OK: whether known). */
static int walk_reaches(uint64_t from, uint64_t to, int64_t *delta, int *delta_ok)
{
	uint64_t ip = from;
	int64_t d = 0, e;
	int ok = 1;

	for (int n = 0; n < WALK_LIMIT; n++) {
		if (ip == to) {
			*delta = -d;
			*delta_ok = ok;
			return 1;
		}
		if (cti_find(ip))
			return 0;
		const struct module *m = module_of(ip);
		if (!m)
			return 0;
		uint16_t im = imap_at(m, ip);
		if (!(im & IM_LEN))
			return 0;
		switch (im & IM_CLASS) {
		case IM_STRAIGHT:
			if (!imap_rsp(ip, im, &e))
				ok = 0;
			d += e;
			ip += im & IM_LEN;
			break;
		case IM_JMP: ip = imap_target(m, ip, im); break;
		case IM_CALL: ip = imap_target(m, ip, im); d -= 8; break;
		default: return 0;
		}
	}
	return 0;
}

static int in_plt(uint64_t a)
{
	for (int i = 0; i < nplt; i++)
		if (a >= plt_lo[i] && a < plt_hi[i])
			return 1;
	return 0;
}

/* Target of the direct call at A (0 if A is not one). */
static uint64_t direct_call_target(uint64_t a)
{
	const struct module *m = module_of(a);
	if (!m || cti_find(a))
		return 0;
	uint16_t im = imap_at(m, a);
	return (im & IM_LEN) && (im & IM_CLASS) == IM_CALL ? imap_target(m, a, im) : 0;
}

/* Code after an unconditional jump or a return cannot be fallen into: when neither a return
 * site nor the function start leads to IP, the thread entered at such a point (a C++
 * landing pad, entered by the unwinder). The last one before IP that reaches it. */
/* Is the instruction at A (in M) a NOP, the padding compilers put between functions
 * (90, 66 90, 0f 1f /0, 66 2e 0f 1f 84 ...)? From the original bytes (no decoder here). */
static int is_nop(const struct module *m, uint64_t a)
{
	const uint8_t *b = m->orig + (a - m->start);
	size_t n = m->end - a, i = 0;
	while (i < n && i < 8 && (b[i] == 0x66 || b[i] == 0x2e))
		i++;
	return i < n && (b[i] == 0x90 || (b[i] == 0x0f && i + 1 < n && b[i + 1] == 0x1f));
}

static uint64_t after_jump_entry(uint64_t fn, uint64_t ip)
{
	const struct module *m = module_of(fn);
	uint64_t a = fn, best[16];
	int nbest = 0, n = 0;
	int64_t d;
	int dok;

	if (!m)
		return 0;
	while (a < ip && n++ < 65536) {
		uint16_t im = imap_at(m, a);
		if (!(im & IM_LEN))
			return 0;
		a += im & IM_LEN;
		if (im & IM_ENDS) {
			/* code entered after a jmp or ret: a function, past the padding before it */
			uint64_t c = a;
			for (uint16_t e; c < ip && (e = imap_at(m, c)) & IM_LEN && is_nop(m, c);)
				c += e & IM_LEN;
			best[nbest++ % 16] = c;
		}
	}
	for (int i = 0; i < nbest && i < 16; i++) {
		uint64_t cand = best[(nbest - 1 - i) % 16];
		if (cand <= ip && walk_reaches(cand, ip, &d, &dok))
			return cand;
	}
	return 0;
}

static int is_ret_site(uint64_t a, long *k)
{
	*k = last_le(ret_sites, nret_sites, a);
	return *k >= 0 && ret_sites[*k] == a;
}

/* Is RA the return address of a call made by untraced code (libc calling main, a thread's
 * start routine, a qsort comparator, an atexit or signal handler)? It lies outside the
 * traced modules and follows a call instruction. The bytes are read with
 * process_vm_readv, which fails instead of faulting on an unmapped page. */
static int untraced_return_address(uint64_t ra)
{
	uint8_t b[8];
	long k;
	if (ra < 0x10000 || ra >= 0x800000000000ull || module_of(ra) || is_ret_site(ra, &k))
		return 0;
	if (rt_read_mem(b, ra - 8, sizeof b) < 0)
		return 0;
	if (b[3] == 0xe8)   /* call rel32 */
		return 1;
	static const int ff_at[] = { 2, 3, 4, 6, 7 };   /* call r/m64: ff /2 */
	for (unsigned i = 0; i < sizeof ff_at / sizeof *ff_at; i++)
		if (b[8 - ff_at[i]] == 0xff && ((b[9 - ff_at[i]] >> 3) & 7) == 2)
			return 1;
	return 0;
}

/* N code bytes at A as the program's file has them: traced code is patched (int3s,
 * trampoline jumps), so its bytes come from the copy; others from memory, by a read
 * that fails instead of faulting. */
static int read_code(void *dst, uint64_t a, size_t n)
{
	const struct module *m = module_of(a);
	if (m && a + n <= m->end) {
		memcpy(dst, m->orig + (a - m->start), n);
		return 0;
	}
	return rt_read_mem(dst, a, n);
}

/* The function that the call returning to RA called, where its code says so: a `call
 * rel32` to a function or to a PLT stub `jmp [rip+d]` (after endbr64, with bnd or not), or
 * a `call [rip+d]`; the GOT slot holds the function (bound by the time it runs). 0 if
 * unknown. */
static uint64_t called_function(uint64_t ra)
{
	uint8_t b[6], s[12];
	int32_t d;
	uint64_t slot, t;
	if (read_code(b, ra - 6, sizeof b) < 0)
		return 0;
	if (b[0] == 0xff && b[1] == 0x15) {
		memcpy(&d, b + 2, 4);
		slot = ra + (uint64_t)(int64_t)d;
	} else if (b[1] == 0xe8) {
		memcpy(&d, b + 2, 4);
		t = ra + (uint64_t)(int64_t)d;
		if (module_of(t) && !in_plt(t))
			return t;
		if (read_code(s, t, sizeof s) < 0)
			return 0;
		unsigned o = 0;
		if (s[0] == 0xf3 && s[1] == 0x0f && s[2] == 0x1e && s[3] == 0xfa)
			o = 4;
		if (s[o] == 0xf2)
			o++;
		if (s[o] != 0xff || s[o + 1] != 0x25)
			return 0;
		memcpy(&d, s + o + 2, 4);
		slot = t + o + 6 + (uint64_t)(int64_t)d;
	} else {
		return 0;
	}
	return rt_read_mem(&t, slot, 8) < 0 ? 0 : t;
}

/* The thread entered the function FN (its start reaches IP, RSP changing by D) through a
 * call returning to RA: at FN, or at the function the call named when that one jumps on
 * to FN (qsort to __qsort_r, strtol to ____strtol_l_internal). */
static uint64_t wrapper_entry(uint64_t ra, uint64_t fn, uint64_t ip, int64_t d)
{
	uint64_t callee = called_function(ra);
	int64_t d2;
	int dok2;
	if (callee && callee != fn && module_of(callee) && walk_reaches(callee, ip, &d2, &dok2) && dok2 &&
	    d2 == d)
		return callee;
	return fn;
}

/* Where did the thread enter traced code, given that it is now at IP with stack pointer
 * RSP and has passed no trapped CTI since? Candidates: the return site after the call that
 * left (RESUME), other return sites of IP's function (longjmp, exceptions), the function's
 * start (called from outside). A start reached by a direct call from traced code (its
 * return address on the stack is a return site) means the entry is further up: follow the
 * stack. Returns 0 if no candidate fits. */
static uint64_t entry_of(uint64_t resume, uint64_t ip, uint64_t rsp, int depth)
{
	int64_t d;
	int dok;
	long k;

	if (resume && walk_reaches(resume, ip, &d, &dok))
		return resume;
	long f = last_le(fn_start, nfns, ip);
	if (f < 0 || ip >= fn_end[f] || depth > 64)
		return 0;
	/* The stack decides first: if the function's start leads to IP and the word where its
	 * return address would be was pushed by a call in untraced code, the thread entered
	 * here from outside, even when a return site of the function (a loop calling out)
	 * also leads to IP. A PLT slot is never called from outside (see below). */
	if (!in_plt(fn_start[f]) && walk_reaches(fn_start[f], ip, &d, &dok) && dok) {
		uint64_t ra;
		memcpy(&ra, (const void *)(uintptr_t)(rsp + (uint64_t)d), 8);
		if (untraced_return_address(ra))
			return wrapper_entry(ra, fn_start[f], ip, d);
	}
	/* A return site and the function start may both lead to IP (a loop whose condition
	 * is tested at the bottom, after a call). A return that came back leaves its return
	 * address just below the stack pointer: prefer the site with that evidence, then the
	 * start, then a site without it (pushes since may have overwritten the evidence). */
	uint64_t site = 0;
	for (long r = last_le(ret_sites, nret_sites, ip); r >= 0 && ret_sites[r] >= fn_start[f]; r--)
		if (walk_reaches(ret_sites[r], ip, &d, &dok)) {
			uint64_t below;
			if (!dok || d < 0)
				return ret_sites[r];
			memcpy(&below, (const void *)(uintptr_t)(rsp + (uint64_t)d - 8), 8);
			if (below == ret_sites[r])
				return ret_sites[r];
			if (!site)
				site = ret_sites[r];
		}
	if (!walk_reaches(fn_start[f], ip, &d, &dok))
		return site ? site : after_jump_entry(fn_start[f], ip);
	if (site && !dok)
		return site;
	if (dok) {
		uint64_t entry_rsp = rsp + (uint64_t)d, ra;
		memcpy(&ra, (const void *)(uintptr_t)entry_rsp, 8);
		if (is_ret_site(ra, &k)) {
			/* called directly, or through a function that jumps here: from further up */
			uint64_t t = direct_call_target(ret_calls[k]);
			int64_t d2;
			int dok2;
			if (t && (t == fn_start[f] || (walk_reaches(t, ip, &d2, &dok2) && dok2 && d2 == d))) {
				uint64_t up = entry_of(0, ret_calls[k], entry_rsp + 8, depth + 1);
				if (up)
					return up;
			}
			/* a call through a PLT slot bound lazily: ld.so jumped to the function
			 * it named, which may jump on to this one */
			if (!in_plt(fn_start[f]))
				return wrapper_entry(ra, fn_start[f], ip, d);
		}
	}
	/* Nothing calls into a PLT slot from outside: a function tail-jumped to it. */
	if (dok && in_plt(fn_start[f])) {
		long t = last_le(tj_target, ntj, fn_start[f]);
		if (t >= 0 && tj_target[t] == fn_start[f] && (t == 0 || tj_target[t - 1] != fn_start[f])) {
			uint64_t up = entry_of(0, tj_src[t], rsp + (uint64_t)d, depth + 1);
			if (up)
				return up;
		}
	}
	return fn_start[f];
}

/* The thread comes back into traced code (from a library, a signal handler, longjmp, ...)
 * and traps at IP: find where it entered, so the decoder counts the code in between. A
 * thread that never recorded before and was created in traced code (libc's clone) starts
 * just after the clone system call. */
static uint64_t find_entry(struct tstate *ts, uint64_t ip, uint64_t rsp)
{
	int64_t d;
	int dok;
	ts->reentries++;
	if (!ts->born)
		for (unsigned i = 0; i < __atomic_load_n(&nbirth, __ATOMIC_ACQUIRE) && i < 8; i++)
			if (walk_reaches(birth_site[i], ip, &d, &dok))
				return birth_site[i];
	uint64_t e = entry_of(ts->resume, ip, rsp, 0);
	if (e)
		return e;
	ts->unresolved++;
	if (debug) {
		char msg[96];
		struct rt_buf b = { msg, 0, sizeof msg };
		rt_puts(&b, "unresolved re-entry before ");
		rt_putx(&b, ip);
		rt_puts(&b, " (resume ");
		rt_putx(&b, ts->resume);
		rt_puts(&b, ")");
		say(msg);
	}
	return ip;
}

/* The return address of a jump out of traced code: at [rsp] for a PLT stub or a tail
 * call, two words deeper for the lazy-binding PLT0 stub, which pushed two values. */
static uint64_t return_address(const greg_t *g)
{
	const uint64_t *sp = (const uint64_t *)(uintptr_t)g[REG_RSP];
	for (int i = 0; i < 3; i++) {
		long k;
		if (is_ret_site(sp[i], &k))
			return sp[i];
	}
	return 0;
}

/* ---- per-thread buffers -------------------------------------------------------------- */

static void flush_thread(struct tstate *ts)
{
	ptenc_tnt_flush(&ts->enc);
	if (ts->enc.len && !closed)
		put_rec(TK_BTRACE_REC_STREAM, (uint32_t)ts->tid, ts->seq++, ts->enc.buf,
			(uint32_t)ts->enc.len);
	ts->enc.len = 0;
	ts->psb_pos = (size_t)-1;   /* every piece starts with a PSB: a sync point */
}

static void end_thread(struct tstate *ts)
{
	uint64_t st[6] = { ts->traps, ts->reentries, ts->unresolved, ts->traps_long, ts->tramp_hits,
			   ts->end_reason };
	flush_thread(ts);
	if (!closed && !ts->done)
		put_rec(TK_BTRACE_REC_THREAD_END, (uint32_t)ts->tid, ts->seq++, st, sizeof st);
	ts->done = 1;
}

#define LOCK_FREE 0
#define LOCK_OWNER 1
#define LOCK_ENDED 2

/* The thread takes its own buffer for a record; fails once the process's end has taken it. */
static inline int ts_enter(struct tstate *ts)
{
	int f = LOCK_FREE;
	return __atomic_compare_exchange_n(&ts->lock, &f, LOCK_OWNER, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void ts_leave(struct tstate *ts)
{
	__atomic_store_n(&ts->lock, LOCK_FREE, __ATOMIC_RELEASE);
}

/* The thread ending the process takes another thread's buffer for good, waiting for a
 * record in progress (microseconds) but not for a thread that cannot run: 0 if not taken. */
static int ts_take(struct tstate *ts)
{
	for (int i = 0; i < 20000; i++) {
		int f = LOCK_FREE;
		if (__atomic_compare_exchange_n(&ts->lock, &f, LOCK_ENDED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ||
		    f == LOCK_ENDED)
			return 1;
		rt_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
	}
	return 0;
}

static struct tstate *thread_state(void)
{
	struct tstate *ts = tls;
	if (ts)
		return ts;
	long p = rt_syscall(SYS_mmap, NULL, sizeof *ts, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p < 0 && p > -4096)
		return NULL;
	ts = (struct tstate *)p;   /* mmap gives zeros */
	ts->enc.buf = ts->buf;
	ts->psb_pos = (size_t)-1;
	ts->tid = rt_gettid();
	struct tstate *head = __atomic_load_n(&threads, __ATOMIC_ACQUIRE);
	do
		ts->next = head;
	while (!__atomic_compare_exchange_n(&threads, &head, ts, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
	tls = ts;
	return ts;
}

static int maybe_psb(struct tstate *ts, uint64_t ip)
{
	if (ts->psb_pos == (size_t)-1 || ts->enc.len - ts->psb_pos >= PSB_EVERY) {
		ptenc_tnt_flush(&ts->enc);
		ts->psb_pos = ts->enc.len;
		ptenc_psb(&ts->enc, __rdtsc(), ts->inside, ip);
		return 1;
	}
	return 0;
}

/* The time where tracing starts again, in a TSC before the TIP.PGE: the thread's time
 * outside traced code (library calls, system calls, sleeps) ends there instead of at the
 * next PSB+. None where tracing stops: that TSC would follow the last TNT packet, and
 * decoders differ in whether its time goes to the instructions before the next packet is
 * needed (the stream would not give one answer). A PSB+ just written has its TSC. */
static void stamp(struct tstate *ts, int psb_written)
{
	if (!psb_written)
		ptenc_tsc(&ts->enc, __rdtsc());
}

#define CLONE_SHARED 1   /* the clone shares memory (vfork, posix_spawn): not recorded */
#define CLONE_COPY 2     /* the clone has a copy (fork): it starts its own trace */

static void child_switch(struct tstate *ts, int tid);

/* Is the task running now not the thread that owns TS? A clone made without a TLS of its
 * own (vfork, posix_spawn's child, fork) runs with its parent's state until it, or the
 * parent, records: the thread id tells them apart. A forked child switches to its own
 * trace file here; a child that shares memory is not recorded. */
static int foreign_task(struct tstate *ts)
{
	if (!(ts->clone_pending | ts->check_tid))
		return 0;
	int tid = rt_gettid();
	if (tid == ts->tid) {
		ts->clone_pending = 0;   /* the parent is back: its child has exec'd, exited or forked off */
		return 0;
	}
	if (ts->clone_pending == CLONE_COPY && !ts->check_tid) {
		child_switch(ts, tid);
		return 0;
	}
	return 1;
}

/* TK_BTRACE_DEBUG=2: where the thread leaves traced code, and where it enters again (NEXT,
 * found at the trap at C while not inside). */
static void leave_message(const struct cti *c, uint64_t next, uint64_t resume, int enter)
{
	char msg[96];
	struct rt_buf b = { msg, 0, sizeof msg };
	rt_puts(&b, enter ? "enter before " : "leave at ");
	rt_putx(&b, c->addr);
	rt_puts(&b, enter ? " at " : " to ");
	rt_putx(&b, next);
	rt_puts(&b, ", resume ");
	rt_putx(&b, resume);
	say(msg);
}

static void record_locked(struct tstate *ts, const struct cti *c, const struct cti_result *r,
			  const greg_t *g, uint64_t rsp, int trap);

/* Record one CTI's outcome (the CTI at c->addr, next RIP r->next); TRAP: it trapped (else a
 * trampoline recorded it). */
static void record(struct tstate *ts, const struct cti *c, const struct cti_result *r, const greg_t *g,
		   uint64_t rsp, int trap)
{
	if (ts->muted || ts->done || foreign_task(ts) || !ts_enter(ts))
		return;
	record_locked(ts, c, r, g, rsp, trap);
	ts_leave(ts);
}

static void record_locked(struct tstate *ts, const struct cti *c, const struct cti_result *r,
			  const greg_t *g, uint64_t rsp, int trap)
{
	if (trap) {
		ts->traps++;
		ts->traps_long += c->len >= 5;
		ts->kind_traps[(c->kind + (c->kind == CTI_JCC && c->len == 2 ? 8 : 0)) & 15]++;
	} else {
		ts->tramp_hits++;
	}
	if (ts->enc.len >= BUF_FLUSH_AT)
		flush_thread(ts);
	if (!ts->inside) {
		uint64_t entry = find_entry(ts, c->addr, rsp);
		if (debug > 1)
			leave_message(c, entry, ts->resume, 1);
		if (entry != ts->resume) {   /* a new entry from untraced code, not the return */
			if (ts->nouter == 16) {
				for (int i = 0; i < 15; i++)
					ts->outer_resume[i] = ts->outer_resume[i + 1];
				ts->nouter--;
			}
			ts->outer_resume[ts->nouter++] = ts->resume;
		}
		stamp(ts, maybe_psb(ts, c->addr));
		ptenc_ip(&ts->enc, PT_TIP_PGE, entry, 0);
		ts->inside = 1;
		ts->born = 1;
	} else {
		maybe_psb(ts, c->addr);
	}
	switch (c->kind) {
	case CTI_JCC:
	case CTI_JCXZ:
	case CTI_LOOP:
		ptenc_tnt(&ts->enc, r->taken);
		return;
	case CTI_SYSCALL:
		/* a far transfer to the kernel, which is not traced: like Intel PT with user-mode
		 * tracing, TIP.PGD without an IP here, TIP.PGE where the thread comes back */
		ptenc_ip(&ts->enc, PT_TIP_PGD, 0, 1);
		ts->inside = 0;
		ts->resume = c->addr + c->len;
		return;
	default:
		break;
	}
	if (module_of(r->next)) {
		ptenc_ip(&ts->enc, PT_TIP, r->next, 0);
		return;
	}
	/* Leaving traced code: tracing is off until the thread traps again. */
	ptenc_ip(&ts->enc, PT_TIP_PGD, r->next, 0);
	ts->inside = 0;
	if (c->kind == CTI_CALL_IND)
		ts->resume = c->addr + c->len;
	else if (c->kind == CTI_JMP_IND)   /* a PLT stub or tail call: back to our caller */
		ts->resume = return_address(g);
	else if (c->kind == CTI_RET && ts->nouter)   /* a callback returns to its caller */
		ts->resume = ts->outer_resume[--ts->nouter];
	else
		ts->resume = 0;
	if (debug > 1)
		leave_message(c, r->next, ts->resume, 0);
}


/* ---- trampolines: conditional jumps of 6 bytes record without a signal -----------------
 * On its first trap, a `jcc rel32` is overwritten with `jmp rel32` to generated code that
 * repeats the condition and, on each path, calls tramp_hit() through a stub that saves all
 * registers, the flags and the extended state (XSAVE), then jumps on to the target or the
 * fall-through. The recorded packets are the same as with the trap. */

#define TRAMP_AREA (16u << 20)   /* reserved; pages are touched only as trampolines are made */

static uint8_t *tramp_area[MAX_MODULES];
static size_t tramp_used[MAX_MODULES];
static uint8_t *tramp_stub[MAX_MODULES];
static uint8_t *tramp_done;           /* per CTI: 1 once rewritten (or given up) */
static uint32_t *tramp_index[MAX_MODULES];  /* CTI index of each trampoline, in area order */
static size_t tramp_count[MAX_MODULES];
static size_t tramp_base[MAX_MODULES];   /* offset of the first trampoline (after the stub) */
/* Where a thread is in trampoline code, for a signal that interrupts it: each path stores
 * its code + 1 (fs-relative, no flags touched); tramp_hit clears it once recorded. */
struct tramp_tls {
	uint32_t code_plus1;
	uint64_t dest;
};
static __thread struct tramp_tls ttls __attribute__((tls_model("initial-exec")));
static int32_t ttls_fs_off;

#define TRAMP_PATH 42        /* bytes per path; the call returns at offset 28 */
/* Slots on a fixed grid: [relocated prefix][jcc rel32 + two paths | one path (+ ret)], and
 * in the last TRAMP_META bytes, never executed, how the prefix maps to the original code:
 * prefix length, instruction count, each one's offset in the slot and in the original
 * window, and the window's distance back from the CTI. A zeroed area means no prefix. */
#define TRAMP_SIZE 128
#define TRAMP_META 16
#define RELOC_MAX_INSNS 6
#define RELOC_MAX_BYTES (TRAMP_SIZE - TRAMP_META - (6 + 2 * TRAMP_PATH))
static int tramps_on;
static volatile int patch_lock;

/* A signal that arrived while the thread was recording (in_hit), delivered again now that
 * the record is whole, with its own siginfo: the program's handler (wrap_handler) or the
 * recorder's end of the process (on_fatal) runs here, as if the signal had come a few
 * instructions later. No system call is needed on the recording path itself. */
static void redeliver(struct tstate *ts)
{
	while (ts->deferred) {
		int sig = __builtin_ctzll(ts->deferred) + 1;
		siginfo_t si = ts->deferred_info[sig];
		ts->deferred &= ~(1ull << (sig - 1));
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		rt_syscall(SYS_rt_tgsigqueueinfo, rt_getpid(), rt_gettid(), sig, &si, 0, 0);
	}
}

/* Keep SIG for redeliver: it interrupted a record in progress. */
static void defer_signal(struct tstate *ts, int sig, const siginfo_t *si)
{
	ts->deferred_info[sig] = *si;
	ts->deferred |= 1ull << (sig - 1);
}

static void tramp_hit(uint32_t code, uint64_t rsp)
{
	const struct cti *c = &ctis[code >> 1];
	struct cti_result r = { (code & 1) ? c->target : c->addr + c->len, (int)(code & 1) };
	greg_t g[NGREG];

	/* A signal handler of the program must not record into the buffer half-way: one that
	 * arrives meanwhile is deferred (wrap_handler sees in_hit) and delivered again at the
	 * end. Nothing here touches errno: no libc (rt.h). */
	if (c->kind == CTI_RET)   /* a relocated ret: it returns through this very word */
		memcpy(&r.next, (const void *)(uintptr_t)rsp, 8);
	else if ((c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) && !c->is_mem)   /* the path stored the register */
		r.next = ttls.dest;
	else if (c->kind != CTI_JCC)   /* jmp/call [rip+disp]: the pointer, read once, is where we go */
		memcpy(&r.next, (const void *)(uintptr_t)(c->addr + c->len + (uint64_t)(int64_t)c->disp), 8);
	struct tstate *ts = active ? thread_state() : NULL;
	if (ts) {
		ts->in_hit = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		g[REG_RSP] = (greg_t)rsp;
		record(ts, c, &r, g, rsp, 0);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	ttls.dest = r.next;
	ttls.code_plus1 = 0;
	if (ts) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		ts->in_hit = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (ts->deferred)
			redeliver(ts);
	}
}

static void emit(uint8_t **p, const void *b, size_t n)
{
	memcpy(*p, b, n);
	*p += n;
}

static void emit_rel32(uint8_t **p, const uint8_t *to)
{
	int32_t rel = (int32_t)(to - (*p + 4));
	emit(p, &rel, 4);
}

/* The shared save/call/restore stub; entered by call with the code in edi (saved by the
 * caller) and the red zone already skipped. */
static uint8_t *make_stub(uint8_t *p)
{
	uint8_t *start = p;
	static const uint8_t save[] = {
		0x9c, 0xfc,                         /* pushfq; cld */
		0x50, 0x51, 0x52, 0x56,             /* push rax rcx rdx rsi */
		0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* push r8-r11 */
		0x53,                               /* push rbx */
		/* rsp at the CTI = entry + 8 (return) + 8 (rdi) + 128 (red zone); 80 pushed */
		0x48, 0x8d, 0xb4, 0x24, 0xe0, 0x00, 0x00, 0x00, /* lea rsi, [rsp + 224] */
		0x48, 0x89, 0xe3,                   /* mov rbx, rsp */
		0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, /* sub rsp, 4096 */
		0x48, 0x83, 0xe4, 0xc0,             /* and rsp, -64 */
		0x31, 0xc9,                         /* xor ecx, ecx */
	};
	emit(&p, save, sizeof save);
	for (int i = 0; i < 8; i++) {   /* the XSAVE header must start zeroed */
		uint8_t mov[] = { 0x48, 0x89, 0x8c, 0x24, (uint8_t)(0x00 + 8 * i), 0x02, 0x00, 0x00 };
		emit(&p, mov, sizeof mov);
	}
	static const uint8_t xs[] = {
		0xb8, 0xff, 0xff, 0xff, 0xff, 0xba, 0xff, 0xff, 0xff, 0xff, /* mov eax,-1; mov edx,-1 */
		0x0f, 0xae, 0x24, 0x24,             /* xsave [rsp] */
		0x48, 0xb8,                         /* mov rax, imm64 */
	};
	emit(&p, xs, sizeof xs);
	uint64_t fn = (uint64_t)(uintptr_t)tramp_hit;
	emit(&p, &fn, 8);
	static const uint8_t rest[] = {
		0xff, 0xd0,                         /* call rax */
		0xb8, 0xff, 0xff, 0xff, 0xff, 0xba, 0xff, 0xff, 0xff, 0xff,
		0x0f, 0xae, 0x2c, 0x24,             /* xrstor [rsp] */
		0x48, 0x89, 0xdc,                   /* mov rsp, rbx */
		0x5b,                               /* pop rbx */
		0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* pop r11-r8 */
		0x5e, 0x5a, 0x59, 0x58,             /* pop rsi rdx rcx rax */
		0x9d, 0xc3,                         /* popfq; ret */
	};
	emit(&p, rest, sizeof rest);
	(void)start;
	return p;
}

/* One path of a trampoline: record CODE, go to TO. */
static void emit_path(uint8_t **p, uint8_t *stub, uint32_t code, uint64_t to)
{
	static const uint8_t st[] = { 0x64, 0xc7, 0x04, 0x25 };   /* mov dword fs:[disp32], imm32 */
	uint32_t cp1 = code + 1;
	emit(p, st, sizeof st);
	emit(p, &ttls_fs_off, 4);
	emit(p, &cp1, 4);
	static const uint8_t pre[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x57, 0xbf }; /* lea rsp,[rsp-128]; push rdi; mov edi, */
	emit(p, pre, sizeof pre);
	emit(p, &code, 4);
	uint8_t call = 0xe8;
	emit(p, &call, 1);
	emit_rel32(p, stub);
	static const uint8_t post[] = { 0x5f, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00, 0xe9 }; /* pop rdi; lea rsp,[rsp+128]; jmp */
	emit(p, post, sizeof post);
	emit_rel32(p, (uint8_t *)(uintptr_t)to);
}

static int xsave_ok(void)
{
	unsigned a, b, c, d;
	__asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
	if (!(c & (1u << 26)) || !(c & (1u << 27)))
		return 0;
	__asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xd), "c"(0));
	return b && b + 64 <= 4096;
}

/* SIZE bytes of executable memory within +-2 GiB of module M's code (reached by rel32). */
static uint8_t *map_near(int m, size_t size)
{
	uint64_t lo = modules[m].start, hi = modules[m].end;
	for (uint64_t step = 1; step < 64; step++) {
		uint64_t cands[2] = { (lo - step * (32u << 20)) & ~0xfffffULL, ((hi + 0xfffff) & ~0xfffffULL) + step * (32u << 20) };
		for (int k = 0; k < 2; k++) {
			void *p = mmap((void *)(uintptr_t)cands[k], size, PROT_READ | PROT_WRITE | PROT_EXEC,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == MAP_FAILED)
				continue;
			if ((uint64_t)(uintptr_t)p != cands[k]) {
				munmap(p, size);
				continue;
			}
			return p;
		}
	}
	return NULL;
}

/* An area for module M's trampolines within +-2 GiB of its code. */
static void tramp_setup(int m)
{
	uint8_t *p = map_near(m, TRAMP_AREA);
	if (!p)
		return;
	tramp_index[m] = rec_alloc((TRAMP_AREA / TRAMP_SIZE + 1) * sizeof(uint32_t));
	if (!tramp_index[m]) {
		munmap(p, TRAMP_AREA);
		return;
	}
	tramp_stub[m] = p;
	/* trampolines start on a TRAMP_SIZE grid after the stub */
	size_t stub = (size_t)(make_stub(p) - p);
	tramp_used[m] = tramp_base[m] = (stub + TRAMP_SIZE - 1) / TRAMP_SIZE * TRAMP_SIZE;
	tramp_area[m] = p;
}

/* The path of an indirect jump or call through [rip+disp]: record (tramp_hit reads the
 * pointer and leaves it in the thread's ttls.dest), push the return address for a call,
 * and jump through ttls.dest, so the recorded target is exactly the one taken. */
static void emit_indirect(uint8_t **p, uint8_t *stub, const struct cti *c, uint32_t code)
{
	static const uint8_t st[] = { 0x64, 0xc7, 0x04, 0x25 };
	uint32_t cp1 = code + 1;
	emit(p, st, sizeof st);
	emit(p, &ttls_fs_off, 4);
	emit(p, &cp1, 4);
	static const uint8_t pre[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x57, 0xbf };
	emit(p, pre, sizeof pre);
	emit(p, &code, 4);
	uint8_t call = 0xe8;
	emit(p, &call, 1);
	emit_rel32(p, stub);
	static const uint8_t post[] = { 0x5f, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
	emit(p, post, sizeof post);
	uint8_t *lit_ref = NULL;
	if (c->kind == CTI_CALL_IND) {
		static const uint8_t push[] = { 0xff, 0x35 };   /* push qword [rip+rel32] */
		emit(p, push, sizeof push);
		lit_ref = *p;
		*p += 4;
	}
	static const uint8_t jmp[] = { 0x64, 0xff, 0x24, 0x25 };   /* jmp qword fs:[disp32] */
	emit(p, jmp, sizeof jmp);
	int32_t dest_off = ttls_fs_off + (int32_t)offsetof(struct tramp_tls, dest);
	emit(p, &dest_off, 4);
	if (lit_ref) {
		uint64_t ret = c->addr + c->len;
		int32_t rel = (int32_t)(*p - (lit_ref + 4));
		memcpy(lit_ref, &rel, 4);
		emit(p, &ret, 8);
	}
}

static int tramp_eligible(const struct cti *c)
{
	if (c->len != 6)
		return 0;
	if (c->kind == CTI_JCC)
		return 1;
	return (c->kind == CTI_JMP_IND || c->kind == CTI_CALL_IND) && c->is_mem &&
	       c->base == CTI_REG_RIP && c->index == CTI_REG_NONE && c->seg == CTI_SEG_NONE &&
	       c->asize == 64;
}

/* Replace the jcc C (index I), which just trapped, by a jump to its trampoline. Runs in the
 * trap handler with all signals blocked. */

/* A conditional branch in a trampoline: the jcc itself, then the not-taken and the taken
 * path, each recording outcome I << 1 | taken through STUB and going on at its target. */
static void emit_jcc_paths(uint8_t **pp, uint8_t *stub, const struct cti *c, size_t i)
{
	uint8_t jcc[2] = { 0x0f, (uint8_t)(0x80 + c->cond) };
	emit(pp, jcc, 2);
	uint8_t *rel_at = *pp;
	*pp += 4;
	emit_path(pp, stub, (uint32_t)(i << 1), c->addr + c->len);
	uint8_t *taken = *pp;
	emit_path(pp, stub, (uint32_t)(i << 1 | 1), c->target);
	int32_t rel = (int32_t)(taken - (rel_at + 4));
	memcpy(rel_at, &rel, 4);
}
static void tramp_install(const struct cti *c, size_t i)
{
	if (__atomic_exchange_n(&tramp_done[i], 1, __ATOMIC_ACQ_REL))
		return;
	const struct module *mod = module_of(c->addr);
	int m = (int)(mod - modules);
	if (!mod || !tramp_area[m])
		return;
	while (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE))
		;
	if (tramp_used[m] + TRAMP_SIZE > TRAMP_AREA || tramp_count[m] >= TRAMP_AREA / TRAMP_SIZE)
		goto out;
	uint8_t *t = tramp_area[m] + tramp_used[m], *p = t;
	if (c->kind == CTI_JCC) {
		emit_jcc_paths(&p, tramp_stub[m], c, i);
	} else {
		emit_indirect(&p, tramp_stub[m], c, (uint32_t)(i << 1));
	}
	tramp_used[m] = (size_t)(t + TRAMP_SIZE - tramp_area[m]);   /* keep the grid */
	tramp_index[m][tramp_count[m]] = (uint32_t)i;
	__atomic_store_n(&tramp_count[m], tramp_count[m] + 1, __ATOMIC_RELEASE);

	int64_t d = (int64_t)((uint64_t)(uintptr_t)t - (c->addr + 5));
	if (d != (int32_t)d)
		goto out;
	long pg = 4096;
	uint64_t a = c->addr & ~(uint64_t)(pg - 1);
	size_t len = (size_t)((c->addr + 6) - a);
	if (rt_syscall(SYS_mprotect, a, len, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) < 0)
		goto out;
	/* the displacement first, then the opcode over the int3: a thread that still sees
	 * the int3 traps and is emulated as before */
	int32_t rel32 = (int32_t)d;
	memcpy((void *)(uintptr_t)(c->addr + 1), &rel32, 4);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint8_t *)(uintptr_t)c->addr = 0xe9;
	rt_syscall(SYS_mprotect, a, len, PROT_READ | PROT_EXEC, 0, 0, 0);
out:
	__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
}

/* ---- relocation: short conditional jumps and returns ---------------------------------
 * A `jcc rel8` (2 bytes) or a `ret` (1 or 3) has no room for a jump, but the straight-line
 * instructions before it do: at start-up, before any other thread runs, the window from
 * the last instruction boundary B that leaves 5 bytes up to the CTI's end is copied to a
 * trampoline (RIP-relative displacements adjusted), followed by the recording paths, and a
 * `jmp rel32` to it is written at B. Safe only where nothing can enter (B, B+5): no direct
 * branch target, return site or function start lies there, and the function has no
 * indirect jump (a jump table could target any instruction). Bytes from B+5 on keep the
 * original code, so a branch into them still finds the CTI's int3. */

struct reloc_insn {
	uint64_t addr;
	uint8_t len;
	uint8_t disp_at;    /* offset of a RIP-relative disp32 in the instruction, 0 if none */
};

/* The jumps into relocated windows, written by patch() after the int3s (a window's jump
 * may cover its CTI). Everything is decided before the first int3: Zydis, which decides,
 * calls libc's memset, and would trap millions of times with libc traced. */
struct window {
	uint64_t at;
	uint8_t jmp[5];
};
static struct window *windows;   /* room for one per CTI */
static size_t nwindows;

/* Make the trampoline of C (index I) with prefix PRE[0..N) and plan the jump from the
 * window to it. Runs at start-up. Returns 0, or -1 to leave the trap. */
static int reloc_install(const struct cti *c, size_t i, const struct reloc_insn *pre, int n)
{
	uint64_t b = n ? pre[0].addr : c->addr;
	const struct module *mod = module_of(c->addr);
	int m = (int)(mod - modules);
	if (!mod || !tramp_area[m] || !windows || n > RELOC_MAX_INSNS ||
	    tramp_used[m] + TRAMP_SIZE > TRAMP_AREA || tramp_count[m] >= TRAMP_AREA / TRAMP_SIZE)
		return -1;
	uint8_t *t = tramp_area[m] + tramp_used[m], *p = t, *meta = t + TRAMP_SIZE - TRAMP_META;
	if (c->addr - b > RELOC_MAX_BYTES)
		return -1;
	memset(t, 0, TRAMP_SIZE);
	for (int j = 0; j < n; j++) {
		const uint8_t *src = mod->orig + (pre[j].addr - mod->start);
		meta[2 + j] = (uint8_t)(p - t);
		meta[8 + j] = (uint8_t)(pre[j].addr - b);
		memcpy(p, src, pre[j].len);
		if (pre[j].disp_at) {
			int32_t disp;
			memcpy(&disp, src + pre[j].disp_at, 4);
			int64_t abs = (int64_t)(pre[j].addr + pre[j].len) + disp;
			int64_t nd = abs - (int64_t)(uintptr_t)(p + pre[j].len);
			if (nd != (int32_t)nd)
				goto fail;   /* nothing is committed before the jump is written */
			int32_t d32 = (int32_t)nd;
			memcpy(p + pre[j].disp_at, &d32, 4);
		}
		p += pre[j].len;
	}
	meta[0] = (uint8_t)(p - t);
	meta[1] = (uint8_t)n;
	meta[14] = (uint8_t)(c->addr - b);
	if (c->kind == CTI_JCC) {
		emit_jcc_paths(&p, tramp_stub[m], c, i);
	} else if (c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) {
		/* call/jmp reg: store the register as the destination (mov fs:[dest], reg), record,
		 * push the original return address, jump through the destination */
		static const uint8_t hw[] = { [REG_RAX] = 0, [REG_RCX] = 1, [REG_RDX] = 2, [REG_RBX] = 3,
			[REG_RSP] = 4, [REG_RBP] = 5, [REG_RSI] = 6, [REG_RDI] = 7, [REG_R8] = 8,
			[REG_R9] = 9, [REG_R10] = 10, [REG_R11] = 11, [REG_R12] = 12, [REG_R13] = 13,
			[REG_R14] = 14, [REG_R15] = 15 };
		unsigned r = hw[c->base];
		uint8_t mov[5] = { 0x64, (uint8_t)(0x48 | (r >> 3) << 2), 0x89, (uint8_t)((r & 7) << 3 | 4), 0x25 };
		int32_t dest_off = ttls_fs_off + (int32_t)offsetof(struct tramp_tls, dest);
		emit(&p, mov, sizeof mov);
		emit(&p, &dest_off, 4);
		emit_indirect(&p, tramp_stub[m], c, (uint32_t)(i << 1));
	} else {   /* ret: record the word it will pop, then the original ret */
		static const uint8_t st[] = { 0x64, 0xc7, 0x04, 0x25 };
		uint32_t code = (uint32_t)(i << 1), cp1 = code + 1;
		emit(&p, st, sizeof st);
		emit(&p, &ttls_fs_off, 4);
		emit(&p, &cp1, 4);
		static const uint8_t pre_call[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x57, 0xbf };
		emit(&p, pre_call, sizeof pre_call);
		emit(&p, &code, 4);
		uint8_t call = 0xe8;
		emit(&p, &call, 1);
		emit_rel32(&p, tramp_stub[m]);
		static const uint8_t post[] = { 0x5f, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
		emit(&p, post, sizeof post);
		emit(&p, mod->orig + (c->addr - mod->start), c->len);
	}
	int64_t d = (int64_t)((uint64_t)(uintptr_t)t - (b + 5));
	if (p > meta || d != (int32_t)d)
		goto fail;
	tramp_used[m] += TRAMP_SIZE;
	tramp_index[m][tramp_count[m]] = (uint32_t)i;
	__atomic_store_n(&tramp_count[m], tramp_count[m] + 1, __ATOMIC_RELEASE);
	struct window *w = &windows[nwindows++];
	int32_t rel32 = (int32_t)d;
	w->at = b;
	w->jmp[0] = 0xe9;
	memcpy(w->jmp + 1, &rel32, 4);
	return 0;
fail:
	memset(t, 0, TRAMP_SIZE);   /* the next slot user expects zeroed metadata */
	return -1;
}

/* Where the decoder is when a signal interrupts the thread at RIP outside traced code but
 * while it is inside (in a trampoline, its stub or tramp_hit): the jcc not yet recorded, or
 * the destination of the one just recorded. */
static uint64_t logical_ip(uint64_t rip)
{
	for (int m = 0; m < nmodules; m++) {
		uint64_t a = (uint64_t)(uintptr_t)tramp_area[m];
		if (!a || rip < a + tramp_base[m] || rip >= a + TRAMP_AREA)
			continue;
		uint64_t off = rip - a - tramp_base[m], in = off % TRAMP_SIZE;
		size_t k = (size_t)(off / TRAMP_SIZE);
		if (k >= __atomic_load_n(&tramp_count[m], __ATOMIC_ACQUIRE))
			break;
		const struct cti *c = &ctis[tramp_index[m][k]];
		const uint8_t *meta = tramp_area[m] + tramp_base[m] + k * TRAMP_SIZE + TRAMP_SIZE - TRAMP_META;
		unsigned plen = meta[0], n = meta[1];
		if (in < plen) {   /* in the relocated prefix: the original of the next instruction */
			unsigned j = 0;
			while (j + 1 < n && meta[2 + j + 1] <= in)
				j++;
			return c->addr - meta[14] + meta[8 + j];
		}
		in -= plen;
		if ((c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) && !c->is_mem)   /* the register's store comes first */
			return in < 9 + 28 ? c->addr : ttls.dest;
		if (c->kind != CTI_JCC)   /* one path: recorded once past the call */
			return in < 28 ? c->addr : ttls.dest;
		if (in < 6 + 28)
			return c->addr;
		if (in < 6 + TRAMP_PATH)
			return c->addr + c->len;
		if (in < 6 + TRAMP_PATH + 28)
			return c->addr;
		return c->target;
	}
	/* in the stub or in tramp_hit */
	if (ttls.code_plus1)
		return ctis[(ttls.code_plus1 - 1) >> 1].addr;
	return ttls.dest;
}

/* ---- the trap handler ------------------------------------------------------------------ */

static void die_foreign_trap(uint64_t ip)
{
	char msg[96];
	struct rt_buf b = { msg, 0, sizeof msg };
	rt_puts(&b, "unexpected SIGTRAP at ");
	rt_putx(&b, ip);
	rt_puts(&b, " (not a recorded branch)");
	say(msg);
	uint64_t dfl[4] = { 0, 0, 0, 0 };   /* the kernel's struct sigaction: SIG_DFL */
	rt_syscall(SYS_rt_sigaction, SIGTRAP, dfl, NULL, 8, 0, 0);
	rt_syscall(SYS_tgkill, rt_getpid(), rt_gettid(), SIGTRAP, 0, 0, 0);
}

#define END_EXIT 0
#define END_EXEC 1
#define END_SIGNAL 2
static void finish(int how, int sig);
static void end_thread(struct tstate *ts);

/* rt_sigprocmask, done on the interrupted context's mask (the kernel restores it when the
 * handler returns): as the system call would, except that SIGTRAP is never blocked (a
 * blocked int3 trap kills the process; libc blocks all signals around clone, raise and
 * posix_spawn). Returns the system call's result. */
static long emulate_sigprocmask(const greg_t *g, ucontext_t *uc)
{
	uint64_t cur, nw, set;
	memcpy(&cur, &uc->uc_sigmask, 8);   /* the kernel's 8-byte mask is in front */
	nw = cur;
	if ((uint64_t)g[REG_R10] != 8)
		return -EINVAL;
	if (g[REG_RSI]) {
		if (rt_read_mem(&set, (uint64_t)g[REG_RSI], 8) < 0)
			return -EFAULT;
		switch ((int)g[REG_RDI]) {
		case SIG_BLOCK: nw = cur | set; break;
		case SIG_UNBLOCK: nw = cur & ~set; break;
		case SIG_SETMASK: nw = set; break;
		default: return -EINVAL;
		}
		nw &= ~(1ull << (SIGTRAP - 1) | 1ull << (SIGKILL - 1) | 1ull << (SIGSTOP - 1));
	}
	if (g[REG_RDX] && rt_write_mem((uint64_t)g[REG_RDX], &cur, 8) < 0)
		return -EFAULT;
	memcpy(&uc->uc_sigmask, &nw, 8);
	return 0;
}

static void wrap_handler(int sig, siginfo_t *si, void *ucv);
static void on_fatal(int sig, siginfo_t *si, void *ucv);
static int is_fatal(int sig);

/* The kernel's struct sigaction on x86-64. */
struct ksigaction {
	uint64_t handler, flags, restorer, mask;
};

/* rt_sigaction, done here (it does not block): SIGTRAP keeps the recorder's handler (the
 * program is told it has none), no handler blocks SIGTRAP, and every handler, libc's own
 * included (SIGCANCEL, SIGSETXID: libc installs them past the sigaction interposer), runs
 * through wrap_handler, so that the trace knows where the thread was interrupted and where
 * it goes on. Returns the system call's result. */
static long emulate_sigaction(const greg_t *g)
{
	int sig = (int)g[REG_RDI];
	uint64_t act = (uint64_t)g[REG_RSI], oact = (uint64_t)g[REG_RDX];
	struct ksigaction k, mine, o;
	uint64_t wrap = (uint64_t)(uintptr_t)wrap_handler, trap = 1ull << (SIGTRAP - 1);
	int known = sig > 0 && sig < 65;

	if ((uint64_t)g[REG_R10] != 8)
		return -EINVAL;
	if (sig == SIGTRAP) {
		static const struct ksigaction none;
		return oact && rt_write_mem(oact, &none, sizeof none) < 0 ? -EFAULT : 0;
	}
	if (act) {
		if (rt_read_mem(&k, act, sizeof k) < 0)
			return -EFAULT;
		mine = k;
		mine.mask &= ~trap;
		if (known && k.handler > (uint64_t)(uintptr_t)SIG_IGN && k.handler != wrap) {
			mine.handler = wrap;
			mine.flags |= SA_SIGINFO;
		} else if (k.handler == (uint64_t)(uintptr_t)SIG_DFL && is_fatal(sig)) {
			mine.handler = (uint64_t)(uintptr_t)on_fatal;   /* see on_fatal */
			mine.flags |= SA_SIGINFO | SA_ONSTACK;
			mine.mask = ~trap;
		}
	}
	long rc = rt_syscall(SYS_rt_sigaction, sig, act ? &mine : NULL, oact ? &o : NULL, 8, 0, 0);
	if (rc < 0)
		return rc;
	if (oact && o.handler == (uint64_t)(uintptr_t)on_fatal)
		o = (struct ksigaction){ 0, 0, 0, 0 };   /* SIG_DFL, as far as the program knows */
	if (oact && known && o.handler == wrap) {
		const struct sigaction *pa = &prog_action[sig];
		o.handler = (uint64_t)(uintptr_t)pa->sa_handler;
		o.flags = (uint64_t)pa->sa_flags;
		memcpy(&o.mask, &pa->sa_mask, 8);
	}
	if (act && known && k.handler != wrap) {
		struct sigaction *pa = &prog_action[sig];
		memset(pa, 0, sizeof *pa);
		pa->sa_handler = (sighandler_t)(uintptr_t)k.handler;
		pa->sa_flags = (int)k.flags;
		memcpy(&pa->sa_mask, &k.mask, 8);
		pa->sa_restorer = (void (*)(void))(uintptr_t)k.restorer;
	}
	if (oact && rt_write_mem(oact, &o, sizeof o) < 0)
		return -EFAULT;
	return 0;
}

/* A new task is about to be made by clone/clone3/vfork with FLAGS, from traced code at
 * SITE: a thread with a TLS of its own starts with a fresh state just after the system
 * call; one without shares or copies the caller's state (see foreign_task). */
static void note_clone(struct tstate *ts, uint64_t flags, uint64_t site)
{
	if (flags & CLONE_SETTLS) {
		unsigned n = __atomic_load_n(&nbirth, __ATOMIC_ACQUIRE);
		for (unsigned i = 0; i < n && i < 8; i++)
			if (birth_site[i] == site)
				return;
		while (n < 8 && !__atomic_compare_exchange_n(&nbirth, &n, n + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			;
		if (n < 8) {
			birth_site[n] = site;   /* racing writers of one slot write the same site */
			__atomic_thread_fence(__ATOMIC_RELEASE);
		}
		return;
	}
	if (!ts || ts->done)
		return;
	if (!(flags & CLONE_VM)) {
		ts->clone_pending = CLONE_COPY;
	} else {
		ts->clone_pending = CLONE_SHARED;
		if (!(flags & CLONE_VFORK))   /* both run at once: the parent cannot clear it */
			ts->check_tid = 1;
	}
}

/* A system call in traced code: it trapped, so that the trace says where the thread left
 * for the kernel (TIP.PGD) and came back (TIP.PGE), and so that no system call of libc can
 * break the recorder: masks never block SIGTRAP, SIGTRAP keeps its handler, the thread's
 * or the process's trace ends at its exit. The call itself runs natively in the site's stub
 * (`syscall; jmp back`), since a call made from this handler would run with every signal
 * blocked and with the handler's stack. */
static void on_syscall(const struct cti *c, ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uint64_t nr = (uint64_t)g[REG_RAX], back = c->addr + c->len;
	struct cti_result r = { back, 0 };
	struct tstate *ts = active ? thread_state() : NULL;
	int mine = ts && !foreign_task(ts);

	if (mine)
		record(ts, c, &r, g, (uint64_t)g[REG_RSP], 1);
	switch (nr) {
	case SYS_rt_sigprocmask:
		g[REG_RAX] = emulate_sigprocmask(g, uc);
		g[REG_RIP] = (greg_t)back;
		return;
	case SYS_rt_sigaction:
		g[REG_RAX] = emulate_sigaction(g);
		g[REG_RIP] = (greg_t)back;
		return;
	case SYS_exit:
		if (mine && ts_enter(ts)) {
			end_thread(ts);
			ts_leave(ts);
		}
		break;
	case SYS_exit_group:
		if (mine)
			finish(END_EXIT, 0);
		break;
	case SYS_clone:
		note_clone(mine ? ts : NULL, (uint64_t)g[REG_RDI], back);
		break;
	case SYS_clone3: {
		uint64_t flags;
		if (rt_read_mem(&flags, (uint64_t)g[REG_RDI], 8) == 0)
			note_clone(mine ? ts : NULL, flags, back);
		break;
	}
	case SYS_vfork:
		note_clone(mine ? ts : NULL, CLONE_VM | CLONE_VFORK, back);
		break;
	case SYS_fork:
		note_clone(mine ? ts : NULL, 0, back);
		break;
	default:
		break;
	}
	g[REG_RIP] = (greg_t)c->target;   /* the stub */
}

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	uint64_t ip = (uint64_t)g[REG_RIP] - 1;
	const struct cti *c = si->si_code == SI_KERNEL ? cti_find(ip) : NULL;
	struct cti_segs segs = { 0, 0 };
	struct cti_result r = { 0, 0 };

	(void)sig;
	if (!c) {
		die_foreign_trap(ip);
		return;
	}
	if (c->kind == CTI_SYSCALL) {
		on_syscall(c, uc);
		return;
	}
	if (c->is_mem && c->seg == CTI_SEG_FS)
		segs.fs_base = rt_fs_base();
	if (c->is_mem && c->seg == CTI_SEG_GS)
		rt_syscall(SYS_arch_prctl, ARCH_GET_GS, &segs.gs_base, 0, 0, 0, 0);
	uint64_t rsp = (uint64_t)g[REG_RSP];
	/* The operand is read from the program's memory before the push of a call. */
	cti_emulate(c, g, &segs, &r);
	if (active) {
		struct tstate *ts = thread_state();
		if (ts)
			record(ts, c, &r, g, rsp, 1);
		if (tramps_on && tramp_eligible(c))
			tramp_install(c, (size_t)(c - ctis));
	}
	g[REG_RIP] = (greg_t)r.next;
}

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
	if (!module_of(rip))
		rip = logical_ip(rip);
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
static void wrap_handler(int sig, siginfo_t *si, void *ucv)
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
		ts->resume = !was_inside ? saved_resume : module_of(after) ? after : interrupted;
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

static int other_task(void);

static int is_fatal(int sig)
{
	return sig > 0 && sig < 65 && (fatal_signals & SIGBIT(sig));
}

static void on_fatal(int sig, siginfo_t *si, void *ucv)
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
static void fatal_action(struct sigaction *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sa_sigaction = on_fatal;
	sa->sa_flags = SA_SIGINFO | SA_ONSTACK;
	memset(&sa->sa_mask, 0xff, sizeof sa->sa_mask);
	sigset_drop_trap(&sa->sa_mask);
}

static void refuse(const char *why)
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
		if (oldact->sa_sigaction == on_fatal)
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

static void resolve_nonlocal(void)
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

/* Also run in a forked child from the trap handler: no libc. */
static void write_header(uint32_t ppid)
{
	uint8_t h[TK_BTRACE_HEADER_SIZE];
	uint32_t v = TK_BTRACE_VERSION, hs = TK_BTRACE_HEADER_SIZE, pid = (uint32_t)rt_getpid();
	uint64_t hz = 0, ns = mono_raw_ns(), tsc = __rdtsc();

	memset(h, 0, sizeof h);
	memcpy(h, TK_BTRACE_MAGIC, 8);
	memcpy(h + 8, &v, 4);
	memcpy(h + 12, &hs, 4);
	memcpy(h + 16, &pid, 4);
	memcpy(h + 20, &ppid, 4);
	memcpy(h + 24, &hz, 8);
	memcpy(h + 32, &tsc, 8);
	memcpy(h + 40, &ns, 8);
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

static int open_output(const char *path)
{
	struct rt_buf b = { out_cur, 0, sizeof out_cur };
	rt_puts(&b, path);
	return out_fd_settle(rt_syscall(SYS_openat, AT_FDCWD, path,
					O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644, 0, 0));
}

/* A forked child (thread ME, now TID) writes its own trace, OUT.<pid>, from its next branch
 * on: from fork()'s handler when libc is untraced, from its first record after the fork
 * system call when libc is traced (and then fork()'s handler finds it done). */
static void child_switch(struct tstate *me, int tid)
{
	char path[PATH_MAX + 16];
	struct rt_buf b = { path, 0, sizeof path };
	int pid = rt_getpid();

	if (!active || pid == out_pid)
		return;
	out_pid = pid;
	fd_reopened = 0;
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
	if (me) {
		/* The parent's pending bytes are the parent's to write. */
		me->next = NULL;
		me->enc.len = 0;
		me->enc.ntnt = 0;
		me->enc.tnt = 0;
		me->psb_pos = (size_t)-1;
		me->tid = tid;
		me->seq = 0;
		me->traps = me->reentries = me->unresolved = me->traps_long = me->tramp_hits = 0;
		me->clone_pending = 0;
		me->lock = LOCK_FREE;
		threads = me;
	}
	write_header((uint32_t)rt_syscall(SYS_getppid, 0, 0, 0, 0, 0, 0));
}

static void after_fork_child(void)
{
	child_switch(tls, rt_gettid());
}

/* N/ALL as a percentage with one decimal. */
static void put_pct(struct rt_buf *b, uint64_t n, uint64_t all)
{
	uint64_t pm = all ? (n * 1000 + all / 2) / all : 0;
	rt_putu(b, pm / 10);
	rt_puts(b, ".");
	rt_putu(b, pm % 10);
	rt_puts(b, "%");
}

/* TK_BTRACE_DEBUG: where the traps went, by CTI kind, over all threads (at exit, maybe from
 * the trap handler: no libc). */
static void say_kinds(void)
{
	static const char *const names[16] = { [CTI_JCC] = "jcc rel32", [CTI_JCC + 8] = "jcc rel8",
		[CTI_JCXZ] = "jrcxz", [CTI_LOOP] = "loop", [CTI_JMP_IND] = "jmp indirect",
		[CTI_CALL_IND] = "call indirect", [CTI_RET] = "ret", [CTI_SYSCALL] = "syscall" };
	uint64_t n[16] = { 0 }, tramp = 0, all = 0;
	char msg[160];
	struct rt_buf b;
	for (struct tstate *ts = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); ts; ts = ts->next) {
		for (int k = 0; k < 16; k++)
			n[k] += ts->kind_traps[k], all += ts->kind_traps[k];
		tramp += ts->tramp_hits;
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
	rt_puts(&b, " of recorded CTIs trapped");
	say(msg);
}

static volatile int finishing;   /* a thread is writing the process's end */

/* The process's trace ends (HOW: END_*; SIG: the fatal signal). The other threads may be
 * running traced code: each buffer is taken from its thread between two records (ts_take)
 * and written whole, its trace marked as cut there. A thread that cannot be taken (its
 * record does not end) keeps its last piece, and the reader says it has no end record. */
static void finish(int how, int sig)
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
			ts->end_reason = how == END_SIGNAL ? TK_BTRACE_THREAD_SIGNAL : TK_BTRACE_THREAD_EXITED;
		} else {
			if (!ts_take(ts))
				continue;
			ts->end_reason = TK_BTRACE_THREAD_CUT;
		}
		end_thread(ts);
	}
	if (debug)
		say_kinds();
	uint64_t ns = mono_raw_ns(), tsc = __rdtsc();   /* as in the header: ns, then TSC */
	if (how != END_EXEC) {
		uint64_t st[8] = { traps, nctis, nthreads, how == END_SIGNAL ? TK_BTRACE_END_SIGNAL : TK_BTRACE_END_EXIT,
				   tsc, ns, (uint64_t)sig, fd_reopened };
		put_rec(TK_BTRACE_REC_PROCESS_END, 0, 0, st, sizeof st);
		closed = 1;
	} else {
		uint64_t st[2] = { tsc, ns };
		put_rec(TK_BTRACE_REC_EXEC, 0, 0, st, sizeof st);
		/* if exec fails, the threads go on with fresh pieces */
		for (struct tstate *ts = threads; ts; ts = ts->next) {
			int ended = LOCK_ENDED;
			ts->done = 0;
			ts->end_reason = 0;
			__atomic_compare_exchange_n(&ts->lock, &ended, LOCK_FREE, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
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
static int is_wanted(const char *want, const char *name, const char *real)
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
static int other_task(void)
{
	return active && ((tls && foreign_task(tls)) || rt_getpid() != out_pid);
}

/* vfork: the child runs in the parent's memory, on its thread state, until it execs or
 * exits. Marked before the call, the child's branches are not recorded into the parent's
 * stream, and its _exit or exec does not end the parent's trace (foreign_task). vfork
 * returns twice on one stack, so the interposer is a tail jump: a frame of its own would
 * be overwritten by the child before the parent returns through it. */
extern void *tk_btrace_real_vfork;
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

/* Not in a vfork child that shares our state (with libc traced, it is known): its exec
 * does not end the parent's trace. */
static char **exec_prepare(char *const envp[])
{
	if (other_task())
		return strip_env(envp);
	int was = mute_self();
	char **e = strip_env(envp);
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

/* ---- start-up: modules, symbols, CTIs, patching ------------------------------------------ */

struct vec {
	void *p;
	size_t n, cap, elt;
};

static void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		void *p = rec_alloc(cap * v->elt);
		if (!p)
			return NULL;
		if (v->p)
			memcpy(p, v->p, v->n * v->elt);
		rec_free(v->p, v->cap * v->elt);
		v->p = p;
		v->cap = cap;
	}
	return (char *)v->p + v->elt * v->n++;
}

/* Sort N elements of SIZE bytes (8 or 16) by their first u64, in place (heapsort). Not
 * libc's qsort: it keeps state (qsort_r's page size and memory size, computed on its first
 * large sort), and a traced program's first qsort must run as it would without us. */
static void sort_u64(void *base, size_t n, size_t size)
{
	uint8_t *a = base, t[16];
#define KEY(i) (*(const uint64_t *)(const void *)(a + (i) * size))
#define SWAP(i, j) (memcpy(t, a + (i) * size, size), memcpy(a + (i) * size, a + (j) * size, size), \
		    memcpy(a + (j) * size, t, size))
	for (size_t end = n, start = n / 2; end > 1;) {
		size_t root;
		if (start > 0) {
			root = --start;
		} else {
			SWAP(0, end - 1);
			end--;
			root = 0;
		}
		for (size_t child; (child = 2 * root + 1) < end; root = child) {
			if (child + 1 < end && KEY(child + 1) > KEY(child))
				child++;
			if (KEY(root) >= KEY(child))
				break;
			SWAP(root, child);
		}
	}
#undef KEY
#undef SWAP
}

struct fnrange {
	uint64_t start, end;
};

static size_t reloc_module(struct module *m, uint64_t start, uint64_t end, const uint64_t *targets,
			   size_t ntargets, const uint64_t *jind, size_t njind);
static uint64_t *reloc_targets, *reloc_jind;
static size_t nreloc_targets, nreloc_jind;
static struct vec reloc_secs[MAX_MODULES];


struct scan {
	struct vec ctis, fns, rets, tails, targets;
	struct vec big_rsp;   /* (address, RSP change as int64) */
};

/* Read-only mapping of a whole ELF file, or NULL. */
static const uint8_t *map_elf(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	void *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return NULL;
	const Elf64_Ehdr *eh = f;
	if ((size_t)st.st_size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size) {
		munmap(f, (size_t)st.st_size);
		return NULL;
	}
	*size = (size_t)st.st_size;
	return f;
}

/* Function symbols (STT_FUNC) of the mapped ELF file F: from .symtab, or with DYNSYM from
 * .dynsym when there is none. Returns whether a .symtab was read. */
static int fn_symbols(const uint8_t *f, size_t size, const struct module *m, struct scan *sc, int dynsym_ok)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	int symtab = -1, dynsym = -1;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_SYMTAB)
			symtab = i;
		else if (sh[i].sh_type == SHT_DYNSYM)
			dynsym = i;
	}
	int s = symtab >= 0 ? symtab : dynsym_ok ? dynsym : -1;
	if (s < 0 || sh[s].sh_offset + sh[s].sh_size > (uint64_t)size)
		return 0;
	const Elf64_Sym *sym = (const Elf64_Sym *)(f + sh[s].sh_offset);
	size_t n = sh[s].sh_size / sizeof *sym;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
		    !sym[i].st_value)
			continue;
		struct fnrange *r = vec_push(&sc->fns);
		if (r) {
			r->start = sym[i].st_value + m->bias;
			r->end = sym[i].st_size ? r->start + sym[i].st_size : 0;   /* 0: to the next symbol */
		}
	}
	return symtab >= 0;
}

/* Function starts from the loaded .eh_frame_hdr's search table (every function with unwind
 * information, static ones included), for modules without any .symtab: each runs to the
 * next start. A count larger than the segment (a damaged file) is not followed: reading
 * past it crashed the traced program. */
static void fde_starts(const struct module *m, struct scan *sc)
{
	const uint8_t *h = (const uint8_t *)(uintptr_t)m->eh_frame_hdr;
	int64_t count = h ? tk_ehfh_count(h, m->eh_frame_hdr_size) : 0;
	for (int64_t i = 0; i < count; i++) {
		struct fnrange *r = vec_push(&sc->fns);
		if (r) {
			r->start = tk_ehfh_start(h, m->eh_frame_hdr, (size_t)i);
			r->end = 0;
		}
	}
}

static void add_start(const struct module *m, struct scan *sc, uint64_t a)
{
	struct fnrange *r;
	if (a >= m->start && a < m->end && (r = vec_push(&sc->fns))) {
		r->start = a;
		r->end = 0;   /* to the next start */
	}
}

/* Entry points a stripped module names without symbols, which the loader and libc call
 * from untraced code: the entry point (_start), DT_INIT and DT_FINI (_init, _fini, often
 * without unwind entries), and the functions of the init, preinit and fini arrays
 * (frame_dummy, __do_global_dtors_aux), read from memory, where the loader has relocated
 * them. Without them, entering such a function could not be placed (code lost). */
static void dyn_starts(const uint8_t *f, size_t size, const struct module *m, struct scan *sc)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	uint64_t arr[3] = { 0, 0, 0 }, arrsz[3] = { 0, 0, 0 };
	if (eh->e_entry)
		add_start(m, sc, eh->e_entry + m->bias);
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(f + eh->e_phoff + (uint64_t)i * eh->e_phentsize);
		if ((const uint8_t *)(ph + 1) > f + size || ph->p_type != PT_DYNAMIC || ph->p_offset > size ||
		    ph->p_filesz > size - ph->p_offset)
			continue;
		const Elf64_Dyn *d = (const Elf64_Dyn *)(f + ph->p_offset);
		for (size_t k = 0; k < ph->p_filesz / sizeof *d && d[k].d_tag != DT_NULL; k++)
			switch (d[k].d_tag) {
			case DT_INIT:
			case DT_FINI: add_start(m, sc, d[k].d_un.d_ptr + m->bias); break;
			case DT_INIT_ARRAY: arr[0] = d[k].d_un.d_ptr; break;
			case DT_INIT_ARRAYSZ: arrsz[0] = d[k].d_un.d_val; break;
			case DT_FINI_ARRAY: arr[1] = d[k].d_un.d_ptr; break;
			case DT_FINI_ARRAYSZ: arrsz[1] = d[k].d_un.d_val; break;
			case DT_PREINIT_ARRAY: arr[2] = d[k].d_un.d_ptr; break;
			case DT_PREINIT_ARRAYSZ: arrsz[2] = d[k].d_un.d_val; break;
			default: break;
			}
	}
	for (int j = 0; j < 3; j++) {
		uint64_t a = arr[j] + m->bias;
		if (!arr[j] || a < m->map_lo || a + arrsz[j] > m->map_hi)
			continue;
		for (uint64_t o = 0; o + 8 <= arrsz[j]; o += 8) {
			uint64_t fn;
			memcpy(&fn, (const void *)(uintptr_t)(a + o), 8);
			add_start(m, sc, fn);
		}
	}
}

/* Function ranges and the executable sections, read from the module's file. Functions come
 * from its .symtab, else from the .symtab of its separate debug file (found by build id,
 * as Debian's libc6-dbg installs libc's), else from .dynsym plus the unwind table: a
 * stripped libc exports few of the functions that run (IFUNC variants, static helpers). */
static int load_elf(struct module *m, struct scan *sc, struct vec *secs)
{
	size_t size;
	const uint8_t *f = map_elf(m->path, &size);
	if (!f)
		return -1;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	const char *shstr = NULL;
	uint64_t shstr_size = 0;
	if (eh->e_shstrndx < eh->e_shnum && sh[eh->e_shstrndx].sh_offset + sh[eh->e_shstrndx].sh_size <= (uint64_t)size) {
		shstr = (const char *)f + sh[eh->e_shstrndx].sh_offset;
		shstr_size = sh[eh->e_shstrndx].sh_size;
	}
	for (int i = 0; i < eh->e_shnum; i++) {
		if ((sh[i].sh_flags & SHF_EXECINSTR) && sh[i].sh_type == SHT_PROGBITS) {
			struct fnrange *r = vec_push(secs);
			if (r) {
				r->start = sh[i].sh_addr + m->bias;
				r->end = r->start + sh[i].sh_size;
			}
			/* PLT stubs have no symbols; each 16-byte slot is an entry point */
			const char *name = shstr && sh[i].sh_name < shstr_size ? shstr + sh[i].sh_name : "";
			uint64_t slot = !strcmp(name, ".plt.got") ? 8 : 16;
			if (!strncmp(name, ".plt", 4) && nplt < MAX_MODULES * 4) {
				plt_lo[nplt] = sh[i].sh_addr + m->bias;
				plt_hi[nplt++] = sh[i].sh_addr + m->bias + sh[i].sh_size;
			}
			if (!strncmp(name, ".plt", 4))
				for (uint64_t a = 0; a + slot <= sh[i].sh_size; a += slot) {
					struct fnrange *fr = vec_push(&sc->fns);
					if (fr) {
						fr->start = sh[i].sh_addr + m->bias + a;
						fr->end = fr->start + slot;
					}
				}
		}
	}
	if (!fn_symbols(f, size, m, sc, 0)) {
		char dbg[64 + 2 * sizeof m->build_id];
		const uint8_t *df = NULL;
		size_t dsize = 0;
		if (tk_debug_file_path(dbg, sizeof dbg, m->build_id, m->build_id_len) == 0)
			df = map_elf(dbg, &dsize);
		if (!df || !fn_symbols(df, dsize, m, sc, 0)) {
			fn_symbols(f, size, m, sc, 1);
			fde_starts(m, sc);
			dyn_starts(f, size, m, sc);
		}
		if (df)
			munmap((void *)df, dsize);
	}
	munmap((void *)f, size);
	return 0;
}

/* The instruction map entry (IM_*) of instruction IN at IP of kind KIND (C its CTI). */
static uint16_t imap_entry(struct scan *sc, uint64_t ip, const ZydisDecodedInstruction *in,
			   const ZydisDecodedOperand *ops, int kind)
{
	uint16_t e = in->length & IM_LEN;
	int64_t d;
	switch (kind) {
	case CTI_NONE:
		if (in->mnemonic == ZYDIS_MNEMONIC_UD2 || in->mnemonic == ZYDIS_MNEMONIC_HLT) {
			e |= IM_STOP | IM_ENDS;
			break;
		}
		if (in->meta.category == ZYDIS_CATEGORY_SYSCALL || in->meta.category == ZYDIS_CATEGORY_SYSRET ||
		    in->meta.category == ZYDIS_CATEGORY_INTERRUPT) {
			e |= IM_STOP;
			break;
		}
		if (!rsp_effect(in, ops, &d)) {
			e |= (uint16_t)((uint8_t)IM_RSP_UNKNOWN << 8);
		} else if (d <= IM_RSP_UNKNOWN || d >= IM_RSP_BIG) {   /* not an int8 of ours */
			struct fnrange *br = vec_push(&sc->big_rsp);
			if (br) {
				br->start = ip;
				br->end = (uint64_t)d;
				e |= (uint16_t)((uint8_t)IM_RSP_BIG << 8);
			} else {
				e |= (uint16_t)((uint8_t)IM_RSP_UNKNOWN << 8);
			}
		} else {
			e |= (uint16_t)((uint8_t)(int8_t)d << 8);
		}
		break;
	case CTI_JMP_DIR:
		e |= IM_JMP | IM_ENDS;
		if (in->raw.imm[0].size == 8)
			e |= IM_REL8;
		break;
	case CTI_CALL_DIR:
		e |= IM_CALL;
		if (in->raw.imm[0].size != 32)
			e = (e & ~IM_CLASS) | IM_STOP;   /* not a form imap_target reads */
		break;
	default:
		e |= IM_STOP;
		if (in->mnemonic == ZYDIS_MNEMONIC_JMP || in->mnemonic == ZYDIS_MNEMONIC_RET)
			e |= IM_ENDS;
		break;
	}
	if (kind == CTI_JMP_DIR && in->raw.imm[0].size != 8 && in->raw.imm[0].size != 32)
		e = (e & ~IM_CLASS) | IM_STOP;
	return e;
}

/* Does the instruction set EAX/RAX to an immediate? Its value, else -1. */
static long eax_imm(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	if (in->mnemonic != ZYDIS_MNEMONIC_MOV || in->operand_count_visible != 2 ||
	    ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
	    (ops[0].reg.value != ZYDIS_REGISTER_EAX && ops[0].reg.value != ZYDIS_REGISTER_RAX))
		return -1;
	return (long)(ops[1].imm.value.u & 0xffffffff);
}

/* Decode the instruction at IP, which must end by END and, unless it is a NOP, by the next
 * function start LIM: the unwind table (used for function starts without a symbol table)
 * starts libc's signal return code one byte early, inside the padding before it, and the
 * decoding must not restart there. */
static int decode_at(const struct module *m, uint64_t ip, uint64_t lim, uint64_t end,
		     ZydisDecodedInstruction *in, ZydisDecodedOperand *ops)
{
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, m->orig + (ip - m->start), end - ip, in, ops)))
		return 0;
	return ip + in->length <= lim || in->mnemonic == ZYDIS_MNEMONIC_NOP;
}

/* Decode a section linearly, restarting at every function start it meets. */
static void sweep(struct module *m, struct scan *sc, uint64_t start, uint64_t end,
		  const uint64_t *starts, size_t nstarts)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	long k = last_le(starts, nstarts, start);
	size_t next = (size_t)(k + 1);
	uint64_t ip = start;
	long eax = -1;   /* the value the previous instruction put in eax, or -1 */

	while (ip < end) {
		while (next < nstarts && starts[next] < ip)
			next++;
		if (next < nstarts && starts[next] == ip)
			next++;
		uint64_t lim = next < nstarts && starts[next] < end ? starts[next] : end;
		if (!decode_at(m, ip, lim, end, &in, ops)) {
			ip = ip + 1 < lim ? ip + 1 : lim;
			eax = -1;
			continue;
		}
		struct cti c;
		int kind = cti_classify(&c, ip, &in, ops);
		c.orig = m->orig[ip - m->start];
		m->imap[ip - m->start] = imap_entry(sc, ip, &in, ops, kind);
		if (kind == CTI_JMP_DIR && in_plt(c.target) && !in_plt(ip)) {
			struct fnrange *t = vec_push(&sc->tails);   /* (target, jump) */
			if (t) {
				t->start = c.target;
				t->end = ip;
			}
		}
		if (kind == CTI_JCC || kind == CTI_JCXZ || kind == CTI_LOOP || kind == CTI_JMP_DIR ||
		    kind == CTI_CALL_DIR) {
			uint64_t *t = vec_push(&sc->targets);
			if (t)
				*t = c.target;
		}
		if (kind == CTI_CALL_DIR || kind == CTI_CALL_IND) {
			struct fnrange *r = vec_push(&sc->rets);   /* (return site, call) */
			if (r) {
				r->start = ip + in.length;
				r->end = ip;
			}
		}
		/* Every system call traps (on_syscall), except rt_sigreturn: the return from a
		 * signal handler, ours included, runs it with the handler's mask (SIGTRAP
		 * blocked), and it is never a traced thread's (handlers return through the
		 * recorder's wrapper). */
		if (kind == CTI_SYSCALL && eax == SYS_rt_sigreturn)
			kind = CTI_OTHER;
		if (kind == CTI_JCC || kind == CTI_JCXZ || kind == CTI_LOOP || kind == CTI_JMP_IND ||
		    kind == CTI_CALL_IND || kind == CTI_RET || kind == CTI_SYSCALL) {
			struct cti *p = vec_push(&sc->ctis);
			if (p)
				*p = c;
		}
		eax = eax_imm(&in, ops);
		ip += in.length;
	}
}

static int refused_modules;

/* The name of a function the recorder runs while handling a trap that lies in [lo, hi), or
 * NULL: such a module cannot be patched with int3 (a trap inside the SIGTRAP handler, where
 * SIGTRAP is blocked, kills the process). The handler calls no other module (rt.h, mem.c;
 * tests/oracle/btrace_nolibc.sh checks the library), so only the recorder itself is left. */
static const char *recorder_code_in(uint64_t lo, uint64_t hi)
{
	static const struct {
		const char *name;
		const void *fn;
	} used[] = {
		{ "the recorder", (const void *)on_trap },
	};
	for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
		uint64_t a = (uint64_t)(uintptr_t)used[i].fn;
		if (a >= lo && a < hi)
			return used[i].name;
	}
	return NULL;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *want = data;
	char path[PATH_MAX];
	(void)size;

	if (nmodules >= MAX_MODULES)
		return 1;
	if (!info->dlpi_name || !info->dlpi_name[0]) {
		if (want[0])
			return 0;
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		if (n <= 0)
			return 0;
		path[n] = 0;
	} else {
		if (!want[0] || !realpath(info->dlpi_name, path) || !is_wanted(want, info->dlpi_name, path))
			return 0;
	}
	struct module *m = &modules[nmodules];
	uint64_t lo = UINT64_MAX, hi = 0;
	memset(m, 0, sizeof *m);
	snprintf(m->path, sizeof m->path, "%s", path);
	m->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			if (!m->map_lo || ph->p_vaddr + m->bias < m->map_lo)
				m->map_lo = ph->p_vaddr + m->bias;
			if (ph->p_vaddr + ph->p_filesz + m->bias > m->map_hi)
				m->map_hi = ph->p_vaddr + ph->p_filesz + m->bias;
		}
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			if (ph->p_vaddr + m->bias < lo)
				lo = ph->p_vaddr + m->bias;
			if (ph->p_vaddr + ph->p_memsz + m->bias > hi)
				hi = ph->p_vaddr + ph->p_memsz + m->bias;
		}
		if (ph->p_type == PT_GNU_EH_FRAME) {
			m->eh_frame_hdr = ph->p_vaddr + m->bias;
			m->eh_frame_hdr_size = ph->p_memsz;
		}
		if (ph->p_type == PT_NOTE) {
			const uint8_t *p = (const uint8_t *)(m->bias + ph->p_vaddr), *e = p + ph->p_memsz;
			while (p + 12 <= e) {
				const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
				const uint8_t *name = p + 12, *desc = name + ((nh->n_namesz + 3) & ~3u);
				if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
				    !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof m->build_id) {
					memcpy(m->build_id, desc, nh->n_descsz);
					m->build_id_len = nh->n_descsz;
				}
				p = desc + ((nh->n_descsz + 3) & ~3u);
			}
		}
	}
	if (lo >= hi)
		return 0;
	const char *needed = recorder_code_in(lo, hi);
	if (needed) {
		/* its int3s would trap inside our own SIGTRAP handler, where SIGTRAP is blocked:
		 * the kernel kills the program */
		char why[PATH_MAX + 128];
		snprintf(why, sizeof why, "%s is not traced: the recorder's trap handler runs its "
			 "code (%s)", path, needed);
		say2("module ", why, "");
		refused_modules++;
		return want[0] ? 1 : 0;
	}
	m->start = lo;
	m->end = hi;
	m->orig = rec_alloc(hi - lo);
	m->imap = rec_alloc((hi - lo) * sizeof *m->imap);
	if (!m->orig || !m->imap)
		return 0;
	memcpy(m->orig, (const void *)lo, hi - lo);
	nmodules++;
	return want[0] ? 1 : 1;
}

static int scan_module(struct module *m, struct scan *sc)
{
	struct vec secs = { .elt = sizeof(struct fnrange) };
	size_t fn0 = sc->fns.n;
	if (load_elf(m, sc, &secs) < 0)
		return -1;
	/* restart points: this module's function starts */
	size_t ns = sc->fns.n - fn0;
	uint64_t *starts = rec_alloc((ns + 1) * sizeof *starts);
	if (!starts)
		return -1;
	for (size_t i = 0; i < ns; i++)
		starts[i] = ((struct fnrange *)sc->fns.p)[fn0 + i].start;
	sort_u64(starts, ns, sizeof *starts);
	struct fnrange *sr = secs.p;
	for (size_t i = 0; i < secs.n; i++) {
		uint64_t s = sr[i].start < m->start ? m->start : sr[i].start;
		uint64_t e = sr[i].end > m->end ? m->end : sr[i].end;
		if (s < e)
			sweep(m, sc, s, e, starts, ns);
	}
	rec_free(starts, (ns + 1) * sizeof *starts);
	reloc_secs[m - modules] = secs;   /* the relocation pass walks them again */
	return 0;
}


/* From the first int3 on, a call into a traced libc traps: from here on, raw system calls. */
static int patch(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < nmodules; i++) {
		uint64_t a = modules[i].start & ~(uint64_t)(pg - 1);
		size_t len = modules[i].end - a;
		if (rt_syscall(SYS_mprotect, a, len, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) < 0)
			return -1;
	}
	for (size_t i = 0; i < nctis; i++)
		*(volatile uint8_t *)(uintptr_t)ctis[i].addr = 0xcc;
	/* after the int3s: a window's jump may cover its CTI */
	for (size_t i = 0; i < nwindows; i++)
		memcpy((void *)(uintptr_t)windows[i].at, windows[i].jmp, 5);
	for (int i = 0; i < nmodules; i++) {
		uint64_t a = modules[i].start & ~(uint64_t)(pg - 1);
		rt_syscall(SYS_mprotect, a, modules[i].end - a, PROT_READ | PROT_EXEC, 0, 0, 0);
	}
	__builtin_ia32_mfence();
	return 0;
}

/* Is anything in the sorted array A[0..N) within (LO, HI)? */
static int any_between(const uint64_t *a, size_t n, uint64_t lo, uint64_t hi)
{
	long k = last_le(a, n, hi - 1);
	return k >= 0 && a[k] > lo;
}

/* A compiler's jump table behind the indirect jump C: `cmp idx, N-1; ja default; lea base,
 * [rip+T]; movsxd dst, [base + idx*4]; add dst, base; jmp dst` (the lea may come before the
 * cmp). Pushes the N targets T + T[i] to TARGETS and returns 1 if the jump is exactly that,
 * with every target inside its function; 0 otherwise (the function then stays unrelocated). */
static int jump_table(const struct cti *c, struct vec *targets)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	const struct module *m = module_of(c->addr);
	long f = last_le(fn_start, nfns, c->addr);
	uint64_t seq[8], ip, lea_t[16] = { 0 }, table = 0;
	ZydisDecodedInstruction hist[8];
	ZydisDecodedOperand hops[8][3];
	int n = 0;

	if (!m || f < 0 || c->addr >= fn_end[f] || c->is_mem || c->base == CTI_REG_NONE)
		return 0;
	/* decode the function up to the jump, keeping the last 5 instructions */
	for (ip = fn_start[f]; ip < c->addr;) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, m->orig + (ip - m->start), c->addr - ip, &in, ops)))
			return 0;
		if (in.mnemonic == ZYDIS_MNEMONIC_LEA && ops[1].mem.base == ZYDIS_REGISTER_RIP &&
		    ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
			uint8_t g = cti_greg(ops[0].reg.value);
			if (g < 16)
				lea_t[g] = ip + in.length + (uint64_t)ops[1].mem.disp.value;
		}
		memmove(hist, hist + 1, sizeof hist[0] * 4);
		memmove(hops, hops + 1, sizeof hops[0] * 4);
		memmove(seq, seq + 1, sizeof seq[0] * 4);
		hist[4] = in;
		memcpy(hops[4], ops, sizeof hops[4]);
		seq[4] = ip;
		n++;
		ip += in.length;
	}
	if (n < 5 || ip != c->addr)
		return 0;
	/* ... cmp; ja; [lea;] movsxd; add; jmp */
	int k = hist[2].mnemonic == ZYDIS_MNEMONIC_LEA ? 1 : 2;
	const ZydisDecodedInstruction *cmp = &hist[k - 1], *ja = &hist[k], *mx = &hist[3], *add = &hist[4];
	const ZydisDecodedOperand *co = hops[k - 1], *mo = hops[3], *ao = hops[4];
	if (k == 1 && hist[2].mnemonic != ZYDIS_MNEMONIC_LEA)
		return 0;
	if (cmp->mnemonic != ZYDIS_MNEMONIC_CMP || ja->mnemonic != ZYDIS_MNEMONIC_JNBE ||
	    mx->mnemonic != ZYDIS_MNEMONIC_MOVSXD || add->mnemonic != ZYDIS_MNEMONIC_ADD ||
	    co[0].type != ZYDIS_OPERAND_TYPE_REGISTER || co[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
	    mo[1].type != ZYDIS_OPERAND_TYPE_MEMORY || mo[1].mem.scale != 4 ||
	    mo[1].mem.disp.has_displacement || ao[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    ao[1].type != ZYDIS_OPERAND_TYPE_REGISTER)
		return 0;
	uint8_t idx = cti_greg(mo[1].mem.index), base = cti_greg(mo[1].mem.base);
	uint8_t dst = cti_greg(mo[0].reg.value);
	if (idx >= 16 || base >= 16 || cti_greg(co[0].reg.value) != idx || dst != c->base ||
	    cti_greg(ao[0].reg.value) != dst || cti_greg(ao[1].reg.value) != base || !(table = lea_t[base]))
		return 0;
	/* the lea of the base must be the one just before (or before the cmp) */
	if (hist[2].mnemonic == ZYDIS_MNEMONIC_LEA ? cti_greg(hops[2][0].reg.value) != base :
	    !(hist[0].mnemonic == ZYDIS_MNEMONIC_LEA && cti_greg(hops[0][0].reg.value) == base))
		return 0;
	uint64_t entries = co[1].imm.value.u + 1;
	if (entries > 4096 || table < m->map_lo || table + 4 * entries > m->map_hi)
		return 0;   /* never read outside the module's loaded file contents */
	size_t first = targets->n;
	for (uint64_t i = 0; i < entries; i++) {
		int32_t e;
		memcpy(&e, (const void *)(uintptr_t)(table + 4 * i), 4);
		uint64_t t = table + (uint64_t)(int64_t)e;
		uint64_t *slot = t >= fn_start[f] && t < fn_end[f] ? vec_push(targets) : NULL;
		if (!slot) {
			targets->n = first;
			return 0;
		}
		*slot = t;
	}
	(void)seq;
	return 1;
}

/* The end of the NOP padding from A on (up to LIM). */
static uint64_t padding_end(const struct module *m, uint64_t a, uint64_t lim)
{
	ZydisDecodedInstruction in;
	uint64_t start = a;
	while (a < lim && a - start < 16 &&
	       ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, NULL, m->orig + (a - m->start), lim - a, &in)) &&
	       in.mnemonic == ZYDIS_MNEMONIC_NOP)
		a += in.length;
	return a;
}

/* Relocate the windows before module M's short jcc and returns (see reloc_install), with
 * the same linear decoding as sweep(). TARGETS: every direct branch target, sorted;
 * JIND: every indirect jump, sorted. Returns how many were relocated. */
static size_t reloc_module(struct module *m, uint64_t start, uint64_t end, const uint64_t *targets,
			   size_t ntargets, const uint64_t *jind, size_t njind)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	struct reloc_insn ring[RELOC_MAX_INSNS + 1];
	int nring = 0;
	size_t done = 0;
	uint64_t ip = start, covered = 0;
	long f = -1;

	while (ip < end) {
		long k = last_le(fn_start, nfns, ip);
		if (k != f) {
			nring = 0;   /* never relocate across a function start */
			f = k;
		}
		size_t nx = (size_t)(k + 1);
		while (nx < nfns && fn_start[nx] <= ip)
			nx++;
		uint64_t lim = nx < nfns && fn_start[nx] < end ? fn_start[nx] : end;
		if (!decode_at(m, ip, lim, end, &in, ops)) {
			nring = 0;
			ip = ip + 1 < lim ? ip + 1 : lim;
			continue;
		}
		struct cti c;
		int kind = cti_classify(&c, ip, &in, ops);
		if (kind == CTI_NONE) {
			struct reloc_insn r = { ip, in.length, 0 };
			int ok = 1;
			for (unsigned o = 0; o < in.operand_count; o++) {
				if (ops[o].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[o].imm.is_relative)
					ok = 0;
				if (ops[o].type == ZYDIS_OPERAND_TYPE_MEMORY && (ops[o].mem.base == ZYDIS_REGISTER_RIP ||
										 ops[o].mem.base == ZYDIS_REGISTER_EIP)) {
					if (in.raw.disp.size != 32 || ops[o].mem.base != ZYDIS_REGISTER_RIP)
						ok = 0;
					r.disp_at = in.raw.disp.offset;
				}
			}
			if (!ok) {
				nring = 0;
			} else {
				if (nring == RELOC_MAX_INSNS + 1) {
					memmove(ring, ring + 1, sizeof ring[0] * RELOC_MAX_INSNS);
					nring--;
				}
				ring[nring++] = r;
			}
			ip += in.length;
			continue;
		}
		const struct cti *tc;
		if (((kind == CTI_JCC && in.length == 2) || kind == CTI_RET ||
		     ((kind == CTI_CALL_IND || kind == CTI_JMP_IND) && !c.is_mem && c.base != REG_RSP)) && f >= 0 &&
		    ip < fn_end[f] && !in_plt(ip) && (tc = cti_find(ip)) &&
		    !any_between(jind, njind, fn_start[f] - 1, fn_end[f])) {
			/* the latest boundary B that leaves room for the 5-byte jump */
			int j = nring - 1;
			while (j > 0 && ip + in.length - ring[j].addr < 5)
				j--;
			uint64_t b = nring ? ring[j].addr : ip, room = ip + in.length;
			if (nring && room - b < 5)
				j = 0, b = ring[0].addr;
			/* after a ret, alignment padding is never executed: the jump may cover it */
			if (kind == CTI_RET && room - b < 5)
				room = padding_end(m, room, lim);
			if (room - b >= 5 && nring - j <= RELOC_MAX_INSNS && b >= covered &&
			    !any_between(targets, ntargets, b, b + 5) &&
			    !any_between(ret_sites, nret_sites, b, b + 5) &&
			    !any_between(fn_start, nfns, b, b + 5) &&
			    reloc_install(tc, (size_t)(tc - ctis), ring + j, nring ? nring - j : 0) == 0) {
				done++;
				covered = b + 5;   /* padding after a ret may be another window's start */
				if (debug > 2) {
					char msg[96];
					snprintf(msg, sizeof msg, "relocated 0x%llx..0x%llx for the CTI at 0x%llx",
						 (unsigned long long)(b - m->bias), (unsigned long long)(room - m->bias),
						 (unsigned long long)(ip - m->bias));
					say(msg);
				}
			}
		}
		nring = 0;
		ip += in.length;
	}
	return done;
}

/* Sort the (key, value) pairs of V by key into two arrays, and free V. */
static int split_pairs(struct vec *v, uint64_t **keys, uint64_t **vals, size_t *n)
{
	struct fnrange *p = v->p;
	*n = v->n;
	sort_u64(p, *n, sizeof *p);
	*keys = rec_alloc((*n + 1) * sizeof **keys);
	*vals = rec_alloc((*n + 1) * sizeof **vals);
	if (!*keys || !*vals)
		return -1;
	for (size_t i = 0; i < *n; i++) {
		(*keys)[i] = p[i].start;
		(*vals)[i] = p[i].end;
	}
	rec_free(p, v->cap * v->elt);
	v->p = NULL;
	return 0;
}

/* Each trapped system call of module M runs natively from a stub near it, `syscall; jmp
 * back` (on_syscall); the stub's address is kept in the CTI's target. */
static int syscall_stubs(void)
{
	for (int m = 0; m < nmodules; m++) {
		size_t n = 0;
		for (size_t i = 0; i < nctis; i++)
			n += ctis[i].kind == CTI_SYSCALL && module_of(ctis[i].addr) == &modules[m];
		if (!n)
			continue;
		size_t size = (n * 8 + 4095) & ~(size_t)4095;
		uint8_t *p = map_near(m, size);
		if (!p)
			return -1;
		for (size_t i = 0; i < nctis; i++) {
			struct cti *c = &ctis[i];
			if (c->kind != CTI_SYSCALL || module_of(c->addr) != &modules[m])
				continue;
			int32_t rel = (int32_t)((int64_t)(c->addr + c->len) - (int64_t)(uintptr_t)(p + 7));
			p[0] = 0x0f;
			p[1] = 0x05;
			p[2] = 0xe9;
			memcpy(p + 3, &rel, 4);
			p[7] = 0xcc;
			c->target = (uint64_t)(uintptr_t)p;
			p += 8;
		}
	}
	return 0;
}

__attribute__((constructor(101))) static void btrace_init(void)
{
	const char *out = getenv("TK_BTRACE_OUT");
	const char *mods = getenv("TK_BTRACE_MODULES");
	struct scan sc = { .ctis = { .elt = sizeof(struct cti) }, .fns = { .elt = sizeof(struct fnrange) },
			   .rets = { .elt = sizeof(struct fnrange) }, .tails = { .elt = sizeof(struct fnrange) },
			   .targets = { .elt = sizeof(uint64_t) }, .big_rsp = { .elt = sizeof(struct fnrange) } };
	struct sigaction sa, old;

	real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (!out || !*out || !real_sigaction)
		return;
	/* Programs this one starts (exec without our wrappers, system(), posix_spawn) inherit
	 * the environment: they are not traced, and must not overwrite the trace. (unsetenv,
	 * unlike setenv, does not allocate: the program's heap stays untouched.) */
	snprintf(out_path, sizeof out_path, "%s", out);
	unsetenv("TK_BTRACE_OUT");
	struct rlimit_k {
		uint64_t cur, max;
	} nofile;
	if (rt_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &nofile, 0, 0) == 0 && nofile.cur >= 128)
		out_fd_floor = (int)(nofile.cur >= 2048 ? 1024 : nofile.cur - 64);   /* past loops to 1024 */
	long efd = rt_syscall(SYS_fcntl, 2, F_DUPFD_CLOEXEC, nofile.cur >= 128 ? nofile.cur - 1 : 0, 0, 0, 0);
	struct stat est;
	if (efd >= 0)
		err_fd = (int)efd;
	if (rt_syscall(SYS_fstat, err_fd, &est, 0, 0, 0, 0) == 0) {
		err_dev = est.st_dev;
		err_ino = est.st_ino;
	}
	debug = getenv("TK_BTRACE_DEBUG") ? atoi(getenv("TK_BTRACE_DEBUG")) : 0;
	ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);

	if (!mods || !*mods) {
		dl_iterate_phdr(add_module, (void *)"");
	} else {
		char list[4096], *save = NULL;
		snprintf(list, sizeof list, "%s", mods);
		for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			int before = nmodules, refused = refused_modules;
			if (!strcmp(p, "main"))
				dl_iterate_phdr(add_module, (void *)"");
			else
				dl_iterate_phdr(add_module, p);
			if (nmodules == before && refused_modules == refused) {
				say2("module ", p, " is not loaded at start-up; not traced");
				if (npending < MAX_MODULES)
					snprintf(pending[npending++], PATH_MAX, "%s", p);
			}
		}
	}
	if (!nmodules) {
		say("no module to trace");
		return;
	}
	for (int i = 0; i < nmodules; i++)
		if (scan_module(&modules[i], &sc) < 0) {
			say2("cannot read ", modules[i].path, "; not recording");
			return;
		}

	ctis = sc.ctis.p;
	nctis = sc.ctis.n;
	size_t hsize = 1024;
	while (hsize < nctis * 2)
		hsize *= 2;
	cti_hash = rec_alloc(hsize * sizeof *cti_hash);
	cti_hash_mask = hsize - 1;
	if (!cti_hash)
		return;
	for (size_t i = 0; i < nctis; i++) {
		size_t h = tk_hash64(ctis[i].addr) & cti_hash_mask;
		while (cti_hash[h])
			h = (h + 1) & cti_hash_mask;
		cti_hash[h] = (uint32_t)i + 1;
	}
	struct fnrange *fr = sc.fns.p;
	sort_u64(fr, sc.fns.n, sizeof *fr);
	nfns = sc.fns.n;
	fn_start = rec_alloc((nfns + 1) * sizeof *fn_start);
	fn_end = rec_alloc((nfns + 1) * sizeof *fn_end);
	if (!fn_start || !fn_end)
		return;
	for (size_t i = 0; i < nfns; i++) {
		fn_start[i] = fr[i].start;
		fn_end[i] = fr[i].end;
		if (!fn_end[i]) {   /* assembler symbols without a size run to the next one */
			size_t j = i + 1;
			while (j < nfns && fr[j].start == fr[i].start)
				j++;
			const struct module *m = module_of(fr[i].start);
			fn_end[i] = j < nfns ? fr[j].start : m ? m->end : fr[i].start + 1;
			if (m && fn_end[i] > m->end)
				fn_end[i] = m->end;
		}
	}
	rec_free(fr, sc.fns.cap * sc.fns.elt);
	if (split_pairs(&sc.rets, &ret_sites, &ret_calls, &nret_sites) < 0 ||
	    split_pairs(&sc.tails, &tj_target, &tj_src, &ntj) < 0 ||
	    split_pairs(&sc.big_rsp, &big_rsp_addr, &big_rsp_delta, &nbig_rsp) < 0)
		return;
	if (syscall_stubs() < 0) {
		say("cannot map the system call stubs near the traced code; not recording");
		return;
	}

	reloc_jind = rec_alloc((nctis + 1) * sizeof *reloc_jind);
	for (size_t i = 0; reloc_jind && i < nctis; i++)
		if (ctis[i].kind == CTI_JMP_IND && !jump_table(&ctis[i], &sc.targets))
			reloc_jind[nreloc_jind++] = ctis[i].addr;
	reloc_targets = sc.targets.p;
	nreloc_targets = sc.targets.n;
	if (reloc_targets)
		sort_u64(reloc_targets, nreloc_targets, sizeof *reloc_targets);
	if (reloc_jind)
		sort_u64(reloc_jind, nreloc_jind, sizeof *reloc_jind);
	else
		reloc_targets = NULL;   /* without it, no relocation */
	if (getenv("TK_BTRACE_RELOCATE") && !strcmp(getenv("TK_BTRACE_RELOCATE"), "0"))
		reloc_targets = NULL;

	real_sigaction(SIGTRAP, NULL, &old);
	if (old.sa_handler != SIG_DFL) {
		say("SIGTRAP already has a handler in this process; not recording");
		return;
	}
	out_fd = open_output(out_path);
	if (out_fd < 0) {
		say("cannot create the trace file; not recording");
		return;
	}
	write_header(0);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	/* Nothing may interrupt an emulation half-way, not even libc's internal SIGCANCEL and
	 * SIGSETXID, which sigfillset leaves out: their handlers run libc, which may be traced
	 * (a trap while the handler runs kills the process). */
	memset(&sa.sa_mask, 0xff, sizeof sa.sa_mask);
	if (real_sigaction(SIGTRAP, &sa, NULL) < 0)
		return;
	/* The kernel returns from our handler into libc's __restore_rt (sa_restorer) with
	 * SIGTRAP still blocked: nothing there may trap. It holds no branch, and its
	 * rt_sigreturn is the one system call left untrapped (sweep); check it. */
	struct sigaction cur;
	real_sigaction(SIGTRAP, NULL, &cur);
	for (uint64_t a = (uint64_t)(uintptr_t)cur.sa_restorer; cur.sa_restorer && a < (uint64_t)(uintptr_t)cur.sa_restorer + 16; a++)
		if (cti_find(a)) {
			real_sigaction(SIGTRAP, &old, NULL);
			say("the signal return code (sa_restorer) would be patched; not recording");
			return;
		}
	uint64_t trapbit = 1ull << (SIGTRAP - 1);   /* a program may start with it blocked */
	rt_sigmask(SIG_UNBLOCK, &trapbit, NULL);
	pthread_atfork(NULL, NULL, after_fork_child);
	resolve_nonlocal();
	real_pthread_sigmask = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "pthread_sigmask");
	real_pthread_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
		dlsym(RTLD_NEXT, "pthread_create");
	real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
	real_execvpe = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execvpe");
	tk_btrace_real_vfork = dlsym(RTLD_NEXT, "vfork");
	exits_traced = module_of((uint64_t)(uintptr_t)dlsym(RTLD_NEXT, "_exit")) != NULL;
	out_pid = getpid();
	const char *tr = getenv("TK_BTRACE_TRAMPOLINES");
	uint64_t fsb = rt_fs_base();
	int64_t fs_off = (int64_t)((uint64_t)(uintptr_t)&ttls - fsb);
	ttls_fs_off = (int32_t)fs_off;
	if ((!tr || strcmp(tr, "0")) && fs_off == ttls_fs_off && xsave_ok() &&
	    (tramp_done = rec_alloc(nctis + 1))) {
		for (int i = 0; i < nmodules; i++)
			tramp_setup(i);
		tramps_on = 1;
	}
	windows = tramps_on && reloc_targets ? rec_alloc((nctis + 1) * sizeof *windows) : NULL;
	for (int i = 0; windows && i < nmodules; i++) {
		struct fnrange *sr = reloc_secs[i].p;
		for (size_t k = 0; k < reloc_secs[i].n; k++) {
			uint64_t s = sr[k].start < modules[i].start ? modules[i].start : sr[k].start;
			uint64_t e = sr[k].end > modules[i].end ? modules[i].end : sr[k].end;
			if (s < e)
				nrelocated += reloc_module(&modules[i], s, e, reloc_targets, nreloc_targets,
							   reloc_jind, nreloc_jind);
		}
	}
	if (patch() < 0)
		refuse("cannot make the code writable (mprotect refused); not recording");
	for (int sig = 1; sig < 65; sig++) {
		struct sigaction fa;
		if (is_fatal(sig) && real_sigaction(sig, NULL, &fa) == 0 && fa.sa_handler == SIG_DFL) {
			fatal_action(&fa);
			real_sigaction(sig, &fa, NULL);
		}
	}
	active = 1;
}
