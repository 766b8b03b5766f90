/* A `jcc rel8` with no room for a window: the block before it is 2 bytes and a branch
 * target follows it (PyObject_Free's `test %edx,%edx; je; 1: pop %rbx; ret`). It becomes a
 * `jmp rel8` to an island, never-executed padding after a return, which jumps to its
 * trampoline. Usage: island [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long isl(long x, int y);   /* x == 0: 0; y != 0: x + 1; else x */

__asm__(".text\n"
	".globl isl\n.type isl, @function\nisl:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	test %rdi, %rdi\n"
	"	je 2f\n"
	"	test %esi, %esi\n"
	"	jne 3f\n"   /* the entry 1f is 0 bytes after it */
	"1:	mov %rbx, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"   /* padding: two 5-byte NOPs */
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"2:	xor %ebx, %ebx\n"
	"	jmp 1b\n"
	"3:	add $1, %rbx\n"
	"	jmp 1b\n"
	".size isl, .-isl\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++)
		s += isl(i % 5, (int)(i & 1));
	printf("%ld\n", s);
	return 0;
}
