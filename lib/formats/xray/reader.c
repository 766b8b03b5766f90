/* XRay record reader: the file header and a forward cursor over every record.
 *
 * Layouts (facts from LLVM's XRay documentation and reader): a 32-byte header (u16 version,
 * u16 type, u32 flags, u64 cycle frequency, 16 free-form bytes whose first u64 is the FDR v1
 * buffer size). Basic mode: 32-byte records. FDR: 16-byte metadata records (first byte:
 * discriminant bit + 7-bit kind) and 8-byte function records (discriminant, 3-bit type,
 * 28-bit function id, u32 TSC delta). On big-endian machines the bit-fields run from the
 * most significant bit, so the discriminant is the top bit. Padding is never checked. */
#include "formats/xray/internal.h"

int tk_xray_read_header(const uint8_t *p, size_t n, struct tk_xray_header *h)
{
	struct tk_format_info fi;

	memset(h, 0, sizeof *h);
	if (n < 32)
		return -TK_E_TRUNCATED;
	memset(&fi, 0, sizeof fi);
	if (tk_xray_probe(p, n, &fi) <= 0)
		return -TK_E_BAD_FORMAT;
	h->big_endian = fi.big_endian;
	h->version = xr_rd16(p, h->big_endian);
	h->type = xr_rd16(p + 2, h->big_endian);
	uint32_t bits = xr_rd32(p + 4, h->big_endian);
	/* A C bool bit-field sits in the low bits on little-endian machines; accept the
	 * top-byte placement of big-endian compilers too. */
	h->constant_tsc = (bits & 1u) || (h->big_endian && (bits & 0x80000000u));
	h->nonstop_tsc = (bits & 2u) || (h->big_endian && (bits & 0x40000000u));
	h->cycle_frequency = xr_rd64(p + 8, h->big_endian);
	h->v1_buffer_size = xr_rd64(p + 16, h->big_endian);
	return 0;
}

int tk_xray_cursor_init(struct tk_xray_cursor *c, const uint8_t *p, size_t n)
{
	memset(c, 0, sizeof *c);
	int rc = tk_xray_read_header(p, n, &c->h);
	if (rc < 0)
		return rc;
	c->p = p;
	c->n = n;
	c->off = 32;
	return 0;
}

/* Plausible start of an FDR buffer at O: for v2+ a BufferExtents record whose extent fits
 * and that is followed by NewBuffer; for v1 a NewBuffer followed by a WalltimeMarker. */
int xr_buffer_start_at(const uint8_t *p, size_t n, size_t o, const struct tk_xray_header *h)
{
	return o + 16 <= n && xr_buffer_start_bytes(p + o, n - o, h);
}

int xr_buffer_start_bytes(const uint8_t *q, size_t left, const struct tk_xray_header *h)
{
	int be = h->big_endian;
	if (left < 16)
		return 0;
	if (h->version >= 2) {
		if (q[0] != xr_meta_byte(TK_XRAY_BUFFER_EXTENTS, be))
			return 0;
		uint64_t size = xr_rd64(q + 1, be);
		if (size > left - 16)
			return 0;
		return size == 0 || q[16] == xr_meta_byte(TK_XRAY_NEW_BUFFER, be);
	}
	if (q[0] != xr_meta_byte(TK_XRAY_NEW_BUFFER, be))
		return 0;
	return left >= 17 && q[16] == xr_meta_byte(TK_XRAY_WALLTIME, be);
}

size_t xr_find_buffer(const uint8_t *p, size_t n, size_t from, const struct tk_xray_header *h)
{
	uint8_t want = xr_meta_byte(h->version >= 2 ? TK_XRAY_BUFFER_EXTENTS : TK_XRAY_NEW_BUFFER,
				    h->big_endian);
	for (size_t o = from; o + 16 <= n; o++) {
		const uint8_t *q = memchr(p + o, want, n - o);
		if (!q)
			break;
		o = (size_t)(q - p);
		if (xr_buffer_start_at(p, n, o, h))
			return o;
	}
	return n;
}

/* LLVM's runtime up to version 16 leaves the 16-byte header of each typed event out of
 * BufferExtents. Walk the records from START: if the buffer ends at the declared end plus 16
 * bytes per typed event met on the way, where the next buffer (or the file's end) starts,
 * return that end and the count; else 0. */
