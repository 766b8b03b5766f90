/* Helpers for bench/ipt-packets.sh (not part of tracekit):
 *   gen FILE MB        write a libipt-encoded stream with a realistic packet mix
 *   walk FILE          libipt anchor: pt_pkt_next over the whole file, count packets
 *   ptdump FILE        libipt anchor: pt_pkt_next + ptdump-style printf to stdout
 *   psb FILE           PSB search: tracekit, libipt sync_forward, plain read bandwidth
 *   tkwalk FILE        tracekit: tk_ipt_pkt_next_batch over the whole file
 *   cpu FILE [REPS]    both walks in this process, REPS times each (default 5): the
 *                      least thread CPU time per packet of each and the ratio (on a
 *                      shared machine, time other jobs take from us is not counted)
 *   timing IN OUT      copy of IN in cycle-accurate timing mode: a CYC before each TNT,
 *                      TIP, TIP.PGE/PGD and FUP, an MTC every 64 packets */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#include "tracekit/ipt.h"
#include "oracle/ipt_gen.h"
#include "oracle/ptdump_fmt.h"

static uint8_t *map(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		exit(3);
	}
	*len = (size_t)st.st_size;
	uint8_t *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(3);
	}
	return p;
}

static volatile uint64_t sink;

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t walk_tk(const uint8_t *buf, size_t len)
{
	int err;
	struct tk_ipt_pkt_decoder *d = tk_ipt_pkt_decoder_new(buf, len, NULL, &err);
	static struct tk_ipt_packet pk[512];
	uint64_t n = 0;
	if (!d || tk_ipt_pkt_sync_forward(d) < 0)
		exit(1);
	for (;;) {
		n += (uint64_t)tk_ipt_pkt_next_batch(d, pk, 512, &err);
		if (err == -TK_E_EOF)
			break;
		if (err && tk_ipt_pkt_sync_forward(d) < 0)
			break;
	}
	tk_ipt_pkt_decoder_free(d);
	return n;
}

static struct pt_packet_decoder *ref_decoder(uint8_t *buf, size_t len)
{
	static struct pt_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.size = sizeof cfg;
	cfg.begin = buf;
	cfg.end = buf + len;
	return pt_pkt_alloc_decoder(&cfg);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *cmd = argv[1], *path = argv[2];
	size_t len;

