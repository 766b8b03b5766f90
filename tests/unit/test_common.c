/* lib/common: input (plain, gzip, zstd, stdin-like pipes, truncated), buffer formatting,
 * worker pool ordering, gap bookkeeping, error names, the memory helper (ahead.c), the
 * radix sorts (sort.c), the relay's thread (relay.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

static char tmpdir[] = "/tmp/tk-test-common-XXXXXX";

static char *tmp_path(const char *name)
{
	static char path[256];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	return path;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* Deterministic, compressible content. */
static uint8_t *make_content(size_t n)
{
	uint8_t *p = malloc(n);
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)("tracekit "[i % 9] ^ ((x >> 16) & 1));
	}
	return p;
}

static size_t gzip_into(const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = (Bytef *)src;
	zs.avail_in = (uInt)n;
	zs.next_out = dst;
	zs.avail_out = (uInt)cap;
	assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
	size_t out = cap - zs.avail_out;
	deflateEnd(&zs);
	return out;
}

static void check_map_and_stream(const char *path, const uint8_t *want, size_t n,
				 enum tk_compression comp)
{
	struct tk_input *in;
	const uint8_t *p;
	size_t len;

	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	assert_int_equal(tk_input_compression(in), comp);
	assert_int_equal(tk_input_peek(in, &p, &len), 0);
	assert_true(len > 0 && len <= n);
	assert_memory_equal(p, want, len);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(p, want, n);
	tk_input_free(in);

	/* streaming in odd-sized pieces gives the same bytes */
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	uint8_t *got = malloc(n + 1);
	size_t total = 0;
	long r;
	while ((r = tk_input_read(in, got + total, total + 777 <= n + 1 ? 777 : n + 1 - total)) > 0)
		total += (size_t)r;
	assert_int_equal(r, 0);
	assert_int_equal(total, n);
	assert_memory_equal(got, want, n);
	free(got);
	tk_input_free(in);
}

static void test_input_plain_gzip_zstd(void **state)
{
	(void)state;
	size_t n = 300000;
	uint8_t *content = make_content(n);
	size_t cap = n + 1024;
	uint8_t *comp = malloc(cap);

	write_file(tmp_path("plain"), content, n);
	check_map_and_stream(tmp_path("plain"), content, n, TK_COMP_NONE);

	size_t gz = gzip_into(content, n, comp, cap);
	write_file(tmp_path("x.gz"), comp, gz);
	check_map_and_stream(tmp_path("x.gz"), content, n, TK_COMP_GZIP);

	size_t zs = ZSTD_compress(comp, cap, content, n, 3);
	assert_false(ZSTD_isError(zs));
	write_file(tmp_path("x.zst"), comp, zs);
	check_map_and_stream(tmp_path("x.zst"), content, n, TK_COMP_ZSTD);

	free(comp);
	free(content);
}

static char last_log[1024];
static void capture_log(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx, (void)level;
	snprintf(last_log, sizeof last_log, "%s", msg);
}

static void test_input_gzip_multimember(void **state)
{
	(void)state;
	uint8_t a[1000], b[3000], comp[8192];
	memset(a, 'a', sizeof a);
	memset(b, 'b', sizeof b);
	size_t n1 = gzip_into(a, sizeof a, comp, sizeof comp);
	size_t n2 = gzip_into(b, sizeof b, comp + n1, sizeof comp - n1);
	write_file(tmp_path("multi.gz"), comp, n1 + n2);

	struct tk_input *in;
	const uint8_t *p;
	size_t len;
	assert_int_equal(tk_input_open(&in, tmp_path("multi.gz"), NULL), 0);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, sizeof a + sizeof b);
	assert_memory_equal(p, a, sizeof a);
	assert_memory_equal(p + sizeof a, b, sizeof b);
	tk_input_free(in);

	/* the size a gzip file states (its last member's) far short of what it holds: the
	 * map's buffer, made that size, grows */
	size_t n = (size_t)3 << 20, small = 600000;
	uint8_t *big = make_content(n), *z = malloc(n);
	size_t z1 = gzip_into(big, n - small, z, n);
	size_t z2 = gzip_into(big + n - small, small, z + z1, n - z1);
	assert_true(small >= (z1 + z2) / 2 && small / 64 <= z1 + z2);   /* taken as plausible */
	write_file(tmp_path("short-isize.gz"), z, z1 + z2);
	assert_int_equal(tk_input_open(&in, tmp_path("short-isize.gz"), NULL), 0);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(p, big, n);
	tk_input_free(in);

	/* ... and far over it (a hostile ISIZE, 60 times the file): the same bytes, the
	 * gzip's length check failing at the end */
	size_t zn = gzip_into(big, n, z, n);
	uint32_t lie = (uint32_t)(60 * zn);
	memcpy(z + zn - 4, &lie, 4);
	write_file(tmp_path("long-isize.gz"), z, zn);
	tk_set_log(capture_log, NULL);
	assert_int_equal(tk_input_open(&in, tmp_path("long-isize.gz"), NULL), 0);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(p, big, n);
	assert_int_equal(tk_input_cut(in, NULL), TK_INPUT_CUT);
	tk_input_free(in);
	tk_set_log(NULL, NULL);
	free(z);
	free(big);
}

static void test_input_truncated_compressed(void **state)
{
	(void)state;
	size_t n = 600000;   /* several zstd blocks: one half holds whole ones */
	uint8_t *content = make_content(n);
	uint8_t *comp = malloc(n + 1024);
	struct tk_input *in;
	const uint8_t *p;
	size_t len;

	tk_set_log(capture_log, NULL);
	size_t gz = gzip_into(content, n, comp, n + 1024);
	write_file(tmp_path("trunc.gz"), comp, gz / 2);
	uint64_t cut;
	/* what decompresses before the cut is read (zcat recovers it too); the cut is told
	 * with its decompressed offset */
	assert_int_equal(tk_input_open(&in, tmp_path("trunc.gz"), NULL), 0);
	last_log[0] = 0;
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_true(len > n / 3 && len < n);
	assert_memory_equal(p, content, len);
	assert_int_equal(tk_input_cut(in, &cut), 1);
	assert_int_equal(cut, len);
	assert_non_null(strstr(last_log, "trunc.gz"));
	assert_non_null(strstr(last_log, "ends early"));
	tk_input_free(in);

	/* a zstd file cut in half: the whole blocks before the cut, by map and by stream */
	size_t zs = ZSTD_compress(comp, n + 1024, content, n, 3);
	write_file(tmp_path("trunc.zst"), comp, zs / 2);
	for (int stream = 0; stream < 2; stream++) {
		assert_int_equal(tk_input_open(&in, tmp_path("trunc.zst"), NULL), 0);
		last_log[0] = 0;
		if (stream) {
			static uint8_t buf[600000];
			long r;
			len = 0;
			while ((r = tk_input_read(in, buf + len, 4096)) > 0)
				len += (size_t)r;
			assert_int_equal(r, 0);
			p = buf;
		} else {
			assert_int_equal(tk_input_map(in, &p, &len), 0);
		}
		assert_true(len > 0 && len < n);
		assert_memory_equal(p, content, len);
		assert_int_equal(tk_input_cut(in, &cut), 1);
		assert_int_equal(cut, len);
		assert_non_null(strstr(last_log, "ends early"));
		tk_input_free(in);
	}

	/* corrupt bytes in the middle of a gzip stream: read up to where zlib notices (which
	 * may be the check at the end), and reported */
	gz = gzip_into(content, n, comp, n + 1024);
	for (size_t i = gz / 3; i < gz / 3 + 64; i++)
		comp[i] ^= 0x5a;
	write_file(tmp_path("corrupt.gz"), comp, gz);
	assert_int_equal(tk_input_open(&in, tmp_path("corrupt.gz"), NULL), 0);
	last_log[0] = 0;
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(tk_input_cut(in, &cut), 1);
	assert_int_equal(cut, len);
	assert_non_null(strstr(last_log, "corrupt gzip data"));
	tk_input_free(in);

	/* an intact file is not cut */
	write_file(tmp_path("whole.zst"), comp, ZSTD_compress(comp, n + 1024, content, n, 3));
	assert_int_equal(tk_input_open(&in, tmp_path("whole.zst"), NULL), 0);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, n);
	assert_int_equal(tk_input_cut(in, NULL), 0);
	tk_input_free(in);
	tk_set_log(NULL, NULL);
	free(comp);
	free(content);
}

