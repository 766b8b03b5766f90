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
#include "recorder.h"

/* Start-up data, read-only once patched. */
struct module modules[MAX_MODULES];
int nmodules;
struct cti *ctis;              /* trapped CTIs */
size_t nctis;
uint32_t *cti_hash;            /* open addressing: index + 1, 0 = empty */
size_t cti_hash_mask;
uint64_t *fn_start, *fn_end;   /* sorted function ranges */
size_t nfns;
uint64_t *ret_sites;           /* sorted return addresses of all calls */
uint64_t *ret_calls;           /* the call instruction of each */
uint64_t *tj_target, *tj_src;  /* direct jumps into PLT slots (tail calls), by target */
size_t ntj;
uint64_t plt_lo[MAX_MODULES * 4], plt_hi[MAX_MODULES * 4];
int nplt;
size_t nret_sites;
ZydisDecoder decoder;

int out_fd = -1;
uint64_t fd_reopened;          /* times the trace file was reopened (out_fd_check) */
char out_path[PATH_MAX];
/* TK_BTRACE_FOLLOW=1: programs this one starts are traced too, each into a file of its own
 * (see trace_name); exec_gen counts the programs this process has exec'd into. */
int follow;
unsigned exec_gen;
volatile int active, closed;
int debug;                     /* TK_BTRACE_DEBUG: explain unresolved re-entries */
struct tstate *threads;        /* all thread states, pushed lock-free */
__thread struct tstate *tls __attribute__((tls_model("initial-exec")));
struct sigaction prog_action[65];   /* the program's own handlers, by signal */
uint64_t total_traps_of_dead;
char pending[MAX_MODULES][PATH_MAX];   /* requested modules not loaded at start-up */
int npending;
size_t nrelocated;             /* CTIs whose window was relocated at start-up */
uint32_t *site_traps;          /* TK_BTRACE_DEBUG=4: traps per CTI (index as in ctis) */
uint8_t *cti_trapped;          /* per CTI: it has trapped (its later traps are past warm-up) */

int out_pid;                   /* the process that owns out_fd */
/* libc is traced: its exit system calls are trapped, so threads and the process end there
 * (not when a thread's start routine returns, nor in the destructor) */
int exits_traced;
/* Addresses just after a clone/clone3 system call seen in traced code: a new thread (with
 * its own TLS, so a fresh state) starts at one of them. */
static uint64_t birth_site[8];
static unsigned nbirth;
/* Big RSP changes (sub rsp, 0x1000) of straight-line instructions, for the walk (IM_RSP_BIG). */
uint64_t *big_rsp_addr;
uint64_t *big_rsp_delta;     /* int64_t values */
size_t nbig_rsp;

int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
int (*real_execve)(const char *, char *const[], char *const[]);
int (*real_execvpe)(const char *, char *const[], char *const[]);

/* ---- small async-signal-safe helpers (no libc: see rt.h) --------------------------------- */

static long sys_write_all(int fd, const struct iovec *iov, int n)
{
	/* O_APPEND keeps each record contiguous even with threads and forked children. */
	return rt_syscall(SYS_writev, fd, iov, n, 0, 0, 0);
}

/* The recorder's messages go to a private duplicate of the stderr the program started
 * with (made at start-up, high and close-on-exec): not to whatever the program later puts
 * on descriptor 2, nor lost when it closes it. */
int err_fd = 2;
uint64_t err_dev, err_ino;   /* what it was: a program that closes it frees its number */

void say2(const char *a, const char *b, const char *c)
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

void say(const char *msg)
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
char out_cur[PATH_MAX + 16];   /* the file out_fd should be: this process's trace */
static uint64_t out_dev, out_ino;
int out_fd_floor;              /* the lowest descriptor the trace may have */
static volatile int out_fd_busy;

/* FD moved to out_fd_floor or above (close-on-exec), its identity noted; -1 if FD < 0. */
int out_fd_settle(long fd)
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

void out_fd_check(void)
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

void put_rec(int type, uint32_t tid, uint32_t seq, const void *p, uint32_t n)
{
	uint8_t h[TK_BTRACE_REC_HEADER];
	static const uint8_t zeros[8];
	uint32_t magic = TK_BTRACE_REC_MAGIC, sum = tk_btrace_record_sum(call_times ? TK_BTRACE_VERSION : 1, p, n);
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

void *rec_alloc(size_t n)   /* zeroed, 16-aligned */
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

void rec_free(void *p, size_t n)
{
	if (p && ((n + 15) & ~(size_t)15) >= REC_CHUNK / 2)
		rt_syscall(SYS_munmap, p, (n + 4095) & ~(size_t)4095, 0, 0, 0, 0);
}

/* ---- lookups ---------------------------------------------------------------------- */

/* Index of the last element <= key in a sorted array, or -1. */
long last_le(const uint64_t *a, size_t n, uint64_t key)
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
int rsp_effect(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops, int64_t *d)
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

#define IM_STRAIGHT 0x00

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

int in_plt(uint64_t a)
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

/* The readable segments of the objects loaded with the program (the program, its
 * libraries, ld.so, the vDSO): ld.so never unloads them, so bytes there are read with a
 * plain copy. The re-entry checks read untraced callers' code and GOT slots at every call
 * from untraced code (sqlite3's shell into libsqlite3: several hundred thousand reads),
 * each a process_vm_readv before. */
#define MAX_FIXED_SEGS 256
static uint64_t fixed_lo[MAX_FIXED_SEGS], fixed_hi[MAX_FIXED_SEGS];
static int nfixed;

static int add_fixed(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	for (int i = 0; i < info->dlpi_phnum && nfixed < MAX_FIXED_SEGS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || !ph->p_memsz)
			continue;
		uint64_t lo = info->dlpi_addr + ph->p_vaddr;
		fixed_lo[nfixed] = lo & ~4095ull;
		fixed_hi[nfixed++] = (lo + ph->p_memsz + 4095) & ~4095ull;
	}
	return 0;
}

/* At start-up, before anything is recorded (dl_iterate_phdr is libc's). */
void fixed_segments_setup(void)
{
	nfixed = 0;
	dl_iterate_phdr(add_fixed, NULL);
}

/* N bytes of the process's memory at A: copied when they lie in a segment loaded with the
 * program, else by a read that fails instead of faulting. */
static int read_mem(void *dst, uint64_t a, size_t n)
{
	for (int i = 0; i < nfixed; i++)
		if (a >= fixed_lo[i] && a + n <= fixed_hi[i] && a + n > a) {
			memcpy(dst, (const void *)(uintptr_t)a, n);
			return 0;
		}
	return rt_read_mem(dst, a, n);
}

/* Is RA the return address of a call made by untraced code (libc calling main, a thread's
 * start routine, a qsort comparator, an atexit or signal handler)? It lies outside the
 * traced modules and follows a call instruction. The bytes are read with read_mem, which
 * fails instead of faulting on an unmapped page. */
static int untraced_return_address(uint64_t ra)
{
	uint8_t b[8];
	long k;
	if (ra < 0x10000 || ra >= 0x800000000000ull || module_of(ra) || is_ret_site(ra, &k))
		return 0;
	if (read_mem(b, ra - 8, sizeof b) < 0)
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
	return read_mem(dst, a, n);
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
	return read_mem(&t, slot, 8) < 0 ? 0 : t;
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

uint64_t ring_pieces, ring_bytes, max_size;
int call_times = 1;
static uint64_t stream_written;   /* stream bytes written (--max-size) */
static int size_stopped;          /* --max-size reached: no more stream pieces */

/* A piece of stream into the file, or with --max-size past the limit the LIMIT record
 * instead (once): the trace ends there, and the reader marks the end as a gap. */
static void put_stream(uint32_t tid, uint32_t seq, const uint8_t *p, uint32_t n)
{
	if (max_size) {
		if (__atomic_load_n(&size_stopped, __ATOMIC_ACQUIRE))
			return;
		if (__atomic_add_fetch(&stream_written, n, __ATOMIC_ACQ_REL) > max_size) {
			if (!__atomic_exchange_n(&size_stopped, 1, __ATOMIC_ACQ_REL))
				put_rec(TK_BTRACE_REC_LIMIT, 0, 0, &max_size, 8);
			return;
		}
	}
	put_rec(TK_BTRACE_REC_STREAM, tid, seq, p, n);
}

/* --ring: the piece goes into the thread's ring (mmap'd at its first piece; without
 * memory, pieces are written as usual); written out by ring_out when the thread ends. */
static void ring_keep(struct tstate *ts)
{
	if (!ts->ring) {
		long p = rt_syscall(SYS_mmap, NULL, ring_pieces * RING_SLOT, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p < 0 && p > -4096) {
			put_stream((uint32_t)ts->tid, ts->seq++, ts->enc.buf, (uint32_t)ts->enc.len);
			return;
		}
		ts->ring = (uint8_t *)p;
	}
	uint8_t *slot = ts->ring + (ts->seq % ring_pieces) * RING_SLOT;
	uint32_t len = (uint32_t)ts->enc.len;
	memcpy(slot, &len, 4);
	memcpy(slot + 4, &ts->seq, 4);
	memcpy(slot + 8, ts->enc.buf, len);
	ts->seq++;
}

/* The thread's ring, oldest piece first, each with its own sequence number: the reader
 * sees the pieces before them as not kept. */
static void ring_out(struct tstate *ts)
{
	if (!ts->ring)
		return;
	uint32_t s = ts->seq > ring_pieces ? ts->seq - (uint32_t)ring_pieces : 0;
	for (s = s > ts->ring_from ? s : ts->ring_from; s < ts->seq; s++) {
		const uint8_t *slot = ts->ring + (s % ring_pieces) * RING_SLOT;
		uint32_t len;
		memcpy(&len, slot, 4);
		put_stream((uint32_t)ts->tid, s, slot + 8, len);
	}
	ts->ring_from = ts->seq;   /* a failed exec goes on: these are written */
}

void flush_thread(struct tstate *ts)
{
	ptenc_tnt_flush(&ts->enc);
	if (ts->enc.len && !closed) {
		if (ring_pieces)
			ring_keep(ts);
		else
			put_stream((uint32_t)ts->tid, ts->seq++, ts->enc.buf, (uint32_t)ts->enc.len);
	}
	ts->enc.len = 0;
	ts->psb_pos = (size_t)-1;   /* every piece starts with a PSB: a sync point */
}

void end_thread(struct tstate *ts)
{
	uint64_t st[7] = { ts->traps, ts->reentries, ts->unresolved, ts->traps_long, ts->tramp_hits,
			   ts->end_reason, ts->traps_first };
	flush_thread(ts);
	if (!closed && !ts->done)
		ring_out(ts);
	if (!closed && !ts->done)
		put_rec(TK_BTRACE_REC_THREAD_END, (uint32_t)ts->tid, ts->seq++, st, sizeof st);
	ts->done = 1;
}


/* The thread ending the process takes another thread's buffer for good, waiting for a
 * record in progress: microseconds, or as long as the machine keeps that thread off its
 * CPU (on a loaded machine milliseconds: 20,000 yields, about 10 ms, once gave up on a
 * thread preempted inside its record), but not for a thread that cannot run (stopped,
 * blocked in its record's write): 0 if not taken after TAKE_WAIT_NS (see ts_enter for the
 * protocol). */
#define TAKE_WAIT_NS 500000000ll
int ts_take(struct tstate *ts)
{
	struct timespec t0, t, nap = { 0, 100000 };

	__atomic_store_n(&ts->ended, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ts_fence)
		rt_syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0, 0, 0, 0);
	for (int i = 0; i < 1000; i++) {
		if (__atomic_load_n(&ts->lock, __ATOMIC_ACQUIRE) == LOCK_FREE)
			return 1;
		rt_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
	}
	if (rt_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t0, 0, 0, 0, 0) != 0)
		return 0;
	for (;;) {
		if (__atomic_load_n(&ts->lock, __ATOMIC_ACQUIRE) == LOCK_FREE)
			return 1;
		if (rt_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t, 0, 0, 0, 0) != 0 ||
		    (t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) >= TAKE_WAIT_NS)
			return 0;
		rt_syscall(SYS_nanosleep, &nap, 0, 0, 0, 0, 0);   /* its CPU to the thread if it waits here */
	}
}

