/* What the recorder's trap path needs from an operating system, without libc: raw system
 * calls, the thread pointer, and small text helpers. With libc traced (`--module
 * libc.so.6`), every conditional branch, indirect jump and return of libc is an int3: a
 * libc function called from the SIGTRAP handler, where SIGTRAP is blocked, would trap
 * again and the kernel would kill the process. So the handler, the trampolines' recording
 * call and everything they reach use these instead (memcpy/memset/memmove, which the
 * compiler emits by itself, are defined inside the library: mem.c). */
#ifndef TK_BTRACE_RT_H
#define TK_BTRACE_RT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

static inline long rt_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define rt_syscall(n, a, b, c, d, e, f) \
	rt_syscall6((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

static inline int rt_gettid(void)
{
	return (int)rt_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

static inline int rt_getpid(void)
{
	return (int)rt_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
}

/* rt_sigprocmask with the kernel's 8-byte signal set. */
static inline long rt_sigmask(int how, const uint64_t *set, uint64_t *old)
{
	return rt_syscall(SYS_rt_sigprocmask, how, set, old, 8, 0, 0);
}

/* The thread pointer: glibc's TCB starts with a pointer to itself, so fs:0 is the FS base
 * (what pthread_self returns), read without a system call. */
static inline uint64_t rt_fs_base(void)
{
	uint64_t p;
	__asm__("movq %%fs:0, %0" : "=r"(p));
	return p;
}

/* Copy N bytes from the process's own memory at SRC, failing (-1) instead of faulting on
 * an unmapped address. */
static inline int rt_read_mem(void *dst, uint64_t src, size_t n)
{
	struct {
		void *base;
		size_t len;
	} local = { dst, n }, remote = { (void *)(uintptr_t)src, n };
	return rt_syscall(SYS_process_vm_readv, rt_getpid(), &local, 1, &remote, 1, 0) == (long)n ? 0 : -1;
}

static inline int rt_write_mem(uint64_t dst, const void *src, size_t n)
{
	struct {
		const void *base;
		size_t len;
	} local = { src, n }, remote = { (void *)(uintptr_t)dst, n };
	return rt_syscall(SYS_process_vm_writev, rt_getpid(), &local, 1, &remote, 1, 0) == (long)n ? 0 : -1;
}

static inline size_t rt_strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

/* Append text to a bounded buffer (always NUL-terminated). */
struct rt_buf {
	char *p;
	size_t len, cap;
};

static inline void rt_puts(struct rt_buf *b, const char *s)
{
	while (*s && b->len + 1 < b->cap)
		b->p[b->len++] = *s++;
	b->p[b->len] = 0;
}

static inline void rt_putu(struct rt_buf *b, uint64_t v)
{
	char t[24];
	int n = 0;
	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n && b->len + 1 < b->cap)
		b->p[b->len++] = t[--n];
	b->p[b->len] = 0;
}

static inline void rt_putx(struct rt_buf *b, uint64_t v)
{
	char t[24];
	int n = 0;
	do
		t[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	rt_puts(b, "0x");
	while (n && b->len + 1 < b->cap)
		b->p[b->len++] = t[--n];
	b->p[b->len] = 0;
}

#endif
