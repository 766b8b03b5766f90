/* Fuzz target: the branch-trace container reader (index, modules, threads, streams). */
#include <stdint.h>
#include <stdlib.h>

#include "tracekit/btrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int err = 0;
	struct tk_btrace *bt = tk_btrace_open(data, size, NULL, &err);
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
	tk_btrace_free(bt);
	return 0;
}
