/* The branch-trace container reader on good and damaged input: pieces of each thread's PT
 * stream are joined in order; a damaged or missing piece becomes a gap (reported with its
 * offset) and an OVF in the stream, which resumes at the next piece's PSB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <intel-pt.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "../../recorder/btrace/ptenc.h"

struct img {
	uint8_t b[16384];
	size_t n;
	size_t rec_off[32];
	int nrec;
};

static void put(struct img *m, const void *p, size_t n)
{
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static unsigned img_version = TK_BTRACE_VERSION;   /* of the containers build() makes */

/* A record's header for payload P (N bytes) in a container of VERSION. */
static void rec_header(uint8_t h[TK_BTRACE_REC_HEADER], unsigned version, uint16_t type,
		       uint32_t tid, uint32_t seq, const void *p, uint32_t n)
{
	uint32_t magic = TK_BTRACE_REC_MAGIC, sum = tk_btrace_record_sum(version, p, n);
	memset(h, 0, TK_BTRACE_REC_HEADER);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &type, 2);
	memcpy(h + 8, &tid, 4);
	memcpy(h + 12, &n, 4);
	memcpy(h + 16, &sum, 4);
	memcpy(h + 20, &seq, 4);
}

static void rec(struct img *m, uint16_t type, uint32_t tid, uint32_t seq, const void *p, uint32_t n)
{
	uint8_t h[TK_BTRACE_REC_HEADER];
	rec_header(h, img_version, type, tid, seq, p, n);
	m->rec_off[m->nrec++] = m->n;
	put(m, h, sizeof h);
	put(m, p, n);
	static const uint8_t z[8];
	put(m, z, (8 - n % 8) % 8);
}

/* A piece of PT: PSB+, enable at IP, a few TNT bits and a TIP, disable. */
static size_t piece(uint8_t *out, uint64_t ip, int k)
{
	struct ptenc e = { .buf = out };
	ptenc_psb(&e, 1000 + (uint64_t)k, 0, 0);
	ptenc_ip(&e, PT_TIP_PGE, ip, 0);
	for (int i = 0; i < 5 + k; i++)
		ptenc_tnt(&e, (i + k) & 1);
	ptenc_ip(&e, PT_TIP, ip + 0x40 * (uint64_t)k, 0);
	ptenc_ip(&e, PT_TIP_PGD, 0, 1);
	return e.len;
}

/* Two threads of three pieces each, interleaved, then the ends. */
static void build(struct img *m, uint8_t pieces[2][3][128], size_t plen[2][3])
{
	uint8_t h[TK_BTRACE_HEADER_SIZE] = { 0 };
	uint32_t v = img_version, hs = TK_BTRACE_HEADER_SIZE, pid = 77;
	memcpy(h, TK_BTRACE_MAGIC, 8);
	memcpy(h + 8, &v, 4);
	memcpy(h + 12, &hs, 4);
	memcpy(h + 16, &pid, 4);
	memset(m, 0, sizeof *m);
	put(m, h, sizeof h);
	uint8_t mod[28 + 4 + 8] = { 0 };
	uint64_t bias = 0x555500000000ULL, s = bias + 0x1000, e = bias + 0x2000;
	uint16_t plen16 = 8;
	memcpy(mod, &bias, 8);
	memcpy(mod + 8, &s, 8);
	memcpy(mod + 16, &e, 8);
	memcpy(mod + 24, &plen16, 2);
	mod[26] = 4;
	memcpy(mod + 28, "\x01\x02\x03\x04", 4);
	memcpy(mod + 32, "/bin/foo", 8);
	rec(m, TK_BTRACE_REC_MODULE, 0, 0, mod, sizeof mod);
	for (int k = 0; k < 3; k++)
		for (int t = 0; t < 2; t++) {
			plen[t][k] = piece(pieces[t][k], s + 0x100 * (uint64_t)t, k);
			rec(m, TK_BTRACE_REC_STREAM, 100 + (uint32_t)t, (uint32_t)k, pieces[t][k], (uint32_t)plen[t][k]);
		}
	uint64_t st[3] = { 9, 1, 0 };
	rec(m, TK_BTRACE_REC_THREAD_END, 100, 3, st, sizeof st);
	rec(m, TK_BTRACE_REC_THREAD_END, 101, 3, st, sizeof st);
	uint64_t pe[4] = { 18, 5, 2, 0 };
	rec(m, TK_BTRACE_REC_PROCESS_END, 0, 0, pe, sizeof pe);
}