	if (!strcmp(cmd, "gen")) {
		size_t mb = argc > 3 ? strtoul(argv[3], NULL, 0) : 128;
		size_t cap = mb << 20;
		uint8_t *buf = malloc(cap);
		/* A PSB every 4 KiB as with perf's default psb_period. */
		len = gen_stream(buf, cap, 1, 4096);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, len, f) != len)
			return 3;
		fclose(f);
		return 0;
	}
	uint8_t *buf = map(path, &len);
	if (!strcmp(cmd, "timing") && argc > 3) {
		/* What the hardware adds with cyc=1 (a CYC with the cycles elapsed
		 * ahead of the packets that carry them) and mtc (one per CTC period):
		 * re-encode IN's packets with libipt, interleaving those. */
		struct pt_packet_decoder *d = ref_decoder(buf, len);
		size_t cap = len * 2 + 4096;
		uint8_t *out = malloc(cap);
		struct pt_config cfg;
		memset(&cfg, 0, sizeof cfg);
		cfg.size = sizeof cfg;
		cfg.begin = out;
		cfg.end = out + cap;
		struct pt_encoder *enc = pt_alloc_encoder(&cfg);
		uint64_t rng = 88172645463325252ULL, npk = 0;
		uint8_t ctc = 0;
		if (!out || !enc || pt_pkt_sync_forward(d) < 0)
			return 1;
		for (;;) {
			struct pt_packet p, t;
			int r = pt_pkt_next(d, &p, sizeof p);
			if (r < 0) {
				if (r == -pte_eos || pt_pkt_sync_forward(d) < 0)
					break;
				continue;
			}
			memset(&t, 0, sizeof t);
			switch (p.type) {
			case ppt_tnt_8: case ppt_tnt_64: case ppt_tip: case ppt_tip_pge:
			case ppt_tip_pgd: case ppt_fup:
				rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
				t.type = ppt_cyc;   /* mostly one byte (< 32 cycles), some two */
				t.payload.cyc.value = rng % 8 ? 1 + rng % 31 : 32 + rng % 2000;
				if (pt_enc_next(enc, &t) < 0)
					return 1;
				break;
			default:
				break;
			}
			if (++npk % 64 == 0) {
				t.type = ppt_mtc;
				t.payload.mtc.ctc = ctc++;
				if (pt_enc_next(enc, &t) < 0)
					return 1;
			}
			if (pt_enc_next(enc, &p) < 0)
				return 1;
		}
		uint64_t olen;
		pt_enc_get_offset(enc, &olen);
		FILE *f = fopen(argv[3], "wb");
		if (!f || fwrite(out, 1, olen, f) != olen)
			return 3;
		fclose(f);
		return 0;
	}
	if (!strcmp(cmd, "walk") || !strcmp(cmd, "ptdump")) {
		int print = !strcmp(cmd, "ptdump");
		struct pt_packet_decoder *d = ref_decoder(buf, len);
		uint64_t n = 0;
		static char obuf[1 << 20];
		setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
		if (pt_pkt_sync_forward(d) < 0)
			return 1;
		for (;;) {
			struct pt_packet p;
			uint64_t off;
			if (print)
				pt_pkt_get_offset(d, &off);
			int r = pt_pkt_next(d, &p, sizeof p);
			if (r < 0) {
				if (r == -pte_eos)
					break;
				if (pt_pkt_sync_forward(d) < 0)
					break;
				continue;
			}
			n++;
			if (print)
				pd_print(stdout, off, &p, 1, NULL);
		}
		if (!print)
			printf("%llu packets\n", (unsigned long long)n);
		pt_pkt_free_decoder(d);
		return 0;
	}
	if (!strcmp(cmd, "tkwalk")) {
		printf("%llu packets\n", (unsigned long long)walk_tk(buf, len));
		return 0;
	}
	if (!strcmp(cmd, "cpu")) {
		int reps = argc > 3 ? atoi(argv[3]) : 5;
		double best_tk = 1e9, best_ref = 1e9;
		uint64_t ntk = 0, nref = 0;
		for (int rep = 0; rep < reps; rep++) {
			double t0 = cpu_now();
			ntk = walk_tk(buf, len);
			double t1 = cpu_now();
			struct pt_packet_decoder *d = ref_decoder(buf, len);
			nref = 0;
			if (pt_pkt_sync_forward(d) < 0)
				return 1;
			for (;;) {
				struct pt_packet p;
				int r = pt_pkt_next(d, &p, sizeof p);
				if (r < 0) {
					if (r == -pte_eos || pt_pkt_sync_forward(d) < 0)
						break;
					continue;
				}
				nref++;
			}
			pt_pkt_free_decoder(d);
			double t2 = cpu_now();
			if (t1 - t0 < best_tk) best_tk = t1 - t0;
			if (t2 - t1 < best_ref) best_ref = t2 - t1;
		}
		printf("CPU time, least of %d: libipt %.2f ns/packet (%.0f MB/s), tracekit %.2f "
		       "ns/packet (%.0f MB/s), %.2fx\n", reps, best_ref * 1e9 / nref,
		       len / best_ref / 1e6, best_tk * 1e9 / ntk, len / best_tk / 1e6,
		       best_ref / best_tk);
		return ntk == nref ? 0 : 1;
	}
	if (!strcmp(cmd, "psb")) {
		double best_tk = 1e9, best_ref = 1e9, best_mem = 1e9;
		uint64_t ntk = 0, nref = 0;
		for (int rep = 0; rep < 5; rep++) {
			double t0 = bench_now();
			ntk = tk_ipt_psb_count(buf, len);
			double t1 = bench_now();
			struct pt_packet_decoder *d = ref_decoder(buf, len);
			nref = 0;
			while (pt_pkt_sync_forward(d) == 0)
				nref++;
			pt_pkt_free_decoder(d);
			double t2 = bench_now();
			/* Memory read bandwidth: xor of every 8-byte word. */
			uint64_t acc = 0;
			for (size_t i = 0; i + 8 <= len; i += 8) {
				uint64_t w;
				memcpy(&w, buf + i, 8);
				acc ^= w;
			}
			sink ^= acc;
			double t3 = bench_now();
			if (t1 - t0 < best_tk) best_tk = t1 - t0;
			if (t2 - t1 < best_ref) best_ref = t2 - t1;
			if (t3 - t2 < best_mem) best_mem = t3 - t2;
		}
		double mb = len / 1e6;
		printf("psb-search tracekit %.0f MB/s (%llu PSBs), libipt sync_forward %.0f MB/s "
		       "(%llu), memory read %.0f MB/s\n", mb / best_tk, (unsigned long long)ntk,
		       mb / best_ref, (unsigned long long)nref, mb / best_mem);
		return ntk == nref ? 0 : 1;
	}
	return 2;
}
