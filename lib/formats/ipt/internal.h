/* Intel PT packet decoding core, shared by the decoder handle, the scanner and dump. */
#ifndef TK_IPT_INTERNAL_H
#define TK_IPT_INTERNAL_H

#include <string.h>

#include "tracekit/event.h"
#include "tracekit/ipt.h"

/* Block context for PEBS-via-PT: BIP packets are only valid between BBP and BEP, and
 * their first byte collides with TNT-8. 0: no block, else the BIP payload size. */
struct tk_ipt_ctx {
	uint8_t blk;
	uint8_t errata;   /* TK_IPT_ERRATA_PACKET bits of enum tk_ipt_erratum */
};

#define TK_IPT_PSB_SIZE 16

/* At least as many as the chunks tk_ipt_flow_chunks makes of BUF with O, without a scan
 * while that bound is small (starts lie a chunk apart, the breaks add theirs), else their
 * count (or -TK_E_*). */
struct tk_ipt_flow_opts;
int64_t tk_ipt_flow_chunks_room(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *o);

/* Decode the packet at BUF[POS]. Returns its size or -TK_E_* (-TK_E_EOF at LEN). */
int tk_ipt_decode_one(const uint8_t *buf, size_t len, size_t pos, struct tk_ipt_ctx *ctx,
		      struct tk_ipt_packet *pkt);

/* First PSB starting at or after FROM (libipt's run-end rule). 0 or -TK_E_NOSYNC. */
int tk_ipt_psb_find(const uint8_t *buf, size_t len, size_t from, size_t *psb);
/* tk_ipt_split with the searches' bytes read by pread from IN, BUF at IN_OFFSET of its file
 * (IN NULL, or BUF not the file's bytes: through BUF), where a page's first touch costs
 * more than reading a few KiB. */
struct tk_input;
int64_t ipt_split_read(const struct tk_input *in, uint64_t in_offset, const uint8_t *buf,
		       size_t len, size_t chunk, uint64_t *offsets, size_t max);
/* At least as many as the starts of tk_ipt_split's: one per multiple of CHUNK at most. */
size_t ipt_split_max(size_t len, size_t chunk);
/* Up to this many, room is made for the bound rather than a counting scan (past it, tiny
 * chunks of a long trace would reserve far more than they use). */
#define IPT_ROOM_BOUND_MAX ((size_t)1 << 16)
/* ipt_split_read's starts into *OFFS (malloc'ed; NULL when none), made room for in one
 * scan while the bound is small, and searched on NTHREADS threads when there are many (the
 * calling thread among them with CALLER_WORKS, as the pool that decodes the chunks has
 * it): their number, or -TK_E_NOMEM. */
int64_t ipt_split_starts(const struct tk_input *in, uint64_t in_offset, const uint8_t *buf,
			 size_t len, size_t chunk, unsigned nthreads, int caller_works,
			 uint64_t **offs);

/* After a decode error at D's position (*AT): move to the next PSB. *SKIPPED: the bytes up
 * to it, or to END without one; 0 when it starts before *AT (a bad packet ate its first
 * bytes, and libipt's search starts a little back). Returns 1 if a PSB was found. */
int tk_ipt_pkt_resync(struct tk_ipt_pkt_decoder *d, uint64_t end, uint64_t *at,
		      uint64_t *skipped);

/* The PSB+ whose PSB ends at POS, read with ERRATA (enum tk_ipt_erratum): 1 and *IP if it
 * has a FUP, else 0; its execution mode into *MODE (TK_FLOW_*, -1: none); *WHOLE (if
 * WHOLE): 1 when it ends with its PSBEND, 0 when it is cut short (the decoder's error). */
int tk_ipt_psb_state(const uint8_t *buf, size_t len, uint32_t errata, size_t pos, uint64_t *ip,
		     int *mode, int *whole);

struct tk_flow;
struct tk_ipt_flow_opts;
struct tk_ipt_flow_stats;
struct tk_isa;
struct insn_memo;
/* What the flow decoder learns of single instructions (the ones that disable tracing or
 * bind events), kept by a thread from chunk to chunk of one image like its tk_flow: made
 * anew for each 64 KiB chunk of a timeline, they cost -j 2 a quarter of its extra
 * instructions. Zeroed to start, freed by ipt_insns_free. */
