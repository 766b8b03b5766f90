/* Kunpeng xtrace instruction and snapshot files. */
#ifndef TRACEKIT_XTRACE_H
#define TRACEKIT_XTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Magic of the snapshot-file header as tracekit writes it (the seed leaves the 4-byte
 * identifier unspecified; see docs/formats/xtrace.md). Old traces have no header. */
#define TK_XTRACE_SNAP_MAGIC 0x50534e58u /* "XNSP" little-endian */

/* Content probe: confidence 0..100 (0: not this format). */
int tk_xtrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);
/* Length of the token item at P (token byte included), 0 if the token is unknown, or
 * SIZE_MAX if N is too short to tell. */
size_t tk_xtrace_item_len(const uint8_t *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
