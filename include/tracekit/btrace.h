/* tracekit branch-trace container (software branch recording). */
#ifndef TRACEKIT_BTRACE_H
#define TRACEKIT_BTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The container starts with these 8 bytes, then a little-endian u32 format version and a
 * u32 header size (docs/formats/tkbt.md). */
#define TK_BTRACE_MAGIC "TKBTRACE"
#define TK_BTRACE_VERSION 1

/* Content probe: confidence 0..100 (0: not this format). */
int tk_btrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

#ifdef __cplusplus
}
#endif
#endif
