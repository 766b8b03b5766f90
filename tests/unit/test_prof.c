/* Profile builder on event streams built here: known counts, recursion, lost exits, gaps,
 * threads, and merging of chunks equals the whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"
#include "analysis/prof_internal.h"

static struct tk_event ev_fn(uint16_t kind, uint64_t fn, uint64_t time, uint32_t track)
{
	return (struct tk_event){ .kind = kind, .addr = fn, .time = time, .track = track };
}

static char *render(struct tk_prof *p, enum tk_out_kind kind, int threads)
{
	struct tk_buf b;
	struct tk_out_opts o = { .sz = sizeof o, .threads = threads };
	assert_int_equal(tk_buf_init(&b, -1, 4096), 0);
	assert_int_equal(tk_out_profile(&b, p, kind, &o), 0);
	tk_buf_putc(&b, 0);
	return b.data;
}

static const struct tk_prof_func *find_func(const struct tk_prof_func *f, size_t n, uint64_t key, uint32_t kind)
{
	for (size_t i = 0; i < n; i++)
		if (f[i].key == key && f[i].kind == kind)
			return &f[i];
	return NULL;
}

/* main(1) calls a(2) three times; a calls b(3) once each; times chosen by hand. */
static void test_known_counts(void **state)
{
	(void)state;
	struct tk_event ev[64];
	size_t n = 0;
	uint64_t t = 100;
	ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 1, t, 7);
	for (int i = 0; i < 3; i++) {
		ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 2, t += 10, 7);
		ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 3, t += 5, 7);
		ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 3, t += 20 + 10 * (uint64_t)i, 7);
		ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 2, t += 5, 7);
	}
	ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 1, t += 10, 7);

	int err;
	struct tk_prof *p = tk_prof_new(NULL, &err);
	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	assert_int_equal(tk_prof_finish(p), 0);
	struct tk_prof_func *f;
	size_t nf;
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	const struct tk_prof_func *m = find_func(f, nf, 1, TK_PROF_KEY_ID);
	const struct tk_prof_func *a = find_func(f, nf, 2, TK_PROF_KEY_ID);
	const struct tk_prof_func *b = find_func(f, nf, 3, TK_PROF_KEY_ID);
	assert_non_null(m);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(m->calls, 1);
	assert_int_equal(a->calls, 3);
	assert_int_equal(b->calls, 3);
	/* b: 20, 30, 40; a: b + 10 each = 30, 40, 50; main: 10 * 3 gaps + 120 + 10 */
	assert_int_equal(b->incl_ticks, 90);
	assert_int_equal(b->dur_min, 20);
	assert_int_equal(b->dur_median, 30);
	assert_int_equal(b->dur_max, 40);
	assert_int_equal(a->incl_ticks, 120);
	assert_int_equal(a->excl_ticks, 30);
	assert_int_equal(m->incl_ticks, t - 100);
	assert_int_equal(m->excl_ticks, t - 100 - 120);
	free(f);

	char *folded = render(p, TK_OUT_FOLDED, 0);
	assert_string_equal(folded, "#1 40\n#1;#2 30\n#1;#2;#3 90\n");
	free(folded);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.calls, 7);
	assert_int_equal(s.returns, 7);
	assert_int_equal(s.orphans, 0);
	tk_prof_free(p);
}

/* Recursion: f(1) calls itself 4 deep; inclusive time counts the outermost call once. */
static void test_recursion(void **state)
{
	(void)state;
	struct tk_event ev[16];
	size_t n = 0;
	for (int i = 0; i < 4; i++)
		ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 1, (uint64_t)i * 10, 0);
	for (int i = 0; i < 4; i++)
		ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 1, 100 + (uint64_t)i * 10, 0);
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	struct tk_prof_func *f;
	size_t nf;
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	const struct tk_prof_func *r = find_func(f, nf, 1, TK_PROF_KEY_ID);
	assert_non_null(r);
	assert_int_equal(r->calls, 4);
	assert_int_equal(r->incl_ticks, 130);  /* 0 .. 130 */
	assert_int_equal(r->excl_ticks, 130);  /* all of it is in f */
	assert_int_equal(r->ndur, 4);
	assert_int_equal(r->dur_sum, 70 + 90 + 110 + 130);
	free(f);
	tk_prof_free(p);
}

/* Call/return with blocks: instructions inclusive and exclusive, longjmp-like return. */
static void test_instructions(void **state)
{
	(void)state;
	struct tk_event ev[32];
	size_t n = 0;
#define BLK(a, c) ev[n++] = (struct tk_event){ .kind = TK_EV_BLOCK, .addr = a, .addr2 = a + 4 * (c - 1), .count = c }
#define CALL(at, to) ev[n++] = (struct tk_event){ .kind = TK_EV_CALL, .addr = at, .addr2 = to, .arg = at + 5 }
#define RET(at, to) ev[n++] = (struct tk_event){ .kind = TK_EV_RETURN, .addr = at, .addr2 = to }
	BLK(0x1000, 3);
	CALL(0x1008, 0x2000);    /* main -> f */
	BLK(0x2000, 5);
	CALL(0x2010, 0x3000);    /* f -> g */
	BLK(0x3000, 2);
	CALL(0x3004, 0x4000);    /* g -> h */
	BLK(0x4000, 7);
	RET(0x4018, 0x2015);     /* h longjmps back into f: returns past g */
	BLK(0x2015, 4);
	RET(0x2020, 0x100d);
	BLK(0x100d, 1);
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	struct tk_prof_func *f;
	size_t nf;
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	const struct tk_prof_func *ff = find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *g = find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *h = find_func(f, nf, 0x4000, TK_PROF_KEY_ADDR);
	assert_non_null(ff);
	assert_non_null(g);
	assert_non_null(h);
	assert_int_equal(ff->incl_insns, 5 + 2 + 7 + 4);
	assert_int_equal(ff->excl_insns, 5 + 4);
	assert_int_equal(g->incl_insns, 9);
	assert_int_equal(g->excl_insns, 2);
	assert_int_equal(h->excl_insns, 7);
	free(f);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.insns, 22);
	assert_int_equal(s.returns, 3);
	assert_int_equal(s.open_at_end, 0);
	struct tk_prof_block *bl;
	size_t nb;
	assert_int_equal(tk_prof_blocks(p, &bl, &nb), 0);
	assert_int_equal(nb, 6);
	free(bl);
	tk_prof_free(p);
}

/* A deterministic random stream: 3 tracks, enters/exits of 6 functions (recursion too),
 * blocks, lost exits, exits without enter, gaps, calls and returns (WITH_ENABLE: also
 * resumes, and jumps to entries: tail calls). */