/* Decompressing ahead on a thread of its own gives the bytes, cuts and messages that
 * reading on the caller's thread gives, the cut told only when the reader gets to it. */
static int logs_seen;
static size_t log_at, read_so_far;
static void count_log(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx, (void)level;
	snprintf(last_log, sizeof last_log, "%s", msg);
	if (!logs_seen++)
		log_at = read_so_far;
}

/* PATH read in pieces of PIECE bytes, ahead or not: its bytes into GOT (CAP), the number
 * read returned, *CUT the cut's offset (UINT64_MAX: none). */
static size_t read_all(const char *path, int ahead, size_t piece, uint8_t *got, size_t cap,
		       uint64_t *cut)
{
	struct tk_input *in;
	long r;

	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	tk_input_read_ahead(in, ahead);
	logs_seen = 0;
	last_log[0] = 0;
	read_so_far = 0;
	while ((r = tk_input_read(in, got + read_so_far,
				  read_so_far + piece <= cap ? piece : cap - read_so_far)) > 0)
		read_so_far += (size_t)r;
	assert_int_equal(r, 0);
	if (tk_input_cut(in, cut) != TK_INPUT_CUT)
		*cut = UINT64_MAX;
	tk_input_free(in);
	return read_so_far;
}

static void test_input_read_ahead(void **state)
{
	(void)state;
	size_t n = (size_t)12 << 20;   /* blocks of 1 MiB, a ring of four: wrapped around */
	uint8_t *content = make_content(n);
	size_t cap = n + 4096;
	uint8_t *comp = malloc(cap), *got = malloc(cap), *want = malloc(cap);
	const size_t pieces[] = { 777, 100003, (size_t)3 << 20 };
	uint64_t cut, cut_want;

	tk_set_log(count_log, NULL);
	size_t gz = gzip_into(content, n, comp, cap);
	write_file(tmp_path("ahead.gz"), comp, gz);
	size_t zs = ZSTD_compress(comp, cap, content, n, 3);
	assert_false(ZSTD_isError(zs));
	write_file(tmp_path("ahead.zst"), comp, zs);
	for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
		assert_int_equal(read_all(tmp_path("ahead.gz"), 1, pieces[i], got, cap, &cut), n);
		assert_memory_equal(got, content, n);
		assert_int_equal(cut, UINT64_MAX);
		assert_int_equal(read_all(tmp_path("ahead.zst"), 1, pieces[i], got, cap, &cut), n);
		assert_memory_equal(got, content, n);
		assert_int_equal(logs_seen, 0);
	}

	/* cut in half, and corrupt in the middle: the same bytes and offset as on the
	 * caller's thread, one message, given once the reader is within a block of the cut
	 * (the thread finds it up to four blocks earlier) */
	gz = gzip_into(content, n, comp, cap);
	write_file(tmp_path("ahead-cut.gz"), comp, gz / 2);
	for (size_t i = gz / 2; i < gz / 2 + 64; i++)
		comp[i] ^= 0x5a;
	write_file(tmp_path("ahead-bad.gz"), comp, gz);
	write_file(tmp_path("ahead-cut.zst"), comp, ZSTD_compress(comp, cap, content, n, 3) / 2);
	const char *damaged[] = { "ahead-cut.gz", "ahead-bad.gz", "ahead-cut.zst" };
	for (size_t f = 0; f < 3; f++) {
		char path[256], msg[sizeof last_log];
		snprintf(path, sizeof path, "%s", tmp_path(damaged[f]));
		size_t len = read_all(path, 0, 65536, want, cap, &cut_want);
		snprintf(msg, sizeof msg, "%s", last_log);
		/* (the corrupt gzip decompresses to garbage until its check at the end) */
		assert_true(len > ((size_t)5 << 20) && len < n + 4096);
		assert_int_equal(cut_want, len);
		assert_int_equal(logs_seen, 1);
		assert_memory_equal(want, content, f == 1 ? gz / 2 : len);
		assert_int_equal(read_all(path, 1, 65536, got, cap, &cut), len);
		assert_memory_equal(got, want, len);
		assert_int_equal(cut, cut_want);
		assert_int_equal(logs_seen, 1);
		assert_string_equal(last_log, msg);
		assert_true(log_at + ((size_t)1 << 20) >= cut);
	}
	tk_set_log(NULL, NULL);

	/* freed after a few bytes: the thread stops (no hang; ASan sees no leak) */
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, tmp_path("ahead.gz"), NULL), 0);
	tk_input_read_ahead(in, 1);
	assert_int_equal(tk_input_read(in, got, 100), 100);
	assert_memory_equal(got, content, 100);
	tk_input_free(in);
	free(want);
	free(got);
	free(comp);
	free(content);
}

