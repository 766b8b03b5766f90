/* Real programs (the programs in examples/, -O0 -g): their true instruction stream from ptrace
 * single-stepping (tests/tools/ptrace-step) becomes TK_EV_BLOCK/CALL/RETURN events; the
 * profile's per-function calls and per-line instruction counts must match what the program
 * provably executes and what `valgrind --tool=callgrind` counts for the same program. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

/* ---- running a program under ptrace-step ------------------------------------------------ */

struct run {
	struct tk_prof *whole, *half1, *half2;
	struct tk_sym *sym;
	uint64_t ninsns;
	char exe[4096];
	/* unique instruction addresses of the executable, for inline lookups */
	uint64_t *addrs;
	size_t naddrs, caddrs;
};

static void feed(struct run *r, struct tk_event *ev, size_t *n, int force)
{
	if (*n < 4096 && !force)
		return;
	assert_int_equal(tk_prof_events(r->whole, ev, *n), 0);
	/* the same stream in two chunks, split at an arbitrary instruction */
	for (size_t i = 0; i < *n; i++) {
		struct tk_prof *h = ev[i].time < r->ninsns / 2 + 7 ? r->half1 : r->half2;
		assert_int_equal(tk_prof_events(h, &ev[i], 1), 0);
	}
	*n = 0;
}

static void trace_program(struct run *r, const char *exe)
{
	char cmd[8192], tmp[] = "/tmp/tk-steps-XXXXXX";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof cmd, "./ptrace-step -o %s %s", tmp, exe);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(tmp, "r");
	assert_non_null(f);
	snprintf(r->exe, sizeof r->exe, "%s", exe);
	/* first pass: count instructions, so the split point is mid-stream */
	char line[4608];
	uint64_t lines = 0;
	while (fgets(line, sizeof line, f))
		lines++;
	rewind(f);
	r->ninsns = lines;
	struct { uint64_t addr; unsigned len; char kind; } cur = { 0 }, next;
	int have = 0;
	struct tk_event *ev = malloc(4200 * sizeof *ev);
	size_t n = 0;
	uint64_t block_start = 0, block_n = 0, t = 0;
	char maps[64][4608];
	int nmaps = 0, exited = -1;

	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "map ", 4)) {
			if (nmaps < 64)
				snprintf(maps[nmaps++], sizeof maps[0], "%s", line + 4);
			continue;
		}
		if (!strncmp(line, "exit ", 5)) {
			exited = atoi(line + 5);
			continue;
		}
		unsigned long long a;
		unsigned len;
		char kind;
		if (sscanf(line, "%llx %u %c", &a, &len, &kind) != 3)
			continue;
		next.addr = a;
		next.len = len;
		next.kind = kind;
		if (have) {
			/* cur ends its block when it transfers control or the next one is not next */
			if (!block_n)
				block_start = cur.addr;
			block_n++;
			if (cur.kind != 'n' || next.addr != cur.addr + cur.len) {
				ev[n++] = (struct tk_event){ .kind = TK_EV_BLOCK, .addr = block_start,
							     .addr2 = cur.addr, .count = block_n, .time = t };
				if (cur.kind == 'c')
					ev[n++] = (struct tk_event){ .kind = TK_EV_CALL, .addr = cur.addr,
								     .addr2 = next.addr,
								     .arg = cur.addr + cur.len, .time = t };
				else if (cur.kind == 'r')
					ev[n++] = (struct tk_event){ .kind = TK_EV_RETURN, .addr = cur.addr,
								     .addr2 = next.addr, .time = t };
				block_n = 0;
				feed(r, ev, &n, 0);
			}
			t++;
		}
		cur = next;
		have = 1;
	}
	if (have) {
		if (!block_n)
			block_start = cur.addr;
		ev[n++] = (struct tk_event){ .kind = TK_EV_BLOCK, .addr = block_start, .addr2 = cur.addr,
					     .count = block_n + 1, .time = t++ };
	}
	feed(r, ev, &n, 1);
	free(ev);
	fclose(f);
	unlink(tmp);
	assert_int_equal(exited, 0);
	r->ninsns = t;

	/* symbols of every executable mapping, with its load bias */
	r->sym = tk_sym_new(NULL, NULL);
	assert_non_null(r->sym);
	for (int i = 0; i < nmaps; i++) {
		unsigned long long start, end, off;
		char path[4096];
		if (sscanf(maps[i], "%llx %llx %llx %4095s", &start, &end, &off, path) != 4)
			continue;
		uint64_t bias;
		assert_int_equal(tk_sym_bias_from_map(path, start, off, &bias), 0);
		assert_true(tk_sym_add_elf(r->sym, path, bias) >= 0);
	}
	assert_true(tk_sym_module_count(r->sym) >= 2);
}

