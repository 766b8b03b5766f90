#ifndef RT_H
#define RT_H
/* a header that is not there */
#include "tracekit/missing.h"
#endif
