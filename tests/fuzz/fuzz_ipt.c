/* Fuzz the Intel PT packet layer: decoder with resync, scan, dump with last-IP, PSB
 * search both ways and the split. Any crash, leak or UB is a bug. */
#include <stdint.h>
#include <stdlib.h>

#include "tracekit/ipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_ipt_stats st;
	tk_ipt_scan(data, size, &st, NULL, NULL);

	struct tk_buf b;
	tk_buf_init(&b, -1, 0);
	struct tk_ipt_dump_opts o = { .sz = sizeof o, .lastip = 1 };
	struct tk_gap_stats gaps = { 0 };
	tk_ipt_dump(data, size, &o, &b, &gaps);
	tk_buf_free(&b);

	int err;
	struct tk_ipt_pkt_decoder *d = tk_ipt_pkt_decoder_new(data, size, NULL, &err);
	if (d) {
		struct tk_ipt_packet p;
		/* Decode from every offset of the first bytes: no PSB needed. */
		for (size_t off = 0; off < size && off < 64; off++) {
			tk_ipt_pkt_sync_set(d, off);
			for (int i = 0; i < 8 && tk_ipt_pkt_next(d, &p) > 0; i++)
				;
		}
		while (tk_ipt_pkt_sync_backward(d) == 0)
			;
		tk_ipt_pkt_decoder_free(d);
	}
	uint64_t offs[8];
	tk_ipt_split(data, size, 64, offs, 8);
	return 0;
}
