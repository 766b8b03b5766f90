#ifndef LIB_OUTPUT_INTERNAL_H
#define LIB_OUTPUT_INTERNAL_H
#include "tracekit/out.h"
int names_intern(void);
int out_source(void);
int out_count_sort(void);
#endif
