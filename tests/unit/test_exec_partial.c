/* Execution statistics as partial results (tk_partial_exec_save / tk_partial_exec_load):
 * the statistics of some streams, saved in one process and added in another, finish to
 * exactly what one process that decoded every stream finishes to; the bytes are the same
 * again after a load; a cut or damaged partial is refused with an offset and adds nothing;
 * the code of two images (processes) is counted apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/image.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/partial.h"

static const char *const traces[] = { "basic.pt", "interrupt.pt", "events.pt", "syscall.pt" };
#define NTRACES (sizeof traces / sizeof traces[0])

static uint8_t *slurp(const char *name, size_t *n)
{
	char path[4096];
	const char *src = getenv("SRC");
	FILE *f;

	snprintf(path, sizeof path, "%s/tests/data/flow/%s", src ? src : ".", name);
	assert_non_null(f = fopen(path, "rb"));
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	rewind(f);
	uint8_t *p = malloc(*n ? *n : 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, *n, f), *n);
	fclose(f);
	return p;
}

static struct tk_image *code(void)
{
	char path[4096];
	const char *src = getenv("SRC");
	struct tk_image *img = tk_image_new(NULL);

	assert_non_null(img);
	snprintf(path, sizeof path, "%s/tests/data/flow/code.bin", src ? src : ".");
	assert_int_equal(tk_image_add_raw(img, path, 0x1000), 0);
	return img;
}

/* Traces [FIRST, END) into X, chunked small so that blocks are counted in several walkers. */
static void add(struct tk_ipt_exec *x, const struct tk_image *img, size_t first, size_t end)
{
	struct tk_ipt_flow_opts fo = { .sz = sizeof fo, .image = img, .nthreads = 2,
				       .chunk_bytes = 64 };

	for (size_t i = first; i < end; i++) {
		size_t n;
		uint8_t *p = slurp(traces[i], &n);
		assert_true(tk_ipt_exec_add(x, p, n, &fo, NULL) >= 0);
		free(p);
	}
}

static struct tk_ipt_exec *saved_and_loaded(const struct tk_ipt_exec *x, const struct tk_image *img,
					    struct tk_ipt_exec *into)
{
	uint8_t *a, *b;
	size_t na, nb;
	struct tk_partial_error e;
	struct tk_ipt_exec *again = tk_ipt_exec_new(img, NULL);

