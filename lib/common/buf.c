/* Growable output buffer with hand-rolled number formatting (printf is the slow path). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

int tk_buf_init(struct tk_buf *b, int fd, size_t cap)
{
	if (cap < 256)
		cap = fd >= 0 ? 1 << 20 : 4096;
	b->data = malloc(cap);
	b->len = 0;
	b->cap = b->data ? cap : 0;
	b->fd = fd;
	b->errnum = 0;
	b->err = b->data ? 0 : -TK_E_NOMEM;
	return b->err;
}

void tk_buf_free(struct tk_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* N bytes at P to B's file; the first error stays in B. */
static void write_all(struct tk_buf *b, const char *p, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t w = write(b->fd, p + off, n - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			b->err = -TK_E_IO;
			b->errnum = errno;
			break;
		}
		off += (size_t)w;
	}
}

int tk_buf_flush(struct tk_buf *b)
{
	if (b->fd < 0 || b->err)
		return b->err;
	write_all(b, b->data, b->len);
	b->len = 0;
	return b->err;
}

void tk_buf_put_large(struct tk_buf *b, const void *p, size_t n)
{
	if (b->fd < 0 || n < b->cap / 4) {
		tk_buf_put(b, p, n);
		return;
	}
	if (tk_buf_flush(b) == 0)
		write_all(b, p, n);
}

int tk_buf_reserve_slow(struct tk_buf *b, size_t n)
{
	if (b->err)
		return b->err;
	if (b->fd >= 0 && b->len) {
		if (tk_buf_flush(b) < 0)
			return b->err;
		if (b->cap >= n)
			return 0;
	}
	size_t ncap = b->cap ? b->cap : 4096;
	while (ncap - b->len < n)
		ncap *= 2;
	/* (not on huge pages: a chunk's text waiting for its turn would hold up to 2 MiB more
	 * each, past the bound tests/oracle/ipt_decode_memory.sh sets) */
	char *nd = realloc(b->data, ncap);
	if (!nd) {
		b->err = -TK_E_NOMEM;
		return b->err;
	}
	b->data = nd;
	b->cap = ncap;
	return 0;
}

int tk_buf_printf(struct tk_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -TK_E_INVAL;
	if ((size_t)n >= b->cap - b->len) {
		if (tk_buf_reserve(b, (size_t)n + 1) < 0)
			return b->err;
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
	return n;
}

static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Decimal digits of V (1 for 0): the bit length times log10(2), one more if V reaches the
 * next power of ten. */
static inline unsigned dec_len(uint64_t v)
{
	static const uint64_t p10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
		100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
	};
	unsigned t = ((64u - (unsigned)__builtin_clzll(v | 1)) * 1233u) >> 12;
	return t + (v >= p10[t]) + !v;
}

/* Written in place, from the last digit back: text outputs print millions of integers, and
 * a copy out of a temporary was a library memcpy call for each (a quarter of an XRay YAML
 * conversion's samples). */
