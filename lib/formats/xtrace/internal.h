/* Internal helpers of the xtrace reader. */
#ifndef TK_FORMATS_XTRACE_INTERNAL_H
#define TK_FORMATS_XTRACE_INTERNAL_H

#include <stdint.h>

#include "tracekit/xtrace.h"

/* Token byte: low 3 bits the class, high 5 bits subclass and parameters (seed 002). */
static inline size_t xt_item_len(const uint8_t *p, size_t n)
{
	if (n < 1)
		return SIZE_MAX;
	unsigned t = p[0], hi = t >> 3;
	size_t len;

	switch (t & 7) {
	case 1: /* INST: bits 3-5 subclass, bits 6-7 exception level */
		switch (hi & 7) {
		case 0: len = 1 + 4; break;        /* INST: opcode */
		case 1: len = 1 + 8 + 4; break;    /* PCINST: pc, opcode */
		default: return 0;
		}
		break;
	case 2: /* MEM: bit 3 load/store, bits 4-7 log2 of the value size */
		len = 1 + 8 + ((size_t)1 << (t >> 4));
		break;
	case 3: /* VAL: STXR, MRS, SVCARG, SVCRET, DC, TARGET_B */
		if (hi > 5)
			return 0;
		len = 1 + 8;
		break;
	case 4: /* MISC */
		switch (hi) {
		case 1: len = 1 + 256; break;      /* ALLGPR: X0..X31 */
		case 3: len = 1 + 8; break;        /* MISC_FLAGS: NZCV */
		case 4:                            /* SYSCALL_VEC: count, then 16-byte iovecs */
			if (n < 9)
				return SIZE_MAX;
			{
				uint64_t cnt = tk_le64(p + 1);
				if (cnt > 1024)
					return 0;
				len = 1 + 8 + (size_t)cnt * 16;
			}
			break;
		default: return 0;
		}
		break;
	case 7: /* TIME */
		if (hi != 0)
			return 0;
		len = 1 + 8;
		break;
	default:
		return 0;
	}
	return len;
}

/* The instruction bytes of a trace. */
const uint8_t *xt_data(const struct tk_xtrace *t, size_t *n);

#endif
