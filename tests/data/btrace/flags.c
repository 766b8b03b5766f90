/* The flags a conditional branch leaves must come out of its trampoline as they went in:
 * the stub restores them without popfq (OF by an add, DF by std, the rest by sahf). Each
 * round sets CF, PF, AF, ZF, SF, DF and OF from a pattern, runs a `jo rel32` (recorded by
 * a trampoline once it has trapped), and reads the flags on the path taken. Prints the
 * rounds whose flags or path differ from the pattern's, then a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define FLAGS 0xcd5ul   /* CF PF AF ZF SF DF OF */

__attribute__((noinline)) static unsigned long round_trip(unsigned long f, unsigned long *taken)
{
	unsigned long out, t;
	__asm__ volatile("sub $128, %%rsp\n\t"   /* keep off the red zone */
			 "push %[f]\n\t"
			 "popfq\n\t"
			 ".byte 0x0f, 0x80\n\t"   /* jo rel32 */
			 ".long 1f - 0f\n"
			 "0:\tmov $0, %[t]\n\t"
			 "jmp 2f\n"
			 "1:\tmov $1, %[t]\n"
			 "2:\tpushfq\n\t"
			 "pop %[out]\n\t"
			 "cld\n\t"
			 "add $128, %%rsp"
			 : [out] "=&r"(out), [t] "=&r"(t)
			 : [f] "r"(f)
			 : "cc", "memory");
	*taken = t;
	return out;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, bad = 0;
	unsigned long sum = 0, x = 88172645463325252ull;
	for (long i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned long f = (x & FLAGS) | 0x202, taken;   /* IF and the reserved bit 1 */
		unsigned long out = round_trip(f, &taken);
		if ((out & FLAGS) != (f & FLAGS) || taken != !!(f & 0x800)) {
			if (bad++ < 10)
				printf("round %ld: flags 0x%lx in, 0x%lx out, taken %lu\n", i, f & FLAGS, out & FLAGS, taken);
		}
		sum = sum * 31 + (out & FLAGS) + taken;
	}
	printf("%ld rounds, %ld wrong, checksum %lx\n", n, bad, sum);
	return bad != 0;
}
