/* Fuzz the input layer's decompression (gzip, zstd, or none): the whole file mapped and the
 * file read as a stream, on the caller's thread and decompressed ahead on a thread of its
 * own, must hand out the same bytes and the same cut; and of a gzip file (ISA-L's), no byte
 * zlib decodes otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zlib.h>

#include "fuzz_file.h"
#include "tracekit/tracekit.h"

#define LIMIT ((size_t)32 << 20)   /* decompressed bytes looked at (a small bomb is enough) */

static void quiet(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx, (void)level, (void)msg;
}

/* PATH read in pieces of PIECE bytes; its first LIMIT bytes into *OUT, *N of them; 1 when
 * the whole stream was read, *CUT its cut (UINT64_MAX: none). */
static int stream(const char *path, int ahead, size_t piece, uint8_t **out, size_t *n,
		  uint64_t *cut)
{
	struct tk_input *in;
	size_t cap = 65536;
	long r = 0;

	*n = 0;
	*out = NULL;
	if (tk_input_open(&in, path, NULL) < 0)
		return 0;
	tk_input_read_ahead(in, ahead);
	while (*n < LIMIT) {
		if (!*out || cap - *n < piece) {
			while (cap - *n < piece)
				cap *= 2;
			uint8_t *p = realloc(*out, cap);
			if (!p)
				abort();
			*out = p;
		}
		if ((r = tk_input_read(in, *out + *n, piece < LIMIT - *n ? piece : LIMIT - *n)) <= 0)
			break;
		*n += (size_t)r;
	}
	if (tk_input_cut(in, cut) != TK_INPUT_CUT)
		*cut = UINT64_MAX;
	tk_input_free(in);
	return r == 0;
}

/* DATA's gzip members decoded by zlib, as far as it reads them, into at most CAP bytes of
 * OUT: how many. */
static size_t zlib_gunzip(const uint8_t *data, size_t size, uint8_t *out, size_t cap)
{
	z_stream zs;
	size_t n = 0;

	memset(&zs, 0, sizeof zs);
	if (inflateInit2(&zs, 15 + 16) != Z_OK)
		abort();
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)size;
	for (;;) {
		zs.next_out = out + n;
		zs.avail_out = (uInt)(cap - n);
		int r = inflate(&zs, Z_NO_FLUSH);
		n = cap - zs.avail_out;
		if (r == Z_STREAM_END && zs.avail_in && n < cap) {
			inflateReset(&zs);   /* the next member */
			continue;
		}
		if (r != Z_OK || n == cap || !zs.avail_in)
			break;
	}
	inflateEnd(&zs);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);

	if (fd < 0)
		return 0;
	tk_set_log(quiet, NULL);

	uint8_t *s1, *s2;
	size_t n1, n2;
	uint64_t c1, c2;
	int whole1 = stream(path, 0, 4093, &s1, &n1, &c1);
	int whole2 = stream(path, 1, 65536 + 7, &s2, &n2, &c2);
	/* the same bytes and cut whichever thread decompresses */
	if (whole1 != whole2 || n1 != n2 || (n1 && memcmp(s1, s2, n1)) || c1 != c2)
		abort();
	/* ISA-L's bytes are zlib's where both read (ISA-L may count a bad match's bytes
	 * without writing them: they must not get out) */
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b && n1) {
		uint8_t *z = malloc(n1);
		if (!z)
			abort();
		size_t zn = zlib_gunzip(data, size, z, n1);
		if (memcmp(z, s1, zn < n1 ? zn : n1))
			abort();
		free(z);
	}

	struct tk_input *in;
	struct tk_input_opts o = { .sz = sizeof o, .max_size = LIMIT };
	const uint8_t *m;
	size_t mn;
	uint64_t mc;
	if (whole1 && tk_input_open(&in, path, &o) == 0) {
		if (tk_input_map(in, &m, &mn) == 0) {
			if (tk_input_cut(in, &mc) != TK_INPUT_CUT)
				mc = UINT64_MAX;
			/* the map holds what the stream read */
			if (mn != n1 || (mn && memcmp(m, s1, mn)) || mc != c1)
				abort();
		}
		tk_input_free(in);
	}
	free(s1);
	free(s2);
	tk_set_log(NULL, NULL);
	close(fd);
	return 0;
}
