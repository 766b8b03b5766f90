/* perf.data container. */
#ifndef TRACEKIT_PERF_H
#define TRACEKIT_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 (0: not this format). */
int tk_perf_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

#ifdef __cplusplus
}
#endif
#endif
