/* Fuzz the parser of qemu-aarch64's -d cpu,fpu register dumps (tracekit record --qemu):
 * any text, in both modes, stays inside the input and the result (a vector length of at
 * most 2048 bits, in 64-bit words). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/internal/qemu_regs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tk_qemu_regs r;
	/* a copy of exactly SIZE bytes, so that reading past the end is caught */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	tk_qemu_regs_parse(text, size, 0, &r);
	if (r.vl_bits > 8 * TK_QEMU_MAX_VL_BYTES || r.vl_bits % 64)
		abort();
	tk_qemu_regs_parse(text, size, TK_QEMU_REGS_GPRS, &r);
	if (r.vl_bits)
		abort();
	free(text);
	return 0;
}