static uint8_t pieces[2][3][128];
static size_t plen[2][3];
static struct img img;

static void test_good(void **state)
{
	int err = 0;
	(void)state;
	build(&img, pieces, plen);
	struct tk_btrace *bt = tk_btrace_open(img.b, img.n, NULL, &err);
	assert_non_null(bt);
	const struct tk_btrace_info *bi = tk_btrace_info(bt);
	assert_int_equal(bi->pid, 77);
	assert_true(bi->complete);
	assert_int_equal(bi->traps, 18);
	assert_int_equal(tk_btrace_module_count(bt), 1);
	assert_string_equal(tk_btrace_module(bt, 0)->path, "/bin/foo");
	assert_int_equal(tk_btrace_module(bt, 0)->build_id_len, 4);
	assert_int_equal(tk_btrace_thread_count(bt), 2);
	for (int t = 0; t < 2; t++) {
		const struct tk_btrace_thread *th = tk_btrace_thread(bt, (size_t)t);
		assert_int_equal(th->tid, 100 + t);
		assert_int_equal(th->pieces, 3);
		assert_true(th->ended);
		assert_int_equal(th->lost_pieces, 0);
		uint8_t *s;
		size_t n;
		assert_int_equal(tk_btrace_thread_stream(bt, (size_t)t, &s, &n), 0);
		assert_int_equal(n, plen[t][0] + plen[t][1] + plen[t][2]);
		assert_memory_equal(s, pieces[t][0], plen[t][0]);
		assert_memory_equal(s + plen[t][0], pieces[t][1], plen[t][1]);
		free(s);
	}
	assert_int_equal(tk_btrace_gaps(bt)->count, 0);
	tk_btrace_free(bt);
}

/* Packets of STREAM through libipt: count OVF and PSB, and any decode error. */
static void pt_scan(const uint8_t *s, size_t n, int *ovf, int *psb, int *errors)
{
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)s;
	cfg.end = (uint8_t *)s + n;
	struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
	struct pt_packet p;
	*ovf = *psb = *errors = 0;
	assert_true(pt_pkt_sync_forward(d) >= 0);
	for (;;) {
		int rc = pt_pkt_next(d, &p, sizeof p);
		if (rc == -pte_eos)
			break;
		if (rc < 0) {
			(*errors)++;
			if (pt_pkt_sync_forward(d) < 0)
				break;
			continue;
		}
		*ovf += p.type == ppt_ovf;
		*psb += p.type == ppt_psb;
	}
	pt_pkt_free_decoder(d);
}

static void test_corrupt_piece(void **state)
{
	int err = 0, ovf, psb, errors;
	(void)state;
	build(&img, pieces, plen);
	/* damage thread 100's second piece (record 3: module, t0p0, t1p0, t0p1, ...) */
	size_t off = img.rec_off[3];
	img.b[off + TK_BTRACE_REC_HEADER + 20] ^= 0x5a;
	struct tk_btrace *bt = tk_btrace_open(img.b, img.n, NULL, &err);
	assert_non_null(bt);
	const struct tk_gap_stats *g = tk_btrace_gaps(bt);
	assert_int_equal(g->count, 1);
	assert_int_equal(g->first_offsets[0], off);
	assert_true(g->bytes_skipped >= TK_BTRACE_REC_HEADER);
	const struct tk_btrace_thread *t0 = tk_btrace_thread(bt, 0), *t1 = tk_btrace_thread(bt, 1);
	assert_int_equal(t0->pieces, 2);
	assert_int_equal(t0->lost_pieces, 1);
	assert_int_equal(t1->pieces, 3);
	assert_int_equal(t1->lost_pieces, 0);
	uint8_t *s;
	size_t n;
	assert_int_equal(tk_btrace_thread_stream(bt, 0, &s, &n), 0);
	assert_int_equal(n, plen[0][0] + 2 + plen[0][2]);
	assert_memory_equal(s + plen[0][0], "\x02\xf3", 2);
	pt_scan(s, n, &ovf, &psb, &errors);
	assert_int_equal(ovf, 1);
	assert_int_equal(psb, 2);
	assert_int_equal(errors, 0);
	free(s);
	assert_true(tk_btrace_info(bt)->complete);
	tk_btrace_free(bt);
}