static struct run *profile_example(const char *name)
{
	struct run *r = calloc(1, sizeof *r);
	char exe[256];
	snprintf(exe, sizeof exe, "examples/%s", name);
	assert_int_equal(access(exe, X_OK), 0);
	struct tk_prof_opts po = { .sz = sizeof po };
	r->whole = tk_prof_new(&po, NULL);
	r->half1 = tk_prof_new(&po, NULL);
	r->half2 = tk_prof_new(&po, NULL);
	char real[4096];
	assert_non_null(realpath(exe, real));
	trace_program(r, real);
	assert_int_equal(tk_prof_merge(r->half1, r->half2), 0);
	tk_prof_finish(r->whole);
	tk_prof_finish(r->half1);
	return r;
}

static void free_run(struct run *r)
{
	tk_prof_free(r->whole);
	tk_prof_free(r->half1);
	tk_prof_free(r->half2);
	tk_sym_free(r->sym);
	free(r->addrs);
	free(r);
}

static char *render(struct tk_prof *p, struct tk_sym *sym, enum tk_out_kind k)
{
	struct tk_buf b;
	struct tk_out_opts o = { .sz = sizeof o, .sym = sym };
	tk_buf_init(&b, -1, 1 << 16);
	assert_int_equal(tk_out_profile(&b, p, k, &o), 0);
	tk_buf_putc(&b, 0);
	return b.data;
}

/* Calls of the function named NAME (call target symbolised). */
static uint64_t calls_of(struct run *r, const char *name)
{
	struct tk_prof_func *f;
	size_t n;
	uint64_t calls = 0;
	assert_int_equal(tk_prof_funcs(r->whole, 0, &f, &n), 0);
	for (size_t i = 0; i < n; i++) {
		struct tk_sym_info si;
		if (f[i].kind != TK_PROF_KEY_ADDR)
			continue;
		tk_sym_lookup(r->sym, f[i].key, &si);
		if (si.func && !strcmp(si.func, name) && si.func_start == f[i].key)
			calls += f[i].calls;
	}
	free(f);
	return calls;
}

/* ---- callgrind ------------------------------------------------------------------------------ */

struct cg {
	char names[4096][128];
	uint64_t calls[4096];
	int n;
	uint64_t line_ir[1024];   /* Ir per line of the example's source file */
};

static void cg_add_call(struct cg *c, const char *name, uint64_t k)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->names[i], name)) {
			c->calls[i] += k;
			return;
		}
	if (c->n < 4096) {
		snprintf(c->names[c->n], sizeof c->names[0], "%s", name);
		c->calls[c->n++] = k;
	}
}

static uint64_t cg_calls(const struct cg *c, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->names[i], name))
			return c->calls[i];
	return 0;
}

static void run_callgrind(const char *exe, const char *src_base, struct cg *c)
{
	char out[] = "/tmp/tk-callgrind-XXXXXX", cmd[8192], line[4096], cfn[4096] = "";
	int fd = mkstemp(out);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof cmd, "valgrind --tool=callgrind --callgrind-out-file=%s --compress-strings=no "
		 "--compress-pos=no --skip-plt=no %s >/dev/null 2>&1", out, exe);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	memset(c, 0, sizeof *c);
	int in_src = 0, skip_next = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "fl=", 3) || !strncmp(line, "fi=", 3) || !strncmp(line, "fe=", 3)) {
			const char *slash = strrchr(line + 3, '/');
			in_src = !strcmp(slash ? slash + 1 : line + 3, src_base);
		} else if (!strncmp(line, "cfn=", 4)) {
			snprintf(cfn, sizeof cfn, "%s", line + 4);
			cfn[strcspn(cfn, "'")] = 0; /* fib'2: callgrind's name for a recursion level */
		} else if (!strncmp(line, "calls=", 6)) {
			cg_add_call(c, cfn, strtoull(line + 6, NULL, 10));
			skip_next = 1; /* the next cost line is the call's inclusive cost */
		} else if (line[0] >= '0' && line[0] <= '9') {
			unsigned long long ln, ir;
			if (sscanf(line, "%llu %llu", &ln, &ir) == 2 && !skip_next && in_src && ln < 1024)
				c->line_ir[ln] += ir;
			skip_next = 0;
		}
	}
	fclose(f);
	unlink(out);
}

