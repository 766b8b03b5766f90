/* Branches into a window past its first 5 bytes, byte for byte from libsqlite3.so.0.8.6
 * (Debian 12): the window of a ret starts before a branch target, which runs into the
 * ret's int3 natively; the trampoline of the branch goes to the copy of the target in the
 * ret's trampoline instead.
 * pa (0x3422b): `mov %r8,0x10(%r9); test %edx,%edx; jne 2f; movb $2,2(%r8); 1: xor
 * %eax,%eax; ret; nopl; 2: ...; cmpq $0,0x88(%r9); jne 1b; mov %r9,%rdi; jmp`: the ret's
 * window starts at the movb, and `jne 1b` lands on the xor.
 * pb (sqlite3VdbeCheckFk, 0xf7747): `and $0x312,%eax; add $1,%eax; 4: pop %rbx; ret; ...;
 * xor %eax,%eax; cmpq $0,0x50(%rdi); jg; jmp 4b`: the ret's window starts at the and, and
 * the not-taken path of the jg goes through the direct `jmp 4b` to the pop.
 * Usage: prefix [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long pa(long *o, long *q, int d);   /* 0, or 7 when d != 0 and q[17] == 0 */
long pb(long *p, long v);           /* (v & 0x312) + 1 when p is NULL or p[10] > 0, else 0 */

__asm__(".text\n"
	".globl pz\n.type pz, @function\npz:\n"
	"	mov $7, %eax\n"
	"	ret\n"
	".size pz, .-pz\n"
	".globl pa\n.type pa, @function\npa:\n"
	"	mov %rdi, %r8\n"
	"	mov %rsi, %r9\n"
	"	mov 0x10(%r9), %rax\n"      /* 49 8b 41 10 */
	"	mov %rax, 0x28(%r8)\n"      /* 49 89 40 28 */
	"	mov %r8, 0x10(%r9)\n"       /* 4d 89 41 10 */
	"	test %edx, %edx\n"          /* 85 d2 */
	"	jne 2f\n"                   /* 75 0d */
	"	movb $0x2, 0x2(%r8)\n"      /* 41 c6 40 02 02 */
	"1:	xor %eax, %eax\n"           /* 31 c0 */
	"	ret\n"                      /* c3 */
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"   /* nopl 0x0(%rax,%rax,1) */
	"2:	orb $0x1, 0x1(%r8)\n"       /* 41 80 48 01 01 */
	"	movb $0x0, 0x2(%r8)\n"      /* 41 c6 40 02 00 */
	"	.byte 0x49, 0x83, 0xb9, 0x88, 0x00, 0x00, 0x00, 0x00\n"   /* cmpq $0x0,0x88(%r9) */
	"	jne 1b\n"                   /* 75 e4 */
	"	mov %r9, %rdi\n"            /* 4c 89 cf */
	"	jmp pz\n"
	".size pa, .-pa\n"
	".globl pb\n.type pb, @function\npb:\n"
	"	push %rbx\n"
	"	mov %rsi, %rax\n"
	"	test %rdi, %rdi\n"
	"	jne 5f\n"
	"3:	and $0x312, %eax\n"         /* 25 12 03 00 00 */
	"	add $0x1, %eax\n"           /* 83 c0 01 */
	"4:	pop %rbx\n"                 /* 5b */
	"	ret\n"                      /* c3 */
	"	.byte 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00\n"   /* nopl 0x0(%rax) */
	"	xor %eax, %eax\n"           /* 31 c0: never run here */
	"	pop %rbx\n"
	"	ret\n"
	"	.byte 0x0f, 0x1f, 0x40, 0x00\n"   /* nopl 0x0(%rax) */
	"5:	xor %eax, %eax\n"           /* 31 c0 */
	"	cmpq $0x0, 0x50(%rdi)\n"    /* 48 83 7f 50 00 */
	"	jg 6f\n"                    /* 7f xx */
	"	jmp 4b\n"                   /* eb e4 */
	"6:	mov %rsi, %rax\n"
	"	jmp 3b\n"
	".size pb, .-pb\n");

int main(int argc, char **argv)
{
	static long o[8], q[20], p[12];   /* not on the stack: no `rep stos` (callgrind counts each) */
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	for (long i = 0; i < n; i++) {
		q[17] = i % 3 == 0;
		s += pa(o, q, (int)(i & 1));
		p[10] = i % 5 - 2;
		s += pb(i % 4 ? p : NULL, i);
	}
	printf("%ld %d\n", s, ((unsigned char *)o)[1] + ((unsigned char *)o)[2]);
	return 0;
}
