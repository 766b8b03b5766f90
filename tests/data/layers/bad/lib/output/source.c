#include "output/internal.h"
int out_source(void) { return out_count_sort(); }
