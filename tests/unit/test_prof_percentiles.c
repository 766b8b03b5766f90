/* Duration statistics of tk_prof_funcs (selected, not sorted) against a full sort of the
 * same durations, at llvm-xray account's positions (n/2, floor(n*0.9), floor(n*0.99)), for
 * many sizes and shapes: random, runs of equal values, sorted, reversed, organ pipe, and
 * durations past 32 bits; merged over threads and per thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

enum shape { RANDOM, FEW_VALUES, SORTED, REVERSED, ORGAN, ALL_EQUAL, WITH_BIG, NSHAPES };

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t duration(enum shape s, size_t i, size_t n)
{
	switch (s) {
	case RANDOM: return rnd() % 1000000;
	case FEW_VALUES: return 100 + rnd() % 4;
	case SORTED: return i;
	case REVERSED: return n - i;
	case ORGAN: return i < n / 2 ? i : n - i;
	case ALL_EQUAL: return 42;
	case WITH_BIG: return rnd() % 3 ? rnd() % 1000 : (1ULL << 32) + rnd() % 1000;
	default: return 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void expect(const struct tk_prof_func *f, uint64_t *d, size_t n)
{
	qsort(d, n, sizeof *d, cmp_u64);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += d[i];
	assert_int_equal(f->ndur, n);
	assert_int_equal(f->dur_min, d[0]);
	assert_int_equal(f->dur_max, d[n - 1]);
	assert_int_equal(f->dur_median, d[n / 2]);
	assert_int_equal(f->dur_p90, d[(size_t)((double)n * 0.9)]);
	assert_int_equal(f->dur_p99, d[(size_t)((double)n * 0.99)]);
	assert_int_equal(f->dur_sum, sum);
}

/* Function 1 gets N durations of SHAPE spread over three threads, function 2 a few
 * small ones (a second group beside it, of the other width when SHAPE has big ones), and
 * EXTRA more functions two calls each (many functions take another path). */
static void check_extra(enum shape s, size_t n, size_t extra)
{
	size_t total = n + 5 + 2 * extra;
	struct tk_event *ev = calloc(2 * total, sizeof *ev);
	uint64_t *d = calloc(total, sizeof *d), *per[3];
	size_t nper[3] = { 0 };
	uint64_t t[3] = { 1000, 2000, 3000 };
	struct tk_prof *p = tk_prof_new(NULL, NULL);

	assert_non_null(ev);
	assert_non_null(d);
	assert_non_null(p);
	for (int k = 0; k < 3; k++) {
		per[k] = calloc(total, sizeof *per[k]);
		assert_non_null(per[k]);
	}
	size_t ne = 0;
	for (size_t i = 0; i < total; i++) {
		uint32_t track = (uint32_t)(rnd() % 3);
		uint64_t fn = i < n ? 1 : i < n + 5 ? 2 : 100 + (i - n - 5) / 2;
		uint64_t dur = i < n ? duration(s, i, n) : 7 * i;
		ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = fn, .time = t[track],
					      .track = track };
		t[track] += dur;
		ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = fn, .time = t[track],
					      .track = track };
		t[track] += 3;
		if (i < n) {
			d[i] = dur;
			per[track][nper[track]++] = dur;
		}
	}
	assert_int_equal(tk_prof_events(p, ev, ne), 0);
	assert_int_equal(tk_prof_finish(p), 0);

	struct tk_prof_func *f;
	size_t nf, seen = 0;
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	for (size_t i = 0; i < nf; i++) {
		if (f[i].kind == TK_PROF_KEY_ID && f[i].key == 1) {
			expect(&f[i], d, n);
			seen++;
		}
		if (f[i].kind == TK_PROF_KEY_ID && f[i].key == 2) {
			assert_int_equal(f[i].ndur, 5);
			assert_int_equal(f[i].dur_min, 7 * n);
			assert_int_equal(f[i].dur_median, 7 * (n + 2));
			assert_int_equal(f[i].dur_max, 7 * (n + 4));
			seen++;
		}
	}
	assert_int_equal(seen, 2);
	free(f);

	/* per thread: one row per (function, thread); the tracks are 0, 1, 2 */
	assert_int_equal(tk_prof_funcs(p, 1, &f, &nf), 0);
	seen = 0;
	for (size_t i = 0; i < nf; i++) {
		if (f[i].kind != TK_PROF_KEY_ID || f[i].key != 1 || !f[i].ndur)
			continue;
		assert_true(f[i].track < 3);
		expect(&f[i], per[f[i].track], nper[f[i].track]);
		seen += nper[f[i].track];
	}
	assert_int_equal(seen, n);
	free(f);

	tk_prof_free(p);
	for (int k = 0; k < 3; k++)
		free(per[k]);
	free(ev);
	free(d);
}

static void check(enum shape s, size_t n)
{
	check_extra(s, n, 0);
}

static void test_small_sizes(void **state)
{
	(void)state;
	for (int s = 0; s < NSHAPES; s++)
		for (size_t n = 1; n <= 70; n++)
			check((enum shape)s, n);
}

static void test_large_sizes(void **state)
{
	(void)state;
	static const size_t sizes[] = { 101, 1000, 4099, 65536, 200003 };
	for (int s = 0; s < NSHAPES; s++)
		for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
			check((enum shape)s, sizes[i]);
}

/* more than 64 functions (over three threads): the histograms are built in passes of
 * their own */
static void test_many_functions(void **state)
{
	(void)state;
	for (int s = 0; s < NSHAPES; s++) {
		check_extra((enum shape)s, 200003, 40);
		check_extra((enum shape)s, 70000, 100);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_sizes),
		cmocka_unit_test(test_large_sizes),
		cmocka_unit_test(test_many_functions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
