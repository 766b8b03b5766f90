/* Intel PT packets libipt 2.0 does not know (CFE, EVD, TRIG, PEBS BBP/BIP/BEP, the
 * MODE.Exec IF bit), hand-encoded from the SDM layouts; split and PSB search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/ipt/internal.h"
#include "tracekit/ipt.h"
#include "tracekit/ipt_flow.h"

static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

static struct tk_ipt_pkt_decoder *dec_at_psb(const uint8_t *buf, size_t len)
{
	int err;
	struct tk_ipt_pkt_decoder *d = tk_ipt_pkt_decoder_new(buf, len, NULL, &err);
	assert_non_null(d);
	assert_int_equal(tk_ipt_pkt_sync_forward(d), 0);
	struct tk_ipt_packet p;
	assert_int_equal(tk_ipt_pkt_next(d, &p), 16);
	assert_int_equal(p.kind, TK_IPT_PKT_PSB);
	return d;
}

static void test_newer_packets(void **state)
{
	(void)state;
	uint8_t buf[128];
	size_t n = 0;
	memcpy(buf, psb, 16);
	n = 16;
	const uint8_t more[] = {
		0x99, 0x07,                         /* mode.exec cs.l cs.d if */
		0x02, 0x13, 0x81, 0x0e,             /* cfe intr(1), vector 14, ip */
		0x02, 0x53, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, /* evd type 1 */
		0xd9, 0xe0, 0x05, 0x34, 0x12,       /* trig ip icntv mult, trbv 5, icnt 1234 */
		0xd9, 0x00, 0x03,                   /* trig trbv 3 */
		0x02, 0x63, 0x85,                   /* bbp sz=1 (4-byte items), type 5 */
		0x0c, 0xef, 0xbe, 0xad, 0xde,       /* bip id 1, deadbeef */
		0x02, 0xb3,                         /* bep.ip */
		0x0c,                               /* tnt.8 again outside the block */
		0x02, 0x63, 0x00,                   /* bbp sz=0 (8-byte items) */
		0x14, 1, 0, 0, 0, 0, 0, 0, 0x80,    /* bip id 2 */
		0x02, 0x33,                         /* bep */
	};
	memcpy(buf + n, more, sizeof more);
	n += sizeof more;
	struct tk_ipt_pkt_decoder *d = dec_at_psb(buf, n);
	struct tk_ipt_packet p;

	assert_int_equal(tk_ipt_pkt_next(d, &p), 2);
	assert_int_equal(p.kind, TK_IPT_PKT_MODE_EXEC);
	assert_true(p.exec.csl && p.exec.csd && p.exec.iflag);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 4);
	assert_int_equal(p.kind, TK_IPT_PKT_CFE);
	assert_int_equal(p.cfe.type, 1);
	assert_int_equal(p.cfe.vector, 14);
	assert_int_equal(p.cfe.ip, 1);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 11);
	assert_int_equal(p.kind, TK_IPT_PKT_EVD);
	assert_int_equal(p.evd.type, 1);
	assert_int_equal(p.evd.payload, 0x0807060504030201ULL);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 5);
	assert_int_equal(p.kind, TK_IPT_PKT_TRIG);
	assert_true(p.trig.ip && p.trig.icntv && p.trig.mult);
	assert_int_equal(p.trig.trbv, 5);
	assert_int_equal(p.trig.icnt, 0x1234);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 3);
	assert_int_equal(p.kind, TK_IPT_PKT_TRIG);
	assert_false(p.trig.icntv);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 3);
	assert_int_equal(p.kind, TK_IPT_PKT_BBP);
	assert_int_equal(p.bbp.sz, 1);
	assert_int_equal(p.bbp.type, 5);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 5);
	assert_int_equal(p.kind, TK_IPT_PKT_BIP);
	assert_int_equal(p.bip.id, 1);
	assert_int_equal(p.bip.value, 0xdeadbeef);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 2);
	assert_int_equal(p.kind, TK_IPT_PKT_BEP);
	assert_int_equal(p.bep.ip, 1);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 1);
	assert_int_equal(p.kind, TK_IPT_PKT_TNT8);
	assert_int_equal(p.tnt.count, 2);
	assert_int_equal(p.tnt.bits, 2);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 3);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 9);
	assert_int_equal(p.kind, TK_IPT_PKT_BIP);
	assert_int_equal(p.bip.id, 2);
	assert_int_equal(p.bip.value, 0x8000000000000001ULL);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 2);
	assert_int_equal(p.kind, TK_IPT_PKT_BEP);
	assert_int_equal(tk_ipt_pkt_next(d, &p), -TK_E_EOF);
	tk_ipt_pkt_decoder_free(d);
}