static size_t random_stream(struct tk_event *ev, size_t max, uint64_t seed, int with_enable)
{
	uint64_t x = seed, t[3] = { 1000, 2000, 3000 };
	size_t n = 0;
	int depth[3] = { 0 };
	uint64_t stack[3][64], rets[3][64];
	int after_block[3] = { 0 };
	while (n < max) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned r = (unsigned)(x >> 33);
		unsigned tr = r % 3, op = (r >> 2) % 100;
		struct tk_event *e = &ev[n++];
		t[tr] += 1 + (r >> 9) % 50;
		*e = (struct tk_event){ .time = t[tr], .track = tr };
		if (op < 30) {
			e->kind = TK_EV_BLOCK;
			e->addr = 0x400000 + ((r >> 12) % 64) * 16;
			e->count = 1 + (r >> 18) % 9;
			e->addr2 = e->addr + e->count;
		} else if (op < 55 && depth[tr] < 60) {
			int call = (r >> 12) & 1;
			uint64_t fn = 1 + (r >> 13) % 6;
			e->kind = call ? TK_EV_CALL : TK_EV_FUNC_ENTER;
			if (call) {
				e->addr2 = 0x500000 + fn * 0x100;
				e->arg = 0x600000 + ((r >> 16) % 8);
			} else {
				e->addr = fn;
			}
			stack[tr][depth[tr]] = call ? 0 : fn;
			rets[tr][depth[tr]++] = call ? e->arg : 0;
		} else if (op < 90) {
			/* mostly proper exits; sometimes a random function (lost exits / orphans) */
			int d = depth[tr];
			if (d && (r >> 12) % 10) {
				if (stack[tr][d - 1]) {
					e->kind = (r >> 16) % 7 ? TK_EV_FUNC_EXIT : TK_EV_FUNC_TAIL_EXIT;
					e->addr = stack[tr][d - 1];
				} else {
					e->kind = TK_EV_RETURN;
					e->addr2 = rets[tr][d - 1];
				}
				depth[tr]--;
			} else if ((r >> 16) & 1) {
				e->kind = TK_EV_FUNC_EXIT;
				e->addr = 1 + (r >> 17) % 6;
				depth[tr] = 0; /* may end everything; the model only guides the mix */
			} else {
				/* a return to an address no call returns to: pops one frame.
				 * (A return deeper into a stack begun in an earlier chunk is
				 * the documented limit of exact merging.) */
				e->kind = TK_EV_RETURN;
				e->addr2 = 0x610000 + ((r >> 17) % 8);
				if (depth[tr])
					depth[tr]--;
			}
		} else if (with_enable && op >= 94) {
			/* tracing resumes: at an entry (0x500100..0x500600, see ENTRIES), at
			 * the return address of the innermost call, or elsewhere; or a return
			 * to untraced code (target unknown). (Resuming deeper in a stack begun
			 * in an earlier chunk is the limit of exact merging, as for returns.) */
			unsigned how = (r >> 12) % 4;
			int d = depth[tr];
			e->kind = how == 3 ? TK_EV_RETURN : TK_EV_ENABLE;
			e->addr = how == 0 ? 0x500000 + (1 + (r >> 14) % 6) * 0x100 :
				  how == 1 && d && rets[tr][d - 1] ? rets[tr][d - 1] :
				  0x620000 + ((r >> 14) % 4);
			if (how == 1 && e->addr != 0x620000 + ((r >> 14) % 4))
				depth[tr]--;
			if (how == 3) {
				e->addr = 0x400000;
				e->addr2 = 0;
				if (depth[tr])
					depth[tr]--;
			} else if (how == 0 && depth[tr] < 60) {
				stack[tr][depth[tr]] = 0;
				rets[tr][depth[tr]++] = 0;
			}
		} else if (with_enable && op == 92) {
			/* a jump to an entry: a tail call when it follows a block */
			e->kind = TK_EV_BLOCK;
			e->addr = 0x500000 + (1 + (r >> 12) % 6) * 0x100;
			e->count = 3;
			e->addr2 = e->addr + 8;
			if (after_block[tr] && depth[tr] < 60) {
				stack[tr][depth[tr]] = 0;
				rets[tr][depth[tr]] = depth[tr] ? rets[tr][depth[tr] - 1] : 0;
				depth[tr]++;
			}
		} else if (op < 91) {
			e->kind = TK_EV_GAP;
			e->flags = TK_GAP_OVERFLOW;
			depth[tr] = 0;
		} else {
			e->kind = TK_EV_BLOCK;
			e->addr = 0x700000 + ((r >> 12) % 16) * 8;
			e->count = 2;
			e->addr2 = e->addr + 4;
		}
		after_block[tr] = e->kind == TK_EV_BLOCK;
	}
	return n;
}

static void assert_same_profile(struct tk_prof *a, struct tk_prof *b)
{
	static const enum tk_out_kind kinds[] = { TK_OUT_FOLDED, TK_OUT_TEXT, TK_OUT_JSON, TK_OUT_CSV, TK_OUT_CALLTREE };
	for (int th = 0; th < 2; th++)
		for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
			char *x = render(a, kinds[k], th), *y = render(b, kinds[k], th);
			if (strcmp(x, y)) {
				fprintf(stderr, "kind %d threads %d differ:\n--- whole\n%.3000s\n--- merged\n%.3000s\n",
					kinds[k], th, x, y);
				fail();
			}
			free(x);
			free(y);
		}
	/* pprof lists the call paths in the order the profile made them: a merge makes them
	 * in the order the whole did (the runner sends some chunks' events to the total) */
	struct tk_buf x, y;
	struct tk_out_opts o = { .sz = sizeof o };
	assert_int_equal(tk_buf_init(&x, -1, 4096), 0);
	assert_int_equal(tk_buf_init(&y, -1, 4096), 0);
	assert_int_equal(tk_out_profile(&x, a, TK_OUT_PPROF, &o), 0);
	assert_int_equal(tk_out_profile(&y, b, TK_OUT_PPROF, &o), 0);
	assert_int_equal(x.len, y.len);
	assert_memory_equal(x.data, y.data, x.len);
	tk_buf_free(&x);
	tk_buf_free(&y);
	struct tk_prof_summary sa, sb;
	tk_prof_summary(a, &sa);
	tk_prof_summary(b, &sb);
	assert_memory_equal(&sa, &sb, sizeof sa);
}

/* EV cut anywhere into two or three chunks, the merged chunks' profile is WHOLE. */
static void assert_cuts_equal_whole(struct tk_prof *whole, const struct tk_prof_opts *po,
				    const struct tk_event *ev, size_t n)
{
	for (size_t cut = 1; cut < n; cut++)
		for (size_t cut2 = cut; cut2 < n; cut2++) {
			struct tk_prof *h1 = tk_prof_new(po, NULL), *h2 = tk_prof_new_like(h1, NULL);
			struct tk_prof *h3 = tk_prof_new_like(h1, NULL);
			assert_int_equal(tk_prof_events(h1, ev, cut), 0);
			assert_int_equal(tk_prof_events(h2, ev + cut, cut2 - cut), 0);
			assert_int_equal(tk_prof_events(h3, ev + cut2, n - cut2), 0);
			assert_int_equal(tk_prof_merge(h1, h2), 0);
			assert_int_equal(tk_prof_merge(h1, h3), 0);
			tk_prof_finish(h1);
			assert_same_profile(whole, h1);
			tk_prof_free(h1);
			tk_prof_free(h2);
			tk_prof_free(h3);
		}
}

/* The profile of EV[0..N) in one piece, finished, with its functions in *F (to free). */
static struct tk_prof *profile_of(const struct tk_prof_opts *po, const struct tk_event *ev, size_t n,
				  struct tk_prof_func **f, size_t *nf)
{
	struct tk_prof *p = tk_prof_new(po, NULL);
	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	assert_int_equal(tk_prof_funcs(p, 0, f, nf), 0);
	return p;
}

static void merge_equals_whole(int with_enable)
{
	enum { N = 6000 };
	static const uint64_t entries[] = { 0x500300, 0x500100, 0x500200, 0x500600, 0x500500, 0x500400, 0x500100 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 7 };
	const struct tk_prof_opts *opts = with_enable ? &po : NULL;
	struct tk_event *ev = malloc(N * sizeof *ev);
	for (uint64_t seed = 1; seed <= 4; seed++) {
		size_t n = random_stream(ev, N, seed, with_enable);
		struct tk_prof *whole = tk_prof_new(opts, NULL);
		assert_int_equal(tk_prof_events(whole, ev, n), 0);
		tk_prof_finish(whole);
		/* two halves at several points, and many small chunks */
		size_t cuts[] = { 1, n / 3, n / 2, n - 1 };
		for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
			struct tk_prof *h1 = tk_prof_new(opts, NULL), *h2 = tk_prof_new(opts, NULL);
			assert_int_equal(tk_prof_events(h1, ev, cuts[c]), 0);
			assert_int_equal(tk_prof_events(h2, ev + cuts[c], n - cuts[c]), 0);
			assert_int_equal(tk_prof_merge(h1, h2), 0);
			tk_prof_finish(h1);
			assert_same_profile(whole, h1);
			tk_prof_free(h1);
			tk_prof_free(h2);
		}
		struct tk_prof *acc = tk_prof_new(opts, NULL);
		size_t step = 137 + seed * 11;
		for (size_t i = 0; i < n; i += step) {
			struct tk_prof *ch = tk_prof_new(opts, NULL);
			size_t k = n - i < step ? n - i : step;
			assert_int_equal(tk_prof_events(ch, ev + i, k), 0);
			assert_int_equal(tk_prof_merge(acc, ch), 0);
			tk_prof_free(ch);
		}
		tk_prof_finish(acc);
		assert_same_profile(whole, acc);
		tk_prof_free(acc);
		tk_prof_free(whole);
	}
	free(ev);
}