/* ---- per-line counts ------------------------------------------------------------------------ */

struct lines {
	uint64_t execs[1024], insns[1024];
};

/* Parse our TK_OUT_LINES table for one source file. */
static void our_lines(struct run *r, const char *src_base, struct lines *l)
{
	memset(l, 0, sizeof *l);
	char *text = render(r->whole, r->sym, TK_OUT_LINES);
	char *save, *ln = strtok_r(text, "\n", &save);
	while ((ln = strtok_r(NULL, "\n", &save))) {
		unsigned long long e, i;
		char file[4096];
		if (sscanf(ln, "%llu %llu %4095s", &e, &i, file) != 3)
			continue;
		char *colon = strrchr(file, ':');
		if (!colon)
			continue;
		*colon = 0;
		const char *slash = strrchr(file, '/');
		unsigned no = (unsigned)atoi(colon + 1);
		if (!strcmp(slash ? slash + 1 : file, src_base) && no < 1024) {
			l->execs[no] += e;
			l->insns[no] += i;
		}
	}
	free(text);
}

/* Line number of the source line carrying MARK. */
static unsigned marked_line(const char *src, const char *mark)
{
	char path[4096], line[1024];
	const char *root = getenv("SRC");
	snprintf(path, sizeof path, "%s/examples/%s", root ? root : "../..", src);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned no = 0, found = 0;
	while (fgets(line, sizeof line, f)) {
		no++;
		if (strstr(line, mark)) {
			found = no;
			break;
		}
	}
	fclose(f);
	assert_true(found > 0);
	return found;
}

static void compare_with_callgrind(struct run *r, const char *src_base, const char *const *funcs,
				   const uint64_t *expect_calls)
{
	struct cg *c = malloc(sizeof *c);
	struct lines *l = malloc(sizeof *l);
	run_callgrind(r->exe, src_base, c);
	for (int i = 0; funcs[i]; i++) {
		uint64_t ours = calls_of(r, funcs[i]);
		if (ours != expect_calls[i] || cg_calls(c, funcs[i]) != expect_calls[i])
			fprintf(stderr, "%s: tracekit %llu, callgrind %llu, expected %llu\n", funcs[i],
				(unsigned long long)ours, (unsigned long long)cg_calls(c, funcs[i]),
				(unsigned long long)expect_calls[i]);
		assert_int_equal(ours, expect_calls[i]);
		assert_int_equal(cg_calls(c, funcs[i]), expect_calls[i]);
	}
	/* every line of the program's source: our instructions == callgrind's Ir (PLT stubs
	 * are functions of their own on both sides: --skip-plt=no) */
	our_lines(r, src_base, l);
	uint64_t total = 0;
	int mismatches = 0;
	for (int i = 0; i < 1024; i++) {
		if (l->insns[i] != c->line_ir[i]) {
			fprintf(stderr, "%s:%d: tracekit %llu instructions, callgrind %llu\n", src_base, i,
				(unsigned long long)l->insns[i], (unsigned long long)c->line_ir[i]);
			mismatches++;
		}
		total += l->insns[i];
	}
	assert_int_equal(mismatches, 0);
	assert_true(total > 1000);
	free(c);
	free(l);
}

static void assert_same_outputs(struct run *r)
{
	static const enum tk_out_kind kinds[] = { TK_OUT_FOLDED, TK_OUT_TEXT, TK_OUT_LINES };
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		char *a = render(r->whole, r->sym, kinds[k]), *b = render(r->half1, r->sym, kinds[k]);
		assert_string_equal(a, b);
		free(a);
		free(b);
	}
}

static int has_line(const char *text, const char *suffix)
{
	/* a folded line whose path ends with SUFFIX (after a ';'), any count */
	size_t sl = strlen(suffix);
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *sp = memrchr(p, ' ', len);
		if (sp && (size_t)(sp - p) >= sl + 1 && !memcmp(sp - sl, suffix, sl) && sp[-(long)sl - 1] == ';')
			return 1;
		p += len + (nl ? 1 : 0);
	}
	return 0;
}

