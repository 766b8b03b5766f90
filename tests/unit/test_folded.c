/* Folded stacks against the straightforward writer they replaced: build every path string,
 * sort with strcmp, merge equal strings, --top by (value desc, path). The writer walks a trie
 * of the paths instead (memory O(nodes), not O(paths x depth)) and must print the same bytes,
 * including for names that sort below ';' ("a b", "a!", "f(int)"), names holding ';', equal
 * names under one parent and the dropped "[unknown]" base level. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"
#include "output/internal.h"

struct ref_line {
	char *path;
	uint64_t v;
};

static int ref_cmp(const void *x, const void *y)
{
	return strcmp(((const struct ref_line *)x)->path, ((const struct ref_line *)y)->path);
}

static int ref_cmp_heavy(const void *x, const void *y)
{
	const struct ref_line *a = x, *b = y;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return strcmp(a->path, b->path);
}

static size_t ref_merges;     /* equal paths merged by the reference: the cases are covered */

/* The writer as it was before the trie (lib/output/profile.c, out_folded). */
static void ref_folded(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o)
{
	struct names nm;
	struct agg a;
	assert_int_equal(names_init(&nm, o->sym), 0);
	enum tk_out_metric m = out_metric(p, o->metric);
	assert_int_equal(agg_build(&a, p, &nm, o), 0);
	struct ref_line *lines = calloc(a.nn + 1, sizeof *lines);
	assert_non_null(lines);
	size_t nl = 0;
	struct tk_buf path;
	tk_buf_init(&path, -1, 4096);
	uint32_t *anc = malloc(a.nn * sizeof *anc);
	assert_non_null(anc);
	for (size_t i = 1; i < a.nn; i++) {
		uint64_t v = agg_self(&a.n[i], m);
		if (!v)
			continue;
		size_t d = 0;
		for (uint32_t x = (uint32_t)i; x != 0; x = a.n[x].parent)
			anc[d++] = x;
		/* the base level, outermost or under the thread's node, is left off */
		size_t b = a.tracks ? 2 : 1;
		if (d > b && !strcmp(names_str(&nm, a.n[anc[d - b]].name), "[unknown]")) {
			anc[d - b] = anc[d - 1];
			d--;
		}
		path.len = 0;
		while (d--) {
			tk_buf_puts(&path, names_str(&nm, a.n[anc[d]].name));
			if (d)
				tk_buf_putc(&path, ';');
		}
		lines[nl].path = strndup(path.data, path.len);
		lines[nl++].v = v;
	}
	free(anc);
	qsort(lines, nl, sizeof *lines, ref_cmp);
	size_t w = 0;
	for (size_t i = 0; i < nl;) {
		size_t j = i + 1;
		for (; j < nl && !strcmp(lines[j].path, lines[i].path); j++) {
			lines[i].v += lines[j].v;
			free(lines[j].path);
			ref_merges++;
		}
		lines[w++] = lines[i];
		i = j;
	}
	nl = w;
	if (o->top && nl > o->top) {
		qsort(lines, nl, sizeof *lines, ref_cmp_heavy);
		for (size_t i = o->top; i < nl; i++)
			free(lines[i].path);
		nl = o->top;
		qsort(lines, nl, sizeof *lines, ref_cmp);
	}
	for (size_t i = 0; i < nl; i++) {
		tk_buf_puts(b, lines[i].path);
		tk_buf_putc(b, ' ');
		tk_buf_u64(b, lines[i].v);
		tk_buf_putc(b, '\n');
		free(lines[i].path);
	}
	free(lines);
	tk_buf_free(&path);
	agg_free(&a);
	names_free(&nm);
}

/* Names that sort below ';' (' ', '!', '('), hold ';', prefix each other, repeat, and one
 * that is literally "[unknown]". Ids 1..NNAMES. */
static const char *const fnames[] = {
	"a", "a b", "a!", "f(int)", "ab", "a;b", "b", "a;", "dup", "dup", "[unknown]", "a(", "~z",
	"b;a b",
};
#define NNAMES (sizeof fnames / sizeof fnames[0])

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng_state >> 33) % n;
}

/* A random walk of enters and exits on two tracks: exits of the wrong function and on an
 * empty stack (unknown base levels), time steps of 0..3 (ties and zero self values). */