/* P through tk_prof_save and tk_prof_load (like LIKE): the same profile, whose bytes
 * are the same again. */
static struct tk_prof *saved_and_loaded(const struct tk_prof *p, const struct tk_prof *like)
{
	uint8_t *a, *b;
	size_t na, nb;
	struct tk_partial_error e;
	assert_int_equal(tk_prof_save(p, &a, &na), 0);
	struct tk_prof *q = tk_prof_load(like, a, na, &e);
	if (!q)
		fprintf(stderr, "offset %llu: %s\n", (unsigned long long)e.offset, e.msg);
	assert_non_null(q);
	assert_int_equal(tk_prof_save(q, &b, &nb), 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	/* every shorter prefix is refused, with an offset inside it */
	for (size_t k = 0; k < na; k += 1 + k / 4) {
		assert_null(tk_prof_load(like, a, k, &e));
		assert_true(e.code < 0 && e.offset <= k);
	}
	free(a);
	free(b);
	return q;
}

/* Chunks saved as partial results and loaded again (another process's, as `profile
 * --shard` makes them) merge to exactly the whole, and say the same of their seams. */
static void saved_chunks_equal_whole(int with_enable)
{
	enum { N = 6000 };
	static const uint64_t entries[] = { 0x500300, 0x500100, 0x500200, 0x500600, 0x500500, 0x500400 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 6 };
	const struct tk_prof_opts *opts = with_enable ? &po : NULL;
	struct tk_event *ev = malloc(N * sizeof *ev);
	for (uint64_t seed = 1; seed <= 3; seed++) {
		size_t n = random_stream(ev, N, seed, with_enable), step = 211 + seed * 13;
		struct tk_prof *whole = tk_prof_new(opts, NULL), *acc = tk_prof_new(opts, NULL);
		assert_int_equal(tk_prof_events(whole, ev, n), 0);
		tk_prof_finish(whole);
		for (size_t i = 0; i < n; i += step) {
			struct tk_prof *ch = tk_prof_new_like(acc, NULL);
			size_t k = n - i < step ? n - i : step;
			assert_int_equal(tk_prof_events(ch, ev + i, k), 0);
			struct tk_prof *back = saved_and_loaded(ch, acc);
			assert_int_equal(tk_prof_seam_exact(acc, back), tk_prof_seam_exact(acc, ch));
			assert_int_equal(tk_prof_merge_take(acc, back), 0);
			tk_prof_free(back);
			tk_prof_free(ch);
		}
		/* the accumulated profile itself survives the trip, durations and all */
		struct tk_prof *acc2 = saved_and_loaded(acc, acc);
		tk_prof_finish(acc2);
		assert_same_profile(whole, acc2);
		tk_prof_free(acc2);
		tk_prof_free(acc);
		tk_prof_free(whole);
	}
	free(ev);
}

static void test_saved_chunks_equal_whole(void **state)
{
	(void)state;
	saved_chunks_equal_whole(0);
	saved_chunks_equal_whole(1);
}

/* A chunk whose return matched none of its calls but an open call of the chunks before:
 * its loaded copy still says the seam is not exact (the runner then decodes it again), and
 * a profile made with other function entries is refused. */
static void test_saved_seam_and_entries(void **state)
{
	(void)state;
	static const uint64_t entries[] = { 0x1000, 0x2000 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 2 };
	struct tk_event a[] = {
		{ .kind = TK_EV_CALL, .addr = 0x900, .addr2 = 0x1000, .arg = 0x909, .time = 1 },
		{ .kind = TK_EV_CALL, .addr = 0x1008, .addr2 = 0x2000, .arg = 0x100d, .time = 2 },
	};
	struct tk_event b[] = {
		{ .kind = TK_EV_CALL, .addr = 0x2008, .addr2 = 0x2000, .arg = 0x200d, .time = 3 },
		{ .kind = TK_EV_RETURN, .addr = 0x2010, .addr2 = 0x909, .time = 4 },  /* longjmp */
	};
	struct tk_prof *pa = tk_prof_new(&po, NULL), *pb = tk_prof_new_like(pa, NULL);
	assert_int_equal(tk_prof_events(pa, a, 2), 0);
	assert_int_equal(tk_prof_events(pb, b, 2), 0);
	assert_int_equal(tk_prof_seam_exact(pa, pb), 0);
	struct tk_prof *back = saved_and_loaded(pb, pa);
	assert_int_equal(tk_prof_seam_exact(pa, back), 0);
	tk_prof_free(back);

	struct tk_prof *other = tk_prof_new(NULL, NULL);
	uint8_t *bytes;
	size_t len;
	struct tk_partial_error e;
	assert_int_equal(tk_prof_save(pb, &bytes, &len), 0);
	assert_null(tk_prof_load(other, bytes, len, &e));
	assert_int_equal(e.code, -TK_E_BAD_FORMAT);
	assert_non_null(strstr(e.msg, "other function entries"));
	free(bytes);
	tk_prof_free(other);
	tk_prof_free(pa);
	tk_prof_free(pb);
}

static void test_merge_equals_whole(void **state)
{
	(void)state;
	merge_equals_whole(0);
}

/* Calls from untraced code (TK_EV_ENABLE at entries) and returns into it, chunked anywhere:
 * the merged chunks still give exactly the whole. */
static void test_merge_with_enables(void **state)
{
	(void)state;
	merge_equals_whole(1);
}

/* A program whose caller is not traced (libc calls main, a library calls back, dtors run
 * after main): the shape of a branch trace of one module. */
static size_t untraced_caller_stream(struct tk_event *ev)
{
	size_t n = 0;
	uint64_t t = 100;
#define EV(k, a, a2, c, r) ev[n++] = (struct tk_event){ .kind = k, .addr = a, .addr2 = a2, .count = c, .arg = r, .time = t += 10 }
	EV(TK_EV_ENABLE, 0x1000, 0, 0, 0);          /* _start */
	EV(TK_EV_BLOCK, 0x1000, 0x1008, 3, 0);
	EV(TK_EV_DISABLE, 0x1008, 0x7f0000, 0, 0);  /* calls libc (indirect: no call event) */
	EV(TK_EV_ENABLE, 0x2000, 0, 0, 0);          /* libc calls main */
	EV(TK_EV_BLOCK, 0x2000, 0x2010, 4, 0);
	EV(TK_EV_CALL, 0x2010, 0x5000, 0, 0x2015);  /* main -> plt stub */
	EV(TK_EV_BLOCK, 0x5000, 0x5000, 1, 0);
	EV(TK_EV_DISABLE, 0x5000, 0x7f1000, 0, 0);  /* the stub jumps into libc */
	EV(TK_EV_ENABLE, 0x4000, 0, 0, 0);          /* which calls back */
	EV(TK_EV_BLOCK, 0x4000, 0x4004, 2, 0);
	EV(TK_EV_RETURN, 0x4004, 0x7f1100, 0, 0);   /* back into libc */
	EV(TK_EV_DISABLE, 0x4004, 0x7f1100, 0, 0);
	EV(TK_EV_ENABLE, 0x2015, 0, 0, 0);          /* libc returns to main: ends the stub's call */
	EV(TK_EV_BLOCK, 0x2015, 0x2020, 3, 0);
	EV(TK_EV_RETURN, 0x2020, 0x7f0100, 0, 0);   /* main returns into libc */
	EV(TK_EV_DISABLE, 0x2020, 0x7f0100, 0, 0);
	EV(TK_EV_ENABLE, 0x3000, 0, 0, 0);          /* a destructor, called by exit */
	EV(TK_EV_BLOCK, 0x3000, 0x3004, 2, 0);
	EV(TK_EV_RETURN, 0x3004, 0, 0, 0);          /* target unknown */
	EV(TK_EV_ENABLE, 0x2017, 0, 0, 0);          /* not an entry, no frame returns there */
	EV(TK_EV_BLOCK, 0x2017, 0x2020, 1, 0);
#undef EV
	return n;
}

static void test_calls_from_untraced_code(void **state)
{
	(void)state;
	static const uint64_t entries[] = { 0x4000, 0x1000, 0x3000, 0x2000, 0x5000 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 5 };
	struct tk_event ev[64];
	size_t n = untraced_caller_stream(ev);
	struct tk_prof_func *f;
	size_t nf;
	struct tk_prof *p = profile_of(&po, ev, n, &f, &nf);
	const struct tk_prof_func *start = find_func(f, nf, 0x1000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *mainf = find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *cb = find_func(f, nf, 0x4000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *stub = find_func(f, nf, 0x5000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *dtor = find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR);
	assert_non_null(start);
	assert_non_null(mainf);
	assert_non_null(cb);
	assert_non_null(stub);
	assert_non_null(dtor);
	assert_int_equal(mainf->calls, 1);
	assert_int_equal(mainf->incl_insns, 4 + 1 + 2 + 3);
	assert_int_equal(mainf->excl_insns, 4 + 3);
	assert_int_equal(mainf->ndur, 1);
	assert_int_equal(mainf->dur_max, 250 - 140); /* ENABLE at t=140, RETURN at t=250 */
	assert_int_equal(stub->calls, 1);
	assert_int_equal(stub->incl_insns, 1 + 2);
	assert_int_equal(cb->calls, 1);
	assert_int_equal(cb->incl_insns, 2);
	assert_int_equal(dtor->calls, 1);
	assert_int_equal(dtor->incl_insns, 2);
	assert_int_equal(start->calls, 1);
	assert_int_equal(start->incl_insns, 3 + 10 + 2 + 1);
	free(f);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.calls, 5);
	assert_int_equal(s.returns, 4);
	assert_int_equal(s.open_at_end, 1);   /* _start never returns */
	assert_int_equal(s.orphans, 0);
	/* the call paths: the callback under the stub under main under _start */
	char *folded = render(p, TK_OUT_FOLDED, 0);
	assert_non_null(strstr(folded, "0x1000;0x2000;0x5000;0x4000 2\n"));
	assert_non_null(strstr(folded, "0x1000;0x3000 2\n"));
	free(folded);

	/* cut anywhere, the merged chunks equal the whole */
	for (size_t cut = 1; cut < n; cut++) {
		struct tk_prof *h1 = tk_prof_new(&po, NULL), *h2 = tk_prof_new_like(h1, NULL);
		assert_int_equal(tk_prof_events(h1, ev, cut), 0);
		assert_int_equal(tk_prof_events(h2, ev + cut, n - cut), 0);
		assert_int_equal(tk_prof_merge(h1, h2), 0);
		tk_prof_finish(h1);
		assert_same_profile(p, h1);
		tk_prof_free(h1);
		tk_prof_free(h2);
	}
	tk_prof_free(p);

	/* without entries, main is not known: its code runs in the unknown level */
	p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	assert_null(find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR));
	free(f);
	tk_prof_free(p);
}

/* Tail calls (-O2): a jump to a function entry (a block at an entry right after a block,
 * no call event) is a call, as callgrind counts it; the return of the function jumped to
 * ends the function that jumped too. Cut anywhere, merged chunks equal the whole. */
static size_t tail_call_stream(struct tk_event *ev)
{
	size_t n = 0;
	uint64_t t = 100;
#define EV(k, a, a2, c, r) ev[n++] = (struct tk_event){ .kind = k, .addr = a, .addr2 = a2, .count = c, .arg = r, .time = t += 10 }
	EV(TK_EV_BLOCK, 0x800, 0x804, 1, 0);        /* unknown code jumps to negate */
	EV(TK_EV_BLOCK, 0x4000, 0x4004, 2, 0);
	EV(TK_EV_RETURN, 0x4004, 0x850, 0, 0);      /* which returns for it: ends that level */
	EV(TK_EV_BLOCK, 0x850, 0x850, 1, 0);
	EV(TK_EV_CALL, 0x850, 0x1000, 0, 0x855);    /* -> main */
	EV(TK_EV_BLOCK, 0x1000, 0x1008, 3, 0);
	EV(TK_EV_CALL, 0x1008, 0x2000, 0, 0x100d);  /* main -> apply */
	EV(TK_EV_BLOCK, 0x2000, 0x2004, 2, 0);      /* apply: jmp twice */
	EV(TK_EV_BLOCK, 0x3000, 0x300c, 4, 0);
	EV(TK_EV_RETURN, 0x300c, 0x100d, 0, 0);     /* twice returns to main: apply ends too */
	EV(TK_EV_BLOCK, 0x100d, 0x1010, 2, 0);
	EV(TK_EV_CALL, 0x1010, 0x2000, 0, 0x1015);  /* main -> apply */
	EV(TK_EV_BLOCK, 0x2000, 0x2004, 2, 0);      /* jcc not taken */
	EV(TK_EV_BLOCK, 0x2008, 0x2008, 1, 0);      /* jmp negate */
	EV(TK_EV_TIME, 0, 0, 0, 0);                 /* not a transfer */
	EV(TK_EV_BLOCK, 0x4000, 0x4008, 3, 0);      /* negate: jmp twice */
	EV(TK_EV_BLOCK, 0x3000, 0x300c, 4, 0);
	EV(TK_EV_RETURN, 0x300c, 0x1015, 0, 0);     /* ends twice, negate and apply */
	EV(TK_EV_BLOCK, 0x1015, 0x1015, 1, 0);
	EV(TK_EV_RETURN, 0x1015, 0x855, 0, 0);
	EV(TK_EV_BLOCK, 0x855, 0x855, 1, 0);
#undef EV
	return n;
}

static void test_tail_calls(void **state)
{
	(void)state;
	static const uint64_t entries[] = { 0x1000, 0x2000, 0x3000, 0x4000 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 4 };
	struct tk_event ev[64];
	size_t n = tail_call_stream(ev);
	struct tk_prof_func *f;
	size_t nf;
	struct tk_prof *p = profile_of(&po, ev, n, &f, &nf);
	const struct tk_prof_func *mainf = find_func(f, nf, 0x1000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *apply = find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *twice = find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *negate = find_func(f, nf, 0x4000, TK_PROF_KEY_ADDR);
	assert_non_null(mainf);
	assert_non_null(apply);
	assert_non_null(twice);
	assert_non_null(negate);
	assert_int_equal(mainf->calls, 1);
	assert_int_equal(apply->calls, 2);
	assert_int_equal(twice->calls, 2);
	assert_int_equal(negate->calls, 2);
	assert_int_equal(apply->incl_insns, (2 + 4) + (2 + 1 + 3 + 4));
	assert_int_equal(apply->excl_insns, 2 + 2 + 1);
	assert_int_equal(twice->incl_insns, 8);
	assert_int_equal(negate->incl_insns, 2 + 3 + 4);
	assert_int_equal(negate->excl_insns, 2 + 3);
	assert_int_equal(mainf->incl_insns, 3 + 6 + 2 + 10 + 1);
	/* apply's second call: entered at t=220, ended by twice's return at t=280 */
	assert_int_equal(apply->dur_max, 280 - 220);
	free(f);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.calls, 7);
	assert_int_equal(s.returns, 7);
	assert_int_equal(s.open_at_end, 0);
	char *folded = render(p, TK_OUT_FOLDED, 0);
	assert_non_null(strstr(folded, "0x1000;0x2000;0x3000 4\n"));
	assert_non_null(strstr(folded, "0x1000;0x2000;0x4000 3\n"));
	assert_non_null(strstr(folded, "0x1000;0x2000;0x4000;0x3000 4\n"));
	free(folded);

	/* cut anywhere (into two or three chunks), the merged chunks equal the whole */
	assert_cuts_equal_whole(p, &po, ev, n);
	tk_prof_free(p);

	/* without entries there are no tail calls: twice and negate are never called */
	p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	assert_int_equal(tk_prof_funcs(p, 0, &f, &nf), 0);
	assert_null(find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR));
	assert_null(find_func(f, nf, 0x4000, TK_PROF_KEY_ADDR));
	free(f);
	tk_prof_free(p);
}

