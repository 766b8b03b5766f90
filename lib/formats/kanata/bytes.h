/* Bytes of a Kanata statistics partial (docs/formats/partial.md, "Kanata statistics"):
 * LEB128 numbers, zigzag for signed ones, strings as a length and bytes. The reader stops
 * at the first fault and keeps its offset and a message. */
#ifndef TK_KANATA_BYTES_H
#define TK_KANATA_BYTES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/common.h"

struct kn_out {
	uint8_t *p;
	size_t n, cap;
	int err;
};

struct kn_in {
	const uint8_t *p;
	size_t n, at;
	int err;
	uint64_t err_at;
	char msg[120];
};

static inline void kn_put(struct kn_out *w, const void *v, size_t n)
{
	if (w->err || !n)
		return;
	if (w->n + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		while (cap < w->n + n)
			cap *= 2;
		uint8_t *p = realloc(w->p, cap);
		if (!p) {
			w->err = -TK_E_NOMEM;
			return;
		}
		w->p = p;
		w->cap = cap;
	}
	memcpy(w->p + w->n, v, n);
	w->n += n;
}

static inline void kn_putv(struct kn_out *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		b[n++] |= v ? 0x80 : 0;
	} while (v);
	kn_put(w, b, n);
}

static inline void kn_putz(struct kn_out *w, int64_t v)
{
	kn_putv(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline void kn_put_str(struct kn_out *w, const char *s, size_t n)
{
	kn_putv(w, n);
	kn_put(w, s, n);
}

static inline void kn_bad(struct kn_in *r, const char *what)
{
	if (r->err)
		return;
	r->err = -TK_E_BAD_FORMAT;
	r->err_at = r->at;
	snprintf(r->msg, sizeof r->msg, "Kanata statistics: %s", what);
}

static inline uint64_t kn_getv(struct kn_in *r, const char *what)
{
	uint64_t v = 0;
	for (unsigned s = 0; !r->err; s += 7) {
		if (r->at >= r->n || s > 63) {
			kn_bad(r, what);
			break;
		}
		uint8_t b = r->p[r->at++];
		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	return 0;
}

static inline int64_t kn_getz(struct kn_in *r, const char *what)
{
	uint64_t v = kn_getv(r, what);
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A count of items of at least MIN bytes each, checked against the bytes left. */
static inline size_t kn_get_count(struct kn_in *r, size_t min, size_t max, const char *what)
{
	uint64_t v = kn_getv(r, what);
	if (!r->err && (v > max || v > (r->n - r->at) / (min ? min : 1))) {
		kn_bad(r, what);
		return 0;
	}
	return (size_t)v;
}

/* A string of at most CAP - 1 bytes into OUT, NUL-terminated; its length. */
static inline size_t kn_get_str(struct kn_in *r, char *out, size_t cap, const char *what)
{
	size_t n = kn_get_count(r, 1, cap - 1, what);
	if (r->err) {
		out[0] = 0;
		return 0;
	}
	memcpy(out, r->p + r->at, n);
	out[n] = 0;
	r->at += n;
	return n;
}

#endif
