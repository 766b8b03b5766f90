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
size_t xr_find_buffer(const uint8_t *p, size_t n, size_t from, const struct tk_xray_header *h);

#endif
