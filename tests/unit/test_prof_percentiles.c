/* Duration statistics of tk_prof_funcs (selected, not sorted) against a full sort of the
 * same durations, at llvm-xray account's positions (n/2, floor(n*0.9), floor(n*0.99)), for
 * many sizes and shapes: random, runs of equal values, sorted, reversed, organ pipe, mostly
 * zeros, durations past 32 bits, a narrow range across a 64 Ki boundary; merged over
 * threads and per thread. The same statistics from several threads (tk_prof_opts.nthreads),
 * from chunk profiles merged by moving their durations (tk_prof_merge_take) and from a
 * profile emptied after that (tk_prof_reset). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

enum shape { RANDOM, FEW_VALUES, SORTED, REVERSED, ORGAN, ALL_EQUAL, MOSTLY_ZERO, SOME_ZERO,
	     WITH_BIG, STRADDLE, NSHAPES };

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
	/* zeros are counted, not logged: as in Intel PT without cycle-accurate timing, and
	   with small values in the same high-half bucket as the zeros */
	case MOSTLY_ZERO: return rnd() % 32 ? 0 : rnd() % 1000000;
	case SOME_ZERO: return rnd() % 5 < 3 ? 0 : rnd() % 100000;
	case WITH_BIG: return rnd() % 3 ? rnd() % 1000 : (1ULL << 32) + rnd() % 1000;
	/* a narrow range across a high-half boundary, far from 0: the histograms are
	   summed and searched only between the smallest and largest duration */
	case STRADDLE: return (5u << 16) + 65400 + rnd() % 300;
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

static int cmp_row(const void *a, const void *b)
{
	const struct tk_prof_func *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->track < y->track ? -1 : x->track > y->track;
}

/* P's and Q's function tables are the same (in key order), per thread and merged. */
static void same_funcs(const struct tk_prof *p, const struct tk_prof *q)
{
	for (int pt = 0; pt < 2; pt++) {
		struct tk_prof_func *a, *b;
		size_t na, nb;
		assert_int_equal(tk_prof_funcs(p, pt, &a, &na), 0);
		assert_int_equal(tk_prof_funcs(q, pt, &b, &nb), 0);
		assert_int_equal(na, nb);
		qsort(a, na, sizeof *a, cmp_row);
		qsort(b, nb, sizeof *b, cmp_row);
		for (size_t i = 0; i < na; i++) {
			assert_int_equal(a[i].key, b[i].key);
			assert_int_equal(a[i].track, b[i].track);
			assert_int_equal(a[i].calls, b[i].calls);
			assert_int_equal(a[i].incl_ticks, b[i].incl_ticks);
			assert_int_equal(a[i].excl_ticks, b[i].excl_ticks);
			assert_int_equal(a[i].ndur, b[i].ndur);
			assert_int_equal(a[i].dur_min, b[i].dur_min);
			assert_int_equal(a[i].dur_median, b[i].dur_median);
			assert_int_equal(a[i].dur_p90, b[i].dur_p90);
			assert_int_equal(a[i].dur_p99, b[i].dur_p99);
			assert_int_equal(a[i].dur_max, b[i].dur_max);
			assert_int_equal(a[i].dur_sum, b[i].dur_sum);
		}
		free(a);
		free(b);
	}
}

/* N durations of SHAPE (function 1, nested calls of function 2 inside some, EXTRA more
 * functions) over three threads: one profile on one thread; the same with three threads
 * for the statistics; and five chunk profiles (cut anywhere, so calls span the cuts)
 * merged by taking, by taking a profile that itself took one, and by copying a profile
 * with taken chunks. All give the same table. */
