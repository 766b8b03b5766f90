/* Fuzz the perf.data reader: every queue's trace lies in the input or in its own copy, no
 * longer than the input's trace buffers together, its breaks inside it and ascending, the
 * mappings name a file or the vDSO, and the CPUID header is a string in its field; and with its records read again as a part of a
 * perf record --threads directory. */
#include <stdint.h>
#include <string.h>

#include "tracekit/tracekit.h"

static void ignore(void *ctx, uint64_t offset, const char *msg)
{
	(void)ctx;
	(void)offset;
	if (strnlen(msg, 256) == 256)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_perf_aux a;
	int rc = tk_perf_aux_read(data, size, &a, ignore, NULL);
	if (rc < 0)
		return 0;
	size_t total = 0;
	for (size_t i = 0; i < a.nqueues; i++) {
		const struct tk_perf_queue *q = &a.queues[i];
		if (q->len && !q->data)
			__builtin_trap();
		if (!q->owned && q->len && (q->data < data || q->data + q->len > data + size))
			__builtin_trap();
		if (q->owned && q->data != q->owned)
			__builtin_trap();
		/* breaks: inside the trace, ascending (the decoder splits there) */
		for (size_t k = 0; k < q->nbreaks; k++)
			if (!q->breaks[k] || q->breaks[k] >= q->len ||
			    (k && q->breaks[k] <= q->breaks[k - 1]))
				__builtin_trap();
		uint8_t x = 0;
		for (size_t k = 0; k < q->len; k++)   /* every byte readable (ASan checks) */
			x ^= q->data[k];
		(void)x;
		total += q->len;
	}
	if (total > size)
		__builtin_trap();
	/* the recorded processor: a string within its field, read as a CPUID or refused */
	uint32_t errata;
	if (!memchr(a.cpuid, 0, sizeof a.cpuid) ||
	    (tk_ipt_cpuid_errata(a.cpuid, &errata) < 0 && errata))
		__builtin_trap();
	for (size_t i = 0; i < a.nmmaps; i++)
		if (!a.mmaps[i].path || (a.mmaps[i].path[0] != '/' && strcmp(a.mmaps[i].path, "[vdso]")))
			__builtin_trap();
	/* the summary without the copy: the same sizes */
	struct tk_perf_aux b;
	if (tk_perf_aux_scan(data, size, &b, ignore, NULL) != rc || b.nqueues != a.nqueues)
		__builtin_trap();
	for (size_t i = 0; i < a.nqueues; i++)
		if (b.queues[i].data || b.queues[i].len != a.queues[i].len ||
		    b.queues[i].nbreaks != a.queues[i].nbreaks)
			__builtin_trap();
	tk_perf_aux_free(&b);
	tk_perf_aux_free(&a);

	/* perf record --threads: the data section once more as a part (a DIR/data.K holds
	 * records without a header); queues still lie in the input or in their copies */
	uint64_t off = 0;
	if (size >= 48)
		memcpy(&off, data + 40, 8);
	if (off < size) {
		struct tk_perf_part part = { data + off, size - off, "data.0" };
		if (tk_perf_aux_read_parts(data, size, &part, 1, &a, ignore, NULL, 0) >= 0) {
			for (size_t i = 0; i < a.nqueues; i++) {
				const struct tk_perf_queue *q = &a.queues[i];
				if (!q->owned && q->len && (q->data < data || q->data + q->len > data + size))
					__builtin_trap();
				if (q->file_part > 1)
					__builtin_trap();
			}
			tk_perf_aux_free(&a);
		}
	}
	return 0;
}