/* At start-up and in a forked child (one thread each): ts_take's barrier, membarrier, or
 * if the kernel refuses it, a fence in every ts_enter. */
int ts_fence;
void ts_lock_setup(void)
{
	ts_fence = rt_syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0, 0, 0, 0) != 0;
}

struct tstate *thread_state(void)
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

int maybe_psb(struct tstate *ts, uint64_t ip)
{
	if (ts->psb_pos == (size_t)-1 || ts->enc.len - ts->psb_pos >= PSB_EVERY) {
		ptenc_tnt_flush(&ts->enc);
		ts->psb_pos = ts->enc.len;
		ptenc_psb(&ts->enc, __rdtsc(), ts->inside, ip);
		return 1;
	}
	return 0;
}

/* A TSC (rdtsc: no system call) before the packet of every transfer that is not a
 * conditional branch: where tracing starts again (TIP.PGE: the time outside traced code,
 * library calls, system calls, sleeps, ends there), where it stops (TIP.PGD: the library
 * call starts there) and at every return and indirect call or jump (TIP), so a call that
 * calls nothing still has a time at its end, and the calls around it a time at their start
 * (format version 2; version 1 had them only at TIP.PGE and in PSB+). The decoder reads a
 * timing packet when it needs the packet after it, so the time is that of the transfer.
 * A PSB+ just written has its TSC. */
static void stamp(struct tstate *ts, int psb_written)
{
	if (!psb_written)
		ptenc_tsc(&ts->enc, __rdtsc());
}

#define CLONE_COPY 2     /* the clone has a copy (fork): it starts its own trace */


/* Is the task running now not the thread that owns TS? A clone made without a TLS of its
 * own (vfork, posix_spawn's child, fork) runs with its parent's state until it, or the
 * parent, records: the thread id tells them apart. A forked child switches to its own
 * trace file here; a child that shares memory is not recorded. */
int foreign_task(struct tstate *ts)
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

static uint64_t record_locked(struct tstate *ts, const struct cti *c, const struct cti_result *r,
			      const greg_t *g, uint64_t rsp, int trap);
static void trigger_count(struct tstate *ts, uint64_t at, uint64_t rsp);
uint64_t trigger_at, trigger_n;   /* --trigger: the function's entry, the call that ends the recording */
const char *trigger_name;

/* Record one CTI's outcome (the CTI at c->addr, next RIP r->next); TRAP: it trapped (else a
 * trampoline recorded it). */
static void record(struct tstate *ts, const struct cti *c, const struct cti_result *r, const greg_t *g,
		   uint64_t rsp, int trap)
{
	if (ts->muted || ts->done || foreign_task(ts) || !ts_enter(ts))
		return;
	uint64_t entry = record_locked(ts, c, r, g, rsp, trap);
	ts_leave(ts);
	/* --trigger: an indirect call or jump, a conditional tail call to the function, or an
	 * entry from untraced code (a callback: the trace then ends after this branch) */
	if (trigger_at && (r->next == trigger_at || entry == trigger_at) && c->kind != CTI_RET &&
	    c->kind != CTI_SYSCALL)
		trigger_count(ts, r->next, rsp);
}

/* Returns where the thread entered traced code before this CTI, 0 if it was inside. */
static uint64_t record_locked(struct tstate *ts, const struct cti *c, const struct cti_result *r,
			      const greg_t *g, uint64_t rsp, int trap)
{
	int stamped;
	uint64_t entry = 0;
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
		entry = find_entry(ts, c->addr, rsp);
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
		stamped = 1;
	} else {
		stamped = maybe_psb(ts, c->addr);
	}
	switch (c->kind) {
	case CTI_JCC:
	case CTI_JCXZ:
	case CTI_LOOP:
		ptenc_tnt(&ts->enc, r->taken);
		return entry;
	case CTI_SYSCALL:
		/* a far transfer to the kernel, which is not traced: like Intel PT with user-mode
		 * tracing, TIP.PGD without an IP here, TIP.PGE where the thread comes back */
		ptenc_ip(&ts->enc, PT_TIP_PGD, 0, 1);
		ts->inside = 0;
		ts->resume = c->addr + c->len;
		return entry;
	default:
		break;
	}
	if (call_times)
		stamp(ts, stamped);
	if (module_of(r->next)) {
		ptenc_ip(&ts->enc, PT_TIP, r->next, 0);
		return entry;
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
	return entry;
}


/* ---- trampolines: conditional jumps of 6 bytes record without a signal -----------------
 * At start-up, a `jcc rel32` is overwritten with `jmp rel32` to generated code that
 * repeats the condition and, on each path, calls tramp_hit() through a stub that saves all
 * registers, the flags and the SSE registers, then jumps on to the target or the
 * fall-through. The recorded packets are the same as with the trap. */

#define TRAMP_AREA (16u << 20)   /* reserved; pages are touched only as trampolines are made */

static uint8_t *tramp_area[MAX_MODULES];
static size_t tramp_used[MAX_MODULES];
static uint8_t *tramp_stub[MAX_MODULES];
static uint32_t *tramp_index[MAX_MODULES];  /* CTI index of each trampoline, in area order */
static size_t tramp_count[MAX_MODULES];
static size_t tramp_base[MAX_MODULES];   /* offset of the first trampoline (after the stub) */
__thread struct tramp_tls ttls __attribute__((tls_model("initial-exec")));
int32_t ttls_fs_off;

#define TRAMP_PATH 42        /* bytes per path; the call returns at offset 28 */
/* Slots on a fixed grid: [relocated prefix][jcc rel32 + two paths [suffix, jmp back] | one
 * path (+ ret)], and in the last TRAMP_META bytes, never executed, how the moved code maps
 * to the original: prefix length [0], instruction count [1], each one's offset in the slot
 * [2..] and in the original window [8..], then the suffix's instructions and its end
 * likewise, the window's distance back from the CTI [14], the suffix's instruction count
 * [15]. A zeroed area means nothing moved. */
#define TRAMP_SIZE 128
#define TRAMP_META 16
#define RELOC_MAX_BYTES (TRAMP_SIZE - TRAMP_META - (6 + 2 * TRAMP_PATH))
int tramps_on;

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
void defer_signal(struct tstate *ts, int sig, const siginfo_t *si)
{
	ts->deferred_info[sig] = *si;
	ts->deferred |= 1ull << (sig - 1);
}

static uint64_t window_entry(uint64_t t);

/* What record() writes for a trampoline's conditional branch, in the common case only: the
 * thread's own (no clone pending), inside traced code, room in the buffer, no PSB due, not
 * a branch to --trigger's function; without record()'s general path (about a third of a
 * record's instructions). 0: not that case, record() it. */