static void test_input_pipe(void **state)
{
	(void)state;
	size_t n = 100000;
	uint8_t *content = make_content(n);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		size_t off = 0;
		while (off < n) {
			ssize_t w = write(fds[1], content + off, n - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	close(fds[1]);
	int saved = dup(STDIN_FILENO);
	dup2(fds[0], STDIN_FILENO);
	close(fds[0]);

	struct tk_input *in;
	const uint8_t *p;
	size_t len;
	assert_int_equal(tk_input_open(&in, "-", NULL), 0);
	assert_int_equal(tk_input_peek(in, &p, &len), 0);
	assert_true(len > 0);
	assert_memory_equal(p, content, len);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(p, content, n);
	tk_input_free(in);
	dup2(saved, STDIN_FILENO);
	close(saved);
	free(content);
}

static void test_input_errors(void **state)
{
	(void)state;
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, tmp_path("does-not-exist"), NULL), -TK_E_IO);
	assert_null(in);
	assert_int_equal(tk_input_open(&in, tmpdir, NULL), -TK_E_IO);

	write_file(tmp_path("empty"), "", 0);
	const uint8_t *p;
	size_t len;
	assert_int_equal(tk_input_open(&in, tmp_path("empty"), NULL), 0);
	assert_int_equal(tk_input_peek(in, &p, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(tk_input_map(in, &p, &len), 0);
	assert_int_equal(len, 0);
	tk_input_free(in);
}

static void test_buf_formatting(void **state)
{
	(void)state;
	struct tk_buf b;
	assert_int_equal(tk_buf_init(&b, -1, 0), 0);
	uint64_t vals[] = { 0, 1, 9, 10, 99, 100, 12345, 4294967295u, 10000000000000000000u,
			    UINT64_MAX };
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		char want[64];
		b.len = 0;
		tk_buf_u64(&b, vals[i]);
		snprintf(want, sizeof want, "%llu", (unsigned long long)vals[i]);
		assert_int_equal(b.len, strlen(want));
		assert_memory_equal(b.data, want, b.len);

		b.len = 0;
		tk_buf_hex(&b, vals[i], 16);
		snprintf(want, sizeof want, "%016llx", (unsigned long long)vals[i]);
		assert_memory_equal(b.data, want, 16);
		assert_int_equal(b.len, 16);

		b.len = 0;
		tk_buf_hex(&b, vals[i], 0);
		snprintf(want, sizeof want, "%llx", (unsigned long long)vals[i]);
		assert_int_equal(b.len, strlen(want));
		assert_memory_equal(b.data, want, b.len);
	}
	/* the digit count changes at each power of ten: the integer is written in place, its
	 * length worked out first (and a full buffer must grow for it, not be overrun) */
	for (uint64_t p = 1;; p *= 10) {
		uint64_t around[3] = { p - 1, p, p + 1 };
		for (int k = 0; k < 3; k++) {
			char want[32];
			struct tk_buf full;
			assert_int_equal(tk_buf_init(&full, -1, 0), 0);
			tk_buf_put(&full, "x", 1);
			full.cap = full.len;   /* (no room left: the next put must reserve) */
			tk_buf_u64(&full, around[k]);
			snprintf(want, sizeof want, "x%llu", (unsigned long long)around[k]);
			assert_int_equal(full.len, strlen(want));
			assert_memory_equal(full.data, want, full.len);
			tk_buf_free(&full);
		}
		if (p > UINT64_MAX / 10)
			break;
	}
	b.len = 0;
	tk_buf_i64(&b, INT64_MIN);
	assert_memory_equal(b.data, "-9223372036854775808", 20);
	b.len = 0;
	tk_buf_fixed(&b, -12345, 3);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.data, "-12.345", 7);
	b.len = 0;
	tk_buf_fixed(&b, 5, 2);
	assert_memory_equal(b.data, "0.05", 4);
	b.len = 0;
	tk_buf_json_str(&b, "a\"b\\\n\x01", 6);
	assert_int_equal(b.len, strlen("\"a\\\"b\\\\\\n\\u0001\""));
	assert_memory_equal(b.data, "\"a\\\"b\\\\\\n\\u0001\"", b.len);
	b.len = 0;
	tk_buf_hex_bytes(&b, (const uint8_t *)"\x02\x82\xff", 3, ' ');
	assert_memory_equal(b.data, "02 82 ff", 8);
	b.len = 0;
	assert_int_equal(tk_buf_printf(&b, "%s-%d", "x", 42), 4);
	assert_memory_equal(b.data, "x-42", 4);
	/* growth far beyond the initial capacity */
	b.len = 0;
	for (int i = 0; i < 100000; i++)
		tk_buf_puts(&b, "0123456789");
	assert_int_equal(b.len, 1000000);
	assert_int_equal(b.err, 0);
	tk_buf_free(&b);
}

/* Text for a terminal: C0, DEL and C1 controls escaped; UTF-8 and backslashes kept. */
static void test_text_escape(void **state)
{
	(void)state;
	struct tk_buf b;
	assert_int_equal(tk_buf_init(&b, -1, 16), 0);
	const char in[] = "a\x1b[2J\r\n\t\x7f\\ \xc3\xa9 \xc2\x9b \x9b \xe2\x82 \xf0\x9f\x98\x80";
	const char want[] = "a\\x1b[2J\\r\\n\\t\\x7f\\ \xc3\xa9 \\xc2\\x9b \\x9b \\xe2\\x82 \xf0\x9f\x98\x80";
	tk_buf_text(&b, in, sizeof in - 1);
	assert_int_equal(b.len, sizeof want - 1);
	assert_memory_equal(b.data, want, b.len);
	char out[sizeof want], small[8];
	assert_int_equal(tk_text_escape(out, sizeof out, in), sizeof want - 1);
	assert_string_equal(out, want);
	/* cut at a whole escape, terminated */
	assert_int_equal(tk_text_escape(small, sizeof small, "ab\x1b\x1b"), 6);
	assert_string_equal(small, "ab\\x1b");
	tk_buf_free(&b);
}

