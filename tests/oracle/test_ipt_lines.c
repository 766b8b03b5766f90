/* A real program compiled with -g: single-step it with ptrace (tests/tools/ptrace-step),
 * turn the instructions it executed in its own text into the PT packets the hardware
 * would write with an IP filter on that text (TNT, TIP, return compression,
 * TIP.PGD/TIP.PGE where it calls into libc and back), decode with tracekit and check
 * that the instructions are exactly those executed, and that `tracekit profile --to
 * lines` counts per source line what addr2line says the executed addresses are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle/ptcommon.h"

static const char prog_src[] =
	"#include <stdio.h>\n"
	"static int collatz(unsigned long n)\n"
	"{\n"
	"\tint steps = 0;\n"
	"\twhile (n != 1) {\n"
	"\t\tif (n % 2)\n"
	"\t\t\tn = 3 * n + 1;\n"
	"\t\telse\n"
	"\t\t\tn /= 2;\n"
	"\t\tsteps++;\n"
	"\t}\n"
	"\treturn steps;\n"
	"}\n"
	"static int (*volatile fp)(unsigned long) = collatz;\n"
	"int main(void)\n"
	"{\n"
	"\tlong total = 0;\n"
	"\tfor (unsigned long i = 1; i < 30; i++)\n"
	"\t\ttotal += fp(i);\n"
	"\tprintf(\"%ld\\n\", total);\n"
	"\treturn 0;\n"
	"}\n";

struct emitter {
	struct ptgen g;     /* only its packet helpers and compression stack */
};

static int sh(const char *fmt, const char *a, const char *b, const char *c)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), fmt, a, b, c);
	return system(cmd);
}

