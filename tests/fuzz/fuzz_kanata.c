/* Fuzz the Kanata reader, statistics and writer: nothing may crash, and whatever the writer
 * produces from the accepted commands must read back without errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/tracekit.h"

struct rw {
	struct tk_buf out;
	struct tk_kanata_writer *w;
};

static int to_writer(void *ctx, const struct tk_kanata_cmd *c)
{
	struct rw *r = ctx;
	int err;
	if (c->kind == TK_KANATA_HEADER)
		return 0;
	if (!r->w && !(r->w = tk_kanata_writer_new(&r->out, c->kind == TK_KANATA_CYCLE_SET ? c->a : 0, &err)))
		return err;
	tk_kanata_w_cmd(r->w, c);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_kanata_stats st;
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .window = 3, .slowest = 2 };
	int err;

	tk_kanata_stats_buf((const char *)data, size, &so, &st);
	tk_kanata_stats_free(&st);

	/* split feeding with a tiny line limit exercises the carry and long-line paths */
	struct rw r = { 0 };
	tk_buf_init(&r.out, -1, 1024);
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .max_line = 64,
					    .cmd = to_writer, .ctx = &r };
	struct tk_kanata_reader *rd = tk_kanata_reader_new(&ro, &err);
	if (rd) {
		size_t half = size / 2;
		tk_kanata_reader_feed(rd, (const char *)data, half, 0);
		tk_kanata_reader_feed(rd, (const char *)data + half, size - half, 1);
		tk_kanata_reader_free(rd);
	}
	tk_kanata_writer_free(r.w);
	if (r.out.len) {
		struct tk_kanata_reader_opts ro2 = { .sz = sizeof ro2, .semantic = 1, .max_line = 1 << 20 };
		struct tk_kanata_reader *back = tk_kanata_reader_new(&ro2, &err);
		if (back) {
			tk_kanata_reader_feed(back, r.out.data, r.out.len, 1);
			if (tk_kanata_reader_counts(back)->errors)
				abort();  /* the writer wrote something its own reader rejects */
			tk_kanata_reader_free(back);
		}
	}
	tk_buf_free(&r.out);
	return 0;
}
