#ifndef LIB_FORMATS_IPT_INTERNAL_H
#define LIB_FORMATS_IPT_INTERNAL_H
#include "tracekit/common.h"
#endif
