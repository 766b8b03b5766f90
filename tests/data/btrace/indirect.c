/* Indirect transfers that leave their function, in functions the recorder relocates:
 * tail calls and calls through a table of function pointers (`jmp *disp(reg)`,
 * `call *disp(reg)`), a tail call through a loaded pointer (`jmp *reg`), and a small
 * interpreter with computed gotos (`goto *labels[op]`: its labels' addresses are in the
 * module's data, so windows keep off them). Usage: indirect [N] */
#include <stdio.h>
#include <stdlib.h>

struct ops {
	int (*f[4])(int);
	int bias;
};

__attribute__((noinline)) static int inc(int x) { return x + 1; }
__attribute__((noinline)) static int dbl(int x) { return x * 2 + (x & 3 ? 1 : 0); }
__attribute__((noinline)) static int neg(int x) { return x < 0 ? -x : x ^ 5; }
__attribute__((noinline)) static int sq(int x) { return (x & 0xff) * (x & 0x7f); }

static struct ops table = { { inc, dbl, neg, sq }, 3 };
struct ops *volatile cur = &table;

/* an indirect tail call through memory: jmp *disp(reg,idx,8) */
__attribute__((noinline)) int pick(struct ops *o, int x)
{
	if (!o)
		return 0;
	if (x > 1000000)
		x -= o->bias;
	return o->f[x & 3](x);
}

/* a call through memory in a loop: call *disp(reg) */
__attribute__((noinline)) int sum_calls(struct ops *o, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += o->f[1](i) > 7 ? 1 : 2;
	return s;
}

/* a tail call through a loaded pointer: mov disp(reg),reg; jmp *reg */
__attribute__((noinline)) int last(struct ops *o, int x)
{
	int (*g)(int) = o->f[3];
	if (x < 0)
		return -1;
	return g(x + o->bias);
}

/* computed gotos: every label's address sits in a table in the data */
__attribute__((noinline)) int run(const unsigned char *code, int n, int acc)
{
	static void *const labels[] = { &&op_add, &&op_mul, &&op_xor, &&op_end };
	int pc = 0;
	goto *labels[code[pc]];
op_add:
	acc += pc < n ? code[pc + 1] : 1;
	pc += 2;
	goto *labels[code[pc]];
op_mul:
	acc = acc * 3 + (acc & 1);
	pc += 1;
	goto *labels[code[pc]];
op_xor:
	acc ^= acc > 100 ? 0x55 : 0x0f;
	pc += 1;
	goto *labels[code[pc]];
op_end:
	return acc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	static const unsigned char prog[] = { 0, 7, 1, 2, 0, 3, 2, 1, 0, 9, 2, 3 };
	long s = 0;
	for (int i = 0; i < n; i++) {
		s += pick(cur, i);
		s += last(cur, i);
		s += run(prog, 10, i & 63);
		if ((i & 15) == 0)
			s += sum_calls(cur, 8);
	}
	printf("%ld\n", s);
	return 0;
}