/* A tail call into untraced code (operator delete jumping to its PLT stub, the stub into
 * libstdc++): tracing resumes at the return address of the call that the tail calls hang
 * off. Cut where the tail calls are made at a chunk's unknown level, the enable must still
 * end them and the call they belong to, as in the whole (found in libLLVM's profile, whose
 * result changed with the chunk size by 5 instructions). */
static size_t tail_out_stream(struct tk_event *ev)
{
	size_t n = 0;
	uint64_t t = 100;
#define EV(k, a, a2, c, r) ev[n++] = (struct tk_event){ .kind = k, .addr = a, .addr2 = a2, .count = c, .arg = r, .time = t += 10 }
	EV(TK_EV_CALL, 0x850, 0x1000, 0, 0x855);    /* -> erase */
	EV(TK_EV_BLOCK, 0x1000, 0x1008, 3, 0);
	EV(TK_EV_CALL, 0x1008, 0x2000, 0, 0x100d);  /* erase -> delete_value */
	EV(TK_EV_BLOCK, 0x2000, 0x2004, 2, 0);
	EV(TK_EV_BLOCK, 0x2008, 0x200c, 2, 0);
	EV(TK_EV_BLOCK, 0x3000, 0x3004, 2, 0);      /* jmp operator delete */
	EV(TK_EV_BLOCK, 0x5000, 0x5000, 1, 0);      /* jmp its PLT stub */
	EV(TK_EV_DISABLE, 0x5000, 0x7f0000, 0, 0);  /* into untraced code */
	EV(TK_EV_ENABLE, 0x100d, 0, 0, 0);          /* which returns to erase */
	EV(TK_EV_BLOCK, 0x100d, 0x1010, 5, 0);
	EV(TK_EV_RETURN, 0x1010, 0x855, 0, 0);
	EV(TK_EV_BLOCK, 0x855, 0x855, 1, 0);
#undef EV
	return n;
}