static size_t random_stream(struct tk_event *ev, size_t max, uint32_t nfuncs)
{
	uint64_t stack[2][64];
	size_t depth[2] = { 0, 0 };
	size_t n = 0;
	uint64_t t = 1000;
	while (n < max) {
		uint32_t tr = rnd(2);
		t += rnd(4);
		uint32_t r = rnd(10);
		if (r < 5 && depth[tr] < 64) {
			uint64_t f = 1 + rnd(nfuncs);
			stack[tr][depth[tr]++] = f;
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = f, .time = t, .track = tr };
		} else if (r < 9 && depth[tr]) {
			uint64_t f = stack[tr][--depth[tr]];
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = f, .time = t, .track = tr };
		} else {
			uint64_t f = 1 + rnd(nfuncs);   /* mismatched, or an orphan on an empty stack */
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = f, .time = t, .track = tr };
			for (size_t d = depth[tr]; d-- > 0;)
				if (stack[tr][d] == f) {
					depth[tr] = d;
					break;
				}
		}
	}
	return n;
}

static int cmp_u64_desc(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a > b ? -1 : a < b;
}

/* The values of the lines of S, largest first; returns their number. */
static size_t line_values(const char *s, uint64_t **out)
{
	size_t n = 0;
	for (const char *c = s; *c; c++)
		n += *c == '\n';
	uint64_t *v = malloc((n + 1) * sizeof *v);
	assert_non_null(v);
	size_t k = 0;
	for (const char *c = s; *c; c++)
		if (*c == '\n') {
			const char *sp = c;
			while (sp[-1] != ' ')
				sp--;
			v[k++] = strtoull(sp, NULL, 10);
		}
	qsort(v, n, sizeof *v, cmp_u64_desc);
	*out = v;
	return n;
}

static void test_folded_matches_reference(void **state)
{
	(void)state;
	struct tk_sym *s = tk_sym_new(NULL, NULL);
	assert_non_null(s);
	for (size_t i = 0; i < NNAMES; i++)
		assert_int_equal(tk_sym_set_func(s, i + 1, fnames[i], 0), 0);
	static struct tk_event ev[4000];
	size_t cases = 0, top_cases = 0, tie_cases = 0, unknown_cases = 0;
	for (uint64_t seed = 1; seed <= 120; seed++) {
		rng_state = seed;
		uint32_t nfuncs = 2 + rnd(NNAMES - 1);
		size_t n = random_stream(ev, 20 + rnd(sizeof ev / sizeof ev[0] - 20), nfuncs);
		struct tk_prof *p = tk_prof_new(NULL, NULL);
		assert_non_null(p);
		assert_int_equal(tk_prof_events(p, ev, n), 0);
		assert_int_equal(tk_prof_finish(p), 0);
		for (int threads = 0; threads < 2; threads++) {
			for (int metric = 0; metric < 2; metric++) {
				struct tk_out_opts o = { .sz = sizeof o, .sym = s, .threads = threads,
							 .metric = metric ? TK_OUT_M_CALLS : TK_OUT_M_AUTO };
				struct tk_buf all;
				tk_buf_init(&all, -1, 4096);
				ref_folded(&all, p, &o);
				tk_buf_putc(&all, 0);
				uint64_t *vals;
				size_t nl = line_values(all.data, &vals);
				unknown_cases += strstr(all.data, "[unknown]") != NULL;
				uint64_t tops[] = { 0, 1, 2, 3, 5, 8, nl / 2, nl ? nl - 1 : 0, nl, nl + 1,
						    1 + rnd((uint32_t)nl + 1) };
				for (size_t k = 0; k < sizeof tops / sizeof tops[0]; k++) {
					o.top = tops[k];
					struct tk_buf want, got;
					tk_buf_init(&want, -1, 4096);
					tk_buf_init(&got, -1, 4096);
					ref_folded(&want, p, &o);
					assert_int_equal(tk_out_profile(&got, p, TK_OUT_FOLDED, &o), 0);
					tk_buf_putc(&want, 0);
					tk_buf_putc(&got, 0);
					if (strcmp(want.data, got.data))
						fprintf(stderr, "seed %llu threads %d metric %d top %llu\n"
							"--- want\n%s--- got\n%s", (unsigned long long)seed,
							threads, metric, (unsigned long long)o.top,
							want.data, got.data);
					assert_string_equal(want.data, got.data);
					cases++;
					if (o.top && o.top < nl) {
						top_cases++;
						/* lines equal to the threshold both kept and left out */
						tie_cases += vals[o.top - 1] == vals[o.top];
					}
					tk_buf_free(&want);
					tk_buf_free(&got);
				}
				tk_buf_free(&all);
				free(vals);
			}
		}
		tk_prof_free(p);
	}
	fprintf(stderr, "%zu comparisons, %zu with --top below the line count, %zu of them with "
		"ties at the threshold; %zu profiles with [unknown]; %zu equal paths merged\n",
		cases, top_cases, tie_cases, unknown_cases, ref_merges);
	assert_true(tie_cases > 100 && unknown_cases > 100 && ref_merges > 100);
	tk_sym_free(s);
}