static inline int tnt_quick(struct tstate *ts, uint64_t next, int taken)
{
	if (ts->muted | ts->done | ts->clone_pending | ts->check_tid || (trigger_at && next == trigger_at))
		return 0;
	if (!ts_enter(ts))
		return 1;   /* as record(): the buffer is busy or taken */
	if (!ts->inside || ts->enc.len >= BUF_FLUSH_AT || ts->psb_pos == (size_t)-1 ||
	    ts->enc.len - ts->psb_pos >= PSB_EVERY) {
		ts_leave(ts);
		return 0;
	}
	ts->tramp_hits++;
	ptenc_tnt(&ts->enc, taken);
	ts_leave(ts);
	return 1;
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
	else if ((c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) && (!c->is_mem || c->base != CTI_REG_RIP))
		r.next = ttls.dest;   /* the path stored the register or the pointer */
	else if (c->kind != CTI_JCC)   /* jmp/call [rip+disp]: the pointer, read once, is where we go */
		memcpy(&r.next, (const void *)(uintptr_t)(c->addr + c->len + (uint64_t)(int64_t)c->disp), 8);
	struct tstate *ts = active ? thread_state() : NULL;
	if (ts) {
		ts->in_hit = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (c->kind != CTI_JCC || !tnt_quick(ts, r.next, r.taken)) {
			g[REG_RSP] = (greg_t)rsp;
			record(ts, c, &r, g, rsp, 0);
		}
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	/* a computed jump's path (code's low bit) lands in a window through its trampoline */
	ttls.dest = (code & 1) && c->kind == CTI_JMP_IND ? window_entry(r.next) : r.next;
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
 * caller) and the red zone already skipped. It saves no vector register: the whole recorder
 * is built with -mgeneral-regs-only (tests/oracle/btrace_nolibc.sh checks that nothing the
 * stub calls touches one). The flags are saved with pushfq but restored without popfq
 * (about 20 cycles): DF by std when it was set, OF by an add, the rest by sahf. */
static uint8_t *make_stub(uint8_t *p, void (*hit)(uint32_t, uint64_t))
{
	static const uint8_t save[] = {
		0x9c, 0xfc,                         /* pushfq; cld */
		0x50, 0x51, 0x52, 0x56,             /* push rax rcx rdx rsi */
		0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* push r8-r11 */
		0x53,                               /* push rbx */
		/* rsp at the CTI = entry + 8 (return) + 8 (rdi) + 128 (red zone); 80 pushed */
		0x48, 0x8d, 0xb4, 0x24, 0xe0, 0x00, 0x00, 0x00, /* lea rsi, [rsp + 224] */
		0x48, 0x89, 0xe3,                   /* mov rbx, rsp */
		0x48, 0x83, 0xe4, 0xf0,             /* and rsp, -16 */
		0x48, 0xb8,                         /* mov rax, imm64 */
	};
	emit(&p, save, sizeof save);
	uint64_t fn = (uint64_t)(uintptr_t)hit;
	emit(&p, &fn, 8);
	static const uint8_t rest[] = {
		0xff, 0xd0,                         /* call rax */
		0x48, 0x89, 0xdc,                   /* mov rsp, rbx */
		0x5b,                               /* pop rbx */
		0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* pop r11-r8 */
		0x5e, 0x5a, 0x59,                   /* pop rsi rdx rcx; rax and the flags are left */
		0xf6, 0x44, 0x24, 0x09, 0x04,       /* test byte [rsp + 9], 4: DF (bit 10) */
		0x74, 0x01, 0xfd,                   /* jz 1f; std; 1: */
		0x8a, 0x44, 0x24, 0x09,             /* mov al, [rsp + 9] */
		0xc0, 0xe8, 0x03, 0x24, 0x01,       /* shr al, 3; and al, 1: OF (bit 11) */
		0x04, 0x7f,                         /* add al, 0x7f: OF set iff al was 1 */
		0x8a, 0x64, 0x24, 0x08,             /* mov ah, [rsp + 8]: SF ZF AF PF CF */
		0x9e,                               /* sahf (OF is left as it is) */
		0x58,                               /* pop rax */
		0x48, 0x8d, 0x64, 0x24, 0x08,       /* lea rsp, [rsp + 8] (the flags) */
		0xc3,                               /* ret */
	};
	emit(&p, rest, sizeof rest);
	return p;
}

/* ---- the conditional branches' stub: the TNT bit appended in assembly -----------------
 * A trampoline's conditional branch in the common case (as tnt_quick: recording, the
 * thread's own state, inside traced code, room in the buffer, no PSB due, no --trigger, no
 * fence needed by ts_enter) appends its TNT bit here, without saving what C needs or
 * calling it: the flags are kept in ah/al (lahf, seto; restored as make_stub does), four
 * registers are pushed, the thread's state is fs-relative (tls, initial-exec). Every other
 * case goes on to the full stub (tramp_hit) with everything as it was at entry. in_hit is
 * set before the checks, so a signal arriving meanwhile is deferred as in tramp_hit; a
 * deferred one is redelivered through a full stub calling tramp_deferred. Once in_hit is
 * cleared the branch is recorded but ttls still names it: logical_ip takes a RIP in
 * [jcc_done_at, jcc_done_end) of this stub to the branch's destination. */
static uint8_t *tramp_jcc_stub[MAX_MODULES];
static size_t jcc_done_at, jcc_done_end;   /* offsets in a jcc stub */

/* From the jcc stub, after its record, when a signal was deferred meanwhile. */
static void tramp_deferred(uint32_t code, uint64_t rsp)
{
	(void)code;
	(void)rsp;
	struct tstate *ts = tls;
	if (ts && ts->deferred)
		redeliver(ts);
}

/* An instruction with a memory operand [rdx + disp32] (ModRM already in OP) or fs:[disp32]. */
static void emit_m(uint8_t **p, const uint8_t *op, size_t n, size_t disp)
{
	int32_t d = (int32_t)disp;
	emit(p, op, n);
	emit(p, &d, 4);
}

#define JE 0x4
#define JNE 0x5
#define JAE 0x3
#define JMP 16
/* A jcc rel32 (condition CC) or jmp rel32 (JMP) to be fixed by jump_fix; returns its rel32. */
static uint8_t *emit_jump(uint8_t **p, int cc)
{
	uint8_t op[2] = { 0x0f, (uint8_t)(0x80 + cc) }, jmp = 0xe9;
	if (cc == JMP)
		emit(p, &jmp, 1);
	else
		emit(p, op, 2);
	*p += 4;
	return *p - 4;
}

static void jump_fix(uint8_t *rel_at, const uint8_t *to)
{
	int32_t rel = (int32_t)(to - (rel_at + 4));
	memcpy(rel_at, &rel, 4);
}

/* rsi = &ctis[edi >> 1], the CTI of the stub's code in edi (rcx clobbered). */
static void emit_cti_of_code(uint8_t **p)
{
	static const uint8_t ld_ctis[] = { 0x48, 0xb9 };   /* mov rcx, &ctis */
	uint64_t a = (uint64_t)(uintptr_t)&ctis;
	static const uint8_t cti_at[] = {
		0x48, 0x8b, 0x09,       /* mov rcx, [rcx] */
		0x89, 0xfe,             /* mov esi, edi */
		0xd1, 0xee,             /* shr esi, 1 */
		0x48, 0x6b, 0xf6, (uint8_t)sizeof(struct cti),   /* imul rsi, rsi, sizeof */
		0x48, 0x01, 0xce,       /* add rsi, rcx: the CTI */
	};
	emit(p, ld_ctis, 2);
	emit(p, &a, 8);
	emit(p, cti_at, sizeof cti_at);
}


/* Restore the flags (from ah/al) and the registers pushed at entry (WIDE: r8, r9 too). */
static void emit_fast_leave(uint8_t **p, int wide)
{
	static const uint8_t b[] = {
		0x04, 0x7f,             /* add al, 0x7f: OF from al */
		0x9e,                   /* sahf */
		0x41, 0x59, 0x41, 0x58, /* pop r9 r8 */
		0x5e, 0x5a, 0x59, 0x58, /* pop rsi rdx rcx rax */
	};
	emit(p, b, 3);
	emit(p, b + (wide ? 3 : 7), wide ? 8 : 4);
}

#define RDX(reg) (uint8_t)(0x80 | (reg) << 3 | 2)   /* ModRM [rdx + disp32] */
#define OFF(f) offsetof(struct tstate, f)

/* A fast stub's entry: save the registers and the flags, then tnt_quick's checks with the
 * thread's state in rdx, setting in_hit and taking the buffer on the way. A failed check
 * jumps (rel32 in SLOW before in_hit is set, in UNLOCK after) to the way out to the full
 * stub (emit_fast_slow). */
static void emit_fast_checks(uint8_t **pp, int32_t tls_off, int wide, uint8_t **slow, int *nslow,
			     uint8_t **unlock, int *nunlock)
{
	uint8_t *p = *pp;
	uint64_t a;
	static const uint8_t enter[] = {
		0x50, 0x51, 0x52, 0x56, /* push rax rcx rdx rsi */
		0x41, 0x50, 0x41, 0x51, /* push r8 r9 */
		0x9f,                   /* lahf: SF ZF AF PF CF */
		0x0f, 0x90, 0xc0,       /* seto al */
	};
	emit(&p, enter, 4);
	if (wide)
		emit(&p, enter + 4, 4);
	emit(&p, enter + 8, 4);
	/* the globals: recording, no --trigger, no fence in ts_enter */
	const void *globals[3] = { (const void *)&active, &trigger_at, &ts_fence };
	static const uint8_t cmp_rcx[3][4] = { { 0x83, 0x39, 0x00 }, { 0x48, 0x83, 0x39, 0x00 }, { 0x83, 0x39, 0x00 } };
	for (int k = 0; k < 3; k++) {
		static const uint8_t movabs[] = { 0x48, 0xb9 };   /* mov rcx, imm64 */
		emit(&p, movabs, 2);
		a = (uint64_t)(uintptr_t)globals[k];
		emit(&p, &a, 8);
		emit(&p, cmp_rcx[k], k == 1 ? 4 : 3);
		slow[(*nslow)++] = emit_jump(&p, k == 0 ? JE : JNE);
	}
	static const uint8_t ld_tls[] = { 0x64, 0x48, 0x8b, 0x14, 0x25 };   /* mov rdx, fs:[disp32] */
	emit_m(&p, ld_tls, sizeof ld_tls, (size_t)(int64_t)tls_off);
	static const uint8_t test_rdx[] = { 0x48, 0x85, 0xd2 };
	emit(&p, test_rdx, 3);
	slow[(*nslow)++] = emit_jump(&p, JE);
	/* muted | done | clone_pending | check_tid */
	uint8_t op[4] = { 0x8b, RDX(1) };   /* mov ecx, [rdx+d] */
	emit_m(&p, op, 2, OFF(muted));
	op[0] = 0x0b;   /* or ecx, [rdx+d] */
	emit_m(&p, op, 2, OFF(done));
	emit_m(&p, op, 2, OFF(clone_pending));
	emit_m(&p, op, 2, OFF(check_tid));
	slow[(*nslow)++] = emit_jump(&p, JNE);
	uint8_t cmp0[2] = { 0x83, RDX(7) }, zero = 0;   /* cmp dword [rdx+d], 0 */
	emit_m(&p, cmp0, 2, OFF(lock));
	emit(&p, &zero, 1);
	slow[(*nslow)++] = emit_jump(&p, JNE);
	/* in_hit = 1 (signals from here are deferred), lock = LOCK_OWNER, then ended */
	uint8_t st[2] = { 0xc7, RDX(0) };
	uint32_t one = 1;
	emit_m(&p, st, 2, OFF(in_hit));
	emit(&p, &one, 4);
	emit_m(&p, st, 2, OFF(lock));
	emit(&p, &one, 4);
	emit_m(&p, cmp0, 2, OFF(ended));
	emit(&p, &zero, 1);
	unlock[(*nunlock)++] = emit_jump(&p, JNE);
	emit_m(&p, cmp0, 2, OFF(inside));
	emit(&p, &zero, 1);
	unlock[(*nunlock)++] = emit_jump(&p, JE);
	/* room in the buffer, no PSB due: len < BUF_FLUSH_AT, psb_pos != -1, len - psb_pos < PSB_EVERY */
	uint8_t ld[3] = { 0x48, 0x8b, RDX(1) };   /* mov rcx, [rdx+d] */
	emit_m(&p, ld, 3, OFF(enc.len));
	static const uint8_t cmp_flush[] = { 0x48, 0x81, 0xf9 };   /* cmp rcx, imm32 */
	uint32_t lim = BUF_FLUSH_AT;
	emit(&p, cmp_flush, 3);
	emit(&p, &lim, 4);
	unlock[(*nunlock)++] = emit_jump(&p, JAE);
	uint8_t cmpq[3] = { 0x48, 0x83, RDX(7) }, m1 = 0xff;   /* cmp qword [rdx+d], -1 */
	emit_m(&p, cmpq, 3, OFF(psb_pos));
	emit(&p, &m1, 1);
	unlock[(*nunlock)++] = emit_jump(&p, JE);
	uint8_t sub[3] = { 0x48, 0x2b, RDX(1) };   /* sub rcx, [rdx+d] */
	emit_m(&p, sub, 3, OFF(psb_pos));
	lim = PSB_EVERY;
	emit(&p, cmp_flush, 3);
	emit(&p, &lim, 4);
	unlock[(*nunlock)++] = emit_jump(&p, JAE);
	*pp = p;
}

/* The way out of a fast stub when a check failed: the buffer and in_hit given back (tramp_hit
 * sets in_hit again and redelivers what was deferred), everything as at entry, then the
 * full stub FULL. */
static void emit_fast_slow(uint8_t **pp, int wide, uint8_t *full, uint8_t **slow, int nslow,
			   uint8_t **unlock, int nunlock)
{
	uint8_t *p = *pp;
	uint8_t st[2] = { 0xc7, RDX(0) };
	uint32_t none = 0;
	for (int k = 0; k < nunlock; k++)
		jump_fix(unlock[k], p);
	emit_m(&p, st, 2, OFF(lock));
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(in_hit));
	emit(&p, &none, 4);
	for (int k = 0; k < nslow; k++)
		jump_fix(slow[k], p);
	emit_fast_leave(&p, wide);
	jump_fix(emit_jump(&p, JMP), full);
	*pp = p;
}

