/* Fuzz the Intel PT packet layer: decoder with resync, scan, dump with last-IP, PSB
 * search both ways and the split. Any crash, leak or UB is a bug, and so is a dump in
 * chunks at once (-j N, chunks of 32 to 287 bytes) that differs from the dump in order:
 * its text, its errors and its gaps, and packets in batches that differ from packets one
 * at a time. A third of the inputs are read with the packet-level errata (SKD007, SKZ84). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/ipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* errors in order, as a running hash of (offset, code, bytes skipped) */
static int count_error(void *ctx, uint64_t offset, int err, uint64_t skipped)
{
	uint64_t *h = ctx;
	*h = (*h ^ offset ^ ((uint64_t)(unsigned)err << 40) ^ (skipped << 20)) * 0x100000001b3ull;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_ipt_stats st;
	tk_ipt_scan(data, size, &st, NULL, NULL);

	struct tk_buf b;
	tk_buf_init(&b, -1, 0);
	/* with ptdump's time columns, their options and parameters from the last bytes */
	const uint8_t t = size ? data[size - 1] : 0, *q = size >= 4 ? data + size - 4 : NULL;
	struct tk_ipt_dump_opts o = {
		.sz = sizeof o, .lastip = 1, .time = t & 1, .tcal = (t & 3) == 2,
		.time_delta = t & 4, .no_tcal = t & 8, .no_wall_clock = t & 16,
		.keep_tcal_on_ovf = t & 32, .no_cyc = t & 64, .no_pad = t & 128,
		.mtc_freq = q ? q[0] & 31 : 0, .nom_freq = q ? q[1] : 0,
		.cpuid_15_eax = q ? q[2] & 15 : 0, .cpuid_15_ebx = q ? q[2] >> 4 : 0,
		.errata = q && (q[0] & 32) ? TK_IPT_ERRATUM_SKL168 : 0,
	};
	struct tk_gap_stats gaps = { 0 };
	tk_ipt_dump(data, size, &o, &b, &gaps);
	tk_buf_free(&b);

	struct tk_buf one, two;
	struct tk_gap_stats g1 = { 0 }, g2 = { 0 };
	uint64_t e1 = 0, e2 = 0;
	tk_buf_init(&one, -1, 0);
	tk_buf_init(&two, -1, 0);
	const uint32_t errata = size % 3 == 0 ? TK_IPT_ERRATA_PACKET : 0;
	o = (struct tk_ipt_dump_opts){ .sz = sizeof o, .on_error = count_error, .ctx = &e1,
				       .no_offset = size && (data[0] & 1), .errata = errata,
				       .raw_bytes = size && (data[0] & 2),
				       .exec_mode = size && (data[0] & 4),
				       .no_sync = size && (data[0] & 8) };
	int r1 = tk_ipt_dump(data, size, &o, &one, &g1);
	o.nthreads = 2;
	o.chunk_bytes = 32 + (size > 1 ? data[1] : 0);
	o.ctx = &e2;
	int r2 = tk_ipt_dump(data, size, &o, &two, &g2);
	if (r1 != r2 || one.len != two.len || memcmp(one.data, two.data, one.len) || e1 != e2 ||
	    memcmp(&g1, &g2, sizeof g1))
		abort();   /* -j N dumped otherwise than -j 1 */
	tk_buf_free(&one);
	tk_buf_free(&two);

	int err;
	struct tk_ipt_pkt_opts po = { .sz = sizeof po, .errata = errata };
	struct tk_ipt_pkt_decoder *d = tk_ipt_pkt_decoder_new(data, size, &po, &err);
	struct tk_ipt_pkt_decoder *d2 = tk_ipt_pkt_decoder_new(data, size, &po, &err);
	if (d && d2 && tk_ipt_pkt_sync_forward(d) == 0 && tk_ipt_pkt_sync_forward(d2) == 0) {
		/* from the first PSB to the first error: batches give what single steps do */
		struct tk_ipt_packet one, many[16];
		int n, e2 = 0, e1 = 0;
		while (!e2 && (n = tk_ipt_pkt_next_batch(d2, many, 16, &e2)) >= 0) {
			for (int k = 0; k < n; k++)
				if (tk_ipt_pkt_next(d, &one) <= 0 || one.kind != many[k].kind ||
				    one.size != many[k].size || one.offset != many[k].offset)
					abort();
			if (!n && !e2)
				break;
		}
		if (e2 && e2 != -TK_E_EOF && (e1 = tk_ipt_pkt_next(d, &one)) != e2)
			abort();
	}
	tk_ipt_pkt_decoder_free(d2);
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
