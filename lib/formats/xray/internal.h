/* Internal helpers of the XRay reader. */
#ifndef TK_FORMATS_XRAY_INTERNAL_H
#define TK_FORMATS_XRAY_INTERNAL_H

#include <string.h>

#include "tracekit/common.h"
#include "tracekit/xray.h"

static inline uint16_t xr_rd16(const uint8_t *p, int be) { return be ? tk_be16(p) : tk_le16(p); }
static inline uint32_t xr_rd32(const uint8_t *p, int be) { return be ? tk_be32(p) : tk_le32(p); }
static inline uint64_t xr_rd64(const uint8_t *p, int be) { return be ? tk_be64(p) : tk_le64(p); }

/* First byte of a metadata record of KIND. */
static inline uint8_t xr_meta_byte(unsigned kind, int be)
{
	return be ? (uint8_t)(0x80u | kind) : (uint8_t)(kind << 1 | 1u);
}
static inline int xr_is_meta(uint8_t b, int be) { return be ? b >> 7 : b & 1; }
static inline unsigned xr_meta_kind(uint8_t b, int be) { return be ? b & 0x7fu : b >> 1; }

int xr_buffer_start_at(const uint8_t *p, size_t n, size_t o, const struct tk_xray_header *h);
/* The same test on the bytes Q at an offset with LEFT bytes of file from there (Q holds
 * at least min(LEFT, 17) of them). */
int xr_buffer_start_bytes(const uint8_t *q, size_t left, const struct tk_xray_header *h);
size_t xr_find_buffer(const uint8_t *p, size_t n, size_t from, const struct tk_xray_header *h);

/* How a v2+ buffer's end was found from its BufferExtents record. */
struct xr_extent {
	uint64_t size;             /* the size the record gives */
	uint64_t missing;          /* past the end of the file, no buffer after: bytes cut off */
	unsigned typed_short;      /* short by 16 bytes per typed event (LLVM <= 16): their count */
	int resync;                /* past the end of the file, but a buffer follows: read up to it */
};
/* The end of the buffer whose BufferExtents record is at O (O + 16 <= N). */
size_t xr_buffer_end(const uint8_t *p, size_t n, size_t o, const struct tk_xray_header *h,
		     struct xr_extent *ex);

/* Not damage: the buffer is read whole, and only this warning says so. */
#define XR_MSG_TYPED_SHORT "BufferExtents is 16 bytes short per typed event (as LLVM's runtime " \
	"up to version 16 writes it); the buffer is read whole"

/* What to say about a buffer end, or NULL when the extents were right. */
static inline const char *xr_extent_msg(const struct xr_extent *ex)
{
	if (ex->typed_short)
		return XR_MSG_TYPED_SHORT;
	if (ex->resync)
		return "BufferExtents size is past the end of the file, but another buffer follows; "
		       "the buffer is read up to it";
	if (ex->missing)
		return "buffer extents past end of file";
	return NULL;
}

/* The records of every thread in llvm-xray's order (merged by TSC), one at a time: *R valid
 * until the next call. xr_merge_new (with NTHREADS > 1, on a pool of that many to start
 * with): NULL without memory; *ERR < 0 if the threads' first buffers failed (free it, go
 * no further). xr_merge_next: 1, 0 at the end, or an error.
 * xr_merge_free closes the walk's counts (tk_xray_stats). */
struct xr_merge;
struct xr_merge *xr_merge_new(struct tk_xray *x, unsigned nthreads, int *err);
int xr_merge_next(struct xr_merge *m, const struct tk_xray_rec **r);
void xr_merge_free(struct xr_merge *m);
/* From now on, each thread's next buffer is expanded ahead by whoever calls
 * xr_merge_work_ahead (pool workers) while the merge reads the buffer before it; the
 * merge still expands any buffer nobody took. FDR logs only: 0 (also when not one), or
 * -TK_E_NOMEM. */
int xr_merge_ahead(struct xr_merge *m);
/* One asked-for buffer expanded, if any is waiting: on any thread, concurrently with the
 * merge (the merging thread too, between its calls: the YAML's calling thread runs
 * blocks while it waits). */
void xr_merge_work_ahead(struct xr_merge *m);

/* tk_xray_decode_chunks, the calling thread decoding chunks too between its merges when
 * CALLER_WORKS (as tk_chunk_consumer.caller_decodes asks). */
int xr_decode_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx, int caller_works);

#endif
