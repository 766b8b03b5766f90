/* A jump whose target is computed (`lea 2f(%rip),%rcx; add %rsi,%rcx; jmp *%rcx`: neither
 * a jump table nor a loaded address) into the middle of the window that the recorder
 * relocates for the `jne` after it: the jump gets a trampoline of its own, the rest of its
 * function is relocated, and a landing inside the window goes to the trampoline's copy.
 * Usage: computed [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long cg(long x, long k);   /* k = 0: x + 1 (or 2 x + 2 when x + 1 != 0), k = 3: the same from x */

__asm__(".text\n"
	".globl cg\n.type cg, @function\ncg:\n"
	"	lea 2f(%rip), %rcx\n"
	"	add %rsi, %rcx\n"
	"	mov %rdi, %rax\n"
	"	jmp *%rcx\n"
	"2:	mov %rdi, %rax\n"   /* 3 bytes: 2f + 3 lies inside the jne's window */
	"	inc %eax\n"
	"	jne 3f\n"
	"	add $5, %rax\n"
	"3:	add %rax, %rax\n"
	"	ret\n"
	"	.p2align 4\n"   /* room for the ret's own window */
	".size cg, .-cg\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++)
		s += cg(i % 7 == 3 ? -1 : i, i & 1 ? 3 : 0);
	printf("%ld\n", s);
	return 0;
}