/* The processors' errata by --cpu and CPUID (tk_ipt_cpu_parse, tk_ipt_cpuid_errata), and the packet decoder reading the
 * bytes of SKD007 and SKZ84 as those processors write them only when told: one packet
 * at a time and in batches (whose fast paths step aside) alike. */
static void test_cpu_errata(void **state)
{
	const uint32_t skl = TK_IPT_ERRATUM_SKD007 | TK_IPT_ERRATUM_SKD022 | TK_IPT_ERRATUM_SKL168 |
			     TK_IPT_ERRATUM_SKL014;
	const uint32_t skx = TK_IPT_ERRATUM_SKD022 | TK_IPT_ERRATUM_SKZ84 | TK_IPT_ERRATUM_SKL014;
	static const char *const bad[] = { "", "6", "6/", "6/x", "/142", "6/142/", "6/142x",
					   "6/142/1/2", "GenuineIntel,6", "GenuineIntel,,142", "Auto" };
	uint32_t e = 7;
	char names[64];

	(void)state;
	assert_int_equal(tk_ipt_cpu_parse("6/142", &e), 0);
	assert_int_equal(e, skl);
	assert_int_equal(tk_ipt_cpu_parse("6/0x55/4", &e), 0);
	assert_int_equal(e, skx);
	assert_int_equal(tk_ipt_cpuid_errata("GenuineIntel,6,142,10", &e), 0);
	assert_int_equal(e, skl);
	assert_string_equal(tk_ipt_errata_names(e, names, sizeof names), "SKD007, SKD022, SKL168, SKL014");
	assert_int_equal(tk_ipt_cpu_parse("none", &e), 0);
	assert_int_equal(e, 0);
	/* a recorded CPUID is only that: not a --cpu value, nor the reverse */
	assert_int_equal(tk_ipt_cpuid_errata("6/142", &e), -TK_E_INVAL);
	assert_int_equal(tk_ipt_cpuid_errata("auto", &e), -TK_E_INVAL);
	assert_int_equal(tk_ipt_cpuid_errata("GenuineIntel,6", &e), -TK_E_INVAL);
	assert_int_equal(tk_ipt_cpu_parse("GenuineIntel,6,142,10", &e), -TK_E_INVAL);
	assert_int_equal(tk_ipt_cpuid_errata("AuthenticAMD,25,33,0", &e), 0);
	assert_int_equal(e, 0);
	assert_string_equal(tk_ipt_errata_names(e, names, sizeof names), "none");
	assert_int_equal(tk_ipt_cpu_parse("6/61", &e), 0);   /* Broadwell: BDM64 only */
	assert_int_equal(e, TK_IPT_ERRATUM_BDM64);
	assert_string_equal(tk_ipt_errata_names(e, names, sizeof names), "BDM64");
	assert_int_equal(tk_ipt_cpu_parse("6/0x5c", &e), 0);   /* Goldmont: none of these */
	assert_int_equal(e, 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		e = 7;
		assert_int_equal(tk_ipt_cpu_parse(bad[i], &e), -TK_E_INVAL);
		assert_int_equal(e, 0);
	}

	/* PSB; a CYC's first byte and the OVF; a TMA with a reserved bit set and its bogus
	 * byte; PADs (long enough for the batch decoder's window) */
	uint8_t buf[160];
	memset(buf, 0, sizeof buf);
	memcpy(buf, psb, 16);
	static const uint8_t tail[] = { 0xf7, 0x02, 0xf3, 0x02, 0x73, 0x11, 0x11, 0x01, 0x01, 0x00,
					0xa5 };
	memcpy(buf + 16, tail, sizeof tail);
	static const struct { uint8_t kind, size; uint64_t off; } want[] = {
		{ TK_IPT_PKT_PSB, 16, 0 }, { TK_IPT_PKT_OVF, 3, 16 }, { TK_IPT_PKT_INVALID, 8, 19 },
		{ TK_IPT_PKT_PAD, 1, 27 },
	};
	struct tk_ipt_pkt_opts po = { .sz = sizeof po, .errata = skl | skx };
	struct tk_ipt_packet one[4], batch[4];
	int err;
	for (int b = 0; b < 2; b++) {
		struct tk_ipt_pkt_decoder *d = tk_ipt_pkt_decoder_new(buf, sizeof buf, &po, &err);
		assert_non_null(d);
		assert_int_equal(tk_ipt_pkt_sync_forward(d), 0);
		if (b) {
			assert_int_equal(tk_ipt_pkt_next_batch(d, batch, 4, &err), 4);
			assert_int_equal(err, 0);
		} else {
			for (int k = 0; k < 4; k++)
				assert_true(tk_ipt_pkt_next(d, &one[k]) > 0);
		}
		for (int k = 0; k < 4; k++) {
			const struct tk_ipt_packet *p = b ? &batch[k] : &one[k];
			assert_int_equal(p->kind, want[k].kind);
			assert_int_equal(p->size, want[k].size);
			assert_int_equal(p->offset, want[k].off);
		}
		tk_ipt_pkt_decoder_free(d);
	}
	/* without: two CYCs, then the TMA is an error */
	struct tk_ipt_pkt_decoder *d = dec_at_psb(buf, sizeof buf);
	struct tk_ipt_packet p;
	assert_int_equal(tk_ipt_pkt_next(d, &p), 2);
	assert_int_equal(p.kind, TK_IPT_PKT_CYC);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 1);
	assert_int_equal(p.kind, TK_IPT_PKT_CYC);
	assert_int_equal(tk_ipt_pkt_next(d, &p), -TK_E_BAD_FORMAT);
	tk_ipt_pkt_decoder_free(d);
}