void tk_buf_u64(struct tk_buf *b, uint64_t v)
{
	unsigned n = dec_len(v);

	if (tk_buf_reserve(b, n) < 0)
		return;
	char *p = b->data + b->len + n;
	b->len += n;
	while (v >= 100) {
		unsigned i = (unsigned)(v % 100) * 2;
		v /= 100;
		*--p = digit_pairs[i + 1];
		*--p = digit_pairs[i];
	}
	if (v >= 10) {
		*--p = digit_pairs[v * 2 + 1];
		*--p = digit_pairs[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
}

void tk_buf_i64(struct tk_buf *b, int64_t v)
{
	if (v < 0) {
		tk_buf_putc(b, '-');
		tk_buf_u64(b, (uint64_t)0 - (uint64_t)v);
	} else {
		tk_buf_u64(b, (uint64_t)v);
	}
}

void tk_buf_hex(struct tk_buf *b, uint64_t v, int width)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;

	do {
		tmp[15 - n++] = hex[v & 15];
		v >>= 4;
	} while (v && n < 16);
	if (width > 16)
		width = 16;
	while (n < width)
		tmp[15 - n++] = '0';
	tk_buf_put(b, tmp + 16 - n, (size_t)n);
}

void tk_buf_hex_bytes(struct tk_buf *b, const uint8_t *p, size_t n, char sep)
{
	static const char hex[] = "0123456789abcdef";
	if (tk_buf_reserve(b, n * 3) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (i && sep)
			b->data[b->len++] = sep;
		b->data[b->len++] = hex[p[i] >> 4];
		b->data[b->len++] = hex[p[i] & 15];
	}
}

void tk_buf_fixed(struct tk_buf *b, int64_t v, int decimals)
{
	uint64_t scale = 1, a;
	for (int i = 0; i < decimals; i++)
		scale *= 10;
	if (v < 0) {
		tk_buf_putc(b, '-');
		a = (uint64_t)0 - (uint64_t)v;
	} else {
		a = (uint64_t)v;
	}
	tk_buf_u64(b, a / scale);
	if (decimals > 0) {
		char tmp[20];
		uint64_t frac = a % scale;
		tk_buf_putc(b, '.');
		for (int i = decimals - 1; i >= 0; i--) {
			tmp[i] = (char)('0' + frac % 10);
			frac /= 10;
		}
		tk_buf_put(b, tmp, (size_t)decimals);
	}
}

void tk_buf_json_str(struct tk_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	tk_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': tk_buf_put(b, "\\\"", 2); break;
		case '\\': tk_buf_put(b, "\\\\", 2); break;
		case '\n': tk_buf_put(b, "\\n", 2); break;
		case '\r': tk_buf_put(b, "\\r", 2); break;
		case '\t': tk_buf_put(b, "\\t", 2); break;
		default:
			if (c < 0x20) {
				char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
				tk_buf_put(b, e, 6);
			} else {
				tk_buf_putc(b, (char)c);
			}
		}
	}
	tk_buf_putc(b, '"');
}

/* What the bytes at S (N > 0 left) become on a terminal: returns how many bytes are taken
 * and sets *elen to the length of the escape written to ESC, or 0 when they are kept. Kept:
 * printable ASCII and well-formed UTF-8 other than the C1 controls (U+0080-U+009F, which
 * include the one-character CSI). */
static size_t text_step(const unsigned char *s, size_t n, char esc[4], size_t *elen)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = s[0];
	size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 1;

	*elen = 0;
	if (c >= 0x20 && c < 0x7f)
		return 1;
	if (len > 1 && len <= n && !(c == 0xc2 && s[1] < 0xa0)) {
		size_t i = 1;
		while (i < len && (s[i] & 0xc0) == 0x80)
			i++;
		if (i == len)
			return len;
	}
	esc[0] = '\\';
	if (c == '\n' || c == '\r' || c == '\t') {
		esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		*elen = 2;
	} else {
		esc[1] = 'x';
		esc[2] = hex[c >> 4];
		esc[3] = hex[c & 15];
		*elen = 4;
	}
	return 1;
}

void tk_buf_text(struct tk_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, kept = 0;   /* p[kept..i) is waiting to be written as it is */

	while (i < n) {
		char esc[4];
		size_t elen, k = text_step(p + i, n - i, esc, &elen);
		if (elen) {
			tk_buf_put(b, p + kept, i - kept);
			tk_buf_put(b, esc, elen);
			kept = i + k;
		}
		i += k;
	}
	tk_buf_put(b, p + kept, n - kept);
}

size_t tk_text_escape(char *out, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, n = strlen(s);

	if (!cap)
		return 0;
	for (size_t i = 0; i < n;) {
		char esc[4];
		size_t elen, k = text_step(p + i, n - i, esc, &elen);
		const char *w = elen ? esc : (const char *)p + i;
		size_t wn = elen ? elen : k;
		if (o + wn >= cap)
			break;
		memcpy(out + o, w, wn);
		o += wn;
		i += k;
	}
	out[o] = 0;
	return o;
}
