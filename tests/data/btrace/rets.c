/* Returns with no room for a window of their own: each `ret` is a branch target or falls
 * straight into one, with under 5 bytes to the next entry (shapes of libsqlite3's
 * sqlite3StatusHighwater, sqlite3ExprCheckHeight and sqlite3VdbeCursorRestore, laid out by
 * hand so that no alignment padding gives them room). They are reached from conditional
 * branches that are relocated into trampolines, so they need not trap.
 * Usage: rets [ITERATIONS] */
#include <stdio.h>
#include <stdlib.h>

long hw(long *p, long v);   /* *p = max(*p, v) */
long nz(const int *p, int v);   /* v < *p ? 1 : 0 */
long sp(long x);            /* x ? x : 0, through rbx */

__asm__(".text\n"
	".globl hw\n.type hw, @function\nhw:\n"
	"	mov %rsi, %rax\n"
	"	cmp %rsi, (%rdi)\n"
	"	jge 1f\n"
	"	mov %rsi, (%rdi)\n"
	"1:	ret\n"
	".size hw, .-hw\n"
	".globl nz\n.type nz, @function\nnz:\n"
	"	xor %eax, %eax\n"
	"	cmp %esi, (%rdi)\n"
	"	jg 2f\n"
	"	ret\n"
	"2:	mov $1, %eax\n"
	"	ret\n"
	".size nz, .-nz\n"
	".globl sp\n.type sp, @function\nsp:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	test %rdi, %rdi\n"
	"	jne 3f\n"
	"	xor %eax, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	"3:	mov %rbx, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	".size sp, .-sp\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, m = 0, s = 0;
	int lim = 5;
	for (long i = 0; i < n; i++) {
		hw(&m, i * 7919 % 1000);
		s += nz(&lim, (int)(i % 10));
		s += sp(i & 1);
	}
	printf("%ld %ld\n", m, s);
	return 0;
}
