#ifndef INCLUDE_TRACEKIT_XTRACE_H
#define INCLUDE_TRACEKIT_XTRACE_H
#include "tracekit/common.h"
#endif
