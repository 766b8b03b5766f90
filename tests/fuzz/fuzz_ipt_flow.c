/* Fuzz the PT event and flow layer: any bytes as a PT stream over a small code image
 * (branches of every kind, a loop, a syscall), in one chunk and in tiny chunks, to
 * events and to ptxed-like text. Nothing may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "tracekit/ipt_flow.h"

static const uint8_t code[] = {
	0x31, 0xc0, 0x83, 0xf8, 0x01, 0x74, 0x02, 0xeb, 0x03, 0x90, 0x90, 0x90, /* 1000 */
	0xe8, 0x0f, 0x00, 0x00, 0x00, 0xff, 0xe0, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, /* 100c */
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,                         /* 1018 */
	0x90, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, /* 1020 */
	0xcc, 0xcc, 0xcc, 0xcc,
	0x0f, 0x05, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, /* 1030 */
	0xcc, 0xcc, 0xcc, 0xcc,
	0x90, 0x90, 0xeb, 0xfc, 0x75, 0xfa, 0xe2, 0xf8, 0xff, 0x10, 0xc2, 0x08, /* 1040 */
	0x00, 0xcf, 0x0f, 0x07,
};

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	size_t *total = ctx;

	*total += n;
	(void)ev;
	return 0;
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
		tk_image_add_mem(img, code, sizeof(code), 0x1000);
		tk_image_add_mem(img, code, sizeof(code), 0x7ffff000);
	}
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = 1 };
	struct tk_sink sink = { count_events, &total };

	tk_ipt_flow_events(data, size, &o, sink, &st);
	o.chunk_bytes = 32;
	tk_ipt_flow_events(data, size, &o, sink, &st);
	if (tk_buf_init(&out, -1, 4096) == 0) {
		tk_ipt_flow_text(data, size, &o, 0, &out, &st);
		tk_buf_free(&out);
	}
	return 0;
}