/* The same tail call making a syscall instead: tracing stops at it and resumes right
 * after it, in the same function; the tail call goes on (until its return). */
static size_t tail_syscall_stream(struct tk_event *ev)
{
	size_t n = 0;
	uint64_t t = 100;
#define EV(k, a, a2, c, r) ev[n++] = (struct tk_event){ .kind = k, .addr = a, .addr2 = a2, .count = c, .arg = r, .time = t += 10 }
	EV(TK_EV_CALL, 0x850, 0x1000, 0, 0x855);    /* -> erase */
	EV(TK_EV_BLOCK, 0x1000, 0x1008, 3, 0);
	EV(TK_EV_CALL, 0x1008, 0x2000, 0, 0x100d);  /* erase -> delete_value */
	EV(TK_EV_BLOCK, 0x2000, 0x2004, 2, 0);
	EV(TK_EV_BLOCK, 0x3000, 0x3008, 3, 0);      /* jmp free; syscall at 0x3008 */
	EV(TK_EV_DISABLE, 0x3008, 0, 0, 0);
	EV(TK_EV_ENABLE, 0x300a, 0, 0, 0);          /* back after the syscall */
	EV(TK_EV_BLOCK, 0x300a, 0x300c, 2, 0);
	EV(TK_EV_RETURN, 0x300c, 0x100d, 0, 0);     /* free returns for delete_value */
	EV(TK_EV_BLOCK, 0x100d, 0x1010, 5, 0);
	EV(TK_EV_RETURN, 0x1010, 0x855, 0, 0);
	EV(TK_EV_BLOCK, 0x855, 0x855, 1, 0);
#undef EV
	return n;
}

static void test_tail_call_out_of_trace(void **state)
{
	(void)state;
	static const uint64_t entries[] = { 0x1000, 0x2000, 0x3000, 0x5000 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 4 };
	struct tk_event ev[32];
	size_t n = tail_out_stream(ev);
	struct tk_prof_func *f;
	size_t nf;
	struct tk_prof *p = profile_of(&po, ev, n, &f, &nf);
	const struct tk_prof_func *erase = find_func(f, nf, 0x1000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *dv = find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *del = find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *plt = find_func(f, nf, 0x5000, TK_PROF_KEY_ADDR);
	assert_non_null(erase);
	assert_non_null(dv);
	assert_non_null(del);
	assert_non_null(plt);
	assert_int_equal(erase->incl_insns, 3 + 2 + 2 + 2 + 1 + 5);
	assert_int_equal(erase->excl_insns, 3 + 5);
	assert_int_equal(dv->incl_insns, 2 + 2 + 2 + 1);
	assert_int_equal(del->incl_insns, 2 + 1);
	assert_int_equal(plt->incl_insns, 1);
	free(f);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.open_at_end, 0);
	assert_cuts_equal_whole(p, &po, ev, n);
	tk_prof_free(p);

	n = tail_syscall_stream(ev);
	p = profile_of(&po, ev, n, &f, &nf);
	del = find_func(f, nf, 0x3000, TK_PROF_KEY_ADDR);
	assert_non_null(del);
	assert_int_equal(del->incl_insns, 3 + 2);
	free(f);

	assert_cuts_equal_whole(p, &po, ev, n);
	tk_prof_free(p);
}

/* longjmp: main calls deep, which recurses twice and calls longjmp's PLT stub; untraced
 * code unwinds them all and tracing resumes in main, at no return address (setjmp's call
 * returned long ago). The frames end there, main's code after it is main's, and every way
 * of cutting the stream gives the same profile. A resume in a function with no frame (the
 * one the trace began in) ends the whole stack. */
static void test_longjmp_unwinds(void **state)
{
	(void)state;
	static const uint64_t entries[] = { 0x1000, 0x2000, 0x5000 };
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 3 };
	struct tk_event ev[32];
	size_t n = 0;
	uint64_t t = 100;
#define EV(k, a, a2, c, r) ev[n++] = (struct tk_event){ .kind = k, .addr = a, .addr2 = a2, .count = c, .arg = r, .time = t += 10 }
	EV(TK_EV_BLOCK, 0x900, 0x904, 2, 0);        /* the code the trace began in */
	EV(TK_EV_CALL, 0x904, 0x1000, 0, 0x909);    /* -> main */
	EV(TK_EV_BLOCK, 0x1000, 0x1008, 3, 0);
	EV(TK_EV_CALL, 0x1008, 0x2000, 0, 0x100d);  /* main -> deep */
	EV(TK_EV_BLOCK, 0x2000, 0x2008, 2, 0);
	EV(TK_EV_CALL, 0x2008, 0x2000, 0, 0x200d);  /* deep -> deep */
	EV(TK_EV_BLOCK, 0x2000, 0x2008, 2, 0);
	EV(TK_EV_CALL, 0x2008, 0x5000, 0, 0x200d);  /* deep -> longjmp@plt */
	EV(TK_EV_BLOCK, 0x5000, 0x5000, 1, 0);
	EV(TK_EV_DISABLE, 0x5000, 0x7f0000, 0, 0);  /* into untraced longjmp */
	EV(TK_EV_ENABLE, 0x1020, 0, 0, 0);          /* back in main, after setjmp */
	EV(TK_EV_BLOCK, 0x1020, 0x1030, 7, 0);
	EV(TK_EV_RETURN, 0x1030, 0x909, 0, 0);
	EV(TK_EV_BLOCK, 0x909, 0x910, 4, 0);
	EV(TK_EV_DISABLE, 0x910, 0x7f0000, 0, 0);   /* longjmp from below the stack */
	EV(TK_EV_CALL, 0x904, 0x1000, 0, 0x909);
	EV(TK_EV_CALL, 0x1008, 0x2000, 0, 0x100d);
	EV(TK_EV_DISABLE, 0x2008, 0x7f0000, 0, 0);
	EV(TK_EV_ENABLE, 0x950, 0, 0, 0);
	EV(TK_EV_BLOCK, 0x950, 0x954, 2, 0);