static uint8_t *make_jcc_stub(uint8_t *p, uint8_t *full, uint8_t *deferred, int32_t tls_off)
{
	uint8_t *start = p, *slow[16], *unlock[8];
	int nslow = 0, nunlock = 0;
	uint8_t op[4] = { 0x8b, RDX(1) };
	uint8_t cmp0[2] = { 0x83, RDX(7) }, zero = 0;   /* cmp dword [rdx+d], 0 */
	uint8_t st[2] = { 0xc7, RDX(0) };
	uint32_t none = 0;
	emit_fast_checks(&p, tls_off, 0, slow, &nslow, unlock, &nunlock);
	/* the record: tramp_hits++, then ptenc_tnt */
	uint8_t inc[3] = { 0x48, 0xff, RDX(0) };
	emit_m(&p, inc, 3, OFF(tramp_hits));
	op[0] = 0x8b;   /* mov ecx, [rdx+tnt] */
	emit_m(&p, op, 2, OFF(enc.tnt));
	static const uint8_t bit[] = {
		0x01, 0xc9,             /* add ecx, ecx */
		0x0f, 0xba, 0xe7, 0x00, /* bt edi, 0: the taken bit */
		0x83, 0xd1, 0x00,       /* adc ecx, 0 */
	};
	emit(&p, bit, sizeof bit);
	op[0] = 0x89;   /* mov [rdx+tnt], ecx */
	emit_m(&p, op, 2, OFF(enc.tnt));
	uint8_t incd[2] = { 0xff, RDX(0) }, six = 6;   /* inc dword [rdx+ntnt]; cmp dword [rdx+ntnt], 6 */
	emit_m(&p, incd, 2, OFF(enc.ntnt));
	emit_m(&p, cmp0, 2, OFF(enc.ntnt));
	emit(&p, &six, 1);
	uint8_t *no_flush = emit_jump(&p, JNE);
	/* six bits: a short TNT byte, ((1 << 6) | tnt) << 1, at buf[len++] */
	static const uint8_t tnt_byte[] = { 0x83, 0xc9, 0x40, 0x01, 0xc9 };   /* or ecx, 0x40; add ecx, ecx */
	emit(&p, tnt_byte, sizeof tnt_byte);
	uint8_t ldsi[3] = { 0x48, 0x8b, RDX(6) }, addsi[3] = { 0x48, 0x03, RDX(6) };
	emit_m(&p, ldsi, 3, OFF(enc.len));
	emit_m(&p, addsi, 3, OFF(enc.buf));
	static const uint8_t stb[] = { 0x88, 0x0e };   /* mov [rsi], cl */
	emit(&p, stb, 2);
	emit_m(&p, inc, 3, OFF(enc.len));
	emit_m(&p, st, 2, OFF(enc.tnt));
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(enc.ntnt));
	emit(&p, &none, 4);
	jump_fix(no_flush, p);
	/* ts_leave, then in_hit = 0: recorded */
	emit_m(&p, st, 2, OFF(lock));
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(in_hit));
	emit(&p, &none, 4);
	jcc_done_at = (size_t)(p - start);
	uint8_t cmpdef[3] = { 0x48, 0x83, RDX(7) };   /* cmp qword [rdx+deferred], 0 */
	emit_m(&p, cmpdef, 3, OFF(deferred));
	emit(&p, &zero, 1);
	uint8_t *def = emit_jump(&p, JNE);
	emit_fast_leave(&p, 0);
	static const uint8_t ret = 0xc3;
	emit(&p, &ret, 1);
	/* a signal was deferred: ttls says where the thread goes (as tramp_hit leaves it), then
	 * the full stub calling tramp_deferred */
	jump_fix(def, p);
	emit_cti_of_code(&p);
	static const uint8_t cti_at[] = {
		0x40, 0xf6, 0xc7, 0x01, /* test dil, 1 */
		0x75, 0x0a,             /* jnz taken (10 bytes on) */
		0x0f, 0xb6, 0x4e, (uint8_t)offsetof(struct cti, len),   /* movzx ecx, byte [rsi+len] */
		0x48, 0x03, 0x4e, (uint8_t)offsetof(struct cti, addr),  /* add rcx, [rsi+addr] */
		0xeb, 0x04,             /* jmp 1f */
		0x48, 0x8b, 0x4e, (uint8_t)offsetof(struct cti, target), /* taken: mov rcx, [rsi+target] */
		/* 1: */
	};
	_Static_assert(sizeof(struct cti) < 128 && offsetof(struct cti, len) < 128, "disp8");
	emit(&p, cti_at, sizeof cti_at);
	static const uint8_t st_dest[] = { 0x64, 0x48, 0x89, 0x0c, 0x25 };   /* mov fs:[d], rcx */
	emit_m(&p, st_dest, sizeof st_dest, (size_t)(int64_t)(ttls_fs_off + (int32_t)offsetof(struct tramp_tls, dest)));
	static const uint8_t st_code[] = { 0x64, 0xc7, 0x04, 0x25 };   /* mov dword fs:[d], 0 */
	emit_m(&p, st_code, sizeof st_code, (size_t)(int64_t)ttls_fs_off);
	emit(&p, &none, 4);
	emit_fast_leave(&p, 0);
	jump_fix(emit_jump(&p, JMP), deferred);
	jcc_done_end = (size_t)(p - start);
	emit_fast_slow(&p, 0, full, slow, nslow, unlock, nunlock);
	return p;
}

/* The rets' stub of a module whose code is [LO, HI): record() for a ret in the common case
 * (tnt_quick's, and a time stamp wanted, a return into the same module, an IP packet of 2 or
 * 4 bytes): a pending TNT byte, the TSC, the TIP; ttls says where the thread goes before
 * in_hit is cleared, as tramp_hit leaves it. rsp at the ret is the entry's + 192: the
 * path's call and rdi, the red zone, six registers. FROM_DEST 1: the same for an indirect
 * call or jump whose path stored its destination in ttls.dest (a register, or a pointer
 * loaded from [reg + disp]); 2: for `call/jmp [rip + disp]` (a PLT stub's jump to a function
 * of its own module), reading the pointer. */
static uint8_t *tramp_ret_stub[MAX_MODULES], *tramp_ind_stub[MAX_MODULES], *tramp_rip_stub[MAX_MODULES];
/* LAND: computed jumps too (their path's code has the low bit), when the bit of their
 * landing's offset in the module's map is clear: no window of 5 bytes (window_entry's) holds
 * it. The map is filled by paths_link, once the module's windows are made. */
static uint8_t *tramp_cind_stub[MAX_MODULES], *land_map[MAX_MODULES];

static uint8_t *emit_rel8(uint8_t **p, uint8_t op)
{
	uint8_t b[2] = { op, 0 };
	emit(p, b, 2);
	return *p - 1;
}

static void rel8_fix(uint8_t *at, const uint8_t *to)
{
	*at = (uint8_t)(to - (at + 1));
}