static void test_garbage_and_truncation(void **state)
{
	int err = 0;
	(void)state;
	build(&img, pieces, plen);
	/* 40 bytes of garbage in place of the start of record 2: resync at record 3 */
	memset(img.b + img.rec_off[2], 0xee, 40);
	struct tk_btrace *bt = tk_btrace_open(img.b, img.n, NULL, &err);
	assert_non_null(bt);
	assert_int_equal(tk_btrace_gaps(bt)->count, 1);
	assert_int_equal(tk_btrace_gaps(bt)->first_offsets[0], img.rec_off[2]);
	assert_int_equal(tk_btrace_gaps(bt)->bytes_skipped, img.rec_off[3] - img.rec_off[2]);
	assert_int_equal(tk_btrace_thread(bt, 1)->lost_pieces, 1);
	tk_btrace_free(bt);

	/* cut inside the last stream record: the rest is reported, no end record */
	build(&img, pieces, plen);
	size_t cut = img.rec_off[6] + 10;
	bt = tk_btrace_open(img.b, cut, NULL, &err);
	assert_non_null(bt);
	assert_false(tk_btrace_info(bt)->complete);
	assert_int_equal(tk_btrace_gaps(bt)->count, 1);
	assert_int_equal(tk_btrace_gaps(bt)->first_offsets[0], img.rec_off[6]);
	assert_int_equal(tk_btrace_thread(bt, 0)->pieces, 3);
	assert_int_equal(tk_btrace_thread(bt, 1)->pieces, 2);
	tk_btrace_free(bt);
}

/* What an open found: the gaps, the threads and their streams. */
static void summary(const uint8_t *b, size_t n, unsigned nthreads, struct tk_buf *out)
{
	struct tk_btrace_opts o = { .sz = sizeof o, .nthreads = nthreads };
	int err = 0;
	struct tk_btrace *bt = tk_btrace_open(b, n, &o, &err);
	if (!bt) {
		tk_buf_printf(out, "refused %d\n", err);
		return;
	}
	const struct tk_gap_stats *g = tk_btrace_gaps(bt);
	tk_buf_printf(out, "gaps %llu %llu complete %d\n", (unsigned long long)g->count,
		      (unsigned long long)g->bytes_skipped, tk_btrace_info(bt)->complete);
	for (uint64_t k = 0; k < g->count && k < TK_GAP_FIRST_OFFSETS; k++)
		tk_buf_printf(out, " at %llu", (unsigned long long)g->first_offsets[k]);
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		uint8_t *s;
		size_t len = 0;
		uint64_t h = 0;
		if (tk_btrace_thread_stream(bt, i, &s, &len) == 0) {
			for (size_t k = 0; k < len; k++)
				h = h * 131 + s[k];
			free(s);
		}
		tk_buf_printf(out, "\nthread %u pieces %llu lost %llu ended %d stream %zu %llx", t->tid,
			      (unsigned long long)t->pieces, (unsigned long long)t->lost_pieces, t->ended,
			      len, (unsigned long long)h);
	}
	tk_buf_putc(out, 0);
	tk_btrace_free(bt);
}

/* Checksums checked on workers ahead of the index: the same index as checking them in
 * turn, on the container and on every byte of it damaged. */