struct ipt_insns {
	struct tk_isa *isa;
	struct insn_memo *memo;
};
void ipt_insns_free(struct ipt_insns *in);
/* One chunk of the flow decoder (flow.c), for the parallel driver (flow_parallel.c): the part
 * [START, END) of BUF, which starts at a break of reason BRK (0: a PSB) and may read on to
 * SEG_END, with F and INS (which keep what they learn for the next chunk); its events to
 * SINK, its counts into ST. */
int ipt_decode_range(const uint8_t *buf, uint64_t seg_end, uint64_t start, uint64_t end,
		     uint32_t brk, const struct tk_ipt_flow_opts *o, struct tk_flow *f,
		     struct ipt_insns *ins, struct tk_sink sink, struct tk_ipt_flow_stats *st);
/* How far each of the N chunks that start at STARTS (tk_ipt_flow_chunks') may read: the
 * next start that is one of O's breaks, or LEN (ipt_decode_range's SEG_END), into ENDS. */
void ipt_segment_ends(const struct tk_ipt_flow_opts *o, const uint64_t *starts, size_t n,
		      size_t len, uint64_t *ends);

/* ---- ptdump's time columns for dump (dump_time.c) ---- */
/* The estimated time (libipt's pt_time). */
struct tk_ipt_dump_clock {
	uint64_t tsc;               /* the estimate */
	uint64_t base;              /* the time at the last TSC or MTC, less TMA's FastCounter */
	uint64_t fc;                /* ticks since base from CYCs (or TMA's FastCounter) */
	uint32_t ctc, ctc_cyc;      /* CTC at the last MTC/TMA; where the CYCs' count began */
	uint32_t lost_cyc;          /* CYCs without a calibration since the last MTC/TSC */
	uint8_t have_tsc, have_tma, have_mtc;
};

/* The cycles-to-ticks calibration (libipt's pt_time_cal). */
struct tk_ipt_dump_cal {
	uint64_t fcr;               /* ticks per cycle << 8 */
	uint64_t min_fcr, max_fcr;  /* min > max: none yet */
	uint64_t tsc, cyc_tsc;      /* the last TSC, the cycles since */
	uint64_t cyc_mtc;           /* the cycles since the last MTC */
	uint32_t ctc;               /* at the last MTC */
	uint8_t have_mtc, check_skl168;
};

enum tk_ipt_dump_show { TK_IPT_SHOW_NONE, TK_IPT_SHOW_TSC, TK_IPT_SHOW_FCR };

struct tk_ipt_dump_time {
	enum tk_ipt_dump_show show; /* --time, --tcal, neither (lines left out only) */
	int delta, no_tcal, no_wall_clock, keep_tcal_on_ovf, no_cyc, no_pad, no_timing;
	uint32_t mtc_freq;
	uint64_t nom_freq, eax, ebx;
	int skl168;
	struct tk_ipt_dump_clock t;
	struct tk_ipt_dump_cal cal;
	uint64_t shown_tsc, shown_fcr; /* the last shown, for --time-delta */
	int in_header;              /* between PSB and PSBEND */
};

/* A line's tracking column: ID ("tsc", "fcr"; NULL: none) and its text. */
struct tk_ipt_dump_col {
	const char *id;
	char text[32];
};

void tk_ipt_dump_time_init(struct tk_ipt_dump_time *d, const struct tk_ipt_dump_opts *o);
/* Forget everything (after a resync, as ptdump does). */
void tk_ipt_dump_time_reset(struct tk_ipt_dump_time *d);
/* Packet K in turn: the time tracked, remarks (ptdump's "[offset: ...]" lines) onto OUT,
 * the column into COL. Returns 1 when K's line is left out (--no-pad, --no-timing,
 * --no-cyc). */
int tk_ipt_dump_time_packet(struct tk_ipt_dump_time *d, const struct tk_ipt_packet *k,
			    struct tk_buf *out, struct tk_ipt_dump_col *col);

#endif