static uint8_t *make_ret_stub(uint8_t *p, uint8_t *full, uint8_t *deferred, int32_t tls_off, uint64_t lo,
			      uint64_t hi, int from_dest, const uint8_t *land)
{
	uint8_t *slow[16], *unlock[16], *j;
	int nslow = 0, nunlock = 0;
	uint64_t a;
	uint8_t st[2] = { 0xc7, RDX(0) }, zero = 0;
	uint32_t none = 0;
	emit_fast_checks(&p, tls_off, 1, slow, &nslow, unlock, &nunlock);
	static const uint8_t movabs[] = { 0x48, 0xb9 };   /* mov rcx, imm64 */
	emit(&p, movabs, 2);
	a = (uint64_t)(uintptr_t)&call_times;
	emit(&p, &a, 8);
	static const uint8_t cmp_rcx[] = { 0x83, 0x39, 0x00 };
	emit(&p, cmp_rcx, 3);
	unlock[nunlock++] = emit_jump(&p, JE);
	static const uint8_t ld_ra[] = { 0x48, 0x8b, 0xb4, 0x24, 0xc0, 0x00, 0x00, 0x00 };   /* mov rsi, [rsp+192] */
	static const uint8_t ld_dest[] = { 0x64, 0x48, 0x8b, 0x34, 0x25 };   /* mov rsi, fs:[d] */
	int32_t dest_off = ttls_fs_off + (int32_t)offsetof(struct tramp_tls, dest);
	if (from_dest == 2) {   /* jmp/call [rip + disp]: the pointer, as tramp_hit reads it */
		emit_cti_of_code(&p);
		static const uint8_t ptr[] = {
			0x48, 0x63, 0x4e, (uint8_t)offsetof(struct cti, disp),        /* movsxd rcx, [rsi+disp] */
			0x48, 0x03, 0x4e, (uint8_t)offsetof(struct cti, addr),        /* add rcx, [rsi+addr] */
			0x44, 0x0f, 0xb6, 0x4e, (uint8_t)offsetof(struct cti, len),   /* movzx r9d, byte [rsi+len] */
			0x4c, 0x01, 0xc9,       /* add rcx, r9 */
			0x48, 0x8b, 0x31,       /* mov rsi, [rcx] */
		};
		emit(&p, ptr, sizeof ptr);
	} else if (from_dest) {
		emit_m(&p, ld_dest, sizeof ld_dest, (size_t)(int64_t)dest_off);
	} else {
		emit(&p, ld_ra, sizeof ld_ra);
	}
	static const uint8_t cmp_rsi[] = { 0x48, 0x39, 0xce };   /* cmp rsi, rcx */
	emit(&p, movabs, 2);
	emit(&p, &lo, 8);
	emit(&p, cmp_rsi, 3);
	unlock[nunlock++] = emit_jump(&p, 0x2);   /* jb */
	emit(&p, movabs, 2);
	emit(&p, &hi, 8);
	emit(&p, cmp_rsi, 3);
	unlock[nunlock++] = emit_jump(&p, JAE);
	if (land) {   /* a computed jump landing where window_entry would send it elsewhere */
		static const uint8_t off[] = { 0x48, 0x89, 0xf1, 0x49, 0xb9 };   /* mov rcx, rsi; mov r9, lo */
		emit(&p, off, sizeof off);
		emit(&p, &lo, 8);
		static const uint8_t sub[] = { 0x4c, 0x29, 0xc9, 0x49, 0xb9 };   /* sub rcx, r9; mov r9, land */
		emit(&p, sub, sizeof sub);
		a = (uint64_t)(uintptr_t)land;
		emit(&p, &a, 8);
		static const uint8_t bt[] = { 0x49, 0x0f, 0xa3, 0x09 };   /* bt [r9], rcx */
		emit(&p, bt, sizeof bt);
		unlock[nunlock++] = emit_jump(&p, 0x2);   /* jc */
	}
	uint8_t ldlast[3] = { 0x48, 0x8b, RDX(1) };   /* mov rcx, [rdx+last_ip] */
	static const uint8_t hi32[] = { 0x48, 0x31, 0xf1, 0x48, 0xc1, 0xe9, 0x20 };   /* xor rcx, rsi; shr rcx, 32 */
	emit_m(&p, ldlast, 3, OFF(enc.last_ip));
	emit(&p, hi32, sizeof hi32);
	unlock[nunlock++] = emit_jump(&p, JNE);
	/* r8 = where the packets go */
	uint8_t ldr8[3] = { 0x4c, 0x8b, RDX(0) }, addr8[3] = { 0x4c, 0x03, RDX(0) };
	emit_m(&p, ldr8, 3, OFF(enc.buf));
	emit_m(&p, addr8, 3, OFF(enc.len));
	/* the pending TNT bits: ((1 << ntnt) | tnt) << 1 */
	uint8_t ldn[2] = { 0x8b, RDX(1) };   /* mov ecx, [rdx+ntnt] */
	emit_m(&p, ldn, 2, OFF(enc.ntnt));
	static const uint8_t test_ecx[] = { 0x85, 0xc9 };
	emit(&p, test_ecx, 2);
	j = emit_rel8(&p, 0x74);   /* jz: none */
	static const uint8_t tnt1[] = { 0x41, 0xb9, 0x01, 0x00, 0x00, 0x00, 0x41, 0xd3, 0xe1 };   /* mov r9d, 1; shl r9d, cl */
	emit(&p, tnt1, sizeof tnt1);
	uint8_t or9[3] = { 0x44, 0x0b, RDX(1) };   /* or r9d, [rdx+tnt] */
	emit_m(&p, or9, 3, OFF(enc.tnt));
	static const uint8_t tnt2[] = { 0x45, 0x01, 0xc9, 0x45, 0x88, 0x08, 0x49, 0xff, 0xc0 };   /* add r9d, r9d; mov [r8], r9b; inc r8 */
	emit(&p, tnt2, sizeof tnt2);
	emit_m(&p, st, 2, OFF(enc.tnt));
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(enc.ntnt));
	emit(&p, &none, 4);
	rel8_fix(j, p);
	/* TSC: 0x19 and the counter's low 7 bytes, one 8-byte store (the buffer has room) */
	static const uint8_t tsc[] = {
		0x41, 0x89, 0xc1,       /* mov r9d, eax: the flags */
		0x48, 0x89, 0xd1,       /* mov rcx, rdx: the state */
		0x0f, 0x31,             /* rdtsc */
		0x48, 0xc1, 0xe2, 0x20, /* shl rdx, 32 */
		0x48, 0x09, 0xd0,       /* or rax, rdx */
		0x48, 0xc1, 0xe0, 0x08, /* shl rax, 8 */
		0x0c, 0x19,             /* or al, 0x19 */
		0x49, 0x89, 0x00,       /* mov [r8], rax */
		0x49, 0x83, 0xc0, 0x08, /* add r8, 8 */
		0x48, 0x89, 0xca,       /* mov rdx, rcx */
		0x44, 0x89, 0xc8,       /* mov eax, r9d */
	};
	emit(&p, tsc, sizeof tsc);
	/* TIP with 2 bytes of IP (IPBytes 1) if only those differ from last_ip, else 4 (2) */
	static const uint8_t lo16[] = { 0x48, 0x31, 0xf1, 0x48, 0xc1, 0xe9, 0x10 };   /* xor rcx, rsi; shr rcx, 16 */
	emit_m(&p, ldlast, 3, OFF(enc.last_ip));
	emit(&p, lo16, sizeof lo16);
	j = emit_rel8(&p, 0x75);   /* jnz: four bytes */
	static const uint8_t tip2[] = {
		0x41, 0xc6, 0x00, 1 << 5 | PT_TIP,      /* mov byte [r8], TIP IPBytes 1 */
		0x66, 0x41, 0x89, 0x70, 0x01,           /* mov [r8+1], si */
		0x49, 0x83, 0xc0, 0x03,                 /* add r8, 3 */
	};
	emit(&p, tip2, sizeof tip2);
	uint8_t *j2 = emit_rel8(&p, 0xeb);
	rel8_fix(j, p);
	static const uint8_t tip4[] = {
		0x41, 0xc6, 0x00, 2 << 5 | PT_TIP,      /* mov byte [r8], TIP IPBytes 2 */
		0x41, 0x89, 0x70, 0x01,                 /* mov [r8+1], esi */
		0x49, 0x83, 0xc0, 0x05,                 /* add r8, 5 */
	};
	emit(&p, tip4, sizeof tip4);
	rel8_fix(j2, p);
	uint8_t stlast[3] = { 0x48, 0x89, RDX(6) }, subr8[3] = { 0x4c, 0x2b, RDX(0) }, str8[3] = { 0x4c, 0x89, RDX(0) };
	emit_m(&p, stlast, 3, OFF(enc.last_ip));
	emit_m(&p, subr8, 3, OFF(enc.buf));
	emit_m(&p, str8, 3, OFF(enc.len));
	uint8_t inc[3] = { 0x48, 0xff, RDX(0) };
	emit_m(&p, inc, 3, OFF(tramp_hits));
	/* where the thread goes, then the buffer and in_hit given back */
	static const uint8_t st_dest[] = { 0x64, 0x48, 0x89, 0x34, 0x25 };   /* mov fs:[d], rsi */
	if (from_dest != 1)
		emit_m(&p, st_dest, sizeof st_dest, (size_t)(int64_t)dest_off);
	static const uint8_t st_code[] = { 0x64, 0xc7, 0x04, 0x25 };   /* mov dword fs:[d], 0 */
	emit_m(&p, st_code, sizeof st_code, (size_t)(int64_t)ttls_fs_off);
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(lock));
	emit(&p, &none, 4);
	emit_m(&p, st, 2, OFF(in_hit));
	emit(&p, &none, 4);
	uint8_t cmpdef[3] = { 0x48, 0x83, RDX(7) };
	emit_m(&p, cmpdef, 3, OFF(deferred));
	emit(&p, &zero, 1);
	uint8_t *def = emit_jump(&p, JNE);
	emit_fast_leave(&p, 1);
	static const uint8_t ret = 0xc3;
	emit(&p, &ret, 1);
	jump_fix(def, p);
	emit_fast_leave(&p, 1);
	jump_fix(emit_jump(&p, JMP), deferred);
	emit_fast_slow(&p, 1, full, slow, nslow, unlock, nunlock);
	return p;
}

static uint8_t *ret_stub(int m)
{
	return tramp_ret_stub[m] ? tramp_ret_stub[m] : tramp_stub[m];
}

/* The stub of module M's conditional branches. */
static uint8_t *jcc_stub(int m)
{
	return tramp_jcc_stub[m] ? tramp_jcc_stub[m] : tramp_stub[m];
}

/* Call STUB with CODE in edi, past the red zone, and come back (16 bytes to the return). */
static void emit_stub_call(uint8_t **p, uint8_t *stub, uint32_t code)
{
	static const uint8_t pre[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x57, 0xbf }; /* lea rsp,[rsp-128]; push rdi; mov edi, */
	emit(p, pre, sizeof pre);
	emit(p, &code, 4);
	uint8_t call = 0xe8;
	emit(p, &call, 1);
	emit_rel32(p, stub);
	static const uint8_t post[] = { 0x5f, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 }; /* pop rdi; lea rsp,[rsp+128] */
	emit(p, post, sizeof post);
}

/* One path of a trampoline: record CODE, go to TO. */
static void emit_path(uint8_t **p, uint8_t *stub, uint32_t code, uint64_t to)
{
	static const uint8_t st[] = { 0x64, 0xc7, 0x04, 0x25 };   /* mov dword fs:[disp32], imm32 */
	uint32_t cp1 = code + 1;
	emit(p, st, sizeof st);
	emit(p, &ttls_fs_off, 4);
	emit(p, &cp1, 4);
	emit_stub_call(p, stub, code);
	uint8_t jmp = 0xe9;
	emit(p, &jmp, 1);
	emit_rel32(p, (uint8_t *)(uintptr_t)to);
}

/* SIZE bytes of executable memory within +-2 GiB of module M's code (reached by rel32). */
uint8_t *map_near(int m, size_t size)
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
void tramp_setup(int m)
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
	/* the stubs; trampolines start on a TRAMP_SIZE grid after them */
	uint8_t *q = make_stub(p, tramp_hit), *deferred = q;
	q = make_stub(q, tramp_deferred);
	int64_t tls_off = (int64_t)((uint64_t)(uintptr_t)&tls - rt_fs_base());
	if (tls_off == (int32_t)tls_off) {
		tramp_jcc_stub[m] = q;
		q = make_jcc_stub(q, p, deferred, (int32_t)tls_off);
		tramp_ret_stub[m] = q;
		q = make_ret_stub(q, p, deferred, (int32_t)tls_off, modules[m].start, modules[m].end, 0, NULL);
		tramp_ind_stub[m] = q;
		q = make_ret_stub(q, p, deferred, (int32_t)tls_off, modules[m].start, modules[m].end, 1, NULL);
		tramp_rip_stub[m] = q;
		q = make_ret_stub(q, p, deferred, (int32_t)tls_off, modules[m].start, modules[m].end, 2, NULL);
		if ((land_map[m] = rec_alloc((modules[m].end - modules[m].start) / 8 + 8))) {
			tramp_cind_stub[m] = q;
			q = make_ret_stub(q, p, deferred, (int32_t)tls_off, modules[m].start, modules[m].end, 1,
					  land_map[m]);
		}
	}
	size_t stub = (size_t)(q - p);
	tramp_used[m] = tramp_base[m] = (stub + TRAMP_SIZE - 1) / TRAMP_SIZE * TRAMP_SIZE;
	tramp_area[m] = p;
}

/* ---- --trigger FUNCTION[:N]: the recording ends at the function's Nth call ------------
 * A direct call or jump to the function is not recorded (the decoder follows it), so at
 * start-up every `call rel32` / `jmp rel32` to it in the traced modules is pointed at a
 * trampoline near its module, which counts the call (trigger_hit, through a stub like the
 * trampolines') and jumps on to the function with the stack untouched. Indirect calls and
 * jumps, conditional tail calls and entries from untraced code are counted where they are
 * recorded (record). The Nth call, in any thread, ends the trace of the calling thread at
 * the function's entry (FUP + TIP.PGD, as at a signal), writes every thread's trace (ring
 * or last piece) and the end record, and the program goes on untraced: the count itself
 * needs no system call. Not seen: a `jmp rel8` to the function and code that falls into it. */
static uint8_t *trigger_page[MAX_MODULES];   /* the stub, then the trampoline */
static uint8_t *trigger_tramp[MAX_MODULES];
static uint64_t *trigger_sites;              /* the call and jump sites to patch */
static size_t ntrigger_sites;
static uint64_t trigger_calls;

/* TS ends its trace at AT, the function's entry, and the recording ends. */
static void trigger_fire(struct tstate *ts, uint64_t at, uint64_t rsp)
{
	if (ts_enter(ts)) {
		if (ts->enc.len >= BUF_FLUSH_AT)
			flush_thread(ts);
		if (!ts->inside) {   /* back in traced code without a branch recorded since */
			uint64_t entry = find_entry(ts, at, rsp);
			stamp(ts, maybe_psb(ts, at));
			ptenc_ip(&ts->enc, PT_TIP_PGE, entry, 0);
			ts->inside = 1;
		} else {
			maybe_psb(ts, at);
		}
		ptenc_ip(&ts->enc, PT_FUP, at, 0);
		ptenc_ip(&ts->enc, PT_TIP_PGD, 0, 1);
		ts->inside = 0;
		ts_leave(ts);
	}
	finish(END_TRIGGER, (int)trigger_n);
}

