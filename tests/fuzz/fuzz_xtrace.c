/* Fuzz the xtrace reader: the input is split into an instruction stream and a snapshot file
 * (first byte chooses the split), then walked, chunked, counted and turned into events. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/xtrace.h"

static int sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ctx, (void)ev, (void)n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t split = (size_t)data[0] * size / 256;
	const uint8_t *insn = data + 1;
	size_t n = split, sn = size - 1 - split;
	const uint8_t *snap = insn + n;
	struct tk_format_info fi;
	tk_xtrace_probe(data, size, &fi);
	tk_set_log(NULL, NULL);
	int err = 0;
	struct tk_xtrace *t = tk_xtrace_new(insn, n, sn ? snap : NULL, sn, &err);
	if (!t)
		t = tk_xtrace_new(insn, n, NULL, 0, &err);
	if (!t)
		return 0;
	struct tk_gap_stats gaps = { 0 };
	struct tk_xtrace_stats all;
	tk_xtrace_stats_init(&all, 1);
	for (size_t ci = 0; ci < tk_xtrace_nchunks(t); ci++) {
		struct tk_xtrace_stats part;
		tk_xtrace_stats_init(&part, 1);
		tk_xtrace_stats_chunk(t, ci, &part, &gaps);
		tk_xtrace_stats_merge(&all, &part);
		tk_xtrace_stats_free(&part);
		struct tk_sink sink = { sink_fn, NULL };
		tk_xtrace_decode_chunk(t, ci, 0, 1, sink, &gaps);
		size_t b, e;
		struct tk_xtrace_cursor c;
		struct tk_xtrace_item it;
		tk_xtrace_chunk(t, ci, &b, &e);
		tk_xtrace_cursor_init(&c, insn, b, e);
		while (tk_xtrace_next(&c, &it) > 0)
			;
		if (c.off < e)
			tk_xtrace_resync(insn, e, c.off);
	}
	struct tk_xtrace_stats counts;
	tk_xtrace_stats_init(&counts, TK_XT_STATS_COUNTS);
	for (size_t ci = 0; ci < tk_xtrace_nchunks(t); ci++)
		tk_xtrace_stats_chunk(t, ci, &counts, &gaps);
	tk_xtrace_stats_free(&counts);
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(t);
	for (size_t i = 0; sf && i < tk_xtrace_snapfile_count(sf); i++) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(sf, i, &s);
	}
	tk_xtrace_stats_free(&all);
	tk_xtrace_free(t);
	return 0;
}
