/* Fuzz target for the XRay reader: header, record cursor (dump), index, parallel decode
 * and the TSC-sorted walk (YAML) must survive any input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/xray.h"

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	*(size_t *)ctx += n;
	for (size_t i = 0; i < n; i++)
		if ((ev[i].kind == TK_EV_CUSTOM || ev[i].kind == TK_EV_TYPED) && ev[i].count)
			*(size_t *)ctx += ((const uint8_t *)ev[i].data)[ev[i].count - 1];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_buf out;
	struct tk_gap_stats gaps;
	size_t n = 0;
	int err;

	tk_set_log(NULL, NULL);
	/* a private copy, so reads past the end are caught by the sanitizer */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (tk_buf_init(&out, -1, 1 << 16) == 0) {
		memset(&gaps, 0, sizeof gaps);
		tk_xray_dump(copy, size, 0, 0, &out, &gaps);
		out.len = 0;
		for (unsigned nt = 1; nt <= 2; nt++) {
			struct tk_xray_opts o = { .sz = sizeof o, .nthreads = nt };
			struct tk_xray *x = tk_xray_open(copy, size, &o, &err);
			if (!x)
				break;
			tk_xray_decode(x, (struct tk_sink){ count_events, &n });
			if (nt == 1) {
				tk_xray_yaml(x, NULL, &out);
				out.len = 0;
			}
			tk_xray_free(x);
		}
		tk_buf_free(&out);
	}
	free(copy);
	return 0;
}
