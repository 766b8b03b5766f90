/* Fuzz target: partial results (tracekit/partial.h). The bytes as a partial file, each of
 * its results loaded as a profile and merged in order; the bytes as one profile; and the
 * bytes as execution statistics, added and finished (no code: every block undecoded),
 * and as xtrace statistics, and as a Kanata statistics shard merged over a small log.
 * What loads must merge, finish and print without harm. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracekit/image.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/kanata.h"
#include "tracekit/out.h"
#include "tracekit/partial.h"
#include "tracekit/xtrace.h"

/* P merged into ACC (ACC's entries: none), then both printed. */
static void use(struct tk_prof *acc, struct tk_prof *p)
{
	struct tk_buf b;

	(void)tk_prof_seam_exact(acc, p);
	(void)tk_prof_merge(acc, p);
	if (tk_prof_finish(p) < 0 || tk_buf_init(&b, -1, 4096) < 0)
		return;
	struct tk_out_opts o = { .sz = sizeof o };
	static const enum tk_out_kind kinds[] = { TK_OUT_CSV, TK_OUT_CALLTREE, TK_OUT_FOLDED,
						  TK_OUT_PPROF, TK_OUT_BLOCKS };
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		b.len = 0;
		(void)tk_out_profile(&b, p, kinds[k], &o);
	}
	tk_buf_free(&b);
}

/* The bytes as execution statistics of two images (two processes), twice into one (blocks
 * add), then finished. */
static void exec_stats(const uint8_t *data, size_t size)
{
	struct tk_image *img = tk_image_new(NULL), *other = tk_image_new(NULL);
	struct tk_ipt_exec *x = img && other ? tk_ipt_exec_new(img, NULL) : NULL;
	struct tk_partial_error e;
	struct tk_ipt_exec_stats st;

	if (x && tk_ipt_exec_image(x, other) == 1 && tk_partial_exec_load(x, data, size, &e) == 0 &&
	    tk_partial_exec_load(x, data, size, &e) == 0) {
		uint8_t *again;
		size_t n;

		(void)tk_ipt_exec_finish(x, &st);
		if (tk_partial_exec_save(x, &again, &n) == 0)
			free(again);
	}
	tk_ipt_exec_free(x);
	tk_image_free(img);
	tk_image_free(other);
}

/* The bytes as xtrace statistics, merged into empty ones, saved again. */
static void xtrace_stats(const uint8_t *data, size_t size)
{
	struct tk_xtrace_stats s, total;
	struct tk_partial_error e;

	tk_xtrace_stats_init(&s, TK_XT_STATS_FOOTPRINT);
	tk_xtrace_stats_init(&total, TK_XT_STATS_FOOTPRINT);
	if (tk_partial_xtrace_stats_load(&s, data, size, &e) == 0) {
		uint8_t *again;
		size_t n;

		tk_xtrace_stats_merge(&total, &s);
		if (tk_partial_xtrace_stats_save(&total, &again, &n) == 0)
			free(again);
	}
	tk_xtrace_stats_free(&s);
	tk_xtrace_stats_free(&total);
}

/* The bytes as counts (a branch trace's decode --stat), saved again: the same bytes. */
static void counts(const uint8_t *data, size_t size)
{
	struct tk_partial_error e;
	uint64_t *v;
	size_t n;

	if (tk_partial_counts_load(&v, &n, data, size, &e) == 0) {
		uint8_t *again;
		size_t len;

		if (tk_partial_counts_save(v, n, &again, &len) == 0) {
			if (len > size)
				__builtin_trap();   /* (shorter where a varint had padding) */
			free(again);
		}
		free(v);
	}
}

/* The bytes as a shard of Kanata statistics over a small log (a memfd, made once; the
 * merge reads it when it must read in order), merged, finished and printed. */
static void kanata_stats(const uint8_t *data, size_t size)
{
	static char path[64];
	struct tk_kanata_stats_opts o = { .sz = sizeof o, .window = 4, .slowest = 3 };
	struct tk_kanata_stats_merge *m;
	struct tk_kanata_stats st;
	struct tk_input *in;
	char msg[160];
	uint64_t at;
	int err;

	if (!path[0]) {
		int fd = memfd_create("kanata", 0);
		FILE *f = fd >= 0 ? fdopen(dup(fd), "w") : NULL;
		if (!f)
			return;
		fprintf(f, "Kanata\t0004\nC=\t10\n");
		for (int i = 0; i < 200; i++)
			fprintf(f, "I\t%d\t%d\t%d\nL\t%d\t0\top%d\nS\t%d\t0\tF\nC\t1\nR\t%d\t%d\t%d\n",
				i, i, i % 2, i, i, i, i, i, i % 7 == 0);
		fclose(f);
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (tk_input_open(&in, path, NULL) < 0)
		return;
	if ((m = tk_kanata_stats_merge_new(&o, in, &err))) {
		if (tk_kanata_stats_merge_add(m, data, size, &at, msg, sizeof msg) == 0 &&
		    tk_kanata_stats_merge_end(m, &st) == 0) {
			struct tk_buf b;
			if (tk_buf_init(&b, -1, 4096) == 0) {
				for (int k = TK_STATS_TEXT; k <= TK_STATS_CSV; k++) {
					b.len = 0;
					tk_out_kanata_stats(&b, (enum tk_stats_format)k, "f", &st, o.window);
				}
				tk_buf_free(&b);
			}
			tk_kanata_stats_free(&st);
		}
		tk_kanata_stats_merge_free(m);
	}
	tk_input_free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_prof *like = tk_prof_new(NULL, NULL), *acc, *p;
	struct tk_partial part;
	struct tk_partial_error e;

	if (!like)
		return 0;
	if ((acc = tk_prof_new_like(like, NULL)) != NULL) {
		if (tk_partial_read(&part, data, size, &e) == 0) {
			for (size_t i = 0; i < part.ninputs; i++)
				for (size_t k = 0; k < part.inputs[i].nparts; k++)
					if ((p = tk_prof_load(like, part.inputs[i].parts[k].data,
							      part.inputs[i].parts[k].len, &e))) {
						use(acc, p);
						tk_prof_free(p);
					}
			tk_partial_clear(&part);
		}
		if ((p = tk_prof_load(like, data, size, &e))) {
			use(acc, p);
			tk_prof_free(p);
		}
		if (tk_prof_finish(acc) == 0) {
			struct tk_prof_summary s;
			(void)tk_prof_summary(acc, &s);
		}
		tk_prof_free(acc);
	}
	tk_prof_free(like);
	exec_stats(data, size);
	xtrace_stats(data, size);
	counts(data, size);
	kanata_stats(data, size);
	return 0;
}