static void test_errors_do_not_advance(void **state)
{
	(void)state;
	uint8_t buf[40];
	memcpy(buf, psb, 16);
	buf[16] = 0xc9;                      /* not an opcode */
	memcpy(buf + 17, psb, 16);
	buf[33] = 0x19;                      /* tsc, cut short */
	buf[34] = 1;
	struct tk_ipt_pkt_decoder *d = dec_at_psb(buf, 35);
	struct tk_ipt_packet p;
	uint64_t off;
	assert_int_equal(tk_ipt_pkt_next(d, &p), -TK_E_BAD_OPCODE);
	tk_ipt_pkt_get_offset(d, &off);
	assert_int_equal(off, 16);
	assert_int_equal(tk_ipt_pkt_sync_forward(d), 0);
	tk_ipt_pkt_get_offset(d, &off);
	assert_int_equal(off, 17);
	assert_int_equal(tk_ipt_pkt_next(d, &p), 16);
	assert_int_equal(tk_ipt_pkt_next(d, &p), -TK_E_TRUNCATED);
	assert_int_equal(tk_ipt_pkt_sync_forward(d), -TK_E_EOF);
	assert_int_equal(tk_ipt_pkt_sync_backward(d), 0);
	tk_ipt_pkt_get_sync_offset(d, &off);
	assert_int_equal(off, 17);
	tk_ipt_pkt_decoder_free(d);
}

