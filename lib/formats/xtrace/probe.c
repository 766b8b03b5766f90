#include <stdio.h>

#include "tracekit/common.h"
#include "tracekit/xtrace.h"

/* Token byte: low 3 bits the class, high 5 bits subclass and parameters (seed 002). */
size_t tk_xtrace_item_len(const uint8_t *p, size_t n)
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

/* Instruction files have no header: walk the first tokens and require them all to be
 * valid, with instructions among them. Snapshot files carry a magic (or, in old traces,
 * nothing we can recognise with confidence). */
int tk_xtrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n >= 8 && tk_le32(p) == TK_XTRACE_SNAP_MAGIC) {
		fi->id = TK_FMT_XTRACE_SNAP;
		fi->version = (unsigned)tk_le64(p + 8);
		snprintf(fi->detail, sizeof fi->detail, "register snapshots");
		return 95;
	}
	size_t off = 0, tokens = 0, insns = 0;
	while (off < n && tokens < 256) {
		size_t len = tk_xtrace_item_len(p + off, n - off);
		if (len == 0)
			return 0;
		if (len == SIZE_MAX || off + len > n)
			break; /* the peek window ends inside an item */
		if ((p[off] & 7) == 1)
			insns++;
		off += len;
		tokens++;
	}
	if (insns == 0 || (tokens < 16 && off < n))
		return 0;
	fi->id = TK_FMT_XTRACE_INSN;
	fi->version = 0;
	snprintf(fi->detail, sizeof fi->detail, "instruction stream");
	return tokens >= 64 ? 70 : 40;
}
