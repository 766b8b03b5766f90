/* a format calling the profile builder (a layer above it) */
#include "tracekit/common.h"
int tk_prof_funcs(void);
int xray_account(void) { return tk_prof_funcs(); }
