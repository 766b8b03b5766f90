/* Intel Processor Trace: packets, events, instruction flow. */
#ifndef TRACEKIT_IPT_H
#define TRACEKIT_IPT_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 that P is a raw PT stream (0: not one). */
int tk_ipt_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

#ifdef __cplusplus
}
#endif
#endif