static void check_parts(enum shape s, size_t n, size_t extra, size_t in_memory)
{
	size_t cap = 4 * (n + extra) + 16;
	struct tk_event *ev = calloc(cap, sizeof *ev);
	uint64_t t[3] = { 1000, 2000, 3000 };
	size_t ne = 0;

	assert_non_null(ev);
	for (size_t i = 0; i < n + extra; i++) {
		uint32_t track = (uint32_t)(rnd() % 3);
		uint64_t fn = i < n ? 1 : 100 + rnd() % (extra + 1);
		uint64_t dur = i < n ? duration(s, i, n) : rnd() % 5000;
		int nested = rnd() % 4 == 0;
		ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = fn, .time = t[track],
					      .track = track };
		if (nested) {
			ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = 2,
						      .time = t[track] + 1, .track = track };
			ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = 2,
						      .time = t[track] + 1 + dur / 2, .track = track };
		}
		t[track] += dur + 2;
		ev[ne++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = fn, .time = t[track],
					      .track = track };
		t[track] += 3;
	}
	struct tk_prof_opts one = { .sz = sizeof one },
			    three = { .sz = sizeof three, .nthreads = 3, .durations_in_memory = in_memory };
	struct tk_prof *whole = tk_prof_new(&one, NULL), *par = tk_prof_new(&three, NULL);
	assert_non_null(whole);
	assert_non_null(par);
	assert_int_equal(tk_prof_events(whole, ev, ne), 0);
	assert_int_equal(tk_prof_events(par, ev, ne), 0);

	size_t cut[6] = { 0, 0, 0, 0, 0, ne };
	for (int k = 1; k < 5; k++)
		cut[k] = ne * (size_t)k / 5 + rnd() % 7;
	struct tk_prof *ch[5];
	struct tk_prof_opts two = { .sz = sizeof two, .nthreads = 2 };
	/* A and D spill beyond IN_MEMORY: taken chunks are moved into the spill file */
	struct tk_prof_opts spill = { .sz = sizeof spill, .nthreads = 2, .durations_in_memory = in_memory };
	for (int k = 0; k < 5; k++) {
		ch[k] = tk_prof_new(k ? &two : &spill, NULL);
		assert_non_null(ch[k]);
		assert_int_equal(tk_prof_events(ch[k], ev + cut[k], cut[k + 1] - cut[k]), 0);
	}
	/* A = 0 + 1; B = 2 + 3; A += B (maps of maps); D = copy of A, then D += 4 */
	assert_int_equal(tk_prof_merge_take(ch[0], ch[1]), 0);
	assert_int_equal(tk_prof_merge_take(ch[2], ch[3]), 0);
	assert_int_equal(tk_prof_merge_take(ch[0], ch[2]), 0);
	struct tk_prof *d = tk_prof_new(&spill, NULL);
	assert_non_null(d);
	assert_int_equal(tk_prof_merge(d, ch[0]), 0);
	assert_int_equal(tk_prof_merge_take(d, ch[4]), 0);
	/* the taking merge left A whole: it still equals the copy's source */
	assert_int_equal(tk_prof_finish(ch[0]), 0);
	assert_int_equal(tk_prof_finish(d), 0);
	assert_int_equal(tk_prof_finish(whole), 0);
	assert_int_equal(tk_prof_finish(par), 0);
	same_funcs(whole, par);
	same_funcs(whole, d);
	/* a profile emptied after a take (tk_prof_reset) is as good as a new one */
	assert_int_equal(tk_prof_reset(ch[1]), 0);
	assert_int_equal(tk_prof_events(ch[1], ev, ne), 0);
	assert_int_equal(tk_prof_finish(ch[1]), 0);
	same_funcs(whole, ch[1]);

	for (int k = 0; k < 5; k++)
		tk_prof_free(ch[k]);
	tk_prof_free(d);
	tk_prof_free(whole);
	tk_prof_free(par);
	free(ev);
}

static void test_threads_and_takes(void **state)
{
	(void)state;
	for (int s = 0; s < NSHAPES; s++) {
		check_parts((enum shape)s, 200003, 0, 0);
		check_parts((enum shape)s, 140003, 90, 0);
	}
}

/* With 1 byte of durations allowed in memory every chunk of the log lives in the spill
 * file (written, taken over by copying into it, read by threads): same tables. */
static void test_spill_file(void **state)
{
	(void)state;
	check_parts((enum shape)0, 200003, 0, 1);
	check_parts((enum shape)(NSHAPES - 1), 140003, 90, 1);
}

/* A log of more than 4 Mi durations with two threads: its chunks are freed on a pool
 * (the sanitizer tree sees a leak or a double free there). */
