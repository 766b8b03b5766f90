/* git's `jae 1f` to `1: pop %rbx; ret` in a window's first 5 bytes, with a `jmp 2f` to
 * `2: movb $0,(%rax); 1: pop %rbx; ret` from elsewhere: the window from 2: holds the
 * target of a conditional branch, whose trampoline goes to the window's copy of it, so the
 * ret gets its window and code reaching 2: natively no longer traps. Usage: jccentry
 * [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long je(long x);   /* x == 0: 0; 1..4: x + 2; 5, 6: x + 1; else x */

__asm__(".text\n"
	".globl je\n.type je, @function\nje:\n"
	"	push %rbx\n"
	"	mov %rdi, %rax\n"
	"	cmp $5, %rdi\n"
	"	jae 3f\n"
	"	test %rdi, %rdi\n"
	"	jne 4f\n"
	"	xor %eax, %eax\n"
	"2:	mov %rax, %rbx\n"   /* the window's start: its jump covers 1: */
	"1:	pop %rbx\n"
	"	ret\n"
	"3:	cmp $7, %rdi\n"
	"	jae 1b\n"
	"	add $1, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"4:	add $2, %rax\n"
	"	jmp 2b\n"           /* not recorded: runs natively into the window's jump */
	".size je, .-je\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++)
		s += je(i % 9);
	printf("%ld\n", s);
	return 0;
}
