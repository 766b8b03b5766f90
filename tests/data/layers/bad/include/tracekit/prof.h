#ifndef INCLUDE_TRACEKIT_PROF_H
#define INCLUDE_TRACEKIT_PROF_H
#include "tracekit/common.h"
int tk_prof_funcs(void);
#endif
