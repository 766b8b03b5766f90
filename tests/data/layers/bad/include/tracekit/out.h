#ifndef INCLUDE_TRACEKIT_OUT_H
#define INCLUDE_TRACEKIT_OUT_H
#include "tracekit/prof.h"
#include "tracekit/internal/eh_frame_hdr.h"
#endif