static void test_split_and_count(void **state)
{
	(void)state;
	size_t len = 100000;
	uint8_t *buf = calloc(1, len);       /* PADs */
	size_t where[] = { 3, 1000, 1017, 5000, 40001, 99984 };
	for (size_t i = 0; i < 6; i++)
		memcpy(buf + where[i], psb, 16);
	assert_int_equal(tk_ipt_psb_count(buf, len), 6);
	uint64_t offs[16];
	int64_t n = tk_ipt_split(buf, len, 1, offs, 16);
	assert_int_equal(n, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(offs[i], where[i]);
	n = tk_ipt_split(buf, len, 10000, offs, 16);
	assert_int_equal(n, 3);
	assert_int_equal(offs[0], 3);
	assert_int_equal(offs[1], 40001);
	assert_int_equal(offs[2], 99984);
	assert_int_equal(tk_ipt_split(buf, len, 10000, NULL, 0), 3);
	uint64_t s;
	assert_int_equal(tk_ipt_psb_next(buf, len, 1001, &s), 0);
	assert_int_equal(s, 1017);
	assert_int_equal(tk_ipt_psb_prev(buf, len, 40001, &s), 0);
	assert_int_equal(s, 5000);
	assert_int_equal(tk_ipt_psb_next(buf, 99999, 99984, &s), -TK_E_NOSYNC);
	free(buf);
}

/* A run of 02 82 pairs longer than a PSB is one PSB at its end (libipt's rule); a
 * multi-MiB run must be searched in linear time both ways. */
static void test_long_runs(void **state)
{
	(void)state;
	size_t n = 4u << 20;
	uint8_t *b = malloc(n);
	for (size_t i = 0; i < n; i += 2) {
		b[i] = 2;
		b[i + 1] = 0x82;
	}
	b[100] = 0;
	uint64_t s;
	assert_int_equal(tk_ipt_psb_next(b, n, 0, &s), 0);
	assert_int_equal(s, 84);
	assert_int_equal(tk_ipt_psb_next(b, n, 85, &s), 0);
	assert_int_equal(s, n - 16);
	assert_int_equal(tk_ipt_psb_prev(b, n, n - 100, &s), 0);
	assert_int_equal(s, 84);
	assert_int_equal(tk_ipt_psb_prev(b, n, n - 15, &s), 0);
	assert_int_equal(s, n - 16);
	assert_int_equal(tk_ipt_psb_prev(b, n, n + 1, &s), 0);
	assert_int_equal(s, n - 16);
	assert_int_equal(tk_ipt_psb_count(b, n), 2);
	free(b);
}

static void test_dump_layout(void **state)
{
	(void)state;
	const uint8_t bytes[] = {
		2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
		0x02, 0x43, 0x11, 0, 0, 0, 0, 0,     /* pip cr3 0x100 nr */
		0x7d, 0x00, 0x10, 0x40, 0, 0, 0,      /* fup sext48 */
		0x2d, 0x34, 0x12,                     /* tip upd16 */
		0x1a,                                 /* tnt.8 !.! */
		0x02, 0x23,
	};
	struct tk_buf b;
	tk_buf_init(&b, -1, 0);
	struct tk_ipt_dump_opts o = { .sz = sizeof o, .lastip = 1 };
	assert_int_equal(tk_ipt_dump(bytes, sizeof bytes, &o, &b, NULL), 0);
	tk_buf_putc(&b, 0);
	assert_string_equal(b.data,
		"0000000000000000  psb\n"
		"0000000000000010  pip        100, nr                   cr3  0000000000000100\n"
		"0000000000000018  fup        3: 0000000000401000       ip   0000000000401000\n"
		"000000000000001f  tip        1: ????????????1234       ip   0000000000401234\n"
		"0000000000000022  tnt.8      !.!\n"
		"0000000000000023  psbend\n");
	tk_buf_free(&b);
}

/* The flow's split reads its PSB searches with pread (tk_ipt_flow_opts.in), a window of
 * 4 KiB, then of 8 KiB, at a time: its chunk starts must be tk_ipt_split's over the mapping,
 * also where runs of 02 82 longer or shorter than a PSB sit across a window's edge (EDGE
 * bytes after a search's start) or a chunk's start. */
static void split_read_as_mapped(size_t edge)
{
	const size_t lead = 4093, len = 450000;   /* BUF at an odd offset of the file */
	uint8_t *file = malloc(lead + len), *buf = file + lead;
	assert_non_null(file);
	srand(7);
	for (size_t i = 0; i < lead + len; i++)
		file[i] = (uint8_t)(rand() % 251);   /* no 0x02 0x82 pairs by chance, almost */
	/* Sections of 16 KiB, each opening with a PSB at an 8-aligned A (a search from its end,
	 * at chunks of 1 or 16 bytes, reads windows from A + 16: one ends at E = A + 16 + EDGE); then
	 * either a run of 02 82 with a word wholly in the window and its end past E, which
	 * only the next window shows (its pairs even or odd against E), or a PSB that begins
	 * 1-15 bytes before E, none of whose 8-aligned words lies wholly in the window. */
	size_t sec = 0, sections = len * 2 / 3;
	for (size_t a = 0; a + 16384 <= sections; a += 16384, sec++) {
		memcpy(buf + a, psb, 16);
		size_t e = a + 16 + edge, at, n;
		if (sec % 3 == 0) {
			at = e - 8 - 2 * (sec / 3 % 5);
			n = e - at + 2 + 2 * (sec / 3 % 7);
		} else if (sec % 3 == 1) {   /* a pair across E: the window ends mid-pair */
			at = e - 17 - 2 * (sec / 3 % 3);
			n = e - at + 1 + 2 * (sec / 3 % 4);
		} else {
			at = e - 1 - sec / 3 % 15;
			n = 16;
		}
		for (size_t k = 0; k < n; k += 2) {
			buf[at + k] = 0x02;
			buf[at + k + 1] = 0x82;
		}
	}
	/* and in the last third, runs of 14-40 bytes at random places */
	for (int r = 0; r < 100; r++) {
		size_t at = sections + (size_t)rand() % (len - sections - 80);
		size_t n = 14 + 2 * (size_t)(rand() % 14);
		for (size_t k = 0; k < n; k += 2) {
			buf[at + k] = 0x02;
			buf[at + k + 1] = 0x82;
		}
	}
	memcpy(buf + len - 16, psb, 16);   /* one right at the end */
	char path[] = "/tmp/tk-split-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file, 1, lead + len, f), lead + len);
	fclose(f);
	struct tk_input *in;
	const uint8_t *map;
	size_t maplen;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	assert_int_equal(tk_input_map(in, &map, &maplen), 0);
	assert_int_equal(maplen, lead + len);

	size_t chunks[] = { 1, 16, 100, 4000, 8160, 8192, 10000, 65536 };
	uint64_t *want = malloc(len * sizeof *want), *got = malloc(len * sizeof *got);
	assert_non_null(want);
	assert_non_null(got);
	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
		int64_t n = tk_ipt_split(buf, len, chunks[c], want, len);
		assert_true(n > 10 || chunks[c] > 8000);
		struct tk_ipt_flow_opts o = { .sz = sizeof o, .chunk_bytes = chunks[c], .in = in,
					      .in_offset = lead };
		assert_int_equal(tk_ipt_flow_chunks(buf, len, &o, NULL, 0), n);
		assert_int_equal(tk_ipt_flow_chunks(buf, len, &o, got, len), n);
		for (int64_t i = 0; i < n; i++)
			if (got[i] != want[i])
				fail_msg("chunk %zu: start %lld at %llu, the mapping's at %llu", chunks[c],
					 (long long)i, (unsigned long long)got[i],
					 (unsigned long long)want[i]);
		/* at the wrong offset the file's bytes are not BUF's: the mapping decides */
		o.in_offset = lead + 1;
		assert_int_equal(tk_ipt_flow_chunks(buf, len, &o, got, len), n);
		assert_memory_equal(got, want, (size_t)n * sizeof *got);
		/* the searches split among threads (from 512 multiples of the chunk on: at 16
		 * and 100 bytes here), reading the file or the mapping, find the same starts */
		for (unsigned t = 1; t <= 3; t++) {
			for (int file_read = 0; file_read < 2; file_read++) {
				uint64_t *offs;
				int64_t m = ipt_split_starts(file_read ? in : NULL, lead, buf, len,
							     chunks[c], t, t == 2, &offs);
				assert_int_equal(m, n);
				assert_memory_equal(offs, want, (size_t)n * sizeof *offs);
				free(offs);
			}
		}
	}
	free(want);
	free(got);
	tk_input_free(in);
	unlink(path);
	free(file);
}

static void test_split_read_as_mapped(void **state)
{
	(void)state;
	split_read_as_mapped(4096);                /* the first window's end */
	split_read_as_mapped(4096 - 32 + 8192);    /* the second's (they overlap by 32) */
	split_read_as_mapped(8192);                /* inside the second */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_newer_packets),
		cmocka_unit_test(test_errors_do_not_advance),
		cmocka_unit_test(test_cpu_errata),
		cmocka_unit_test(test_split_and_count),
		cmocka_unit_test(test_split_read_as_mapped),
		cmocka_unit_test(test_long_runs),
		cmocka_unit_test(test_dump_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
