/* A ret with no room for a window, whose block is entered by branches (git's `jae 1f` to
 * `1: pop %rbx; ret`, a window would cover an entry): the ret's tail holds a copy of the
 * straight-line instructions before it, and the branches' trampolines go to the copies of
 * their targets there instead of running into the ret's trap. Usage: rettail [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long rt(long x);   /* x == 0: 0; x == 2: 3; else x */

/* No window fits before the ret: from the xor it would cover the entry 1:, which the
 * address stored in the data below makes an entry of any code (never used), and from 3:
 * there are 4 bytes to the ret's end. */
__asm__(".text\n"
	".globl rt\n.type rt, @function\nrt:\n"
	"	push %rbx\n"
	"	mov %rdi, %rax\n"
	"	test %rdi, %rdi\n"
	"	jne 2f\n"
	"	xor %eax, %eax\n"
	"3:	mov %eax, %ebx\n"
	"1:	pop %rbx\n"
	"	ret\n"
	"2:	cmp $3, %rdi\n"
	"	jae 1b\n"
	"	cmp $1, %rdi\n"
	"	je 3b\n"
	"	add $1, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size rt, .-rt\n"
	".pushsection .data\n"
	"	.quad 1b\n"
	".popsection\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++)
		s += rt(i % 5);
	printf("%ld\n", s);
	return 0;
}
