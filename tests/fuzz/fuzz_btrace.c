/* Fuzz target: the branch-trace container reader (index, modules, threads, streams, and
 * the same index with its checksums checked on workers) and dump's text of its header and
 * records. */
#include <stdint.h>
#include <stdlib.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"

/* dump's text of every record the reader passes on */
static int record(void *ctx, const struct tk_btrace_record *r)
{
	tk_btrace_record_text(ctx, r, 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int err = 0;
	struct tk_buf text;
	if (tk_buf_init(&text, -1, 4096) < 0)
		return 0;
	tk_btrace_header_text(&text, data, size, 0);
	struct tk_btrace_opts o = { .sz = sizeof o, .on_record = record, .ctx = &text };
	struct tk_btrace *bt = tk_btrace_open(data, size, &o, &err);
	tk_buf_free(&text);
	if (!bt)
		return 0;
	const struct tk_btrace_info *bi = tk_btrace_info(bt);
	volatile uint64_t sink = bi->traps + bi->pid;
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++)
		sink += tk_btrace_module(bt, i)->start + tk_btrace_module(bt, i)->path[0];
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		uint8_t *pt;
		size_t n;
		if (tk_btrace_thread_stream(bt, i, &pt, &n) == 0) {
			for (size_t k = 0; k < n; k += 64)
				sink += pt[k];
			free(pt);
		}
	}
	sink += tk_btrace_gaps(bt)->count;
	(void)sink;
	/* the checksums checked on two workers ahead of the index: the same index */
	struct tk_btrace_opts o2 = { .sz = sizeof o2, .nthreads = 2 };
	struct tk_btrace *b2 = tk_btrace_open(data, size, &o2, &err);
	if (!b2 || tk_btrace_gaps(b2)->count != tk_btrace_gaps(bt)->count ||
	    tk_btrace_gaps(b2)->bytes_skipped != tk_btrace_gaps(bt)->bytes_skipped ||
	    tk_btrace_thread_count(b2) != tk_btrace_thread_count(bt))
		__builtin_trap();
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++)
		if (tk_btrace_thread(b2, i)->pieces != tk_btrace_thread(bt, i)->pieces)
			__builtin_trap();
	tk_btrace_free(b2);
	tk_btrace_free(bt);
	return 0;
}