#undef EV
	struct tk_prof_func *f;
	size_t nf;
	struct tk_prof *p = profile_of(&po, ev, n, &f, &nf);
	const struct tk_prof_func *m = find_func(f, nf, 0x1000, TK_PROF_KEY_ADDR);
	const struct tk_prof_func *d = find_func(f, nf, 0x2000, TK_PROF_KEY_ADDR);
	assert_non_null(m);
	assert_non_null(d);
	assert_int_equal(m->excl_insns, 3 + 7);
	assert_int_equal(m->incl_insns, 3 + 2 + 2 + 1 + 7);
	assert_int_equal(d->excl_insns, 2 + 2);
	free(f);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.unwound, 3 + 2);
	assert_int_equal(s.open_at_end, 0);
	assert_cuts_equal_whole(p, &po, ev, n);
	tk_prof_free(p);
}

/* Orphans at the start; a gap drops the stack and counts it. */
static void test_orphans_and_gaps(void **state)
{
	(void)state;
	struct tk_event ev[] = {
		ev_fn(TK_EV_FUNC_EXIT, 5, 10, 0),   /* began before the trace */
		ev_fn(TK_EV_FUNC_ENTER, 6, 20, 0),
		ev_fn(TK_EV_FUNC_ENTER, 7, 30, 0),
		{ .kind = TK_EV_GAP, .time = 40, .flags = TK_GAP_OVERFLOW },
		ev_fn(TK_EV_FUNC_EXIT, 7, 50, 0),   /* stack unknown after the gap */
		ev_fn(TK_EV_FUNC_ENTER, 8, 60, 0),
	};
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, sizeof ev / sizeof ev[0]), 0);
	tk_prof_finish(p);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.orphans, 2);
	assert_int_equal(s.truncated, 2);
	assert_int_equal(s.gaps, 1);
	assert_int_equal(s.open_at_end, 1);
	assert_int_equal(s.returns, 0);
	assert_int_equal(tk_prof_merge(p, p), -TK_E_INVAL);
	tk_prof_free(p);
}

/* Durations past 32 bits are kept exactly (and in order through a merge). */
/* Durations of 0 ticks, over 2^32 and over 2^40 keep their values through merges, and
 * through a partial result merged into a decoded profile (runs beside a log). */
static void test_long_durations(void **state)
{
	(void)state;
	const uint64_t big = 5000000000ULL, huge = 1ULL << 40;
	struct tk_event ev[] = {
		ev_fn(TK_EV_FUNC_ENTER, 9, 0, 0), ev_fn(TK_EV_FUNC_EXIT, 9, 10, 0),
		ev_fn(TK_EV_FUNC_ENTER, 9, 100, 0), ev_fn(TK_EV_FUNC_EXIT, 9, 100 + big, 0),
		ev_fn(TK_EV_FUNC_ENTER, 9, 200 + big, 0), ev_fn(TK_EV_FUNC_EXIT, 9, 200 + big + huge, 0),
		ev_fn(TK_EV_FUNC_ENTER, 9, 300 + big + huge, 0), ev_fn(TK_EV_FUNC_EXIT, 9, 300 + big + huge, 0),
	};
	for (int saved = 0; saved < 2; saved++)
		for (size_t cut = 0; cut <= 8; cut++) {
			struct tk_prof *a = tk_prof_new(NULL, NULL), *b = tk_prof_new(NULL, NULL);
			assert_int_equal(tk_prof_events(a, ev, cut), 0);
			assert_int_equal(tk_prof_events(b, ev + cut, 8 - cut), 0);
			if (saved) {
				struct tk_prof *back = saved_and_loaded(b, a);
				tk_prof_free(b);
				b = back;
			}
			assert_int_equal(tk_prof_merge(a, b), 0);
			tk_prof_finish(a);
			struct tk_prof_func *f;
			size_t nf;
			assert_int_equal(tk_prof_funcs(a, 0, &f, &nf), 0);
			const struct tk_prof_func *r = find_func(f, nf, 9, TK_PROF_KEY_ID);
			assert_non_null(r);
			assert_int_equal(r->ndur, 4);
			assert_int_equal(r->dur_min, 0);
			assert_int_equal(r->dur_median, big);
			assert_int_equal(r->dur_p90, huge);
			assert_int_equal(r->dur_max, huge);
			assert_int_equal(r->dur_sum, 10 + big + huge);
			free(f);
			tk_prof_free(a);
			tk_prof_free(b);
		}
}

/* A profile counting its durations as calls end (prof_count_durations: a shard's chunks)
 * saves the same bytes as one logging them (durations of 2^32 ticks and more, chunks
 * made like it, a reset included), and finishes to the same statistics. */
static void test_counted_durations(void **state)
{
	(void)state;
	enum { N = 6000 };
	struct tk_event *ev = malloc((N + 8) * sizeof *ev);
	const uint64_t big = 5000000000ULL, huge = 1ULL << 40;
	for (uint64_t seed = 1; seed <= 3; seed++) {
		size_t n = random_stream(ev, N, seed, 0);
		uint64_t t = 1ULL << 20;
		for (size_t i = 0; i < n; i++)
			t = ev[i].time > t ? ev[i].time : t;
		const uint64_t d[4] = { 10, big, huge, big };
		for (size_t k = 0; k < 4; k++) {   /* on a fourth track */
			ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 9, t, 3);
			ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 9, t += d[k], 3);
		}
		struct tk_prof *logged = tk_prof_new(NULL, NULL), *like = tk_prof_new(NULL, NULL);
		prof_count_durations(like);
		struct tk_prof *counted = tk_prof_new_like(like, NULL);
		assert_int_equal(tk_prof_events(counted, ev, n / 2), 0);   /* then forgotten */
		assert_int_equal(tk_prof_reset(counted), 0);
		assert_int_equal(tk_prof_events(logged, ev, n), 0);
		assert_int_equal(tk_prof_events(counted, ev, n), 0);
		uint8_t *a, *b;
		size_t na, nb;
		assert_int_equal(tk_prof_save(logged, &a, &na), 0);
		assert_int_equal(tk_prof_save(counted, &b, &nb), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
		free(a);
		free(b);
		tk_prof_finish(logged);
		tk_prof_finish(counted);
		assert_same_profile(logged, counted);
		/* two counting halves merged: the second's values added to the first's as they
		 * are (the same value twice), and the statistics still those of the whole */
		struct tk_prof *h1 = tk_prof_new_like(like, NULL), *h2 = tk_prof_new_like(like, NULL);
		struct tk_prof *l1 = tk_prof_new(NULL, NULL), *l2 = tk_prof_new(NULL, NULL);
		assert_int_equal(tk_prof_events(h1, ev, n / 3), 0);
		assert_int_equal(tk_prof_events(h2, ev + n / 3, n - n / 3), 0);
		assert_int_equal(tk_prof_merge(h1, h2), 0);
		assert_int_equal(tk_prof_events(l1, ev, n / 3), 0);
		assert_int_equal(tk_prof_events(l2, ev + n / 3, n - n / 3), 0);
		assert_int_equal(tk_prof_merge(l1, l2), 0);
		assert_int_equal(tk_prof_save(l1, &a, &na), 0);
		assert_int_equal(tk_prof_save(h1, &b, &nb), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
		free(a);
		free(b);
		tk_prof_finish(h1);
		assert_same_profile(logged, h1);
		tk_prof_free(h1);
		tk_prof_free(h2);
		tk_prof_free(l1);
		tk_prof_free(l2);
		tk_prof_free(logged);
		tk_prof_free(counted);
		tk_prof_free(like);
	}
	free(ev);
}

