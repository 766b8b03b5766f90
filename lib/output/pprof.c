/* pprof profile.proto writer (filled in below). */
#include "output/internal.h"

int out_pprof(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o)
{
	(void)b, (void)p, (void)o;
	return -TK_E_UNSUPPORTED;
}