static void test_large_log_freed(void **state)
{
	(void)state;
	struct tk_prof_opts two = { .sz = sizeof two, .nthreads = 2 };
	struct tk_prof *p = tk_prof_new(&two, NULL);
	struct tk_event ev[2 * 4096];
	const size_t n = ((size_t)4 << 20) + 4096;
	uint64_t t = 1;

	assert_non_null(p);
	for (size_t done = 0; done < n; done += 4096) {
		for (size_t i = 0; i < 4096; i++, t += 10) {
			ev[2 * i] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = 1, .time = t };
			ev[2 * i + 1] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = 1,
							   .time = t + 1 + i % 7 };
		}
		assert_int_equal(tk_prof_events(p, ev, 2 * 4096), 0);
	}
	assert_int_equal(tk_prof_finish(p), 0);
	struct tk_prof_func *f;
	size_t nf, seen = 0;
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	for (size_t i = 0; i < nf; i++) {
		if (f[i].kind == TK_PROF_KEY_ID && f[i].key == 1) {
			assert_int_equal(f[i].ndur, n);
			assert_int_equal(f[i].dur_min, 1);
			assert_int_equal(f[i].dur_max, 7);
			seen++;
		}
	}
	assert_int_equal(seen, 1);
	free(f);
	tk_prof_free(p);
}

/* Calls [FROM, TO) of a fixed sequence (functions 1-3, durations from a hash of the
 * call's number) to P, from time *T on. */
static void feed_calls(struct tk_prof *p, size_t from, size_t to, uint64_t *t)
{
	static struct tk_event ev[2 * 4096];

	for (size_t i = from; i < to;) {
		size_t k = 0;
		for (; k < 4096 && i < to; k++, i++) {
			uint64_t d = 1 + (uint64_t)i * 2654435761u % 100000;
			ev[2 * k] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = 1 + i % 3, .time = *t };
			ev[2 * k + 1] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = 1 + i % 3,
							   .time = *t + d };
			*t += d + 1;
		}
		assert_int_equal(tk_prof_events(p, ev, 2 * k), 0);
	}
}

/* One chunk profile used again and again, as tk_run_profile's spares are: each take
 * leaves it the unused end of its last (huge) log chunk, where its next log begins (the
 * chunks here: past the first small chunk into a large one; within the end left; past
 * that end into a new chunk; a few calls). Once it is emptied without a take (a chunk
 * decoded again), its piece of the shared chunk is freed alone. The statistics equal
 * one profile's of all calls, and freeing the total before the chunk's profile or after
 * it frees each chunk once (the sanitizer tree sees a leak, a double free or a use after
 * free). */
static void test_spare_reused(void **state)
{
	(void)state;
	const size_t cut[] = { 0, 380000, 880000, 1290000, 1300000 };
	const size_t nchunks = sizeof cut / sizeof *cut - 1;

	struct tk_prof *whole = tk_prof_new(NULL, NULL);
	uint64_t tw = 1;

	assert_non_null(whole);
	feed_calls(whole, 0, cut[nchunks], &tw);
	assert_int_equal(tk_prof_finish(whole), 0);
	for (int total_first = 0; total_first < 2; total_first++) {
		struct tk_prof *total = tk_prof_new(NULL, NULL);
		assert_non_null(total);
		struct tk_prof *ch = tk_prof_new_like(total, NULL);
		assert_non_null(ch);
		uint64_t t = 1;
		for (size_t k = 0; k < nchunks; k++) {
			if (k == 2) {   /* decoded, then dropped: its events are given again */
				uint64_t scratch = t;
				assert_int_equal(tk_prof_reset(ch), 0);
				feed_calls(ch, cut[k], cut[k + 1], &scratch);
			}
			if (k)
				assert_int_equal(tk_prof_reset(ch), 0);
			feed_calls(ch, cut[k], cut[k + 1], &t);
			assert_int_equal(tk_prof_merge_take(total, ch), 0);
		}
		assert_int_equal(tk_prof_finish(total), 0);
		same_funcs(whole, total);
		if (total_first) {
			tk_prof_free(total);
			tk_prof_free(ch);
		} else {
			tk_prof_free(ch);
			tk_prof_free(total);
		}
	}
	tk_prof_free(whole);
}

