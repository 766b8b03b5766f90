/* Fuzz format detection: every probe must stay inside the buffer and agree with itself. */
#include <stdint.h>
#include <string.h>

#include "tracekit/tracekit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tk_format_info fi;
	int rc = tk_detect_format(data, size, &fi);
	if (rc == 0 && (fi.id == TK_FMT_UNKNOWN || fi.confidence <= 0 || fi.confidence > 100))
		__builtin_trap();
	if (rc < 0 && fi.id != TK_FMT_UNKNOWN)
		__builtin_trap();
	/* detail is always a terminated string */
	if (strnlen(fi.detail, sizeof fi.detail) == sizeof fi.detail)
		__builtin_trap();
	/* the xtrace item walker never claims more than it was given without saying so */
	if (size) {
		size_t len = tk_xtrace_item_len(data, size);
		(void)len;
	}
	return 0;
}
