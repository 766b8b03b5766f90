#include "output/internal.h"
int names_intern(void) { return 2; }
