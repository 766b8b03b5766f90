/* Source positions that point at code, for outputs such as pprof's locations: each line
 * range's address, and the inlined calls at an address (the library's own, lib/image). */
#ifndef TK_IMAGE_SYM_FRAMES_H
#define TK_IMAGE_SYM_FRAMES_H

#include "tracekit/symbolize.h"

/* tk_sym_lines, with each line range's run-time start address. */
typedef int (*tk_sym_range_fn)(void *ctx, uint64_t addr, const char *file, unsigned line,
			       uint64_t insns);
int tk_sym_line_ranges(struct tk_sym *s, uint64_t start, uint64_t end, uint64_t total_insns,
		       tk_sym_range_fn fn, void *ctx);

/* One level of the inlined calls at an address. */
struct tk_sym_frame {
	const char *func;         /* the inlined function (demangled as the options say);
				     NULL: the function whose symbol holds the address */
	const char *file;
	unsigned line;
};
/* The source position of ADDR with the calls DWARF says were inlined there: OUT[0] is the
 * innermost function at ADDR's line, each next one the function it was inlined into, at the
 * line of that call; the last is the symbol's function (func NULL). Returns how many (at
 * most MAX), 0 without a line; one level only with the no_inline option, or when the calls
 * are more than MAX. */
int tk_sym_frames(struct tk_sym *s, uint64_t addr, struct tk_sym_frame *out, int max);

#endif