	assert_int_equal(tk_partial_exec_save(x, &a, &na), 0);
	assert_int_equal(tk_partial_exec_load(into, a, na, &e), 0);
	assert_int_equal(tk_partial_exec_load(again, a, na, &e), 0);
	assert_int_equal(tk_partial_exec_save(again, &b, &nb), 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	/* every shorter prefix is refused, with an offset inside it, and adds nothing */
	for (size_t k = 0; k < na; k += 1 + k / 8) {
		struct tk_ipt_exec *none = tk_ipt_exec_new(img, NULL);
		assert_true(tk_partial_exec_load(none, a, k, &e) < 0);
		assert_true(e.code < 0 && e.offset <= k);
		assert_int_equal(tk_ipt_exec_nblocks(none), 0);
		assert_int_equal(tk_ipt_exec_counts(none)->flow.insns, 0);
		tk_ipt_exec_free(none);
	}
	free(a);
	free(b);
	return again;
}

/* Two processes' parts (split after each trace in turn) merge to the whole. */
static void test_parts_equal_whole(void **state)
{
	(void)state;
	struct tk_image *img = code();
	struct tk_ipt_exec *whole = tk_ipt_exec_new(img, NULL);
	struct tk_ipt_exec_stats want, got;

	add(whole, img, 0, NTRACES);
	assert_int_equal(tk_ipt_exec_finish(whole, &want), 0);
	assert_true(want.insns > 0 && want.distinct_blocks > 0);
	for (size_t cut = 0; cut <= NTRACES; cut++) {
		struct tk_ipt_exec *a = tk_ipt_exec_new(img, NULL), *b = tk_ipt_exec_new(img, NULL);
		struct tk_ipt_exec *merged = tk_ipt_exec_new(img, NULL);

		add(a, img, 0, cut);
		add(b, img, cut, NTRACES);
		tk_ipt_exec_free(saved_and_loaded(a, img, merged));
		tk_ipt_exec_free(saved_and_loaded(b, img, merged));
		assert_int_equal(tk_ipt_exec_finish(merged, &got), 0);
		assert_memory_equal(&want, &got, sizeof want);
		tk_ipt_exec_free(a);
		tk_ipt_exec_free(b);
		tk_ipt_exec_free(merged);
	}
	tk_ipt_exec_free(whole);
	tk_image_free(img);
}

/* The traces one after another: one stream with a PSB where each began. */
static uint8_t *concat(size_t *len)
{
	uint8_t *all = NULL;

	*len = 0;
	for (size_t i = 0; i < NTRACES; i++) {
		size_t n;
		uint8_t *p = slurp(traces[i], &n);
		assert_non_null(all = realloc(all, *len + n));
		memcpy(all + *len, p, n);
		*len += n;
		free(p);
	}
	return all;
}

/* The stream twice (two streams, as a perf.data's queues), split at every PSB. */
static void add_twice(struct tk_ipt_exec *x, const struct tk_image *img, const uint8_t *p,
		      size_t n)
{
	struct tk_ipt_flow_opts fo = { .sz = sizeof fo, .image = img, .nthreads = 2,
				       .chunk_bytes = 16 };

	assert_true(tk_ipt_exec_add(x, p, n, &fo, NULL) >= 0);
	assert_true(tk_ipt_exec_add(x, p, n, &fo, NULL) >= 0);
}

/* Shards of the plan over both streams (tk_ipt_exec_range: contiguous runs of chunks,
 * numbered across the streams; some empty when there are more shards than chunks), each
 * saved, then all loaded in order and finished: the whole, to the last field. */
static void test_shards_equal_whole(void **state)
{
	(void)state;
	struct tk_image *img = code();
	struct tk_ipt_exec *whole = tk_ipt_exec_new(img, NULL);
	struct tk_ipt_flow_opts fo = { .sz = sizeof fo, .image = img, .chunk_bytes = 16 };
	struct tk_ipt_exec_stats want, got;
	size_t n;
	uint8_t *p = concat(&n);
	int64_t m = tk_ipt_flow_chunks(p, n, &fo, NULL, 0);
	size_t total = 2 * (size_t)m;

	assert_true(m >= (int64_t)NTRACES);   /* a chunk per trace at least */
	add_twice(whole, img, p, n);
	assert_int_equal(tk_ipt_exec_finish(whole, &want), 0);
	for (size_t shards = 1; shards <= total + 1; shards++) {
		struct tk_ipt_exec *merged = tk_ipt_exec_new(img, NULL);

		for (size_t k = 0; k < shards; k++) {
			size_t first = total * k / shards, end = total * (k + 1) / shards;
			struct tk_ipt_exec *part = tk_ipt_exec_new(img, NULL);

			tk_ipt_exec_range(part, first, end - first);
			add_twice(part, img, p, n);
			assert_int_equal(tk_ipt_exec_counts(part)->flow.chunks, end - first);
			tk_ipt_exec_free(saved_and_loaded(part, img, merged));
			tk_ipt_exec_free(part);
		}
		assert_int_equal(tk_ipt_exec_finish(merged, &got), 0);
		assert_memory_equal(&want, &got, sizeof want);
		tk_ipt_exec_free(merged);
	}
	free(p);
	tk_ipt_exec_free(whole);
	tk_image_free(img);
}

/* A block that cannot be (mode 7; more instructions than bytes) is refused by name and
 * offset, and nothing of the partial is added. */
static void test_damaged_block(void **state)
{
	(void)state;
	struct tk_image *img = code();
	struct tk_ipt_exec *x = tk_ipt_exec_new(img, NULL), *into = tk_ipt_exec_new(img, NULL);
	struct tk_partial_error e;
	uint8_t *a;
	size_t n;

	add(x, img, 0, 1);
	assert_int_equal(tk_partial_exec_save(x, &a, &n), 0);
	assert_true(tk_ipt_exec_nblocks(x) > 0);
	/* the first block's mode: 8 magic, 18 counts, 4 count, 28 into the block */
	size_t first = 8 + 18 * 8 + 4;
	a[first + 28] = 7;
	assert_int_equal(tk_partial_exec_load(into, a, n, &e), -TK_E_BAD_FORMAT);
	assert_int_equal(e.offset, first);
	assert_non_null(strstr(e.msg, "block 0"));
	a[first + 28] = 0;
	a[first + 24] = 0xff, a[first + 25] = 0xff;   /* 65535+ instructions */
	assert_int_equal(tk_partial_exec_load(into, a, n, &e), -TK_E_BAD_FORMAT);
	assert_int_equal(tk_ipt_exec_nblocks(into), 0);
	assert_int_equal(tk_ipt_exec_counts(into)->flow.insns, 0);
	a[0] ^= 1;
	assert_int_equal(tk_partial_exec_load(into, a, n, &e), -TK_E_BAD_FORMAT);
	assert_non_null(strstr(e.msg, "not execution statistics"));
	free(a);
	tk_ipt_exec_free(x);
	tk_ipt_exec_free(into);
	tk_image_free(img);
}

/* Two processes (two images, the same code at the same addresses): each image's blocks are
 * apart, the footprint is each one's added; saved and loaded into statistics that number
 * the images alike, the same; into statistics of one image, refused by offset. */
static void test_two_images(void **state)
{
	(void)state;
	struct tk_image *img = code(), *other = code();
	struct tk_ipt_exec *one = tk_ipt_exec_new(img, NULL), *two = tk_ipt_exec_new(img, NULL);
	struct tk_ipt_exec *into = tk_ipt_exec_new(img, NULL), *short1 = tk_ipt_exec_new(img, NULL);
	struct tk_ipt_exec_stats s1, s2, got;
	struct tk_partial_error e;
	uint8_t *a;
	size_t n;

	add(one, img, 0, NTRACES);
	add(two, img, 0, NTRACES);
	assert_int_equal(tk_ipt_exec_image(two, other), 1);
	assert_int_equal(tk_ipt_exec_image(two, img), 0);   /* known: its number */
	add(two, other, 0, NTRACES);
	assert_int_equal(tk_ipt_exec_nimages(two), 2);
	assert_int_equal(tk_ipt_exec_finish(one, &s1), 0);
	assert_int_equal(tk_partial_exec_save(two, &a, &n), 0);
	assert_int_equal(tk_ipt_exec_finish(two, &s2), 0);
	assert_int_equal(s2.insns, 2 * s1.insns);
	assert_int_equal(s2.distinct_blocks, 2 * s1.distinct_blocks);
	assert_int_equal(s2.distinct_insns, 2 * s1.distinct_insns);
	assert_int_equal(s2.code_lines, 2 * s1.code_lines);
	assert_int_equal(s2.category[1] + s2.category[2], 2 * (s1.category[1] + s1.category[2]));
	assert_int_equal(tk_ipt_exec_image(into, other), 1);
	assert_int_equal(tk_partial_exec_load(into, a, n, &e), 0);
	assert_int_equal(tk_ipt_exec_finish(into, &got), 0);
	assert_memory_equal(&s2, &got, sizeof got);
	assert_int_equal(tk_partial_exec_load(short1, a, n, &e), -TK_E_BAD_FORMAT);
	assert_non_null(strstr(e.msg, "image 1, of 1"));
	assert_true(e.offset > 8 + 18 * 8 + 4 && e.offset < n);
	assert_int_equal(tk_ipt_exec_nblocks(short1), 0);
	free(a);
	tk_ipt_exec_free(one);
	tk_ipt_exec_free(two);
	tk_ipt_exec_free(into);
	tk_ipt_exec_free(short1);
	tk_image_free(img);
	tk_image_free(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parts_equal_whole),
		cmocka_unit_test(test_shards_equal_whole),
		cmocka_unit_test(test_damaged_block),
		cmocka_unit_test(test_two_images),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