/* A 300,000-deep stack: the writer walks it without recursion and prints the one line. */
static void test_folded_deep(void **state)
{
	(void)state;
	enum { DEPTH = 300000 };
	struct tk_event *ev = malloc(2 * DEPTH * sizeof *ev);
	assert_non_null(ev);
	size_t n = 0;
	for (uint64_t i = 0; i < DEPTH; i++)
		ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = 1 + i % 3, .time = 10 };
	for (uint64_t i = DEPTH; i-- > 0;)   /* time only at the bottom: one line */
		ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = 1 + i % 3, .time = 17 };
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	assert_int_equal(tk_prof_finish(p), 0);
	struct tk_sym *s = tk_sym_new(NULL, NULL);
	assert_non_null(s);
	tk_sym_set_func(s, 1, "x", 0);
	tk_sym_set_func(s, 2, "y", 0);
	tk_sym_set_func(s, 3, "z", 0);
	struct tk_out_opts o = { .sz = sizeof o, .sym = s };
	struct tk_buf got;
	tk_buf_init(&got, -1, 4096);
	assert_int_equal(tk_out_profile(&got, p, TK_OUT_FOLDED, &o), 0);
	assert_int_equal(got.len, 2 * DEPTH - 1 + 3);
	assert_memory_equal(got.data, "x;y;z;x;", 8);
	assert_memory_equal(got.data + got.len - 6, "y;z 7\n", 6);
	tk_buf_free(&got);
	tk_sym_free(s);
	tk_prof_free(p);
	free(ev);
}

/* The name table the writers share: each distinct string one id, in order of first sight,
 * the same id again however the table has grown, its bytes and length kept (a string
 * longer than a block of the store, one with a NUL inside, strings differing in their
 * last byte only). */
static void test_names_intern(void **state)
{
	(void)state;
	struct names nm;
	enum { N = 100000 };
	char buf[64], *big = malloc(70000);
	assert_non_null(big);
	memset(big, 'x', 70000);
	assert_int_equal(names_init(&nm, NULL), 0);
	assert_int_equal(names_intern(&nm, "", 0), 0);
	/* longer ones first ("label 10" before "label 1"): in the probes of a short one there
	 * are then strings it begins, which a comparison of its bytes alone would take */
	for (uint32_t i = 1; i <= N; i++) {
		int n = snprintf(buf, sizeof buf, "label %u", N - i);
		assert_int_equal(names_intern(&nm, buf, (size_t)n), i);
	}
	assert_int_equal(names_intern(&nm, big, 70000), N + 1);
	assert_int_equal(names_intern(&nm, "a\0b", 3), N + 2);
	assert_int_equal(names_intern(&nm, "a", 1), N + 3);   /* a prefix of the one before */
	for (uint32_t i = 1; i <= N; i++) {
		int n = snprintf(buf, sizeof buf, "label %u", N - i);
		assert_int_equal(names_intern(&nm, buf, (size_t)n), i);
		assert_string_equal(names_str(&nm, i), buf);
	}
	assert_int_equal(names_intern(&nm, big, 70000), N + 1);
	assert_int_equal(strlen(names_str(&nm, N + 1)), 70000);
	assert_int_equal(names_intern(&nm, "a\0b", 3), N + 2);
	assert_memory_equal(names_str(&nm, N + 2), "a\0b", 4);
	assert_int_equal(names_intern(&nm, "a\0c", 3), N + 4);
	assert_string_equal(names_str(&nm, 0), "");
	names_free(&nm);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_folded_matches_reference),
		cmocka_unit_test(test_folded_deep),
		cmocka_unit_test(test_names_intern),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