static void trigger_count(struct tstate *ts, uint64_t at, uint64_t rsp)
{
	if (closed || ts->muted || ts->done || foreign_task(ts) ||
	    __atomic_add_fetch(&trigger_calls, 1, __ATOMIC_ACQ_REL) != trigger_n)
		return;
	if (!other_task())
		trigger_fire(ts, at, rsp);
}

/* From a trampoline's stub: a direct call or jump to the function, RSP at its entry.
 * Signals meanwhile are deferred, as in tramp_hit. */
static void trigger_hit(uint32_t code, uint64_t rsp)
{
	(void)code;
	struct tstate *ts = active && !closed ? thread_state() : NULL;
	if (!ts)
		return;
	ts->in_hit = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	trigger_count(ts, trigger_at, rsp);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ts->in_hit = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (ts->deferred)
		redeliver(ts);
}

/* Is A a `call rel32` or `jmp rel32` of module M to the trigger function? */
static int trigger_site(const struct module *m, uint64_t a, uint16_t im)
{
	uint8_t op = m->orig[a - m->start];
	return (im & IM_LEN) == 5 && !(im & IM_REL8) && (op == 0xe8 || op == 0xe9) &&
	       ((im & IM_CLASS) == IM_CALL || (im & IM_CLASS) == IM_JMP) && !cti_find(a) &&
	       imap_target(m, a, im) == trigger_at;
}

/* Start-up: the trampolines and the list of sites (patched by trigger_patch). Returns the
 * number of sites, or -1 if they cannot be made. */
long trigger_setup(void)
{
	size_t n = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < nmodules; i++) {
			const struct module *m = &modules[i];
			size_t here = 0;
			for (uint64_t a = m->start; a < m->end; a++) {
				uint16_t im = imap_at(m, a);
				if (!trigger_site(m, a, im))
					continue;
				if (pass)
					trigger_sites[ntrigger_sites++] = a;
				here++;
			}
			n += pass ? 0 : here;
			if (!pass || !here)
				continue;
			uint8_t *p = map_near(i, 4096);
			if (!p)
				return -1;
			trigger_page[i] = p;
			trigger_tramp[i] = p = make_stub(p, trigger_hit);
			emit_stub_call(&p, trigger_page[i], 0);
			static const uint8_t jmp_abs[] = { 0xff, 0x25, 0, 0, 0, 0 };   /* jmp [rip+0] */
			emit(&p, jmp_abs, sizeof jmp_abs);
			emit(&p, &trigger_at, 8);
		}
		if (!pass && n && !(trigger_sites = rec_alloc(n * sizeof *trigger_sites)))
			return -1;
	}
	for (size_t k = 0; k < ntrigger_sites; k++) {   /* every site reaches its trampoline */
		int64_t d = (int64_t)(uintptr_t)trigger_tramp[module_of(trigger_sites[k]) - modules] -
			    (int64_t)(trigger_sites[k] + 5);
		if (d != (int32_t)d)
			return -1;
	}
	return (long)n;
}