static void test_checked_ahead(void **state)
{
	(void)state;
	build(&img, pieces, plen);
	static uint8_t b[sizeof img.b];
	struct tk_buf one, two;
	tk_buf_init(&one, -1, 4096);
	tk_buf_init(&two, -1, 4096);
	size_t damaged = 0;
	for (size_t i = 0; i <= img.n; i++) {
		memcpy(b, img.b, img.n);
		if (i < img.n)
			b[i] ^= 0x21;
		one.len = two.len = 0;
		summary(b, img.n, 1, &one);
		summary(b, img.n, 2, &two);
		if (strcmp(one.data, two.data))
			fail_msg("byte %zu damaged: %s\nagainst, checked ahead: %s", i, one.data, two.data);
		damaged += strncmp(one.data, "gaps 0 ", 7) != 0;
	}
	assert_true(damaged > img.n / 2);   /* most damage is seen, and seen alike */
	tk_buf_free(&one);
	tk_buf_free(&two);
}

static void test_bad_header(void **state)
{
	int err = 0;
	(void)state;
	build(&img, pieces, plen);
	img.b[8] = 9;   /* version 9 */
	assert_null(tk_btrace_open(img.b, img.n, NULL, &err));
	assert_int_equal(err, -TK_E_UNSUPPORTED);
	build(&img, pieces, plen);
	img.b[12] = 3;  /* header size 3 */
	assert_null(tk_btrace_open(img.b, img.n, NULL, &err));
	assert_int_equal(err, -TK_E_BAD_FORMAT);
	assert_null(tk_btrace_open((const uint8_t *)"TKBTRAC", 7, NULL, &err));
	struct tk_format_info fi;
	build(&img, pieces, plen);
	assert_int_equal(tk_detect_format(img.b, img.n, &fi), 0);
	assert_int_equal(fi.id, TK_FMT_TKBT);
	assert_int_equal(fi.version, TK_BTRACE_VERSION);
}

/* Version 3's checksum: any one flipped bit of a payload (of any length, the last word
 * partial or not) changes it, and so does the length. */
static void test_checksum64(void **state)
{
	uint8_t b[29];
	(void)state;
	for (size_t i = 0; i < sizeof b; i++)
		b[i] = (uint8_t)(i * 37 + 11);
	for (size_t n = 1; n <= sizeof b; n++) {
		uint32_t sum = tk_btrace_checksum64(b, n);
		assert_int_not_equal(sum, tk_btrace_checksum64(b, n - 1));
		for (size_t i = 0; i < n * 8; i++) {
			b[i / 8] ^= (uint8_t)(1u << (i % 8));
			assert_int_not_equal(sum, tk_btrace_checksum64(b, n));
			b[i / 8] ^= (uint8_t)(1u << (i % 8));
		}
	}
}

/* Files of versions 1 and 2 (FNV-1a checksums) still read; the checksum is the one of the
 * file's version: records of a version 3 file summed with FNV-1a are damaged. */
static void test_old_versions(void **state)
{
	int err = 0;
	(void)state;
	for (unsigned v = 1; v <= 2; v++) {
		img_version = v;
		build(&img, pieces, plen);
		struct tk_btrace *bt = tk_btrace_open(img.b, img.n, NULL, &err);
		assert_non_null(bt);
		assert_int_equal(tk_btrace_info(bt)->version, v);
		assert_true(tk_btrace_info(bt)->complete);
		assert_int_equal(tk_btrace_gaps(bt)->count, 0);
		assert_int_equal(tk_btrace_thread(bt, 1)->pieces, 3);
		tk_btrace_free(bt);
	}
	img_version = 2;
	build(&img, pieces, plen);
	img_version = TK_BTRACE_VERSION;
	img.b[8] = (uint8_t)TK_BTRACE_VERSION;
	struct tk_btrace *bt = tk_btrace_open(img.b, img.n, NULL, &err);
	assert_non_null(bt);
	assert_false(tk_btrace_info(bt)->complete);
	assert_int_equal(tk_btrace_thread_count(bt), 0);
	assert_true(tk_btrace_gaps(bt)->count >= 1);
	tk_btrace_free(bt);
}