static size_t typed_short_end(const uint8_t *p, size_t n, size_t start, uint64_t size,
			      const struct tk_xray_header *h, unsigned *ntyped)
{
	int be = h->big_endian;
	size_t o = start, k = 0;
	uint64_t want = start + size;

	while (o < want && o + 8 <= n) {
		if (!xr_is_meta(p[o], be)) {
			o += 8;
			continue;
		}
		if (o + 16 > n)
			return 0;
		unsigned kind = xr_meta_kind(p[o], be);
		size_t len = 16;
		if (kind == TK_XRAY_CUSTOM || kind == TK_XRAY_TYPED) {
			int32_t ds = (int32_t)xr_rd32(p + o + 1, be);
			if (ds <= 0 || (uint64_t)ds > n - o - 16)
				return 0;
			len += (size_t)ds;
		} else if (kind > TK_XRAY_PID || kind == TK_XRAY_BUFFER_EXTENTS) {
			return 0;
		}
		if (kind == TK_XRAY_TYPED) {
			k++;
			want += 16;
		}
		o += len;
	}
	if (!k || o != want || (o != n && !xr_buffer_start_at(p, n, o, h)))
		return 0;
	*ntyped = (unsigned)k;
	return o;
}

size_t xr_buffer_end(const uint8_t *p, size_t n, size_t o, const struct tk_xray_header *h,
		     struct xr_extent *ex)
{
	size_t start = o + 16, end;
	uint64_t size = xr_rd64(p + o + 1, h->big_endian);

	memset(ex, 0, sizeof *ex);
	ex->size = size;
	if (size <= n - start) {
		end = start + (size_t)size;
		if (end == n || xr_buffer_start_at(p, n, end, h))
			return end;
		size_t t = typed_short_end(p, n, start, size, h, &ex->typed_short);
		return t ? t : end;
	}
	/* a size past the end of the file: a file cut short, or a damaged size that would
	 * swallow every buffer after this one */
	size_t t = typed_short_end(p, n, start, n - start, h, &ex->typed_short);
	if (t)
		return t;
	end = xr_find_buffer(p, n, start, h);
	if (end < n)
		ex->resync = 1;
	else
		ex->missing = size - (n - start);
	return end;
}

/* Where to continue after damage at the cursor: the end of the current buffer if known,
 * else the next plausible buffer start. */
static size_t resync(struct tk_xray_cursor *c, size_t bad)
{
	size_t to;
	if (c->h.version >= 2 && c->buf_end > bad && c->buf_end <= c->n)
		to = c->buf_end;
	else if (c->h.version < 2 && c->h.v1_buffer_size && c->in_buffer &&
		 c->v1_buf_start + c->h.v1_buffer_size > bad &&
		 c->v1_buf_start + c->h.v1_buffer_size <= c->n)
		to = c->v1_buf_start + c->h.v1_buffer_size;
	else
		to = xr_find_buffer(c->p, c->n, bad + 1, &c->h);
	c->buf_end = 0;
	c->in_buffer = 0;
	return to;
}

static int fail(struct tk_xray_cursor *c, struct tk_xray_record *r, const char **msg,
		uint64_t *skipped, const char *why)
{
	size_t to = resync(c, r->offset);
	*msg = why;
	*skipped = to - r->offset;
	c->off = to;
	return -TK_E_BAD_FORMAT;
}

static int next_basic(struct tk_xray_cursor *c, struct tk_xray_record *r, const char **msg,
		      uint64_t *skipped)
{
	const uint8_t *q = c->p + c->off;
	int be = c->h.big_endian;

	if (c->n - c->off < 32) {
		*msg = "truncated record (basic-mode records are 32 bytes)";
		*skipped = c->n - c->off;
		c->off = c->n;
		return -TK_E_TRUNCATED;
	}
	c->off += 32;
	r->size = 32;
	unsigned rt = xr_rd16(q, be);
	if (rt == 0) {
		r->kind = TK_XRAY_BASIC_FUNCTION;
		r->cpu = q[2];
		r->fn = q[3];
		r->func_id = (int32_t)xr_rd32(q + 4, be);
		r->tsc = xr_rd64(q + 8, be);
		r->tid = (int32_t)xr_rd32(q + 16, be);
		r->pid = (int32_t)xr_rd32(q + 20, be);
		if (r->fn > TK_XRAY_ENTER_ARGS) {
			*msg = "unknown function record type";
			*skipped = 32;
			return -TK_E_BAD_OPCODE;
		}
		return 1;
	}
	if (rt == 1) {
		r->kind = TK_XRAY_BASIC_ARG;
		r->func_id = (int32_t)xr_rd32(q + 4, be);
		r->tid = (int32_t)xr_rd32(q + 8, be);
		r->pid = (int32_t)xr_rd32(q + 12, be);
		r->value = xr_rd64(q + 16, be);
		return 1;
	}
	*msg = "unknown record type";
	*skipped = 32;
	return -TK_E_BAD_OPCODE;
}

