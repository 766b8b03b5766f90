/* Fuzz the PT event and flow layer: any bytes as a PT stream over a small code image
 * (branches of every kind, a loop, a syscall), in one chunk and in tiny chunks, to
 * events (also with breaks, as perf.data's losses give), to ptxed-like text, to counts
 * only (the path cache), to a profile with
 * blocks counted by the walker (count mode, function entries) and re-encoded with return
 * compression. Nothing may crash, leak or read out of bounds. The PSB split that reads a
 * file with pread gives the mapping's chunk starts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"

#include "tracekit/flow.h"
#include "tracekit/ipt.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/prof.h"

#include "ipt_flow_code.h"

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	size_t *total = ctx;

	*total += n;
	(void)ev;
	return 0;
}

/* a profile per chunk, merged in order, as `tracekit profile` builds it */
struct prof_run {
	struct tk_prof *total, *chunk[64];
	uint8_t redone[64];
};

static int prof_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct prof_run *r = ctx;
	const uint64_t *e;
	size_t n;
	int err;

	if (i >= 64 || !(r->chunk[i] = tk_prof_new_like(r->total, &err)))
		return -TK_E_NOMEM;
	e = tk_prof_entries(r->total, &n);
	if ((err = tk_flow_set_count_mode(flow, 1, e, n)) < 0)
		return err;
	*sink = tk_prof_sink(r->chunk[i]);
	return 0;
}

/* a chunk whose merge would not be exact, decoded again into the total */
static int prof_redo(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct prof_run *r = ctx;
	const uint64_t *e;
	size_t n;
	int err;

	if (!flow)
		return !tk_prof_seam_exact(r->total, r->chunk[i]);
	e = tk_prof_entries(r->total, &n);
	if ((err = tk_flow_set_count_mode(flow, 1, e, n)) < 0)
		return err;
	r->redone[i] = 1;
	*sink = tk_prof_sink(r->total);
	return 1;
}

static int prof_merge(void *ctx, size_t i)
{
	struct prof_run *r = ctx;
	int rc = r->redone[i] ? 0 : tk_prof_merge(r->total, r->chunk[i]);

	tk_prof_free(r->chunk[i]);
	r->chunk[i] = NULL;
	return rc;
}

static int prof_block(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		      uint64_t insns)
{
	(void)mode;
	return tk_prof_add_block(ctx, start, last, execs, insns);
}

static int prof_done(void *ctx, struct tk_flow *flow)
{
	struct prof_run *r = ctx;

	return tk_flow_take_counts(flow, prof_block, r->total);
}

/* The split that reads the trace's file with pread (tk_ipt_flow_opts.in) must give
 * tk_ipt_split's starts over the mapping: the input after LEAD filler bytes, so that its
 * runs of 02 82 meet the ends of the reads' 8 KiB windows, at an odd offset of a file. */
static void check_split_read(const uint8_t *data, size_t size)
{
	enum { SKIP = 3, LEAD = 8150 };
	static const size_t chunks[] = { 1, 16, 40, 4096, 8192, 9000 };
	size_t len = LEAD + size, max = len / 16 + 2, n;
	uint8_t *file = malloc(SKIP + len);
	uint64_t *want = malloc(max * sizeof *want), *got = malloc(max * sizeof *got);
	struct tk_input *in = NULL;
	const uint8_t *map;
	char path[64];
	int fd = -1;

	if (!file || !want || !got)
		goto out;
	memset(file, 0x11, SKIP + LEAD);
	memcpy(file + SKIP + LEAD, data, size);
	if ((fd = fuzz_file(file, SKIP + len, path, sizeof path)) < 0 ||
	    tk_input_open(&in, path, NULL) < 0 || tk_input_map(in, &map, &n) < 0 || n != SKIP + len)
		goto out;
	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
		struct tk_ipt_flow_opts o = { .sz = sizeof o, .chunk_bytes = chunks[c], .in = in,
					      .in_offset = SKIP };
		int64_t w = tk_ipt_split(map + SKIP, len, chunks[c], want, max);
		int64_t g = tk_ipt_flow_chunks(map + SKIP, len, &o, got, max);
		if (g != w || (w > 0 && memcmp(got, want, (size_t)w * sizeof *got) != 0))
			abort();
	}