/* While patch() has the code writable: each site calls or jumps to its trampoline. */
void trigger_patch(void)
{
	if (!trigger_at)
		return;
	for (size_t k = 0; k < ntrigger_sites; k++) {
		uint64_t a = trigger_sites[k];
		int m = (int)(module_of(a) - modules);
		int32_t rel = (int32_t)((int64_t)(uintptr_t)trigger_tramp[m] - (int64_t)(a + 5));
		memcpy((void *)(uintptr_t)(a + 1), &rel, 4);
	}
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
	emit_stub_call(p, stub, code);
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
 * path, each recording outcome I << 1 | taken through STUB and going on at its target (the
 * not-taken one at FALL). */
static void emit_jcc_paths(uint8_t **pp, uint8_t *stub, const struct cti *c, size_t i, uint64_t fall,
			   uint64_t taken_to)
{
	uint8_t jcc[2] = { 0x0f, (uint8_t)(0x80 + c->cond) };
	emit(pp, jcc, 2);
	uint8_t *rel_at = *pp;
	*pp += 4;
	emit_path(pp, stub, (uint32_t)(i << 1), fall);
	uint8_t *taken = *pp;
	emit_path(pp, stub, (uint32_t)(i << 1 | 1), taken_to);
	int32_t rel = (int32_t)(taken - (rel_at + 4));
	memcpy(rel_at, &rel, 4);
}
/* A `ret` whose own window does not fit (a branch target with under 5 bytes to the next
 * function: `cmp; jge 1f; mov; 1: ret`) keeps its int3 for code that reaches it natively,
 * and gets a slot of its own that records it and returns (its tail), with no jump to it
 * from its code: the trampoline paths of the branches that reach it (a jcc's taken path or
 * the end of its not-taken path) go to the tail instead of into the trap. The slot reads as
 * a relocated ret without prefix (logical_ip: at the ret until recorded). A `jcc rel8` with
 * neither a window nor an island gets a tail too (tail_install).
 * More generally, a path bound for a CTI with a slot made at start-up (a window's, an
 * island's or a tail), or for an instruction of the slot's prefix, goes to its copy there:
 * a branch target past the first 5 bytes of a window (`jne 1f; mov; 1: xor %eax,%eax;
 * ret`, the window from the mov) would otherwise run into the CTI's int3. */
uint32_t *cti_slot;   /* per CTI: 1 + the offset of its start-up slot in its module's area, or 0 */

/* The path of a ret C (index I) in a trampoline: record the word it will pop, then the
 * original ret. */
static void emit_ret(uint8_t **p, uint8_t *stub, const struct module *mod, const struct cti *c, size_t i)
{
	static const uint8_t st[] = { 0x64, 0xc7, 0x04, 0x25 };
	uint32_t code = (uint32_t)(i << 1), cp1 = code + 1;
	emit(p, st, sizeof st);
	emit(p, &ttls_fs_off, 4);
	emit(p, &cp1, 4);
	emit_stub_call(p, stub, code);
	emit(p, mod->orig + (c->addr - mod->start), c->len);
}

/* Where the direct jumps from TO in module M lead (never recorded: a decoder follows them),
 * unless to the --trigger function, whose jumps are counted. */
static uint64_t through_jumps(int m, uint64_t to)
{
	const struct module *mod = &modules[m];
	for (int k = 0; k < 4 && to >= mod->start && to < mod->end; k++) {
		uint16_t im = imap_at(mod, to);
		uint64_t t = (im & IM_LEN) && (im & IM_CLASS) == IM_JMP ? imap_target(mod, to, im) : 0;
		if (!t || t == trigger_at || t < mod->start || t >= mod->end || cti_find(to))
			break;
		to = t;
	}
	return to;
}

/* The copy of the instruction at TO of module M in a start-up slot: TO is the slot's CTI or
 * an instruction of its prefix, from which straight-line code leads to the CTI. 0 if none. */
static uint64_t slot_copy(int m, uint64_t to)
{
	const struct module *mod = &modules[m];
	uint64_t a = to;
	for (int k = 0; k <= RELOC_MAX_INSNS && a >= mod->start && a < mod->end; k++) {
		uint16_t im = imap_at(mod, a);
		if (!(im & IM_LEN))
			return 0;
		if ((im & IM_CLASS) == IM_STRAIGHT) {
			a += im & IM_LEN;
			continue;
		}
		const struct cti *c = (im & IM_CLASS) == IM_STOP ? cti_find(a) : NULL;
		if (c) {
			size_t i = (size_t)(c - ctis);
			if (!cti_slot[i])
				return 0;
			const uint8_t *t = tramp_area[m] + cti_slot[i] - 1, *meta = t + TRAMP_SIZE - TRAMP_META;
			if (a == to)
				return (uint64_t)(uintptr_t)(t + meta[0]);
			for (unsigned j = 0; j < meta[1]; j++)
				if (c->addr - meta[14] + meta[8 + j] == to)
					return (uint64_t)(uintptr_t)(t + meta[2 + j]);
		}
		return 0;
	}
	return 0;
}

/* Where a trampoline path of module M bound for TO goes: the copy of TO in a start-up slot,
 * else TO itself. At start-up (MAKE), a trapped ret at TO without a slot gets its tail
 * before the caller takes its own slot, and the path goes to TO: paths_link sends it to
 * the copy once every slot is made. */
static uint64_t path_to(int m, uint64_t to, int make)
{
	if (!cti_slot || module_of(to) != &modules[m])
		return to;
	const struct cti *c = make ? cti_find(to) : NULL;   /* a lookup per path otherwise */
	size_t i = c ? (size_t)(c - ctis) : 0;
	if (c && c->kind == CTI_RET && !cti_slot[i] && tramp_used[m] + TRAMP_SIZE <= TRAMP_AREA &&
	    tramp_count[m] < TRAMP_AREA / TRAMP_SIZE) {
		uint8_t *t = tramp_area[m] + tramp_used[m], *p = t;
		memset(t, 0, TRAMP_SIZE);
		emit_ret(&p, ret_stub(m), &modules[m], c, i);
		tramp_used[m] += TRAMP_SIZE;
		tramp_index[m][tramp_count[m]] = (uint32_t)i;
		__atomic_store_n(&tramp_count[m], tramp_count[m] + 1, __ATOMIC_RELEASE);
		cti_slot[i] = (uint32_t)(t - tramp_area[m]) + 1;
	}
	uint64_t copy = make ? 0 : slot_copy(m, through_jumps(m, to));
	return copy ? copy : to;
}

/* Make the trampoline of the jcc rel32 or 6-byte indirect transfer C (index I) in its
 * module's area; the rel32 of a `jmp` at C to it into *REL. -1 if there is no room, -2 if
 * the jump cannot reach it. Start-up only. */
static int tramp_make(const struct cti *c, size_t i, int32_t *rel)
{
	const struct module *mod = module_of(c->addr);
	int m = (int)(mod - modules);
	if (!mod || !tramp_area[m] || tramp_used[m] + TRAMP_SIZE > TRAMP_AREA ||
	    tramp_count[m] >= TRAMP_AREA / TRAMP_SIZE)
		return -1;
	uint8_t *t = tramp_area[m] + tramp_used[m], *p = t;
	if (c->kind == CTI_JCC) {
		emit_jcc_paths(&p, jcc_stub(m), c, i, path_to(m, c->addr + c->len, 0), path_to(m, c->target, 0));
	} else {
		emit_indirect(&p, tramp_rip_stub[m] ? tramp_rip_stub[m] : tramp_stub[m], c, (uint32_t)(i << 1));
	}
	tramp_used[m] = (size_t)(t + TRAMP_SIZE - tramp_area[m]);   /* keep the grid */
	tramp_index[m][tramp_count[m]] = (uint32_t)i;
	__atomic_store_n(&tramp_count[m], tramp_count[m] + 1, __ATOMIC_RELEASE);
	int64_t d = (int64_t)((uint64_t)(uintptr_t)t - (c->addr + 5));
	*rel = (int32_t)d;
	return d == *rel ? 0 : -2;
}

/* Start-up, once the windows are made: every jcc rel32 and 6-byte `call/jmp [rip + disp]`
 * without a slot gets its trampoline, its jump written by patch() from JUMPS (room for one
 * per CTI; *N of them). Made at its first trap instead (until session 28), each one executed
 * cost a trap (about 10 us); made here, about 0.15 us each and 128 bytes of the area (git: 31 k
 * of them, 1.2 k executed by git status). One that does not fit in its module's area or
 * cannot reach it keeps its trap. Returns how many were made. */
size_t start_tramps(struct window *jumps, size_t *n)
{
	size_t made = 0;
	for (size_t i = 0; i < nctis; i++) {
		const struct cti *c = &ctis[i];
		int32_t rel;
		if (!tramp_eligible(c) || (cti_slot && cti_slot[i]) || tramp_make(c, i, &rel) < 0)
			continue;
		struct window *w = &jumps[(*n)++];
		w->at = c->addr;
		w->jmp[0] = 0xe9;
		memcpy(w->jmp + 1, &rel, 4);
		w->len = 5;
		w->island = 0;
		made++;
	}
	return made;
}

/* ---- relocation: short conditional jumps and returns ---------------------------------
 * A `jcc rel8` (2 bytes) or a `ret` (1 or 3) has no room for a jump, but the straight-line
 * instructions before it do: at start-up, before any other thread runs, the window from
 * the last instruction boundary B that leaves 5 bytes up to the CTI's end is copied to a
 * trampoline (RIP-relative displacements adjusted), followed by the recording paths, and a
 * `jmp rel32` to it is written at B. Safe only where nothing can enter (B, B+5): no direct
 * branch target, return site or function start lies there; an indirect jump whose targets
 * are not known sends its landings there to the trampoline (window_entry). Bytes from B+5
 * on keep the original code, so a branch into them still finds the CTI's int3 (a
 * trampoline path goes to the copy instead: path_to). */


/* The jumps into relocated windows, written by patch() after the int3s (a window's jump
 * may cover its CTI). Everything is decided before the first int3: Zydis, which decides,
 * calls libc's memset, and would trap millions of times with libc traced. */
struct window *windows;   /* room for one per CTI */
size_t nwindows;

/* Where a jump to T goes now: a jump whose target cannot be known
 * in advance (a `jmp reg` that is neither a recognised table nor a loaded address) may
 * land in the first 5 bytes of a window of its function, where the jump to the window's
 * trampoline lies; it goes to the trampoline's copy of the instruction at T instead, which
 * runs and records as the original would. WINDOWS is sorted by address (start-up). */
/* The index of the first window at or after T (binary search). */
static size_t window_from(uint64_t t)
{
	size_t lo = 0, hi = nwindows;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (windows[mid].at < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint64_t window_entry(uint64_t t)
{
	size_t lo = window_from(t);
	if (!lo || t - windows[lo - 1].at >= windows[lo - 1].len || windows[lo - 1].len != 5 || windows[lo - 1].island)
		return t;
	const struct window *w = &windows[lo - 1];
	uint64_t off = t - w->at;
	int32_t rel;
	memcpy(&rel, w->jmp + 1, 4);
	const uint8_t *tr = (const uint8_t *)(uintptr_t)(w->at + 5 + (uint64_t)(int64_t)rel);
	const uint8_t *meta = tr + TRAMP_SIZE - TRAMP_META;
	unsigned n = meta[1], ns = meta[15] & 0x7f;
	if (off == meta[14])   /* the CTI: its recording path */
		return (uint64_t)(uintptr_t)(tr + meta[0]);
	for (unsigned j = 0; j < n + ns; j++)   /* a moved instruction of the prefix or the suffix */
		if (meta[8 + j] == off)
			return (uint64_t)(uintptr_t)(tr + meta[2 + j]);
	return t;   /* inside an instruction: as the program would, it runs what is there */
}

/* The jcc rel8 of CTI index I, which has no room for a window (an entry lies within the
 * 4 bytes after it), gets a trampoline without prefix; its 2 bytes become `jmp rel8` to
 * ISLAND, 5 bytes of padding after a jump or return (never executed, no entry), which
 * become the `jmp rel32` to the trampoline. Start-up only; 0, or -1 to leave the trap. */
int island_install(size_t i, uint64_t island)
{
	const struct cti *c = &ctis[i];
	int64_t d8 = (int64_t)island - (int64_t)(c->addr + 2);
	if (d8 != (int8_t)d8 || reloc_install(c, i, NULL, 0, NULL, 0) < 0)
		return -1;
	struct window *w = &windows[nwindows - 1];
	int32_t rel;
	memcpy(&rel, w->jmp + 1, 4);
	int64_t d = (int64_t)(c->addr + 5) + rel - (int64_t)(island + 5);
	if (d != (int32_t)d) {   /* the slot stays, unused */
		nwindows--;
		cti_slot[i] = 0;
		return -1;
	}
	rel = (int32_t)d;
	w->at = island;
	memcpy(w->jmp + 1, &rel, 4);
	w->island = 1;
	w = &windows[nwindows++];
	w->at = c->addr;
	w->jmp[0] = 0xeb;
	w->jmp[1] = (uint8_t)(int8_t)d8;
	w->len = 2;
	w->island = 0;
	return 0;
}

/* A signal at RIP in traced code: the jump in an island is logically at its CTI. */
uint64_t island_ip(uint64_t rip)
{
	size_t lo = window_from(rip);
	if (lo == nwindows || windows[lo].at != rip || !windows[lo].island)
		return rip;
	int32_t rel;
	memcpy(&rel, windows[lo].jmp + 1, 4);
	const uint8_t *tr = (const uint8_t *)(uintptr_t)(rip + 5 + (uint64_t)(int64_t)rel);
	return logical_ip((uint64_t)(uintptr_t)(tr + tr[TRAMP_SIZE - TRAMP_META]));   /* its CTI path */
}

/* The jcc rel8 of CTI index I, which has neither a window nor an island (PyObject_Free:
 * `test %rcx,%rcx; je 1f; test %edx,%edx; je 2f; 3: pop %rbx; ret`, 3: a branch target),
 * or the call or jump through a register without a window (`je 1f; call *%rax`: the return
 * site right after it), keeps its int3 for code that reaches it natively and gets a tail: a
 * slot with its paths after a copy of PRE[0..N), the straight-line instructions before it
 * (as many of the last ones as fit), and no jump to it from its code. The trampoline paths
 * bound for the CTI or one of those instructions go to their copy (path_to, paths_link).
 * Start-up only; 0, or -1 to leave the trap alone. */
int tail_install(size_t i, const struct reloc_insn *pre, int n)
{
	const struct cti *c = &ctis[i];
	while (n && (n > RELOC_MAX_INSNS || c->addr - pre[0].addr > RELOC_MAX_BYTES)) {
		pre++;
		n--;
	}
	if (!cti_slot || reloc_install(c, i, pre, n, NULL, 0) < 0)
		return -1;
	nwindows--;   /* no jump to it */
	return 0;
}

/* Send the paths of module M's conditional branches' trampolines to the copies of their
 * targets in start-up slots (see path_to), once all of them are made. Start-up only. */
void paths_link(int m)
{
	for (size_t k = 0; cti_slot && k < tramp_count[m]; k++) {
		const struct cti *c = &ctis[tramp_index[m][k]];
		uint8_t *t = tramp_area[m] + tramp_base[m] + k * TRAMP_SIZE, *meta = t + TRAMP_SIZE - TRAMP_META;
		if (c->kind != CTI_JCC)
			continue;
		unsigned n = meta[1], ns = meta[15] & 0x7f;
		/* the jumps that end the two paths, and the one back after a suffix */
		uint8_t *jmps[3] = { t + meta[0] + 6 + TRAMP_PATH - 5, t + meta[0] + 6 + 2 * TRAMP_PATH - 5,
				     ns && !(meta[15] & 0x80) ? t + meta[2 + n + ns] : NULL };
		for (int j = 0; j < 3; j++) {
			int32_t rel;
			if (!jmps[j] || jmps[j][0] != 0xe9)
				continue;
			memcpy(&rel, jmps[j] + 1, 4);
			uint64_t to = (uint64_t)(uintptr_t)(jmps[j] + 5) + (uint64_t)(int64_t)rel, copy;
			if (module_of(to) != &modules[m] || !(copy = slot_copy(m, through_jumps(m, to))))
				continue;
			rel = (int32_t)(copy - (uint64_t)(uintptr_t)(jmps[j] + 5));
			memcpy(jmps[j] + 1, &rel, 4);
		}
	}
	/* where window_entry moves a computed jump's landing: the fast stub leaves it to C */
	const struct module *mod = &modules[m];
	for (size_t k = 0; land_map[m] && k < nwindows; k++) {
		const struct window *w = &windows[k];
		if (w->at < mod->start || w->at >= mod->end || w->len != 5 || w->island)
			continue;
		for (uint64_t a = w->at - mod->start; a < w->at + 5 - mod->start; a++)
			land_map[m][a / 8] |= (uint8_t)(1u << (a % 8));
	}
}

/* Copy the instruction R of module MOD to *P, its RIP-relative displacement adjusted; -1 if
 * the copy cannot reach its operand. */
static int emit_moved(uint8_t **p, const struct module *mod, const struct reloc_insn *r)
{
	const uint8_t *src = mod->orig + (r->addr - mod->start);
	memcpy(*p, src, r->len);
	if (r->disp_at) {
		int32_t disp;
		memcpy(&disp, src + r->disp_at, 4);
		int64_t abs = (int64_t)(r->addr + r->len) + disp;
		int64_t nd = abs - (int64_t)(uintptr_t)(*p + r->len);
		if (nd != (int32_t)nd)
			return -1;
		int32_t d32 = (int32_t)nd;
		memcpy(*p + r->disp_at, &d32, 4);
	}
	*p += r->len;
	return 0;
}

/* The pointer a `call/jmp [mem]` C (reloc_indirect_ok) goes through, into the thread's
 * ttls.dest at fs:DEST_OFF: below the red zone, `push [mem]` (the instruction itself with
 * /6 for /2 or /4: the address is computed before the push), `pop fs:[dest]`, padded with
 * NOPs to TRAMP_LOAD bytes (logical_ip counts on it). */
#define TRAMP_LOAD 32
static int emit_load_dest(uint8_t **p, const struct module *mod, const struct cti *c, int32_t dest_off)
{
	const uint8_t *src = mod->orig + (c->addr - mod->start);
	uint8_t *start = *p;
	unsigned o = 0;
	while (o < c->len && src[o] != 0xff)   /* legacy and REX prefixes */
		o++;
	if (o + 2 > c->len || c->len > 15)
		return -1;
	static const uint8_t below[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };   /* lea rsp, [rsp - 128] */
	emit(p, below, sizeof below);
	emit(p, src, c->len);
	(*p)[(int)o + 1 - (int)c->len] = (uint8_t)(((*p)[(int)o + 1 - (int)c->len] & ~0x38) | 6 << 3);
	static const uint8_t pop[] = { 0x64, 0x8f, 0x04, 0x25 };   /* pop qword fs:[disp32] */
	emit(p, pop, sizeof pop);
	emit(p, &dest_off, 4);
	static const uint8_t back[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };   /* lea rsp, [rsp + 128] */
	emit(p, back, sizeof back);
	while (*p < start + TRAMP_LOAD)
		*(*p)++ = 0x90;
	return *p == start + TRAMP_LOAD ? 0 : -1;
}

/* Make the trampoline of C (index I) with prefix PRE[0..N) and, for a jcc, suffix
 * SUF[0..NSUF) (its not-taken path runs them, then jumps back after them), and plan the
 * jump from the window to it. Runs at start-up. Returns 0, or -1 to leave the trap. */
int reloc_install(const struct cti *c, size_t i, const struct reloc_insn *pre, int n,
		  const struct reloc_insn *suf, int nsuf)
{
	uint64_t b = n ? pre[0].addr : c->addr;
	const struct module *mod = module_of(c->addr);
	int m = (int)(mod - modules);
	if (!mod || !tramp_area[m] || !windows || n + nsuf + (nsuf > 0) > RELOC_MAX_INSNS ||
	    (nsuf && c->kind != CTI_JCC) ||
	    tramp_used[m] + TRAMP_SIZE > TRAMP_AREA || tramp_count[m] >= TRAMP_AREA / TRAMP_SIZE)
		return -1;
	/* the suffix ends with a jump back (5 bytes), or a direct transfer: push [rip + literal]
	 * (a call's), jmp rel32, the literal (19 bytes) */
	const struct reloc_insn *last = nsuf ? &suf[nsuf - 1] : NULL;
	/* a jcc's paths that reach a trapped ret go to its tail (made first: a slot of its own) */
	uint64_t taken_to = 0, fall_to = 0, back_to = 0;
	if (c->kind == CTI_JCC) {
		taken_to = path_to(m, c->target, 1);
		fall_to = path_to(m, c->addr + c->len, 1);
		back_to = last && !last->transfer ? path_to(m, last->addr + last->len, 1) : 0;
		if (tramp_used[m] + TRAMP_SIZE > TRAMP_AREA || tramp_count[m] >= TRAMP_AREA / TRAMP_SIZE)
			return -1;
	}
	uint8_t *t = tramp_area[m] + tramp_used[m], *p = t, *meta = t + TRAMP_SIZE - TRAMP_META;
	uint64_t moved = (c->addr - b) + (last ? last->addr - (c->addr + c->len) + (last->transfer ? 19 : last->len + 5) : 0);
	if (moved > RELOC_MAX_BYTES)
		return -1;
	memset(t, 0, TRAMP_SIZE);
	for (int j = 0; j < n; j++) {
		meta[2 + j] = (uint8_t)(p - t);
		meta[8 + j] = (uint8_t)(pre[j].addr - b);
		if (emit_moved(&p, mod, &pre[j]) < 0)
			goto fail;   /* nothing is committed before the jump is written */
	}
	meta[0] = (uint8_t)(p - t);
	meta[1] = (uint8_t)n;
	meta[14] = (uint8_t)(c->addr - b);
	if (c->kind == CTI_JCC && nsuf) {
		/* the paths, then the suffix (meta: its instructions and its end after the prefix's) */
		uint64_t e = last->addr + last->len, to = e;
		uint8_t *s = p + 6 + 2 * TRAMP_PATH, *lit = NULL;
		emit_jcc_paths(&p, jcc_stub(m), c, i, (uint64_t)(uintptr_t)s, taken_to);
		meta[15] = (uint8_t)(nsuf | (last->transfer ? 0x80 : 0));
		for (int j = 0; j <= nsuf; j++) {
			if (j == nsuf - 1 && last->transfer) {   /* its place: before the push */
				int32_t rel;
				memcpy(&rel, mod->orig + (e - 4 - mod->start), 4);
				to = e + (uint64_t)(int64_t)rel;
				meta[2 + n + j] = (uint8_t)(p - t);
				meta[8 + n + j] = (uint8_t)(last->addr - b);
				if (last->transfer == RELOC_CALL) {
					static const uint8_t push[] = { 0xff, 0x35 };   /* push qword [rip+rel32] */
					emit(&p, push, sizeof push);
					lit = p;
					p += 4;
				}
				continue;
			}
			/* the end: after a transfer's push, the thread is at its target (logical_ip) */
			meta[2 + n + j] = (uint8_t)(p - t);
			meta[8 + n + j] = (uint8_t)((j < nsuf ? suf[j].addr : e) - b);
			if (j < nsuf && emit_moved(&p, mod, &suf[j]) < 0)
				goto fail;
		}
		if (!last->transfer)
			to = back_to;
		uint8_t jmp = 0xe9;
		emit(&p, &jmp, 1);
		emit_rel32(&p, (uint8_t *)(uintptr_t)to);
		int64_t back = (int64_t)to - (int64_t)(uintptr_t)p;
		if (back != (int32_t)back)
			goto fail;
		if (lit) {
			int32_t rel = (int32_t)(p - (lit + 4));
			memcpy(lit, &rel, 4);
			emit(&p, &e, 8);
		}
	} else if (c->kind == CTI_JCC) {
		emit_jcc_paths(&p, jcc_stub(m), c, i, fall_to, taken_to);
	} else if (c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) {
		/* call/jmp reg: store the register as the destination (mov fs:[dest], reg), record,
		 * push the original return address, jump through the destination */
		static const uint8_t hw[] = { [REG_RAX] = 0, [REG_RCX] = 1, [REG_RDX] = 2, [REG_RBX] = 3,
			[REG_RSP] = 4, [REG_RBP] = 5, [REG_RSI] = 6, [REG_RDI] = 7, [REG_R8] = 8,
			[REG_R9] = 9, [REG_R10] = 10, [REG_R11] = 11, [REG_R12] = 12, [REG_R13] = 13,
			[REG_R14] = 14, [REG_R15] = 15 };
		int32_t dest_off = ttls_fs_off + (int32_t)offsetof(struct tramp_tls, dest);
		if (!c->is_mem) {
			unsigned r = hw[c->base];
			uint8_t mov[5] = { 0x64, (uint8_t)(0x48 | (r >> 3) << 2), 0x89, (uint8_t)((r & 7) << 3 | 4), 0x25 };
			emit(&p, mov, sizeof mov);
			emit(&p, &dest_off, 4);
		} else if (emit_load_dest(&p, mod, c, dest_off) < 0) {
			goto fail;
		}
		int computed = c->kind == CTI_JMP_IND && c->cond == CTI_COMPUTED;
		uint8_t *stub = computed ? tramp_cind_stub[m] : tramp_ind_stub[m];
		emit_indirect(&p, stub ? stub : tramp_stub[m], c, (uint32_t)(i << 1 | computed));
	} else {
		emit_ret(&p, ret_stub(m), mod, c, i);
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
	w->len = 5;
	w->island = 0;
	if (cti_slot)
		cti_slot[i] = (uint32_t)(t - tramp_area[m]) + 1;
	return 0;
fail:
	memset(t, 0, TRAMP_SIZE);   /* the next slot user expects zeroed metadata */
	return -1;
}

/* Where the thread goes after the CTI just recorded: a computed jump's destination may be
 * the trampoline's copy of the instruction it landed on (window_entry), which stands for
 * the original. */
static uint64_t dest_ip(void)
{
	uint64_t d = ttls.dest;
	for (int m = 0; m < nmodules; m++)
		if (tramp_area[m] && d - (uint64_t)(uintptr_t)tramp_area[m] < TRAMP_AREA)
			return logical_ip(d);
	return d;
}

/* Where the decoder is when a signal interrupts the thread at RIP outside traced code but
 * while it is inside (in a trampoline, its stub or tramp_hit): the jcc not yet recorded, or
 * the destination of the one just recorded. */
uint64_t logical_ip(uint64_t rip)
{
	for (int m = 0; m < nmodules; m++)   /* counting a call: the decoder is at the function */
		if (trigger_page[m] && rip - (uint64_t)(uintptr_t)trigger_page[m] < 4096)
			return trigger_at;
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
		unsigned plen = meta[0], n = meta[1], ns = meta[15] & 0x7f;
		if (ns && in >= meta[2 + n]) {   /* in the suffix, or at the jump back after it */
			unsigned j = n;
			while (j < n + ns && meta[2 + j + 1] <= in)
				j++;
			uint64_t at = c->addr - meta[14] + meta[8 + j];
			if (j == n + ns && (meta[15] & 0x80)) {   /* past a direct call's push: at its target */
				int32_t rel;
				memcpy(&rel, modules[m].orig + (at - 4 - modules[m].start), 4);
				return at + (uint64_t)(int64_t)rel;
			}
			return at;
		}
		if (in < plen) {   /* in the relocated prefix: the original of the next instruction */
			unsigned j = 0;
			while (j + 1 < n && meta[2 + j + 1] <= in)
				j++;
			return c->addr - meta[14] + meta[8 + j];
		}
		in -= plen;
		if ((c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) && !c->is_mem)   /* the register's store comes first */
			return in < 9 + 28 ? c->addr : dest_ip();
		if ((c->kind == CTI_CALL_IND || c->kind == CTI_JMP_IND) && c->base != CTI_REG_RIP)   /* the pointer's load */
			return in < TRAMP_LOAD + 28 ? c->addr : dest_ip();
		if (c->kind != CTI_JCC)   /* one path: recorded once past the call */
			return in < 28 ? c->addr : dest_ip();
		if (in < 6 + 28)
			return c->addr;
		if (in < 6 + TRAMP_PATH)
			return c->addr + c->len;
		if (in < 6 + TRAMP_PATH + 28)
			return c->addr;
		return c->target;
	}
	/* in the stub or in tramp_hit; past the jcc stub's record, at the branch's destination */
	for (int m = 0; m < nmodules; m++)
		if (tramp_jcc_stub[m] && rip - (uint64_t)(uintptr_t)tramp_jcc_stub[m] - jcc_done_at <
					 jcc_done_end - jcc_done_at && ttls.code_plus1) {
			const struct cti *c = &ctis[(ttls.code_plus1 - 1) >> 1];
			return ((ttls.code_plus1 - 1) & 1) ? c->target : c->addr + c->len;
		}
	if (ttls.code_plus1)
		return ctis[(ttls.code_plus1 - 1) >> 1].addr;
	return dest_ip();
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

void end_thread(struct tstate *ts);

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

void on_trap(int sig, siginfo_t *si, void *ucv)
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
	if (site_traps)
		__atomic_fetch_add(&site_traps[c - ctis], 1, __ATOMIC_RELAXED);
	if (active) {
		struct tstate *ts = thread_state();
		uint64_t traps = ts ? ts->traps : 0;
		if (ts)
			record(ts, c, &r, g, rsp, 1);
		/* a recorded trap, the first at this CTI (in this process and those it forked from) */
		if (ts && ts->traps != traps && cti_trapped &&
		    !__atomic_exchange_n(&cti_trapped[c - ctis], 1, __ATOMIC_RELAXED))
			ts->traps_first++;
	}
	/* a computed jump, or a conditional branch to a window's moved instruction (reloc.h) */
	g[REG_RIP] = (greg_t)((c->kind == CTI_JMP_IND || c->kind == CTI_JCC) && nwindows ? window_entry(r.next) : r.next);
}