/* More large functions than one pass of the radix selection takes (RADIX_GROUPS, 32),
 * and more functions than the counting pass gives histograms to at four threads: batches
 * of groups, some without those histograms (a pass of their own); beside them functions
 * too small for a group whose selections run in parts on the pool (one with durations
 * past 32 bits); on 1, 2 and 4 threads. Each one's statistics against its durations
 * sorted. */
#define GROUPS_N 40
#define GROUP_DURS 66000
#define MID_N 20
#define MID_DURS 20000
static void test_many_groups(void **state)
{
	(void)state;
	struct tk_prof *p[3];
	static const unsigned threads[3] = { 1, 2, 4 };
	const size_t nlarge = (size_t)GROUPS_N * GROUP_DURS, nmid = (size_t)MID_N * MID_DURS;
	uint64_t *d = malloc((nlarge + nmid) * sizeof *d);
	struct tk_event ev[2 * 4096];
	uint64_t t = 1;

	assert_non_null(d);
	for (int k = 0; k < 3; k++) {
		struct tk_prof_opts o = { .sz = sizeof o, .nthreads = threads[k] };
		assert_non_null(p[k] = tk_prof_new(&o, NULL));
	}
	/* calls of the large functions interleaved, then the middle ones', then 30 small
	 * ones (90 functions); d holds function fn's durations at its own offset */
	const size_t ncalls = nlarge + nmid + 30;
	for (size_t done = 0; done < ncalls;) {
		size_t n = 0;
		for (; n < 4096 && done < ncalls; n++, done++) {
			uint64_t fn, dur;
			if (done < nlarge) {
				fn = 1 + done % GROUPS_N;
				dur = 1 + rnd() % (fn % 3 ? 100000 : 3000000);
				d[(fn - 1) * GROUP_DURS + done / GROUPS_N] = dur;
			} else if (done < nlarge + nmid) {
				size_t m = done - nlarge;
				fn = GROUPS_N + 1 + m % MID_N;
				dur = fn == GROUPS_N + 1 && rnd() % 5 == 0 ? (1ULL << 32) + rnd() % 1000
									 : 1 + rnd() % 50000;
				d[nlarge + (fn - GROUPS_N - 1) * MID_DURS + m / MID_N] = dur;
			} else {
				fn = 1000 + done;
				dur = 5;
			}
			ev[2 * n] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .addr = fn, .time = t };
			ev[2 * n + 1] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .addr = fn,
							   .time = t + dur };
			t += dur + 1;
		}
		for (int k = 0; k < 3; k++)
			assert_int_equal(tk_prof_events(p[k], ev, 2 * n), 0);
	}
	for (int k = 0; k < 3; k++) {
		assert_int_equal(tk_prof_finish(p[k]), 0);
		for (int pt = 0; pt < 2; pt++) {   /* merged and per thread: one thread here */
			struct tk_prof_func *f;
			size_t nf, seen = 0;
			assert_int_equal(tk_prof_funcs(p[k], pt, &f, &nf), 0);
			for (size_t i = 0; i < nf; i++) {
				uint64_t fn = f[i].key;
				if (f[i].kind != TK_PROF_KEY_ID || fn < 1 || fn > GROUPS_N + MID_N)
					continue;
				/* sorted by the first check: the same values */
				if (fn <= GROUPS_N)
					expect(&f[i], d + (fn - 1) * GROUP_DURS, GROUP_DURS);
				else
					expect(&f[i], d + nlarge + (fn - GROUPS_N - 1) * MID_DURS, MID_DURS);
				seen++;
			}
			assert_int_equal(seen, GROUPS_N + MID_N);
			free(f);
		}
	}
	for (int k = 0; k < 3; k++)
		tk_prof_free(p[k]);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_sizes),
		cmocka_unit_test(test_large_sizes),
		cmocka_unit_test(test_many_functions),
		cmocka_unit_test(test_threads_and_takes),
		cmocka_unit_test(test_spill_file),
		cmocka_unit_test(test_large_log_freed),
		cmocka_unit_test(test_spare_reused),
		cmocka_unit_test(test_many_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