static void test_buf_fd_flush(void **state)
{
	(void)state;
	int fd = open(tmp_path("bufout"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct tk_buf b;
	assert_true(fd >= 0);
	assert_int_equal(tk_buf_init(&b, fd, 256), 0);
	for (int i = 0; i < 10000; i++) {
		tk_buf_u64(&b, (uint64_t)i);
		tk_buf_putc(&b, '\n');
	}
	assert_int_equal(tk_buf_flush(&b), 0);
	close(fd);
	tk_buf_free(&b);
	FILE *f = fopen(tmp_path("bufout"), "r");
	int expect = 0, v;
	while (fscanf(f, "%d", &v) == 1)
		assert_int_equal(v, expect++);
	fclose(f);
	assert_int_equal(expect, 10000);
}

/* Pool: each job computes a value; merge must see them strictly in order. */
struct pool_ctx {
	uint64_t *results;
	uint64_t *merged;
	size_t nmerged;
	int fail_at;
	pthread_t caller;
	size_t on_caller;         /* jobs the calling thread ran (caller_works; atomic) */
	int wait_caller;          /* job 1, on a worker, waits until the caller ran one */
};

static int pool_work(void *ctx, size_t i)
{
	struct pool_ctx *c = ctx;
	uint64_t h = i;
	/* uneven amounts of work so that jobs finish out of order */
	for (size_t k = 0; k < (i % 7) * 20000; k++)
		h = tk_hash64(h);
	c->results[i] = h;
	if (pthread_equal(pthread_self(), c->caller))
		__atomic_add_fetch(&c->on_caller, 1, __ATOMIC_RELEASE);
	else if (c->wait_caller && i == 1) {
		/* the caller, waiting for this job's merge, must take another: however slow
		 * the machine, it has run one before this returns (10 s at most: a pool that
		 * never lets it fails the test, not hangs it) */
		time_t until = time(NULL) + 10;
		while (!__atomic_load_n(&c->on_caller, __ATOMIC_ACQUIRE) && time(NULL) < until)
			sched_yield();
	}
	return (int)i == c->fail_at ? -TK_E_BAD_FORMAT : 0;
}

static int pool_merge(void *ctx, size_t i)
{
	struct pool_ctx *c = ctx;
	assert_int_equal(i, c->nmerged);
	c->merged[c->nmerged++] = c->results[i];
	return 0;
}

static size_t run_pool_with(unsigned threads, int caller_works, size_t jobs, uint64_t *merged,
			    size_t *nmerged, int fail_at, int *rc)
{
	struct pool_ctx c = { calloc(jobs, 8), merged, 0, fail_at, pthread_self(), 0, caller_works };
	struct tk_pool_opts o = { sizeof o, threads, 0, caller_works };
	*rc = tk_pool_run(&o, jobs, pool_work, pool_merge, &c);
	*nmerged = c.nmerged;
	free(c.results);
	return c.on_caller;
}

static void run_pool(unsigned threads, size_t jobs, uint64_t *merged, size_t *nmerged,
		     int fail_at, int *rc)
{
	run_pool_with(threads, 0, jobs, merged, nmerged, fail_at, rc);
}

static void test_pool_ordered(void **state)
{
	(void)state;
	size_t jobs = 300, n1, n4;
	uint64_t *m1 = calloc(jobs, 8), *m4 = calloc(jobs, 8);
	int rc;

	run_pool(1, jobs, m1, &n1, -1, &rc);
	assert_int_equal(rc, 0);
	run_pool(4, jobs, m4, &n4, -1, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(n1, jobs);
	assert_int_equal(n4, jobs);
	assert_memory_equal(m1, m4, jobs * 8);

	/* an error stops the run and is returned; nothing after it is merged */
	run_pool(3, jobs, m4, &n4, 50, &rc);
	assert_int_equal(rc, -TK_E_BAD_FORMAT);
	assert_true(n4 <= 50);
	run_pool(1, jobs, m1, &n1, 50, &rc);
	assert_int_equal(rc, -TK_E_BAD_FORMAT);
	assert_int_equal(n1, 50);

	/* zero jobs */
	run_pool(4, 0, m4, &n4, -1, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(n4, 0);

	/* the calling thread working too: the same merges in the same order, an error stops
	 * the run, and the caller runs jobs (job 1 on a worker waits for that) */
	for (unsigned t = 2; t <= 4; t++) {
		size_t on_caller = run_pool_with(t, 1, jobs, m4, &n4, -1, &rc);
		assert_int_equal(rc, 0);
		assert_int_equal(n4, jobs);
		assert_memory_equal(m1, m4, jobs * 8);
		assert_true(on_caller > 0);
		run_pool_with(t, 1, jobs, m4, &n4, 50, &rc);
		assert_int_equal(rc, -TK_E_BAD_FORMAT);
		assert_true(n4 <= 50);
	}
	free(m1);
	free(m4);
}

static size_t threads_now(void)
{
	size_t n = 0;
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A job that runs a pool of its own (the pools nest: a chunk's work may use one). */
static int nested_work(void *ctx, size_t i)
{
	uint64_t *out = ctx, inner[40], n;
	int rc;
	run_pool(2, 40, inner, &n, -1, &rc);
	out[i] = rc == 0 && n == 40 ? inner[i % 40] : 0;
	return rc;
}

static void *pools_in_turn(void *arg)
{
	uint64_t *want = arg, got[300];
	size_t n;
	int rc;
	for (int r = 0; r < 20; r++) {
		run_pool(3, 300, got, &n, -1, &rc);
		if (rc || n != 300 || memcmp(got, want, sizeof got))
			return (void *)1;
	}
	return NULL;
}

/* A pool's workers are kept for the next pool, not made anew (glibc gives an ended
 * thread's stack back, so each new one faulted it in again): after a pool of 4 its 4
 * threads are still there, and 50 more pools add none. Pools run at once from two
 * threads, and pools inside a pool's jobs, take what is parked or start more, and merge
 * what they merged before. */
static void test_pool_threads_kept(void **state)
{
	(void)state;
	uint64_t want[300], got[300];
	size_t n;
	int rc;

	run_pool(1, 300, want, &n, -1, &rc);
	run_pool(4, 300, got, &n, -1, &rc);
	assert_int_equal(rc, 0);
	size_t kept = threads_now();
	assert_true(kept >= 5);   /* this one and the pool's 4 */
	for (int r = 0; r < 50; r++) {
		run_pool(r % 2 ? 4 : 2, 300, got, &n, -1, &rc);
		assert_int_equal(rc, 0);
		assert_memory_equal(got, want, sizeof want);
	}
	assert_int_equal(threads_now(), kept);

	pthread_t other;
	assert_int_equal(pthread_create(&other, NULL, pools_in_turn, want), 0);
	void *other_failed = pools_in_turn(want);
	void *failed;
	pthread_join(other, &failed);
	assert_null(other_failed);
	assert_null(failed);

	uint64_t inner[40], outer[120];
	run_pool(1, 40, inner, &n, -1, &rc);
	struct tk_pool_opts o = { sizeof o, 3, 0, 0 };
	assert_int_equal(tk_pool_run(&o, 120, nested_work, NULL, outer), 0);
	for (size_t i = 0; i < 120; i++)
		assert_true(outer[i] == inner[i % 40]);
}

static int no_work(void *ctx, size_t i)
{
	(void)ctx;
	(void)i;
	return 0;
}

static void *pools_back_to_back(void *arg)
{
	struct tk_pool_opts o = { sizeof o, 3, 0, 0 };
	for (int r = 0; r < 200; r++)
		if (tk_pool_run(&o, 3, no_work, NULL, NULL) != 0)
			return (void *)1;
	*(int *)arg = 1;
	return NULL;
}

/* Pools one after the other, with the pauses a loaded machine makes: a worker of the last
 * pool not yet waiting when the next one takes it (it runs that pool's jobs unwoken and
 * parks again) while the caller has not woken the others yet. All of them must still be
 * woken: with the idle list's links read after the lock was let go, the third pool waited
 * for ever. A watchdog: a hang fails the test in 60 s. */
static void test_pool_wakes_every_thread(void **state)
{
	(void)state;
	pthread_t t;
	int finished = 0;
	void *failed = (void *)1;
	struct timespec until;

	tk_pool_test_pause(100);
	assert_int_equal(pthread_create(&t, NULL, pools_back_to_back, &finished), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	int rc = pthread_timedjoin_np(t, &failed, &until);
	tk_pool_test_pause(0);
	if (rc != 0)
		fail_msg("200 pools in a row did not end in 60 s: a parked thread was never woken");
	assert_null(failed);
	assert_int_equal(finished, 1);
}

/* The pools' CPU accounting is read only when asked for (TK_PHASES): off, runs leave
 * tk_pool_times as it was; on, they count their jobs. */
static void test_pool_timing(void **state)
{
	(void)state;
	size_t jobs = 40, n;
	uint64_t *m = calloc(jobs, 8);
	struct tk_pool_times a, b;
	int rc;

	tk_pool_timing(0);
	tk_pool_times(&a);
	run_pool(1, jobs, m, &n, -1, &rc);
	run_pool(3, jobs, m, &n, -1, &rc);
	tk_pool_times(&b);
	assert_int_equal(rc, 0);
	assert_true(b.jobs == a.jobs && b.runs == a.runs && b.worker_cpu == a.worker_cpu);

	tk_pool_timing(1);
	run_pool(1, jobs, m, &n, -1, &rc);
	run_pool(3, jobs, m, &n, -1, &rc);
	tk_pool_times(&b);
	tk_pool_timing(0);
	assert_int_equal(b.jobs, a.jobs + 2 * jobs);
	assert_int_equal(b.runs, a.runs + 2);
	assert_true(b.worker_cpu >= a.worker_cpu && b.merge_cpu >= a.merge_cpu);
	free(m);
}

/* Held events past TK_HUGE_FROM fill whole huge pages: the capacity is what the pages
 * hold, and the events already held move with it. */
static void test_event_vec_capacity(void **state)
{
	(void)state;
	struct tk_event_vec v = { 0 };
	size_t sz = sizeof(struct tk_event);

	for (uint64_t i = 0; i < 3 * TK_HUGE_FROM / sz; i++) {
		struct tk_event e = { .kind = TK_EV_STAGE_BEGIN, .addr = i };
		assert_int_equal(tk_event_vec_add(&v, &e, 1), 0);
		if (v.cap * sz >= TK_HUGE_FROM)
			assert_int_equal(v.cap, (v.cap * sz + TK_HUGE_PAGE - 1) / TK_HUGE_PAGE * TK_HUGE_PAGE / sz);
	}
	assert_true(v.cap * sz >= TK_HUGE_PAGE);
	for (uint64_t i = 0; i < v.n; i++)
		assert_int_equal(v.ev[i].addr, i);
	tk_event_vec_free(&v);
}

/* A sink for a lean hold: thin drops time events; prepare counts the events it saw
 * (raw or thinned) and cuts at the first event of track 9, or gives up at track 8; take
 * and events() record what reached them. */
struct lean_sink {
	size_t cut_seen;             /* prepare's cut, in the events it saw */
	size_t take_first, take_n, events_n, prepared;
	uint64_t take_addr0;         /* the first event take got */
	int took, gave_up;
};
struct lean_prep { size_t nev, cut; };

static size_t lean_thin(void *ctx, const struct tk_event *ev, size_t n, struct tk_event *out)
{
	size_t k = 0;
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		if (ev[i].kind != TK_EV_TIME)
			out[k++] = ev[i];
	return k;
}

static void *lean_prepare(void *ctx, void *prepared, const struct tk_event *ev, size_t n)
{
	struct lean_sink *s = ctx;
	struct lean_prep *p = prepared;
	if (!p) {
		p = calloc(1, sizeof *p);
		p->cut = SIZE_MAX;
		s->prepared++;
	}
	for (size_t i = 0; i < n && p->cut == SIZE_MAX; i++) {
		if (ev[i].track == 8) {
			free(p);
			s->gave_up = 1;
			return NULL;
		}
		if (ev[i].track == 9)
			p->cut = s->cut_seen = p->nev + i;
	}
	p->nev += n;
	return p;
}

static int lean_take(void *ctx, const struct tk_event *ev, size_t n, size_t first, void *prepared)
{
	struct lean_sink *s = ctx;
	s->took = 1;
	s->take_first = first;
	s->take_n = n;
	s->take_addr0 = n ? ev[0].addr : UINT64_MAX;
	free(prepared);
	return 0;
}

static int lean_events(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ev;
	((struct lean_sink *)ctx)->events_n += n;
	return 0;
}

static void lean_drop(void *ctx, void *prepared)
{
	(void)ctx;
	free(prepared);
}

static size_t lean_need_from(void *ctx, const void *prepared)
{
	(void)ctx;
	return ((const struct lean_prep *)prepared)->cut;
}

/* Three batches of 10 events, every other one a time event (thinned away); event i has
 * addr i, and the one at index SPECIAL (if any) is on track TRACK. */
static int lean_run(struct tk_event_vec *v, struct tk_sink *to, size_t special, uint32_t track)
{
	int rc = 0;
	for (size_t b = 0; b < 3 && rc >= 0; b++) {
		struct tk_event ev[10];
		for (size_t i = 0; i < 10; i++) {
			size_t k = 10 * b + i;
			ev[i] = (struct tk_event){ .kind = k % 2 ? TK_EV_TIME : TK_EV_CALL, .addr = k,
						   .track = k == special ? track : 1 };
		}
		rc = tk_event_vec_add_thin(v, to, ev, 10);
	}
	return rc < 0 ? rc : tk_event_vec_pass(v, *to);
}

/* A lean hold prepares its events as they come and keeps only what take needs: from the
 * cut on, thinned, take told the cut's index among the events prepare saw; a chunk
 * passed whole keeps nothing; one given up in its first events keeps them all for
 * events(), and later asks for the chunk again. */
static void test_event_vec_lean(void **state)
{
	(void)state;
	struct lean_sink s;
	struct tk_event_vec v = { .lean = 1 };
	struct tk_sink to = { .events = lean_events, .ctx = &s, .thin = lean_thin, .prepare = lean_prepare,
			      .take = lean_take, .drop = lean_drop, .need_from = lean_need_from };

	/* no cut: all prepared, none kept */
	memset(&s, 0, sizeof s);
	assert_int_equal(lean_run(&v, &to, SIZE_MAX, 0), 0);
	assert_true(s.took);
	assert_int_equal(s.take_n, 0);
	assert_int_equal(s.take_first, 30);
	assert_int_equal(s.events_n, 0);
	v.lean = 1;

	/* a cut at event 14 (in the second batch): take gets 14, 16, ..., 28, from index 14 */
	memset(&s, 0, sizeof s);
	assert_int_equal(lean_run(&v, &to, 14, 9), 0);
	assert_true(s.took);
	assert_int_equal(s.cut_seen, 14);
	assert_int_equal(s.take_first, 14);
	assert_int_equal(s.take_n, 8);
	assert_int_equal(s.take_addr0, 14);
	assert_int_equal(s.prepared, 1);
	v.lean = 1;

	/* given up in the first batch: its events and the rest, thinned, to events() */
	memset(&s, 0, sizeof s);
	assert_int_equal(lean_run(&v, &to, 4, 8), 0);
	assert_true(s.gave_up && !s.took);
	assert_int_equal(s.events_n, 15);
	v.lean = 1;

	/* given up in the second batch, the first one's events not kept: the chunk again */
	memset(&s, 0, sizeof s);
	assert_int_equal(lean_run(&v, &to, 12, 8), TK_SINK_AGAIN);
	assert_true(s.gave_up && !s.took);
	assert_int_equal(s.events_n, 0);
	tk_event_vec_free(&v);
}

/* The relay's consumer: checks each event against the order the producer made them in,
 * payloads included, and fails on request after FAIL_AT events. */
struct relay_check {
	uint64_t seen, fail_at;
	int bad;
};

static int relay_check_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct relay_check *c = ctx;

	for (size_t i = 0; i < n; i++, c->seen++) {
		char want[32];
		int len = snprintf(want, sizeof want, "label %llu", (unsigned long long)c->seen);
		if (ev[i].addr != c->seen)
			c->bad = 1;
		if (ev[i].kind == TK_EV_TYPED &&
		    (ev[i].count != (uint64_t)len || memcmp(ev[i].data, want, (size_t)len)))
			c->bad = 1;
		if (c->seen == c->fail_at)
			return -TK_E_BAD_FORMAT;
	}
	return 0;
}

/* Events sent in uneven groups from a buffer the producer rewrites right away: every third
 * one a label whose text lives in that buffer only during the call. */
static int relay_produce(struct tk_sink s, uint64_t total)
{
	struct tk_event ev[37];
	char text[37][32];
	uint64_t id = 0;

	while (id < total) {
		size_t n = 1 + (size_t)(id % 37);
		if (n > total - id)
			n = (size_t)(total - id);
		for (size_t i = 0; i < n; i++, id++) {
			ev[i] = (struct tk_event){ .kind = TK_EV_STAGE_BEGIN, .addr = id };
			if (id % 3 == 0) {
				int len = snprintf(text[i], sizeof text[i], "label %llu", (unsigned long long)id);
				ev[i].kind = TK_EV_TYPED;
				ev[i].data = text[i];
				ev[i].count = (uint64_t)len;
			}
		}
		int rc = s.events(s.ctx, ev, n);
		memset(text, 'x', sizeof text);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void test_relay(void **state)
{
	(void)state;
	struct relay_check c = { .fail_at = UINT64_MAX };
	int err;
	struct tk_relay *r = tk_relay_new((struct tk_sink){ relay_check_events, &c, NULL }, &err);

	assert_non_null(r);
	assert_int_equal(relay_produce(tk_relay_sink(r), 100000), 0);
	assert_int_equal(tk_relay_finish(r), 0);
	tk_relay_free(r);
	assert_int_equal(c.seen, 100000);
	assert_false(c.bad);

	/* the consumer's error stops the producer (at a later call) and is what finish says;
	 * nothing after it reaches the consumer */
	c = (struct relay_check){ .fail_at = 30000 };
	r = tk_relay_new((struct tk_sink){ relay_check_events, &c, NULL }, &err);
	assert_non_null(r);
	assert_int_equal(relay_produce(tk_relay_sink(r), 10000000), -TK_E_BAD_FORMAT);
	assert_int_equal(tk_relay_finish(r), -TK_E_BAD_FORMAT);
	tk_relay_free(r);
	assert_int_equal(c.seen, 30000);
	assert_false(c.bad);

	/* nothing sent; and freed without finish */
	r = tk_relay_new((struct tk_sink){ relay_check_events, &c, NULL }, &err);
	assert_non_null(r);
	assert_int_equal(tk_relay_finish(r), 0);
	tk_relay_free(r);
	r = tk_relay_new((struct tk_sink){ relay_check_events, &c, NULL }, &err);
	assert_int_equal(relay_produce(tk_relay_sink(r), 5000), 0);
	tk_relay_free(r);
}

static void test_gap_stats(void **state)
{
	(void)state;
	struct tk_gap_stats a = { 0 }, b = { 0 };
	tk_gap_stats_add(&a, 0x10, 5);
	tk_gap_stats_add(&a, 0x20, 7);
	tk_gap_stats_add(&b, 0x30, 1);
	tk_gap_stats_add(&b, 0x40, 1);
	tk_gap_stats_add(&b, 0x50, 1);
	tk_gap_stats_merge(&a, &b);
	assert_int_equal(a.count, 5);
	assert_int_equal(a.bytes_skipped, 15);
	assert_int_equal(a.first_offsets[0], 0x10);
	assert_int_equal(a.first_offsets[2], 0x30);
	assert_int_equal(a.first_offsets[3], 0x40);

	/* met out of order (XRay: thread by thread): the lowest, in order */
	struct tk_gap_stats c = { 0 };
	static const uint64_t met[] = { 0x80, 0x20, 0x60, 0x90, 0x10, 0x70, 0x05 };
	for (size_t i = 0; i < sizeof met / sizeof *met; i++)
		tk_gap_stats_add(&c, met[i], 1);
	assert_int_equal(c.count, 7);
	assert_int_equal(c.first_offsets[0], 0x05);
	assert_int_equal(c.first_offsets[1], 0x10);
	assert_int_equal(c.first_offsets[2], 0x20);
	assert_int_equal(c.first_offsets[3], 0x60);

	/* chunks merged out of the file's order (perf.data: queue after queue) */
	struct tk_gap_stats d = { 0 }, e = { 0 };
	tk_gap_stats_add(&d, 0x50, 1);
	tk_gap_stats_add(&d, 0x60, 1);
	tk_gap_stats_add(&e, 0x10, 1);
	tk_gap_stats_add(&e, 0x70, 1);
	tk_gap_stats_add(&e, 0x08, 1);
	tk_gap_stats_merge(&d, &e);
	assert_int_equal(d.count, 5);
	assert_int_equal(d.first_offsets[0], 0x08);
	assert_int_equal(d.first_offsets[1], 0x10);
	assert_int_equal(d.first_offsets[2], 0x50);
	assert_int_equal(d.first_offsets[3], 0x60);
}

static void test_errors_and_leb(void **state)
{
	(void)state;
	assert_string_equal(tk_strerror(0), "success");
	assert_string_equal(tk_strerror(-TK_E_TRUNCATED), tk_strerror(TK_E_TRUNCATED));
	assert_string_equal(tk_strerror(-9999), "unknown error");
	for (int e = 1; e < TK_E__COUNT; e++)
		assert_string_not_equal(tk_strerror(-e), "unknown error");
	uint64_t v;
	assert_int_equal(tk_uleb128((const uint8_t *)"\xe5\x8e\x26", 3, &v), 3);
	assert_int_equal(v, 624485);
	assert_int_equal(tk_uleb128((const uint8_t *)"\x80\x80", 2, &v), 0);
}

static char progress_line[256];
static int progress_calls;
static void capture_progress(void *ctx, const char *line)
{
	(void)ctx;
	progress_calls++;
	snprintf(progress_line, sizeof progress_line, "%s", line ? line : "(clear)");
}

static void test_progress(void **state)
{
	(void)state;
	struct tk_progress p;
	tk_progress_init(&p, "decode", 1000000, capture_progress, NULL);
	tk_progress_set(&p, 10);
	assert_int_equal(progress_calls, 0); /* quiet during the first second */
	p.start_ns -= 2000000000u;           /* pretend two seconds passed */
	p.last_ns -= 2000000000u;
	tk_progress_set(&p, 500000);
	assert_int_equal(progress_calls, 1);
	assert_non_null(strstr(progress_line, "decode: 50.0%"));
	tk_progress_set(&p, 600000);         /* rate-limited: too soon after the last line */
	assert_int_equal(progress_calls, 1);
	tk_progress_finish(&p);
	assert_string_equal(progress_line, "(clear)");

	/* disabled: nothing is ever printed */
	tk_progress_init(&p, "x", 0, NULL, NULL);
	p.start_ns -= 5000000000u;
	tk_progress_set(&p, 1);
	tk_progress_finish(&p);
	assert_int_equal(progress_calls, 2);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd);
}

/* The background writer puts every handed-over buffer into the file in order, whatever
 * their sizes, and reports a write error (a closed descriptor). */
static void test_writer(void **state)
{
	(void)state;
	char path[] = "/tmp/tk-writer-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct tk_writer *w = tk_writer_start(fd, NULL);
	assert_non_null(w);
	struct tk_buf b;
	assert_int_equal(tk_buf_init(&b, -1, 1000), 0);
	uint64_t want = 0;
	for (uint32_t i = 0; i < 5000; i++) {
		tk_buf_u64(&b, i);
		tk_buf_putc(&b, '\n');
		want += i;
		if (i % 37 == 0 || b.len > 900)
			assert_int_equal(tk_writer_submit(w, &b), 0);
	}
	assert_int_equal(tk_writer_submit(w, &b), 0);
	assert_int_equal(tk_writer_stop(w), 0);
	assert_int_equal(b.len, 0);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	uint64_t v, next = 0, sum = 0;
	while (fscanf(f, "%lu", &v) == 1) {
		assert_int_equal(v, next++);
		sum += v;
	}
	fclose(f);
	assert_int_equal(next, 5000);
	assert_int_equal(sum, want);

	/* a descriptor that cannot be written: the error comes back at the next hand-over */
	int bad = open(path, O_RDONLY);
	assert_true(bad >= 0);
	w = tk_writer_start(bad, NULL);
	assert_non_null(w);
	tk_buf_puts(&b, "x\n");
	assert_int_equal(tk_writer_submit(w, &b), 0);
	tk_buf_puts(&b, "y\n");
	int rc = tk_writer_submit(w, &b);
	int stop = tk_writer_stop(w);
	assert_true(rc == -TK_E_IO || stop == -TK_E_IO);
	assert_int_equal(rc == -TK_E_IO ? b.errnum : errno, EBADF);   /* the reason is kept */
	close(bad);
	close(fd);
	unlink(path);
	tk_buf_free(&b);
}

/* Output files: an input is recognised through a hard link; a file is replaced only when
 * the output is kept, and no temporary file is left either way. */
static void test_outfile(void **state)
{
	(void)state;
	char dir[] = "/tmp/tk-outfile-XXXXXX", a[64], l[64], cmd[128];
	assert_non_null(mkdtemp(dir));
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(l, sizeof l, "%s/link", dir);
	FILE *f = fopen(a, "w");
	assert_non_null(f);
	fputs("good\n", f);
	fclose(f);
	assert_int_equal(link(a, l), 0);
	const char *ins[] = { "/nonexistent", a };
	assert_int_equal(tk_outfile_same(l, ins, 2), 1);
	assert_int_equal(tk_outfile_same(dir, ins, 2), -1);

	int err = 0;
	struct tk_outfile *o = tk_outfile_open(a, &err);
	assert_non_null(o);
	assert_int_equal(write(tk_outfile_fd(o), "half", 4), 4);
	assert_int_equal(tk_outfile_close(o, 0), 0);       /* failed: A stays as it was */
	char buf[16] = "";
	f = fopen(a, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof buf, f));
	fclose(f);
	assert_string_equal(buf, "good\n");
	o = tk_outfile_open(a, &err);
	assert_non_null(o);
	assert_int_equal(write(tk_outfile_fd(o), "new\n", 4), 4);
	assert_int_equal(tk_outfile_close(o, 1), 0);
	f = fopen(a, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof buf, f));
	fclose(f);
	assert_string_equal(buf, "new\n");
	snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 2", dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	assert_null(tk_outfile_open("/nonexistent/x", &err));
	assert_int_equal(err, -TK_E_IO);
	assert_int_equal(errno, ENOENT);
}

/* Past 64 MiB into a regular file the writer goes around the page cache (O_DIRECT, where
 * the filesystem has it): the file still holds every byte in order, buffers of odd sizes
 * included, and the descriptor's flags are as before once the writer stops. */
static void test_writer_direct(void **state)
{
	(void)state;
	char path[] = "/tmp/tk-writer-direct-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	int probe = open(path, O_WRONLY | O_DIRECT), can_direct = probe >= 0;
	if (probe >= 0)
		close(probe);
	int fl = fcntl(fd, F_GETFL);
	struct tk_writer *w = tk_writer_start(fd, NULL);
	assert_non_null(w);
	struct tk_buf b;
	assert_int_equal(tk_buf_init(&b, -1, 3 << 20), 0);
	uint64_t pos = 0, total = (uint64_t)100 << 20;
	int saw_direct = 0;
	for (uint32_t k = 0; pos < total; k++) {
		/* an odd length each time: blocks never line up with buffers */
		size_t n = (size_t)(1 << 20) + k * 4099 % 65521 + 1;
		assert_int_equal(tk_buf_reserve(&b, n), 0);
		for (size_t i = 0; i < n; i++)
			b.data[b.len + i] = (char)((pos + i) * 2654435761u >> 13);
		b.len += n;
		pos += n;
		assert_int_equal(tk_writer_submit(w, &b), 0);
		saw_direct |= (fcntl(fd, F_GETFL) & O_DIRECT) != 0;
	}
	assert_int_equal(tk_writer_stop(w), 0);
	assert_int_equal(fcntl(fd, F_GETFL), fl);
	if (can_direct)
		assert_true(saw_direct);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal((uint64_t)st.st_size, pos);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char chunk[1 << 16];
	uint64_t at = 0, bad = 0;
	size_t r;
	while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
		for (size_t i = 0; i < r; i++)
			bad += chunk[i] != (char)((at + i) * 2654435761u >> 13);
		at += r;
	}
	fclose(f);
	assert_int_equal(at, pos);
	assert_int_equal(bad, 0);
	close(fd);
	unlink(path);
	tk_buf_free(&b);
}

/* The helper's populating keeps what the owner writes into the same pages meanwhile; a
 * table is made at the size asked for, and a take of another size gets none. */
static void test_ahead(void **state)
{
	(void)state;
	struct tk_ahead *a = tk_ahead_start();
	assert_non_null(a);
	const size_t len = (size_t)16 << 20, piece = (size_t)1 << 20;
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	assert_true(m != MAP_FAILED);
	for (size_t off = 0; off < len; off += piece)
		tk_ahead_populate(a, m + off, piece);
	for (size_t i = 0; i < len; i += 512)
		m[i + 7] = (unsigned char)(i >> 9 | 1);
	tk_ahead_wait(a);
	for (size_t i = 0; i < len; i += 512)
		assert_int_equal(m[i + 7], (unsigned char)(i >> 9 | 1));
	munmap(m, len);

	/* on huge pages (2 MiB aligned), zeroed */
	unsigned char *t;
	tk_ahead_table(a, (size_t)3 << 20);
	tk_ahead_table(a, (size_t)5 << 20);   /* one at a time: not made */
	t = tk_ahead_take_table(a, (size_t)3 << 20);
	assert_non_null(t);
	assert_int_equal((uintptr_t)t % ((size_t)2 << 20), 0);
	for (size_t i = 0; i < (size_t)3 << 20; i++)
		if (t[i])
			fail_msg("byte %zu of the table is %u", i, t[i]);
	free(t);
	assert_null(tk_ahead_take_table(a, (size_t)5 << 20));
	tk_ahead_table(a, (size_t)1 << 20);
	assert_null(tk_ahead_take_table(a, (size_t)2 << 20));
	assert_null(tk_ahead_take_table(a, (size_t)1 << 20));   /* dropped by the take before */
	/* ready: nothing asked for, or made (the owner polls it instead of waiting); the take
	 * waits for the table, not for the populates queued after it */
	assert_true(tk_ahead_table_ready(a));
	tk_ahead_table(a, (size_t)8 << 20);
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	assert_true(p != MAP_FAILED);
	for (size_t off = 0; off < len; off += piece)
		tk_ahead_populate(a, p + off, piece);
	for (int tries = 0; !tk_ahead_table_ready(a); tries++) {
		assert_true(tries < 10000);   /* 10 s */
		usleep(1000);
	}
	t = tk_ahead_take_table(a, (size_t)8 << 20);
	assert_non_null(t);
	assert_true(tk_ahead_table_ready(a));
	free(t);
	tk_ahead_wait(a);
	munmap(p, len);
	/* a table larger than a slice and not a multiple of one, populates queued behind it
	 * (run between its slices): the wait for them returns, the table is zero to its end */
	const size_t big = ((size_t)40 << 20) + 8;
	tk_ahead_table(a, big);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	for (size_t off = 0; off < len; off += piece)
		tk_ahead_populate(a, p + off, piece);
	tk_ahead_wait(a);
	munmap(p, len);
	t = tk_ahead_take_table(a, big);
	assert_non_null(t);
	for (size_t i = 0; i < big; i++)
		if (t[i])
			fail_msg("byte %zu of the large table is %u", i, t[i]);
	free(t);
	tk_ahead_table(a, (size_t)1 << 20);   /* left to tk_ahead_stop */
	tk_ahead_free(a, malloc(4096));
	tk_ahead_stop(a);
	tk_ahead_stop(NULL);
}

/* tk_sort_u64 against qsort; tk_sort_by_u64 sorted and stable for each element size it
 * has a path for (16, 24) and another (40); keys that share high bytes, all equal, sorted,
 * reversed. */
struct rec16 { uint64_t key, seq; };
struct rec24 { uint64_t seq, key, pad; };
struct rec40 { uint64_t pad[3], key, seq; };

static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

#define CHECK_SORTED_STABLE(T, v, n) do { \
	for (size_t i_ = 1; i_ < (n); i_++) { \
		assert_true((v)[i_ - 1].key <= (v)[i_].key); \
		if ((v)[i_ - 1].key == (v)[i_].key) \
			assert_true((v)[i_ - 1].seq < (v)[i_].seq); \
	} \
} while (0)

static void test_sort(void **state)
{
	(void)state;
	static const size_t sizes[] = { 0, 1, 2, 3, 100, 4097 };
	uint64_t x = 88172645463325252ull;

	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		size_t n = sizes[si];
		for (int shape = 0; shape < 5; shape++) {
			uint64_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
			struct rec16 *r16 = malloc((n + 1) * sizeof *r16);
			struct rec24 *r24 = malloc((n + 1) * sizeof *r24);
			struct rec40 *r40 = malloc((n + 1) * sizeof *r40);
			assert_true(a && b && r16 && r24 && r40);
			for (size_t i = 0; i < n; i++) {
				uint64_t r = next_rand(&x);
				/* 0: any 64 bits; 1: one module's addresses (high bytes shared), few
				 * distinct (many equal keys); 2: all equal; 3: sorted; 4: reversed */
				a[i] = shape == 0 ? r : shape == 1 ? 0x7f0000400000ull + (r % 64) * 16 :
				       shape == 2 ? 42 : shape == 3 ? i * 3 : (uint64_t)(n - i) << 40;
				r16[i] = (struct rec16){ a[i], i };
				r24[i] = (struct rec24){ i, a[i], 0 };
				r40[i] = (struct rec40){ { 0 }, a[i], i };
			}
			memcpy(b, a, n * sizeof *a);
			qsort(b, n, sizeof *b, tk_cmp_u64);
			assert_int_equal(tk_sort_u64(a, n), 0);
			if (n)
				assert_memory_equal(a, b, n * sizeof *a);
			assert_int_equal(tk_sort_by_u64(r16, n, sizeof *r16, offsetof(struct rec16, key)), 0);
			assert_int_equal(tk_sort_by_u64(r24, n, sizeof *r24, offsetof(struct rec24, key)), 0);
			assert_int_equal(tk_sort_by_u64(r40, n, sizeof *r40, offsetof(struct rec40, key)), 0);
			CHECK_SORTED_STABLE(struct rec16, r16, n);
			CHECK_SORTED_STABLE(struct rec24, r24, n);
			CHECK_SORTED_STABLE(struct rec40, r40, n);
			for (size_t i = 0; i < n; i++)
				assert_true(r16[i].key == b[i] && r24[i].key == b[i] && r40[i].key == b[i]);
			free(a);
			free(b);
			free(r16);
			free(r24);
			free(r40);
		}
	}
}

/* tk_bufs: a thread gets back a buffer it filled itself, not another thread's, while more
 * may be made; past that, any free one; none free: a new one whatever the count. */
struct bufs_fill {
	struct tk_bufs *p;
	struct tk_buf *b;
};

static void *bufs_fill_other(void *arg)
{
	struct bufs_fill *f = arg;
	f->b = tk_bufs_take(f->p);
	if (f->b)
		tk_buf_puts(f->b, "filled on another thread");
	return NULL;
}

static void test_bufs_kept_for_filler(void **state)
{
	(void)state;
	struct tk_bufs *p = tk_bufs_new(3);
	assert_non_null(p);
	struct tk_buf *mine = tk_bufs_take(p);
	assert_non_null(mine);
	tk_buf_puts(mine, "mine");
	struct bufs_fill f = { p, NULL };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, bufs_fill_other, &f), 0);
	pthread_join(t, NULL);
	assert_non_null(f.b);
	assert_ptr_not_equal(f.b, mine);
	/* both free, the other's given back last: this thread gets its own, emptied */
	tk_bufs_give(p, mine);
	tk_bufs_give(p, f.b);
	struct tk_buf *again = tk_bufs_take(p);
	assert_ptr_equal(again, mine);
	assert_int_equal(again->len, 0);
	/* its own in use: a third is made (fewer than 3 so far), not the other's taken */
	struct tk_buf *third = tk_bufs_take(p);
	assert_non_null(third);
	assert_ptr_not_equal(third, f.b);
	/* three made: the other thread's free one now */
	struct tk_buf *fourth = tk_bufs_take(p);
	assert_ptr_equal(fourth, f.b);
	/* none free: a new one all the same */
	struct tk_buf *fifth = tk_bufs_take(p);
	assert_non_null(fifth);
	assert_true(fifth != mine && fifth != third && fifth != f.b);
	tk_buf_puts(fifth, "still a buffer");
	assert_int_equal(fifth->err, 0);
	tk_bufs_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_input_plain_gzip_zstd),
		cmocka_unit_test(test_input_gzip_multimember),
		cmocka_unit_test(test_input_truncated_compressed),
		cmocka_unit_test(test_input_read_ahead),
		cmocka_unit_test(test_input_pipe),
		cmocka_unit_test(test_input_errors),
		cmocka_unit_test(test_buf_formatting),
		cmocka_unit_test(test_text_escape),
		cmocka_unit_test(test_buf_fd_flush),
		cmocka_unit_test(test_pool_ordered),
		cmocka_unit_test(test_pool_threads_kept),
		cmocka_unit_test(test_pool_wakes_every_thread),
		cmocka_unit_test(test_pool_timing),
		cmocka_unit_test(test_event_vec_capacity),
		cmocka_unit_test(test_relay),
		cmocka_unit_test(test_gap_stats),
		cmocka_unit_test(test_progress),
		cmocka_unit_test(test_errors_and_leb),
		cmocka_unit_test(test_writer),
		cmocka_unit_test(test_writer_direct),
		cmocka_unit_test(test_outfile),
		cmocka_unit_test(test_ahead),
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_bufs_kept_for_filler),
		cmocka_unit_test(test_event_vec_lean),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
