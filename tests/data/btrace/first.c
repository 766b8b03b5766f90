/* 256 `jcc rel32` in one function, each run once per call: with their trampolines made at
 * their first trap, every one trapped once (a short program is mostly first executions);
 * made at start-up, none does. Usage: first [CALLS] */
#include <stdio.h>
#include <stdlib.h>

#define J1 "	cmp $1, %rdi\n	.byte 0x0f, 0x84, 0x00, 0x00, 0x00, 0x00\n"   /* je rel32 to the next */
#define J4 J1 J1 J1 J1
#define J16 J4 J4 J4 J4
#define J64 J16 J16 J16 J16

long many(long x);   /* returns x */

__asm__(".text\n"
	".globl many\n.type many, @function\nmany:\n"
	J64 J64 J64 J64
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size many, .-many\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1, s = 0;
	for (long i = 0; i < n; i++)
		s += many(i);
	printf("%ld\n", s);
	return 0;
}