/* A stack 200,000 calls deep with resumes at addresses no frame holds, then a resume and a
 * return deep into it: each ends exactly the frames above its target (the return-address
 * set must stay exact through its rebuilds). */
static void test_deep_stack(void **state)
{
	(void)state;
	enum { DEPTH = 200000 };
	struct tk_event *ev = calloc(2 * DEPTH + 2, sizeof *ev);
	assert_non_null(ev);
	size_t n = 0;
	for (uint64_t i = 0; i < DEPTH; i++) {
		ev[n++] = (struct tk_event){ .kind = TK_EV_CALL, .addr = 0x400000 + i * 8,
					     .addr2 = 0x1000 + (i % 1000) * 16, .arg = 0x900000 + i * 4,
					     .time = TK_TIME_NONE };
		ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .addr = 0x5000000 + i,
					     .time = TK_TIME_NONE };
	}
	/* resume at the return address of frame 150,000: frames 150,000.. end */
	ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .addr = 0x900000 + 150000 * 4,
				     .time = TK_TIME_NONE };
	/* return to frame 100's return address: frames 100..149,999 end */
	ev[n++] = (struct tk_event){ .kind = TK_EV_RETURN, .addr = 0x2000, .addr2 = 0x900000 + 100 * 4,
				     .time = TK_TIME_NONE };
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	struct tk_prof_summary s;
	tk_prof_summary(p, &s);
	assert_int_equal(s.calls, DEPTH);
	assert_int_equal(s.returns, DEPTH - 100);
	assert_int_equal(s.open_at_end, 100);
	assert_int_equal(s.orphans, 0);
	tk_prof_free(p);
	free(ev);
}

/* 300,000 distinct call paths walked twice: the node table grows ten times during the
 * first walk (its slots moved without the nodes), and the second walk finds every path
 * (no node made twice, every one called twice). */
static void test_many_paths(void **state)
{
	(void)state;
	enum { PATHS = 150000 };
	struct tk_event *ev = calloc(8 * PATHS, sizeof *ev);
	assert_non_null(ev);
	size_t n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < PATHS; i++) {
			/* f(i) calls g(i % 97): two new paths each */
			ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 0x1000 + i, TK_TIME_NONE, 1);
			ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 0x100 + i % 97, TK_TIME_NONE, 1);
			ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 0x100 + i % 97, TK_TIME_NONE, 1);
			ev[n++] = ev_fn(TK_EV_FUNC_EXIT, 0x1000 + i, TK_TIME_NONE, 1);
		}
	/* with threads, a helper prepares the memory the nodes and the table grow into: the
	 * same nodes and links, and a table that finds each node (it may be smaller: it fills
	 * on to 3/4 while the helper still makes the next one); r copies every table of 1024
	 * slots or more on two threads (rehash_copy's parts and the entries left between) */
	struct tk_prof_opts o = { .sz = sizeof o, .nthreads = 2 };
	struct tk_prof *p = tk_prof_new(NULL, NULL), *q = tk_prof_new(&o, NULL),
		       *r = tk_prof_new(&o, NULL);
	assert_non_null(p);
	assert_non_null(q);
	assert_non_null(r);
	r->rehash_split = 1024;
	assert_int_equal(tk_prof_events(p, ev, n / 2), 0);
	assert_int_equal(tk_prof_events(q, ev, n / 2), 0);
	assert_int_equal(tk_prof_events(r, ev, n / 2), 0);
	size_t made = p->nnodes;
	assert_true(made >= 2 * PATHS);
	assert_int_equal(tk_prof_events(p, ev + n / 2, n / 2), 0);
	assert_int_equal(tk_prof_events(q, ev + n / 2, n / 2), 0);
	assert_int_equal(tk_prof_events(r, ev + n / 2, n / 2), 0);
	assert_int_equal(p->nnodes, made);
	size_t called = 0;
	for (size_t i = 0; i < p->nnodes; i++)
		if (p->nodes[i].kind == TK_PROF_KEY_ID) {
			assert_int_equal(p->nodes[i].calls, 2);
			called++;
		}
	assert_int_equal(called, 2 * PATHS);
	assert_null(p->ahead);
	for (int k = 0; k < 2; k++) {
		struct tk_prof *t = k ? r : q;
		assert_non_null(t->ahead);
		assert_int_equal(t->nnodes, made);
		assert_true(t->node_mask <= p->node_mask);
		assert_true(4 * t->nnodes <= 3 * (t->node_mask + 1));
		assert_memory_equal(t->nodes, p->nodes, made * sizeof *p->nodes);
		for (size_t i = 0; i < made; i++) {
			assert_int_equal(t->links[i].first_child, p->links[i].first_child);
			assert_int_equal(t->links[i].next_sibling, p->links[i].next_sibling);
		}
		size_t in_map = 0;
		for (size_t s = 0; s <= t->node_mask; s++)
			in_map += t->node_map[s].tag != 0;
		assert_int_equal(in_map, made);
		for (size_t i = 0; i < made; i++) {
			const struct node *nd = &t->nodes[i];
			if (nd->parent != NONE32)
				assert_int_equal(get_child(t, nd->parent, nd->key, nd->kind, nd->track), i);
		}
		assert_int_equal(t->nnodes, made);   /* no lookup made a node */
	}
	tk_prof_free(p);
	tk_prof_free(q);
	tk_prof_free(r);
	free(ev);
}

/* Each function's and each track's unknown levels' costs as a walk in node order sums
 * them (the reference of test_funcs_split): WANT[0, nfuncs) then WANT[nfuncs + track
 * index]. A node whose function is on an ancestor adds no inclusive cost; an unknown
 * level's row is named by its track's hint when all agree. Returns such nodes. */
static size_t expect_rows(const struct tk_prof *p, struct tk_prof_func *want)
{
	size_t rec_nodes = 0;
	uint8_t *mixed = calloc(p->ntracks + 1, 1);
	assert_non_null(mixed);
	for (size_t i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		size_t r = n->func, t = 0;
		if (n->kind == KIND_TRACK)
			continue;
		if (n->func == NONE32) {
			while (p->tracks[t].id != n->track)
				t++;
			r = p->nfuncs + t;
		}
		int rec = 0;
		for (uint32_t a = n->parent; a != NONE32 && n->func != NONE32; a = p->nodes[a].parent)
			rec |= p->nodes[a].func == n->func;
		rec_nodes += (size_t)rec;
		want[r].calls += n->calls;
		want[r].excl_ticks += n->excl_ticks;
		want[r].excl_insns += n->excl_insns;
		want[r].incl_ticks += rec ? 0 : n->incl_ticks;
		want[r].incl_insns += rec ? 0 : n->incl_insns;
		uint64_t hint = p->links[i].hint;
		if (n->func == NONE32 && hint && !mixed[t]) {
			mixed[t] = want[r].key && want[r].key != hint;
			want[r].key = mixed[t] ? 0 : hint;
		}
	}
	free(mixed);
	return rec_nodes;
}

/* A random walk over 8 functions on one track below the calls 1, 2, 1, 3 (never
 * returned from): the tree is a chain at the top, so the subtrees that walkers hand over
 * lie below functions that recur in them. */
static size_t chain_walk(struct tk_event *ev, size_t max)
{
	static const uint64_t top[] = { 1, 2, 1, 3 };
	uint64_t x = 36, t = 0, stack[48];
	size_t n = 0;
	int d = 0;
	for (; d < 4; d++)
		ev[n++] = ev_fn(TK_EV_FUNC_ENTER, stack[d] = top[d], t += 3, 9);
	while (n + 48 < max) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned r = (unsigned)(x >> 33);
		if (d < 48 && (d == 4 || r % 8 < 4)) {
			stack[d] = 1 + (r >> 3) % 8;
			ev[n++] = ev_fn(TK_EV_FUNC_ENTER, stack[d++], t += 1 + (r >> 6) % 8, 9);
		} else {
			ev[n++] = ev_fn(TK_EV_FUNC_EXIT, stack[--d], t += 1 + (r >> 6) % 8, 9);
		}
	}
	while (d)
		ev[n++] = ev_fn(TK_EV_FUNC_EXIT, stack[--d], t += 2, 9);
	return n;
}