/* The folded lines from main down, cut at the first function not in ALLOWED (library code),
 * as "path value" lines with equal paths added; returned sorted, one per line. */
static char *paths_below_main(const char *folded, const char *const *allowed)
{
	struct { char path[512]; uint64_t v; } *rows = calloc(4096, sizeof *rows);
	size_t n = 0;
	char *copy = strdup(folded), *save, *ln;
	for (ln = strtok_r(copy, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(ln, ' ');
		const char *m = strstr(ln, ";main;");
		if (!m) {
			m = strstr(ln, ";main ");
			if (!m)
				continue;
		}
		*sp = 0;
		uint64_t v = strtoull(sp + 1, NULL, 10);
		char path[512] = "";
		char *comp, *s2, *rest = strdup(m + 1);
		int cut = 0;
		for (comp = strtok_r(rest, ";", &s2); comp; comp = strtok_r(NULL, ";", &s2)) {
			int ok = 0;
			for (int i = 0; allowed[i]; i++)
				ok |= !strcmp(comp, allowed[i]);
			if (!ok) {
				cut = 1;
				break;
			}
			if (path[0])
				strcat(path, ";");
			strcat(path, comp);
		}
		free(rest);
		if (cut)
			continue; /* cost inside library code called from here */
		size_t k = 0;
		while (k < n && strcmp(rows[k].path, path))
			k++;
		if (k == n)
			snprintf(rows[n++].path, sizeof rows[0].path, "%s", path);
		rows[k].v += v;
	}
	free(copy);
	/* sort by path */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(rows[j].path, rows[i].path) < 0) {
				char tmp[512];
				uint64_t tv = rows[i].v;
				memcpy(tmp, rows[i].path, sizeof tmp);
				memcpy(rows[i].path, rows[j].path, sizeof tmp);
				rows[i].v = rows[j].v;
				memcpy(rows[j].path, tmp, sizeof tmp);
				rows[j].v = tv;
			}
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	for (size_t i = 0; i < n; i++)
		tk_buf_printf(&b, "%s %llu\n", rows[i].path, (unsigned long long)rows[i].v);
	tk_buf_putc(&b, 0);
	free(rows);
	return b.data;
}

/* ---- the tests ------------------------------------------------------------------------------- */