int tk_xray_next(struct tk_xray_cursor *c, struct tk_xray_record *r, const char **msg,
		 uint64_t *skipped)
{
	const struct tk_xray_header *h = &c->h;
	int be = h->big_endian;

	memset(r, 0, sizeof *r);
	*msg = NULL;
	*skipped = 0;
	if (c->off >= c->n)
		return 0;
	r->offset = c->off;
	if (h->type == TK_XRAY_BASIC)
		return next_basic(c, r, msg, skipped);

	/* v2+: every buffer starts with BufferExtents; outside a buffer nothing else may be. */
	if (h->version >= 2 && (!c->in_buffer || c->off >= c->buf_end)) {
		c->in_buffer = 0;
		if (c->p[c->off] != xr_meta_byte(TK_XRAY_BUFFER_EXTENTS, be))
			return fail(c, r, msg, skipped, "expected a BufferExtents record");
		if (c->n - c->off < 16)
			return fail(c, r, msg, skipped, "truncated BufferExtents record");
		struct xr_extent ex;
		r->kind = TK_XRAY_BUFFER_EXTENTS;
		r->size = 16;
		r->value = xr_rd64(c->p + c->off + 1, be);
		c->buf_end = xr_buffer_end(c->p, c->n, c->off, h, &ex);
		c->off += 16;
		c->in_buffer = 1;
		*msg = xr_extent_msg(&ex);
		*skipped = ex.missing;
		return 1;
	}

	size_t limit = h->version >= 2 ? c->buf_end : c->n;
	const uint8_t *q = c->p + c->off;
	uint8_t b = q[0];
	if (xr_is_meta(b, be)) {
		unsigned kind = xr_meta_kind(b, be);
		r->kind = kind;
		r->size = 16;
		if (limit - c->off < 16)
			return fail(c, r, msg, skipped, "truncated metadata record");
		if (kind > TK_XRAY_PID)
			return fail(c, r, msg, skipped, "unknown metadata record kind");
		switch (kind) {
		case TK_XRAY_NEW_BUFFER:
			r->tid = (int32_t)xr_rd32(q + 1, be);
			if (h->version < 2) {
				c->v1_buf_start = c->off;
				c->in_buffer = 1;
			}
			break;
		case TK_XRAY_END_OF_BUFFER:
			if (h->version >= 2)
				return fail(c, r, msg, skipped,
					    "EndOfBuffer record in a version 2+ log");
			break;
		case TK_XRAY_NEW_CPU:
			r->cpu = xr_rd16(q + 1, be);
			r->tsc = xr_rd64(q + 3, be);
			break;
		case TK_XRAY_TSC_WRAP:
			r->tsc = xr_rd64(q + 1, be);
			break;
		case TK_XRAY_WALLTIME:
			r->seconds = xr_rd64(q + 1, be);
			r->nanos = xr_rd32(q + 9, be);
			break;
		case TK_XRAY_CUSTOM:
		case TK_XRAY_TYPED:
			r->data_size = (int32_t)xr_rd32(q + 1, be);
			if (kind == TK_XRAY_TYPED || h->version >= 5) {
				r->sdelta = (int32_t)xr_rd32(q + 5, be);
				if (kind == TK_XRAY_TYPED)
					r->event_type = xr_rd16(q + 9, be);
			} else {
				r->tsc = xr_rd64(q + 5, be);
				if (h->version >= 4)
					r->cpu = xr_rd16(q + 13, be);
			}
			if (r->data_size <= 0)
				return fail(c, r, msg, skipped, "invalid event payload size");
			if ((uint64_t)r->data_size > limit - c->off - 16)
				return fail(c, r, msg, skipped, "event payload past end of buffer");
			r->data = q + 16;
			r->size = 16 + (unsigned)r->data_size;
			break;
		case TK_XRAY_CALL_ARG:
			r->value = xr_rd64(q + 1, be);
			break;
		case TK_XRAY_BUFFER_EXTENTS:
			/* Only valid at a buffer start (handled above) and in v1 logs never. */
			return fail(c, r, msg, skipped, "BufferExtents record inside a buffer");
		case TK_XRAY_PID:
			r->pid = (int32_t)xr_rd32(q + 1, be);
			break;
		}
		c->off += r->size;
		if (kind == TK_XRAY_END_OF_BUFFER) {
			/* v1: the rest of the fixed-size buffer is unused. */
			size_t end = c->v1_buf_start + h->v1_buffer_size;
			if (c->in_buffer && h->v1_buffer_size && end > c->off && end <= c->n)
				c->off = end;
			else if (c->off < c->n && !xr_buffer_start_at(c->p, c->n, c->off, h))
				c->off = xr_find_buffer(c->p, c->n, c->off, h);
			c->in_buffer = 0;
		}
		return 1;
	}
	r->kind = TK_XRAY_FUNCTION;
	r->size = 8;
	if (limit - c->off < 8)
		return fail(c, r, msg, skipped, "truncated function record");
	uint32_t w = xr_rd32(q, be);
	if (be) {
		r->fn = (w >> 28) & 7;
		r->func_id = (int32_t)(w & 0x0fffffffu);
	} else {
		r->fn = (w >> 1) & 7;
		r->func_id = (int32_t)(w >> 4);
	}
	r->delta = xr_rd32(q + 4, be);
	if (r->fn > TK_XRAY_ENTER_ARGS)
		return fail(c, r, msg, skipped, "unknown function record type");
	c->off += 8;
	return 1;
}
