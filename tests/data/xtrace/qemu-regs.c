/* Test program for the recorder's register values: STXR status (exclusive store loop),
 * MRS reads (TPIDR_EL0, DCZID_EL0, RNDR with its NZCV), MSR TPIDR_EL0, DC ZVA addresses,
 * conditional selects (NZCV) and syscalls (ALLGPR on the return). Deterministic under
 * qemu's -seed. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static long counter;
static uint8_t zbuf[4096] __attribute__((aligned(256)));

__attribute__((noinline)) static long excl_add(long *p, long v)
{
	long old, tmp;
	unsigned status;
	__asm__ volatile("1: ldxr %0, [%3]\n"
			 "   add %1, %0, %4\n"
			 "   stxr %w2, %1, [%3]\n"
			 "   cbnz %w2, 1b\n"
			 : "=&r"(old), "=&r"(tmp), "=&r"(status) : "r"(p), "r"(v) : "memory");
	return old;
}

__attribute__((noinline)) static long pick(long a, long b)
{
	long r;
	__asm__ volatile("cmp %1, %2\n csel %0, %1, %2, lt" : "=r"(r) : "r"(a), "r"(b) : "cc");
	return r;
}

int main(int argc, char **argv)
{
	long acc = 0;
	uint64_t tp, dczid, rnd, nzcv;
	(void)argv;
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
	__asm__ volatile("msr tpidr_el0, %0" : : "r"(tp));  /* same value: TLS stays valid */
	__asm__ volatile("mrs %0, dczid_el0" : "=r"(dczid));
	for (int i = 0; i < 200 + argc; i++) {
		acc += excl_add(&counter, i);
		acc += pick(i, 100 - i);
		if (!(dczid & 16)) /* DC ZVA permitted */
			__asm__ volatile("dc zva, %0" : : "r"(zbuf + 64 * (i % 64)) : "memory");
	}
	__asm__ volatile(".arch_extension rng\n mrs %0, rndr\n mrs %1, nzcv"
			 : "=r"(rnd), "=r"(nzcv));
	acc += getpid() > 0;
	printf("acc %ld counter %ld rnd %d\n", acc, counter, (int)(rnd & 1) + (int)(nzcv >> 30));
	return 0;
}