/* The files of a followed recording are found by name beside the first: BASE.<pid> and
 * BASE.<pid>.<n>, in pid then exec order; look-alikes are not taken. */
/* The TSC's rate over the run: from the recorder's start when the header has it (a run
 * of 50 us is too short to measure alone), else from the header's start, else unknown. */
static uint64_t measured_hz(uint64_t cal_tsc, uint64_t cal_ns)
{
	static struct img m;
	uint8_t h[TK_BTRACE_HEADER_SIZE] = { 0 };
	uint32_t v = TK_BTRACE_VERSION, hs = TK_BTRACE_HEADER_SIZE, pid = 78;
	uint64_t tsc = 3000000000ull, ns = 1000000000ull;   /* a 2 GHz TSC: ns * 2 + 1e9 */
	memcpy(h, TK_BTRACE_MAGIC, 8);
	memcpy(h + 8, &v, 4);
	memcpy(h + 12, &hs, 4);
	memcpy(h + 16, &pid, 4);
	memcpy(h + 32, &tsc, 8);
	memcpy(h + 40, &ns, 8);
	memcpy(h + 56, &cal_tsc, 8);
	memcpy(h + 64, &cal_ns, 8);
	memset(&m, 0, sizeof m);
	put(&m, h, sizeof h);
	uint64_t pe[6] = { 0, 0, 0, 0, tsc + 100000, ns + 50000 };   /* 50 us later */
	rec(&m, TK_BTRACE_REC_PROCESS_END, 0, 0, pe, sizeof pe);
	int err = 0;
	struct tk_btrace *bt = tk_btrace_open(m.b, m.n, NULL, &err);
	assert_non_null(bt);
	uint64_t hz = tk_btrace_info(bt)->tsc_hz;
	assert_int_equal(tk_btrace_info(bt)->tsc_hz_measured, hz != 0);
	tk_btrace_free(bt);
	return hz;
}

static void test_rate_from_recorder_start(void **state)
{
	(void)state;
	/* 2 ms before the header: (100,000 + 4,000,000) ticks over 2,050,000 ns */
	assert_int_equal(measured_hz(3000000000ull - 4000000, 1000000000ull - 2000000), 2000000000ull);
	assert_int_equal(measured_hz(0, 0), 0);
	/* a start after the header's is not the recorder's: not used */
	assert_int_equal(measured_hz(3000000000ull + 10, 1000000000ull + 5), 0);
}

static void test_related(void **state)
{
	(void)state;
	char dir[] = "/tmp/tk-related-XXXXXX", path[256];
	assert_non_null(mkdtemp(dir));
	static const char *const files[] = { "t.tkbt", "t.tkbt.12", "t.tkbt.12.2", "t.tkbt.12.1",
		"t.tkbt.7", "t.tkbt.x", "t.tkbt.12.a", "t.tkbt.", "t.tkbt.3.", "u.tkbt.5", "t.tkbtx.5" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fclose(f);
	}
	char **v;
	size_t n;
	snprintf(path, sizeof path, "%s/t.tkbt", dir);
	assert_int_equal(tk_btrace_related(path, &v, &n), 0);
	static const char *const want[] = { "t.tkbt.7", "t.tkbt.12", "t.tkbt.12.1", "t.tkbt.12.2" };
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, want[i]);
		assert_string_equal(v[i], path);
	}
	tk_btrace_related_free(v, n);
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof path, "%s/t.tkbt", dir);
	assert_int_equal(tk_btrace_related(path, &v, &n), 0);
	assert_int_equal(n, 0);
	rmdir(dir);
	assert_int_equal(tk_btrace_related("/nonexistent-dir/t.tkbt", &v, &n), -TK_E_IO);
}

/* A container in a growing buffer: one thread's stream of NPIECES pieces of PLEN bytes
 * (any bytes: the reader checks records, not PT), every LOSE-th piece lost (its sequence
 * number skipped), interleaved with a second thread's small pieces. */
struct big {
	uint8_t *b;
	size_t n, cap;
};