/* P's per-function table from 1, 2 and 3 threads: the reference's rows, and the same
 * rows from every split. HAND: the walkers must have handed subtrees over (it depends on
 * timing: tried again until they did). */
static void check_funcs(struct tk_prof *p, int hand)
{
	struct tk_prof_func *one, *f;
	struct tk_prof_func *want = calloc(p->nfuncs + p->ntracks, sizeof *want);
	size_t none, nf, named = 0;
	assert_non_null(want);
	assert_true(p->nnodes >= (size_t)1 << 16);   /* walked on threads (WALK_MIN) */
	assert_true(expect_rows(p, want) > 0);       /* recursion */
	p->opts.nthreads = 1;
	size_t handed = prof_walk_handed();
	assert_int_equal(tk_prof_funcs(p, 1, &one, &none), 0);
	assert_int_equal(prof_walk_handed(), handed);
	for (size_t i = 0; i < none; i++) {
		size_t r = 0;
		if (one[i].kind == TK_PROF_KEY_UNKNOWN) {
			while (p->tracks[r].id != one[i].track)
				r++;
			r += p->nfuncs;
			assert_int_equal(one[i].key, want[r].key);
			named += one[i].key != 0;
		} else {
			while (p->funcs[r].key != one[i].key || p->funcs[r].kind != one[i].kind ||
			       p->funcs[r].track != one[i].track)
				r++;
		}
		assert_int_equal(one[i].calls, want[r].calls);
		assert_int_equal(one[i].incl_ticks, want[r].incl_ticks);
		assert_int_equal(one[i].excl_ticks, want[r].excl_ticks);
		assert_int_equal(one[i].incl_insns, want[r].incl_insns);
		assert_int_equal(one[i].excl_insns, want[r].excl_insns);
	}
	free(want);
	assert_true(named > 0 || hand);   /* random_stream's: a hint names a level */
	for (unsigned threads = 2; threads <= 3; threads++) {
		p->opts.nthreads = threads;
		for (int tries = 0; tries < (hand ? 50 : 1); tries++) {
			handed = prof_walk_handed();
			assert_int_equal(tk_prof_funcs(p, 1, &f, &nf), 0);
			assert_int_equal(nf, none);
			assert_memory_equal(f, one, nf * sizeof *f);
			free(f);
			if (prof_walk_handed() > handed)
				break;
		}
		assert_true(prof_walk_handed() > handed || !hand);
	}
	free(one);
}

/* check_funcs on the profile of EV[0, N), which has NTRACKS tracks. */
static void funcs_of_events(const struct tk_event *ev, size_t n, size_t ntracks, int hand)
{
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	assert_int_equal(tk_prof_finish(p), 0);
	assert_int_equal(p->ntracks, ntracks);
	check_funcs(p, hand);
	tk_prof_free(p);
}

/* The per-function table of profiles of more nodes than one thread walks: 4 tracks
 * (walkers take a tree each, the unknown levels' names from several), and one track with
 * recursion across the subtrees handed over (their roots' ancestors are on the path). */
static void test_funcs_split(void **state)
{
	(void)state;
	enum { EVENTS = 3000000 };
	struct tk_event *ev = calloc(EVENTS, sizeof *ev);
	assert_non_null(ev);
	size_t n = random_stream(ev, EVENTS - 2, 36, 1);
	/* a fourth track whose unknown level ran in one function: named by it */
	ev[n++] = (struct tk_event){ .kind = TK_EV_BLOCK, .addr = 0x7000, .addr2 = 0x7004, .count = 2,
				     .time = 10, .track = 7 };
	ev[n++] = ev_fn(TK_EV_FUNC_ENTER, 1, 20, 7);
	funcs_of_events(ev, n, 4, 0);
	n = chain_walk(ev, 600000);
	funcs_of_events(ev, n, 1, 1);
	free(ev);
}

static int cmp_block(const void *a, const void *b)
{
	const struct tk_prof_block *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static void sorted_blocks(const struct tk_prof *p, struct tk_prof_block **v, size_t *n)
{
	assert_int_equal(tk_prof_blocks(p, v, n), 0);
	qsort(*v, *n, sizeof **v, cmp_block);
}

/* Block counts added in batches (tk_prof_add_blocks) give the table and the summary that
 * adding them one at a time gives: 100,000 blocks (the table grows past 2 MiB, into a
 * mapping of its own), in random order, each several times, also twice in one batch; and
 * again after a reset, which keeps that mapping. */
static void test_add_blocks_batched(void **state)
{
	(void)state;
	enum { DISTINCT = 100000, COUNTS = 300000 };
	struct tk_prof_opts o = { .sz = sizeof o };
	struct tk_prof_block_count *v = malloc(COUNTS * sizeof *v);
	uint64_t x = 88172645463325252ULL;
	assert_non_null(v);
	for (size_t i = 0; i < COUNTS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t b = i < DISTINCT ? i : x % DISTINCT, start = 0x400000 + b * 64;
		v[i] = (struct tk_prof_block_count){ start, start + 4 + b % 40, 1 + x % 5, 0 };
		v[i].insns = v[i].execs * (1 + b % 9);
	}
	for (size_t i = 1; i < COUNTS; i++) {   /* shuffled */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t j = x % (i + 1);
		struct tk_prof_block_count t = v[i];
		v[i] = v[j], v[j] = t;
	}
	v[1] = v[0];   /* one block twice in the first batch */
	int err;
	struct tk_prof *one = tk_prof_new(&o, &err), *batched = tk_prof_new(&o, &err);
	assert_non_null(one);
	assert_non_null(batched);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < COUNTS; i++)
			assert_int_equal(tk_prof_add_block(one, v[i].start, v[i].last, v[i].execs,
							   v[i].insns), 0);
		for (size_t i = 0, k = 0; i < COUNTS; i += k, k = (k * 7 + 3) % 1000)
			assert_int_equal(tk_prof_add_blocks(batched, v + i, i + k > COUNTS ? COUNTS - i : k), 0);
		struct tk_prof_block *a, *b;
		size_t na, nb;
		sorted_blocks(one, &a, &na);
		sorted_blocks(batched, &b, &nb);
		assert_int_equal(na, DISTINCT);
		assert_int_equal(nb, DISTINCT);
		assert_memory_equal(a, b, na * sizeof *a);
		assert_int_equal(one->sum.blocks, batched->sum.blocks);
		assert_int_equal(one->sum.events, batched->sum.events);
		assert_true(batched->cblocks * sizeof *batched->blocks > ((size_t)2 << 20));
		free(a);
		free(b);
		assert_int_equal(tk_prof_reset(one), 0);
		assert_int_equal(tk_prof_reset(batched), 0);
	}
	tk_prof_free(one);
	tk_prof_free(batched);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_counts),
		cmocka_unit_test(test_recursion),
		cmocka_unit_test(test_instructions),
		cmocka_unit_test(test_orphans_and_gaps),
		cmocka_unit_test(test_merge_equals_whole),
		cmocka_unit_test(test_saved_chunks_equal_whole),
		cmocka_unit_test(test_saved_seam_and_entries),
		cmocka_unit_test(test_merge_with_enables),
		cmocka_unit_test(test_calls_from_untraced_code),
		cmocka_unit_test(test_tail_calls),
		cmocka_unit_test(test_tail_call_out_of_trace),
		cmocka_unit_test(test_longjmp_unwinds),
		cmocka_unit_test(test_long_durations),
		cmocka_unit_test(test_counted_durations),
		cmocka_unit_test(test_deep_stack),
		cmocka_unit_test(test_many_paths),
		cmocka_unit_test(test_funcs_split),
		cmocka_unit_test(test_add_blocks_batched),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
