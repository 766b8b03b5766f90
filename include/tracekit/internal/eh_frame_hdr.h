/* The search table of .eh_frame_hdr: the start of every function with unwind information
 * (static ones included), sorted. Shared by the symbolizer (a stripped module's entries)
 * and the branch recorder (function starts of a loaded module), which runs inside traced
 * processes: pure byte reads, no calls. Internal tier (include/tracekit/internal/): for
 * the library and its recorders, not installed. */
#ifndef TRACEKIT_INTERNAL_EH_FRAME_HDR_H
#define TRACEKIT_INTERNAL_EH_FRAME_HDR_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t tk_ehfh_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* How many starts the table of the .eh_frame_hdr at H (SIZE bytes, little-endian) lists:
 * 0 unless it has the layout every linker writes (version 1, eh_frame_ptr pc-relative
 * sdata4, count udata4, table of datarel sdata4 pairs); -1 when its count claims more
 * pairs than SIZE holds (a damaged file). */
static inline int64_t tk_ehfh_count(const uint8_t *h, size_t size)
{
	if (size < 12 || h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
		return 0;
	uint32_t n = tk_ehfh_le32(h + 8);
	return n > (size - 12) / 8 ? -1 : (int64_t)n;
}

/* Start I (below tk_ehfh_count) of the table of the .eh_frame_hdr at H, which lies at
 * address ADDR (its entries are relative to it). */
static inline uint64_t tk_ehfh_start(const uint8_t *h, uint64_t addr, size_t i)
{
	return addr + (uint64_t)(int64_t)(int32_t)tk_ehfh_le32(h + 12 + 8 * i);
}

#endif