static void big_put(struct big *m, const void *p, size_t n)
{
	if (m->n + n > m->cap) {
		m->cap = 2 * (m->n + n);
		m->b = realloc(m->b, m->cap);
		assert_non_null(m->b);
	}
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void big_rec(struct big *m, uint16_t type, uint32_t tid, uint32_t seq, const void *p,
		    uint32_t n)
{
	uint8_t h[TK_BTRACE_REC_HEADER];
	static const uint8_t z[8];
	rec_header(h, TK_BTRACE_VERSION, type, tid, seq, p, n);
	big_put(m, h, sizeof h);
	big_put(m, p, n);
	big_put(m, z, (8 - n % 8) % 8);
}

/* The stream the reader must give: the kept pieces in order, an OVF (02 f3) before each
 * that follows a lost one. */
static uint8_t *expected_stream(const uint8_t *payload, size_t npieces, size_t plen,
				unsigned lose, size_t *n)
{
	uint8_t *e = malloc(npieces * (plen + 2)), *p = e;
	int lost = 0;
	assert_non_null(e);
	for (size_t k = 0; k < npieces; k++) {
		if (k % lose == lose - 1) {
			lost = 1;
			continue;
		}
		if (lost && p != e) {
			*p++ = 0x02;
			*p++ = 0xf3;
		}
		lost = 0;
		memcpy(p, payload + k * plen, plen);
		p += plen;
	}
	*n = (size_t)(p - e);
	return e;
}

static void test_join_parallel(void **state)
{
	const size_t npieces = 400, plen = 60000;   /* 24 MB: joined on the workers */
	const unsigned lose = 37;
	struct big m = { 0 };
	uint8_t h[TK_BTRACE_HEADER_SIZE] = { 0 };
	uint32_t v = TK_BTRACE_VERSION, hs = TK_BTRACE_HEADER_SIZE, pid = 5;
	uint8_t *payload = malloc(npieces * plen), small[100];
	uint64_t x = 88172645463325252ULL;
	(void)state;

	assert_non_null(payload);
	for (size_t i = 0; i < npieces * plen; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		payload[i] = (uint8_t)x;
	}
	memset(small, 0xa5, sizeof small);
	memcpy(h, TK_BTRACE_MAGIC, 8);
	memcpy(h + 8, &v, 4);
	memcpy(h + 12, &hs, 4);
	memcpy(h + 16, &pid, 4);
	big_put(&m, h, sizeof h);
	for (size_t k = 0; k < npieces; k++) {
		if (k % lose != lose - 1)
			big_rec(&m, TK_BTRACE_REC_STREAM, 7, (uint32_t)k, payload + k * plen,
				(uint32_t)plen);
		big_rec(&m, TK_BTRACE_REC_STREAM, 8, (uint32_t)k, small, sizeof small);
	}
	size_t want_n;
	uint8_t *want = expected_stream(payload, npieces, plen, lose, &want_n);
	assert_true(want_n >= ((size_t)16 << 20));
	for (unsigned nt = 1; nt <= 3; nt++) {
		struct tk_btrace_opts o = { .sz = sizeof o, .nthreads = nt };
		int err = 0;
		struct tk_btrace *bt = tk_btrace_open(m.b, m.n, &o, &err);
		assert_non_null(bt);
		assert_int_equal(tk_btrace_thread(bt, 0)->lost_pieces, npieces / lose);
		uint8_t *s;
		size_t n;
		assert_int_equal(tk_btrace_thread_stream(bt, 0, &s, &n), 0);
		assert_int_equal(n, want_n);
		assert_memory_equal(s, want, n);
		free(s);
		tk_btrace_free(bt);
	}
	free(want);
	free(payload);
	free(m.b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_corrupt_piece),
		cmocka_unit_test(test_garbage_and_truncation),
		cmocka_unit_test(test_checked_ahead),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_checksum64),
		cmocka_unit_test(test_old_versions),
		cmocka_unit_test(test_related),
		cmocka_unit_test(test_rate_from_recorder_start),
		cmocka_unit_test(test_join_parallel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