out:
	tk_input_free(in);
	if (fd >= 0)
		close(fd);
	free(file);
	free(want);
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tk_image *img;
	struct tk_ipt_flow_stats st;
	size_t total = 0;
	struct tk_buf out;

	if (!img) {
		int err;

		img = tk_image_new(&err);
		tk_image_add_mem(img, ipt_flow_code, sizeof(ipt_flow_code), 0x1000);
		tk_image_add_mem(img, ipt_flow_code, sizeof(ipt_flow_code), 0x7ffff000);
	}
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = 1 };
	struct tk_sink sink = { count_events, &total };

	/* a third of the inputs read as a processor with every erratum decode knows, an
	 * address filter (a region and a TraceStop part) set for SKL014 */
	static const struct tk_ipt_addr_filter filter = {
		.cfg = { 1, 2 }, .a = { 0x1000, 0x1010 }, .b = { 0x1fff, 0x101f },
	};
	if (size % 3 == 0) {
		o.errata = TK_IPT_ERRATUM_SKD007 | TK_IPT_ERRATUM_SKZ84 | TK_IPT_ERRATUM_SKD022 |
			   TK_IPT_ERRATUM_BDM64 | TK_IPT_ERRATUM_SKL014;
		o.addr_filter = &filter;
	}

	check_split_read(data, size);

	tk_ipt_flow_events(data, size, &o, sink, &st);
	o.chunk_bytes = 32;
	tk_ipt_flow_events(data, size, &o, sink, &st);
	/* breaks (perf.data's losses) at every other PSB, one where none is, one past the
	 * end: the pieces decode apart, in big chunks and tiny ones */
	uint64_t breaks[4], psb, from = 0;
	size_t nb = 0;
	for (int k = 0; nb < 2 && tk_ipt_psb_next(data, size, from, &psb) == 0; k++) {
		if (k & 1)
			breaks[nb++] = psb;
		from = psb + 1;
	}
	breaks[nb] = nb ? breaks[nb - 1] + 3 : size / 2;
	nb++;
	breaks[nb++] = (uint64_t)size + 5;
	for (size_t i = 1; i < nb; i++)   /* ascending, as the reader gives them */
		for (size_t j = i; j > 0 && breaks[j] < breaks[j - 1]; j--) {
			uint64_t t = breaks[j];
			breaks[j] = breaks[j - 1];
			breaks[j - 1] = t;
		}
	o.breaks = breaks;
	o.nbreaks = nb;
	o.break_reason = size & 1 ? TK_GAP_WRAP : TK_GAP_OVERFLOW;
	tk_ipt_flow_events(data, size, &o, sink, &st);
	o.chunk_bytes = 0;
	tk_ipt_flow_events(data, size, &o, sink, &st);
	o.chunk_bytes = 32;
	if (tk_buf_init(&out, -1, 4096) == 0) {
		/* ptxed's --event:ip and --event:iflags on half of them */
		tk_ipt_flow_text(data, size, &o, size & 2 ? TK_IPT_TEXT_EVENT_IP | TK_IPT_TEXT_IFLAGS : 0,
				 &out, &st);
		tk_ipt_flow_text(data, size, &o, TK_IPT_TEXT_STAT, &out, &st);
		tk_buf_free(&out);
	}
	/* written again with return compression (in tiny chunks): the result is a stream the
	 * decoder reads without a decode error (what the input lost is an overflow) */
	if (tk_buf_init(&out, -1, 4096) == 0) {
		struct tk_ipt_reencode_stats rs;
		struct tk_ipt_flow_opts d = { .sz = sizeof(d), .image = img, .nthreads = 1 };

		if (tk_ipt_reencode(data, size, &o, NULL, &out, &rs) == 0 &&
		    tk_ipt_flow_events((const uint8_t *)out.data, out.len, &d, sink, &st) == 0 &&
		    st.errors)
			abort();
		tk_buf_free(&out);
	}
	/* execution statistics (tracekit stats), in tiny chunks with the breaks: the blocks
	 * they count hold every instruction decoded, and there are no more conditional
	 * outcomes than executed conditional branches (fewer where the trace stopped at one) */
	struct tk_ipt_exec *ex = tk_ipt_exec_new(img, NULL);
	if (ex) {
		struct tk_ipt_exec_stats es;
		struct tk_ipt_flow_stats one;

		if (tk_ipt_exec_add(ex, data, size, &o, &one) == 0 &&
		    tk_ipt_exec_finish(ex, &es) == 0 &&
		    (es.insns != one.insns || es.cond_taken + es.cond_not_taken > es.kind[1]))
			abort();
		tk_ipt_exec_free(ex);
	}
	static const uint64_t entries[] = { 0x1000, 0x1020, 0x1030, 0x1040 };
	struct tk_prof_opts po = { .sz = sizeof(po), .entries = entries, .nentries = 4 };
	struct prof_run r = { 0 };
	struct tk_ipt_flow_consumer c = { .sz = sizeof c, .begin = prof_begin, .merge = prof_merge, .ctx = &r,
					  .done = prof_done, .redo = prof_redo };
	int err;

	if (size / 32 < 56 && (r.total = tk_prof_new(&po, &err))) {
		tk_ipt_flow_decode(data, size, &o, &c, &st);
		for (size_t i = 0; i < 64; i++)
			tk_prof_free(r.chunk[i]);
		tk_prof_finish(r.total);
		tk_prof_free(r.total);
	}
	return 0;
}
