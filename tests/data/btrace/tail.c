/* PyObject_Free's (python3.11) `test %rcx,%rcx; je 2f; test %edx,%edx; je 3f; 1: pop %rbx;
 * ret; nopl`, byte for byte (48 85 c9 74 0b 85 d2 74 xx 5b c3 0f 1f 44 00 00), with 1: a
 * branch target: the second `je` has no room for a window (2 bytes before it, an entry right
 * after it), the padding after the ret goes to the ret's own window, and no other padding
 * lies within its rel8 reach (no island). It keeps its int3 and gets a tail, which the
 * trampoline of the first `je` falls into. Usage: tail [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long tl(long a, long b, long c);   /* a + 40, + 10 if b == 0, else + 100 if c == 0 */

__asm__(".text\n"
	".globl tl\n.type tl, @function\ntl:\n"
	"	push %rbx\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rcx\n"
	"	.rept 40\n"   /* code, not padding, within the jcc's reach */
	"	add $1, %rax\n"
	"	.endr\n"
	"	cmp $43, %rax\n"
	"	je 1f\n"
	"	.byte 0x48, 0x85, 0xc9\n"   /* test %rcx,%rcx */
	"	je 2f\n"                   /* 74 0b */
	"	.byte 0x85, 0xd2\n"         /* test %edx,%edx */
	"	je 3f\n"                   /* 74 0d */
	"1:	.byte 0x5b\n"               /* pop %rbx */
	"	.byte 0xc3\n"               /* ret */
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"   /* nopl 0x0(%rax,%rax,1) */
	"2:	add $10, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"3:	add $100, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"	.rept 40\n"   /* never executed, not padding either */
	"	add $1, %rax\n"
	"	.endr\n"
	".size tl, .-tl\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++)
		s += tl(i % 7, i % 3, i & 1);
	printf("%ld\n", s);
	return 0;
}
