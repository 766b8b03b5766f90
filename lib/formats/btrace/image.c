/* The code a branch trace needs: its modules, loaded where the recorder saw them. */
#include "tracekit/btrace.h"
#include "tracekit/image.h"

int tk_btrace_add_modules(const struct tk_btrace *bt, struct tk_image *img)
{
	int rc;
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		/* the bias is where the ELF's address 0 went (PIE and shared objects); 0 for a
		 * fixed-address executable, which loads at its own addresses */
		if ((rc = tk_image_add_elf(img, m->path, m->bias, m->bias != 0)) < 0) {
			tk_log(TK_LOG_ERROR, "%s: cannot load module into the image: %s", m->path,
			       tk_strerror(rc));
			return rc;
		}
	}
	return 0;
}