static void test_lines(void **state)
{
	(void)state;
	const char *build = getenv("BUILD"), *tk = getenv("TK");
	char dir[] = "/tmp/tk-lines-XXXXXX", path[512], prog[512], steps[512], ptfile[512];
	uint64_t lo = 0, hi = 0;
	struct addrs truth = { 0 }, got = { 0 };
	FILE *fp;

	assert_non_null(build);
	assert_non_null(tk);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/prog.c", dir);
	snprintf(prog, sizeof(prog), "%s/prog", dir);
	snprintf(steps, sizeof(steps), "%s/steps.txt", dir);
	snprintf(ptfile, sizeof(ptfile), "%s/prog.pt", dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(prog_src, fp);
	fclose(fp);
	assert_int_equal(sh("gcc -g -O0 -no-pie -o %s %s%s", prog, path, ""), 0);
	assert_int_equal(sh("%s/tests/ptrace-step -o %s %s >/dev/null", build, steps, prog), 0);

	/* the program's executable mapping: the IP filter region */
	char line[1024];

	fp = fopen(steps, "r");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long s, e, off;
		char p[512];

		if (sscanf(line, "map %llx %llx %llx %511s", &s, &e, &off, p) == 4 &&
		    !strcmp(p, prog)) {
			lo = s;
			hi = e;
		}
	}
	assert_true(hi > lo);
	rewind(fp);
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long a;
		unsigned len;
		char kind;

		if (sscanf(line, "%llx %u %c", &a, &len, &kind) == 3 && strncmp(line, "map", 3))
			addrs_push(&truth, a);   /* every executed instruction, in order */
	}
	fclose(fp);

	/* packets for the executed path, filtered to [lo, hi) */
	int err;
	struct tk_image *img = tk_image_new(&err);
	struct ptgen g;
	struct ptgen_opts go = { .max_bytes = 1 << 20 };
	struct addrs want = { 0 };
	int in = 0;

	assert_int_equal(tk_image_add_elf(img, prog, 0, 0), 0);
	assert_int_equal(ptgen_init(&g, img, &go), 0);
	assert_int_equal(ptgen_psb(&g, 0, 0), 0);
	for (size_t i = 0; i < truth.n; i++) {
		uint64_t a = truth.a[i], next = i + 1 < truth.n ? truth.a[i + 1] : 0;
		int next_in = next >= lo && next < hi;
		uint8_t code[16];
		struct tk_isa_insn ins;

		if (!(a >= lo && a < hi)) {
			if (next_in) {
				assert_int_equal(ptgen_mode64(&g), 0);
				assert_int_equal(ptgen_ip(&g, ppt_tip_pge, next, 0), 0);
			}
			in = 0;
			continue;
		}
		in = 1;
		addrs_push(&want, a);
		int n = tk_image_read(img, a, code, sizeof(code));

		assert_true(n > 0);
		assert_int_equal(tk_isa_classify(&g.isa, TK_ISA_64, code, (size_t)n, a, &ins), 0);
		if (i + 1 == truth.n)
			break;
		switch (ins.cls) {
		case TK_ISA_JCC:
			assert_true(next_in);
			assert_int_equal(ptgen_bit(&g, next != a + ins.len), 0);
			break;
		case TK_ISA_CALL:
			if (!ins.zero_call)
				ptgen_cpush(&g, a + ins.len);
			if (!next_in)
				assert_int_equal(ptgen_ip(&g, ppt_tip_pgd, next, 0), 0);
			break;
		case TK_ISA_JMP:
			if (!next_in)
				assert_int_equal(ptgen_ip(&g, ppt_tip_pgd, next, 0), 0);
			break;
		case TK_ISA_RET:
			if (ptgen_cret(&g, next, next_in)) {
				assert_int_equal(ptgen_bit(&g, 1), 0);
				break;
			}
			/* not compressed: like an indirect branch */
			__attribute__((fallthrough));
		case TK_ISA_CALL_IND:
		case TK_ISA_JMP_IND:
		case TK_ISA_FAR:
			if (ins.cls == TK_ISA_CALL_IND)
				ptgen_cpush(&g, a + ins.len);
			if (next_in)
				assert_int_equal(ptgen_ip(&g, ppt_tip, next, 0), 0);
			else
				assert_int_equal(ptgen_ip(&g, ppt_tip_pgd, 0, 1), 0);
			break;
		default:
			break;
		}
	}
	(void)in;
	assert_int_equal(ptgen_flush_tnt(&g), 0);
	size_t len = ptgen_off(&g);

	assert_true(want.n > 1000);
	fp = fopen(ptfile, "wb");
	assert_non_null(fp);
	fwrite(g.buf, 1, len, fp);
	fclose(fp);

	/* tracekit, library: the executed instructions in the program, in order */
	struct tk_ipt_flow_stats st;

	assert_int_equal(tk_insns(g.buf, len, img, 2, 256, &got, &st), 0);
	/* the last instruction before the trace ends is reported like libipt does: as the
	 * branch whose outcome is unknown; everything up to it must match */
	long d = first_diff(&want, &got);

	if (d >= 0)
		fprintf(stderr, "first difference at %ld of %zu/%zu: %llx %llx\n", d, want.n, got.n,
			(unsigned long long)(d < (long)want.n ? want.a[d] : 0),
			(unsigned long long)(d < (long)got.n ? got.a[d] : 0));
	assert_int_equal(d, -1);
	assert_int_equal(st.gaps.count, 0);

	/* per-line counts: tracekit profile --to lines vs addr2line over the truth */
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "cd %s && for a in $(awk '!/^(map|exit)/ {print $1}' steps.txt); do "
		 "  [ $((0x$a)) -ge %llu ] && [ $((0x$a)) -lt %llu ] && echo 0x$a; done"
		 " | addr2line -e prog | sed 's/ (discriminator.*//' | sort | uniq -c"
		 " | awk '{split($2, p, \":\"); print p[2], $1}' | sort -n > truth.txt",
		 dir, (unsigned long long)lo, (unsigned long long)hi);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && %s profile --to lines --elf prog prog.pt > lines.txt", dir, tk);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "cd %s && cat truth.txt && head -20 lines.txt", dir);
	if (getenv("LINES_DEBUG"))
		assert_int_equal(system(cmd), 0);
	/* every source line: tracekit's instruction count equals the truth's, and no line is
	 * missing on either side */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && awk '$1 ~ /^[0-9]+$/ && $1 > 0 {print $1, $2}' truth.txt | sort > t.txt && "
		 "awk '$3 ~ /prog.c:/ {n = split($3, p, \":\"); print p[n], $2}' lines.txt | sort > g.txt && "
		 "test -s t.txt && diff t.txt g.txt", dir);
	assert_int_equal(system(cmd), 0);

	tk_image_free(img);
	ptgen_fini(&g);
	free(truth.a), free(want.a), free(got.a);
	sh("rm -rf %s%s%s", dir, "", "");
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_lines) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
