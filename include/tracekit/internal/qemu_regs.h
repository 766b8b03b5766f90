/* Registers from qemu-aarch64's `-d cpu,fpu` log, which `tracekit record --qemu` reads in
 * its register run (lib/formats/xtrace/qemu_regs.c). Internal tier: the command's, not the
 * stable API. */
#ifndef TRACEKIT_INTERNAL_QEMU_REGS_H
#define TRACEKIT_INTERNAL_QEMU_REGS_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_QEMU_MAX_VL_BYTES 256   /* SVE's longest vector, 2048 bits */

/* One dump: what QEMU prints from a " PC=" line up to the next. Registers not in the text
 * stay 0. Vectors and predicates are little-endian bytes; Z register R starts at
 * z + R * vl_bits / 8, predicate R at p + 32 * R. */
struct tk_qemu_regs {
	uint64_t x[32];            /* X0..X30, SP */
	uint64_t nzcv;             /* PSTATE bits 31:28 */
	uint64_t fpcr, fpsr;
	uint32_t vl_bits;          /* 64 bits per word QEMU shows of Z0; 0 without SVE */
	uint8_t z[32 * TK_QEMU_MAX_VL_BYTES], p[16 * 32], ffr[32];
};

enum tk_qemu_regs_flags {
	TK_QEMU_REGS_GPRS = 1,     /* only X0..X30, SP and NZCV: stop at PSTATE */
};

/* Parse the N bytes at TEXT (no terminating NUL needed) into *R. Never reads past TEXT + N;
 * a Z register longer than Z0, or than 2048 bits, is cut to that length. */
void tk_qemu_regs_parse(const char *text, size_t n, unsigned flags, struct tk_qemu_regs *r);

#ifdef __cplusplus
}
#endif
#endif
