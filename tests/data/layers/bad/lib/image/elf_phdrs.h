#ifndef LIB_IMAGE_ELF_PHDRS_H
#define LIB_IMAGE_ELF_PHDRS_H
#include "tracekit/common.h"
#endif