static void test_loops(void **state)
{
	(void)state;
	struct run *r = profile_example("loops");
	static const char *const funcs[] = { "main", "inner", "leaf", "apply", "twice", "negate", NULL };
	static const uint64_t calls[] = { 1, 10, 1000, 7, 4, 3 };
	compare_with_callgrind(r, "loops.c", funcs, calls);

	/* loop counts: the loop body lines run exactly as often as the loops say */
	struct lines *l = malloc(sizeof *l);
	our_lines(r, "loops.c", l);
	assert_int_equal(l->execs[marked_line("loops.c", "LINE:square ")], 50);
	assert_int_equal(l->insns[marked_line("loops.c", "LINE:square ")] % 50, 0);
	free(l);

	/* the inlined helper: DWARF says square is inlined into main at the loop line */
	struct tk_prof_block *bl;
	size_t nb;
	int found = 0;
	assert_int_equal(tk_prof_blocks(r->whole, &bl, &nb), 0);
	for (size_t i = 0; i < nb && !found; i++)
		for (uint64_t a = bl[i].start; a <= bl[i].end && !found; a++) {
			struct tk_sym_info si;
			tk_sym_lookup(r->sym, a, &si);
			if (si.inline_func && !strcmp(si.inline_func, "square")) {
				found = 1;
				assert_string_equal(si.func, "main");
				assert_int_equal(si.inline_line, marked_line("loops.c", "LINE:square-loop"));
				assert_int_equal(si.line, marked_line("loops.c", "LINE:square "));
				assert_non_null(si.build_id);
			}
		}
	free(bl);
	assert_true(found);

	/* folded stacks: exactly the call paths the program takes below main */
	char *folded = render(r->whole, r->sym, TK_OUT_FOLDED);
	assert_true(has_line(folded, "main;inner;leaf"));
	assert_true(has_line(folded, "main;inner"));
	assert_true(has_line(folded, "main;apply;twice"));
	assert_true(has_line(folded, "main;apply;negate"));
	assert_true(has_line(folded, "main;apply"));
	assert_null(strstr(folded, ";leaf;"));           /* leaf calls nothing */
	assert_null(strstr(folded, "main;leaf"));        /* only inner calls leaf */
	assert_null(strstr(folded, "main;twice"));       /* only through apply */
	assert_null(strstr(folded, "inner;apply"));
	/* line by line: exactly the program's own call paths, each with the exclusive
	 * instructions that callgrind counts on the lines of its function */
	static const char *const own[] = { "main", "inner", "leaf", "apply", "twice", "negate", NULL };
	char *below = paths_below_main(folded, own);
	struct cg *c = malloc(sizeof *c);
	run_callgrind(r->exe, "loops.c", c);
	uint64_t lines_ir[7] = { 0 };
	const unsigned ranges[6][2] = { { 39, 51 }, { 16, 21 }, { 11, 13 }, { 34, 36 }, { 24, 26 }, { 29, 31 } };
	for (int f = 0; f < 6; f++)
		for (unsigned k = ranges[f][0]; k <= ranges[f][1]; k++)
			lines_ir[f] += c->line_ir[k];
	char expect[1024];
	/* main's own lines include the inlined square (line 7) */
	snprintf(expect, sizeof expect,
		 "main %llu\nmain;apply %llu\nmain;apply;negate %llu\nmain;apply;twice %llu\n"
		 "main;inner %llu\nmain;inner;leaf %llu\n",
		 (unsigned long long)(lines_ir[0] + c->line_ir[7]), (unsigned long long)lines_ir[3],
		 (unsigned long long)lines_ir[5], (unsigned long long)lines_ir[4],
		 (unsigned long long)lines_ir[1], (unsigned long long)lines_ir[2]);
	assert_string_equal(below, expect);
	assert_true(lines_ir[2] >= 3000 && lines_ir[2] % 1000 == 0); /* leaf: 1000 calls */
	free(c);
	free(below);
	free(folded);

	/* annotated source: the inlined helper's line shows its 50 executions */
	char *src = render(r->whole, r->sym, TK_OUT_SOURCE);
	if (getenv("TK_SHOW"))
		fprintf(stderr, "%s\n%s", src, render(r->whole, r->sym, TK_OUT_CALLTREE));
	char want[256];
	snprintf(want, sizeof want, "%12u", 50);
	const char *sq = strstr(src, "return x * x; /* LINE:square */");
	assert_non_null(sq);
	const char *bol = sq;
	while (bol > src && bol[-1] != '\n')
		bol--;
	assert_memory_equal(bol, want, 12);
	assert_non_null(strstr(src, "           .            .     1  /* Loops with known counts"));
	free(src);

	struct tk_prof_summary s;
	tk_prof_summary(r->whole, &s);
	assert_int_equal(s.insns, r->ninsns);
	assert_int_equal(s.orphans, 0);
	assert_int_equal(s.gaps, 0);
	assert_same_outputs(r);
	free_run(r);
}

static void test_recursion(void **state)
{
	(void)state;
	struct run *r = profile_example("recursion");
	static const char *const funcs[] = { "main", "fib", "is_even", "is_odd", "try_dive", "dive", NULL };
	static const uint64_t calls[] = { 1, 1973, 11, 10, 3, 18 };
	compare_with_callgrind(r, "recursion.c", funcs, calls);

	char *folded = render(r->whole, r->sym, TK_OUT_FOLDED);
	char path[1024] = "main";
	for (int k = 1; k <= 16; k++) {
		strcat(path, ";fib");
		/* fib(15) recurses 15 deep: main;fib x1..15, never 16 */
		assert_int_equal(has_line(folded, path), k <= 15);
	}
	strcpy(path, "main;try_dive");
	for (int k = 1; k <= 7; k++) {
		strcat(path, ";dive");
		/* dive reaches depth 5 (6 frames) and longjmps; the abandoned frames end when
		 * try_dive returns, so the next try_dive starts from main again */
		if (k <= 5)
			assert_int_equal(has_line(folded, path), 1);
		if (k == 7)
			assert_int_equal(has_line(folded, path), 0);
	}
	assert_null(strstr(folded, "try_dive;dive;dive;dive;dive;dive;dive;try_dive"));
	assert_true(has_line(folded, "main;is_even;is_odd;is_even;is_odd;is_even"));
	free(folded);
	assert_same_outputs(r);
	free_run(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loops),
		cmocka_unit_test(test_recursion),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
