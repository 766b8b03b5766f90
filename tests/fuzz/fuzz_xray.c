/* Fuzz target for the XRay reader: header, record cursor (dump), index, parallel decode,
 * the chunk decoder and the TSC-sorted walk (YAML) must survive any input; the chunk
 * decoder must give the same events as the parallel decoder, the dump in chunks at once
 * (-j N, chunks of 16 to 271 bytes) the same text, messages and damage as in order, and the
 * YAML in blocks of 1 to 8 records the same text and messages as in order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/xray.h"

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	*(size_t *)ctx += n;
	for (size_t i = 0; i < n; i++)
		if ((ev[i].kind == TK_EV_CUSTOM || ev[i].kind == TK_EV_TYPED) && ev[i].count)
			*(size_t *)ctx += ((const uint8_t *)ev[i].data)[ev[i].count - 1];
	return 0;
}

/* a hash of the event stream, in order */
static int hash_events(void *ctx, const struct tk_event *ev, size_t n)
{
	uint64_t *h = ctx;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = ev[i].time ^ ev[i].addr * 31 ^ (uint64_t)ev[i].kind << 48 ^
			     (uint64_t)ev[i].track << 32 ^ ev[i].count * 7;
		if (ev[i].kind != TK_EV_CUSTOM && ev[i].kind != TK_EV_TYPED)
			v ^= ev[i].arg * 13;
		*h = (*h ^ v) * 0x100000001b3ULL;
	}
	return 0;
}

/* each chunk hashes its own events; the merge folds them in order (one chunk: the
 * stream's hash) */
static int chunk_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	(void)ctx, (void)chunk;
	uint64_t *h = calloc(1, sizeof *h);
	if (!h)
		return -TK_E_NOMEM;
	*sink = (struct tk_sink){ hash_events, h };
	*consumer = h;
	return 0;
}

static int chunk_merge(void *ctx, size_t chunk, void *consumer)
{
	uint64_t *total = ctx, *h = consumer;
	(void)chunk;
	*total = *total * 0x9e3779b97f4a7c15ULL ^ *h;
	free(h);
	return 0;
}

/* the log's messages in order, as a running hash */
static void hash_log(void *ctx, enum tk_log_level level, const char *msg)
{
	uint64_t *h = ctx;
	for (*h ^= (uint64_t)level; *msg; msg++)
		*h = (*h ^ (unsigned char)*msg) * 0x100000001b3ull;
}

static int no_record(void *ctx, const struct tk_xray_rec *r)
{
	(void)ctx, (void)r;
	return 0;
}

/* The counts of a walk that visits every record and of one that only counts (the chunk
 * decoder's, info's), and the messages each logs, are the same. */
static void walks_agree(struct tk_xray *x)
{
	uint64_t h1 = 0, h2 = 0;
	tk_set_log(hash_log, &h1);
	int r1 = tk_xray_walk(x, no_record, NULL);
	struct tk_xray_stats a = *tk_xray_stats(x);
	tk_set_log(hash_log, &h2);
	int r2 = tk_xray_walk(x, NULL, NULL);
	const struct tk_xray_stats *b = tk_xray_stats(x);
	tk_set_log(NULL, NULL);
	if (r1 != r2 || h1 != h2 || a.buffers != b->buffers || a.records != b->records ||
	    a.function_records != b->function_records || a.custom_events != b->custom_events ||
	    a.typed_events != b->typed_events || a.call_args != b->call_args ||
	    a.orphan_exits != b->orphan_exits || a.first_tsc != b->first_tsc ||
	    a.last_tsc != b->last_tsc || a.cpus != b->cpus || memcmp(&a.gaps, &b->gaps, sizeof a.gaps))
		abort();
}

static void dump_both(const uint8_t *data, size_t size)
{
	struct tk_buf one, two;
	struct tk_gap_stats g1 = { 0 }, g2 = { 0 };
	uint64_t h1 = 0, h2 = 0;
	struct tk_xray_dump_opts o = { .sz = sizeof o, .no_offset = size && (data[0] & 1) };

	if (tk_buf_init(&one, -1, 1 << 16) < 0 || tk_buf_init(&two, -1, 1 << 16) < 0)
		abort();
	tk_set_log(hash_log, &h1);
	long b1 = tk_xray_dump_with(data, size, &o, &one, &g1);
	o.nthreads = 2;
	o.chunk_bytes = 16 + (size > 1 ? data[1] : 0);
	tk_set_log(hash_log, &h2);
	long b2 = tk_xray_dump_with(data, size, &o, &two, &g2);
	tk_set_log(NULL, NULL);
	if (b1 != b2 || one.len != two.len || memcmp(one.data, two.data, one.len) || h1 != h2 ||
	    memcmp(&g1, &g2, sizeof g1))
		abort();   /* -j N dumped otherwise than -j 1 */
	tk_buf_free(&one);
	tk_buf_free(&two);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_buf out;
	struct tk_gap_stats gaps;
	size_t n = 0;
	int err;

	tk_set_log(NULL, NULL);
	/* a private copy, so reads past the end are caught by the sanitizer */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (tk_buf_init(&out, -1, 1 << 16) == 0) {
		memset(&gaps, 0, sizeof gaps);
		tk_xray_dump(copy, size, 0, 0, &out, &gaps);
		out.len = 0;
		dump_both(copy, size);
		for (unsigned nt = 1; nt <= 2; nt++) {
			struct tk_xray_opts o = { .sz = sizeof o, .nthreads = nt };
			struct tk_xray *x = tk_xray_open(copy, size, &o, &err);
			if (!x)
				break;
			tk_xray_decode(x, (struct tk_sink){ count_events, &n });
			walks_agree(x);
			if (nt == 1) {
				/* one chunk on one thread: the same stream, event for event */
				static const struct tk_xray_chunk_ops ops = { chunk_begin, chunk_merge };
				uint64_t h1 = 0, h2 = 0;
				tk_xray_decode(x, (struct tk_sink){ hash_events, &h1 });
				tk_xray_decode_chunks(x, &ops, &h2);
				if (h1 != h2)
					__builtin_trap();
			} else {
				static const struct tk_xray_chunk_ops ops = { chunk_begin, chunk_merge };
				uint64_t h = 0;
				tk_xray_decode_chunks(x, &ops, &h);
			}
			if (nt == 1) {
				uint64_t h1 = 0, h2 = 0;
				tk_set_log(hash_log, &h1);
				int y1 = tk_xray_yaml(x, NULL, &out);
				size_t len1 = out.len;
				/* (3 threads: the threads' next buffers expanded on the workers) */
				struct tk_xray_yaml_opts yo = { .sz = sizeof yo,
								.nthreads = 2 + (size > 3 ? data[3] % 2 : 0),
								.block_records = 1 + (size > 2 ? data[2] % 8 : 0) };
				tk_set_log(hash_log, &h2);
				int y2 = tk_xray_yaml_with(x, NULL, &out, &yo);
				tk_set_log(NULL, NULL);
				if (y1 != y2 || out.len != 2 * len1 || memcmp(out.data, out.data + len1, len1) ||
				    h1 != h2)
					abort();   /* the YAML in blocks otherwise than in order */
				out.len = 0;
			}
			tk_xray_free(x);
		}
		tk_buf_free(&out);
	}
	free(copy);
	return 0;
}
