/* Intel PT instruction flow: packets + memory image -> executed blocks, calls, returns and
 * events, split at PSBs for parallel decoding. */
#ifndef TRACEKIT_IPT_FLOW_H
#define TRACEKIT_IPT_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/flow.h"
#include "tracekit/image.h"
#include "tracekit/ipt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The PSB split's chunk size when tk_ipt_flow_opts.chunk_bytes is 0. */
#define TK_IPT_FLOW_CHUNK ((size_t)2 << 20)

struct tk_ipt_flow_opts {
	size_t sz;                    /* sizeof(struct tk_ipt_flow_opts) */
	const struct tk_image *image;
	unsigned nthreads;            /* 0 = all cores, 1 = on the calling thread */
	size_t chunk_bytes;           /* target chunk size for the PSB split (0: TK_IPT_FLOW_CHUNK) */
	/* Timing (ptxed's options); 0 = unknown. Event times are TSC ticks, refined by
	 * MTC when mtc_freq and the CPUID 0x15 ratio are known. */
	uint32_t mtc_freq, nom_freq, cpuid_15_eax, cpuid_15_ebx;
	/* The events' track (tk_event.track): streams of different CPUs or threads decoded
	 * into one profile or timeline keep their call stacks apart. */
	uint32_t track;
	/* Offsets in BUF where the trace does not continue the bytes before it (data lost
	 * between two perf.data buffers, snapshots that do not overlap), ascending, each at a
	 * PSB (others are ignored): decoding ends before each as at the end of the trace and
	 * starts again there with a TK_EV_GAP of reason break_reason (TK_GAP_OVERFLOW: lost,
	 * counted in the stats' gaps; TK_GAP_WRAP: not kept by a snapshot, not counted). */
	const uint64_t *breaks;
	size_t nbreaks;
	uint32_t break_reason;
	/* tk_ipt_flow_text with TK_IPT_TEXT_TIME: times on this clock, as seconds and
	 * nanoseconds (a timed perf.data session's, as perf script --ns prints them) instead
	 * of TSC ticks; mult 0: ticks */
	struct tk_tsc_conv time_conv;
	/* Nonzero: a stream taken part by part, its next part from this offset of BUF on (at
	 * a PSB): no chunk starts there or later, and those bytes are read only to finish
	 * the block that crosses it (the next call, given them first, decodes them). */
	size_t part_end;
	/* Advanced by each chunk's bytes as it is merged (in order, on the calling thread):
	 * one progress across a session's streams (NULL: none). */
	struct tk_progress *progress;
	/* Nonzero: BUF lies in a read-only mapping of a file (tk_input_is_file_mapping): each
	 * chunk's pages are given back once it is decoded, on the worker that decoded it
	 * (unmapping a 231 MB trace at the end took the one main thread 15-30 ms); a chunk
	 * read again faults them back in from the file. */
	int release_read;
	/* Non-NULL: the file BUF was mapped from, BUF at offset in_offset of it. The PSB split
	 * then reads the bytes its searches need with tk_input_pread: through the mapping,
	 * each chunk's start was a first touch of the trace on the calling thread (a fault of
	 * 12-20 us here; 2,053 chunks of a 139 MB trace split for a timeline: 38-52 ms, the
	 * run's serial part). Nothing changes where pread cannot read it (compressed, a pipe). */
	const struct tk_input *in;
	uint64_t in_offset;
	/* The processor's errata (enum tk_ipt_erratum in tracekit/ipt.h; tk_ipt_cpu_errata):
	 * the trace is read as that processor writes it. 0: none. */
	uint32_t errata;
	/* The address filter the trace was recorded with (NULL: none known). */
	const struct tk_ipt_addr_filter *addr_filter;
};

struct tk_ipt_flow_stats {
	uint64_t insns;               /* instructions reconstructed */
	uint64_t blocks;              /* TK_EV_BLOCK events */
	uint64_t events;              /* other events (enable, disable, mode, ...) */
	uint64_t errors;              /* decode errors (each one resynced) */
	uint64_t overflows;
	uint64_t chunks;
	struct tk_gap_stats gaps;
};

/* FROM's counts added to TO's (streams decoded one after another). */
TK_API void tk_ipt_flow_stats_add(struct tk_ipt_flow_stats *to, const struct tk_ipt_flow_stats *from);

/* Event flags for TK_EV_MODE/POWER/DISABLE produced by the PT decoder beyond event.h. */
enum tk_ipt_flow_flags {
	TK_IPT_DISABLE_ASYNC = 1,     /* TK_EV_DISABLE: asynchronous (FUP + TIP.PGD) */
	TK_IPT_DISABLE_END = 2,       /* TK_EV_DISABLE: the trace ends with tracing on;
					 addr = the next instruction (not executed) */
	TK_IPT_ENABLE_RESUMED = 1,    /* TK_EV_ENABLE: at the IP where tracing stopped
					 (libipt's "resumed") */
	TK_IPT_PTW_BOUND = 1,         /* TK_EV_PTWRITE: its packet had no IP; addr (if
					 not 0) is the PTWRITE the walk bound it to */
	TK_IPT_POWER_EXSTOP = 1, TK_IPT_POWER_MWAIT, TK_IPT_POWER_PWRE, TK_IPT_POWER_PWRX,
	TK_IPT_POWER_CBR, TK_IPT_POWER_STOP,
	TK_IPT_POWER_MNT,             /* TK_EV_POWER: a maintenance packet, arg = its payload */
	TK_IPT_POWER_TRIG,            /* TK_EV_POWER: a TRIG, arg = its TRBV, addr2 = 1 if
					 several triggers hit (MULT) */
	TK_IPT_POWER_EVENT,           /* TK_EV_POWER: an Event Trace event (CFE with its EVDs):
					 arg = enum tk_ipt_et | vector << 8 | TK_IPT_ET_HAS_*,
					 addr = its IP (0: none), addr2 = CR2 or VMX exit
					 qualification, count = VMX exit reason */
	/* TK_IPT_POWER_PWRE's addr2: 1 if the hardware chose the C-state; PWRX's addr2: why
	 * the core woke (SDM, PWRX "Wake Reason") */
	TK_IPT_WAKE_INT = 1, TK_IPT_WAKE_ST = 2, TK_IPT_WAKE_HW = 4,
};

/* TK_IPT_POWER_EVENT's kinds: the CFE packet's types (SDM, "Event Trace"; a VM exit with
 * an event vector is TK_IPT_ET_VMEXIT with TK_IPT_ET_HAS_VECTOR), and what else its arg
 * holds. */
enum tk_ipt_et {
	TK_IPT_ET_INTR = 1, TK_IPT_ET_IRET, TK_IPT_ET_SMI, TK_IPT_ET_RSM, TK_IPT_ET_SIPI,
	TK_IPT_ET_INIT, TK_IPT_ET_VMENTRY, TK_IPT_ET_VMEXIT, TK_IPT_ET_SHUTDOWN = 10,
	TK_IPT_ET_UINTR = 12, TK_IPT_ET_UIRET, TK_IPT_ET_SWINTR, TK_IPT_ET_SYSCALL,
	TK_IPT_ET_HAS_CR2 = 1 << 16,      /* addr2 is CR2 (a page fault's address) */
	TK_IPT_ET_HAS_VECTOR = 1 << 17,   /* a VM exit's vector is in arg */
	TK_IPT_ET_HAS_VMXR = 1 << 18,     /* count is the VMX exit reason */
	TK_IPT_ET_HAS_VMXQ = 1 << 19,     /* addr2 is the VMX exit qualification */
};

/* Per-chunk consumer. begin() runs on the worker before chunk I is decoded and supplies
 * its sink (FLOW is that worker's walker, for tk_flow_print_block); end() runs on the
 * worker after it; merge() runs on the calling thread, strictly in chunk order. Any may
 * be NULL except begin, which may return TK_CHUNK_SKIP (the chunk is not decoded).
 * SZ: as in tk_chunk_consumer (source.h), sizeof the struct the caller knows: it must
 * cover the members up to CTX, and the later (optional) ones are read only when it
 * covers them. */
struct tk_ipt_flow_consumer {
	size_t sz;
	int (*begin)(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink);
	int (*end)(void *ctx, size_t chunk, struct tk_flow *flow);
	int (*merge)(void *ctx, size_t chunk);
	void *ctx;
	/* Optional: each decoder (flow) once more when all chunks are merged, before it is
	 * freed; for what it gathered over all its chunks (tk_flow_take_counts). */
	int (*done)(void *ctx, struct tk_flow *flow);
	/* Optional: before merge(CHUNK), with FLOW NULL: 1 if the chunk must be decoded again
	 * (its events were right, the result of merging them is not: tk_prof_seam_exact), 0
	 * if not. If 1, called again with a decoder of its own (set it up as begin does) to
	 * give the sink of the second decoding; that decoder is then freed without done, and
	 * the chunk's stats count once. merge(CHUNK) follows either way. */
	int (*redo)(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink);
	/* Optional: on the worker, when chunk CHUNK failed with ERR (decoding stops: no
	 * later merge comes), for consumers whose workers wait for their chunk's turn. */
	void (*fail)(void *ctx, size_t chunk, int err);
	/* Optional: as tk_chunk_consumer.caller_decodes (source.h): no chunk's decoding waits
	 * for a merge, so the calling thread decodes chunks too. */
	int caller_decodes;
};

/* Decode BUF (a raw PT stream) against opts->image. Errors become TK_EV_GAP events (and
 * stats->gaps); decoding resyncs at the next PSB. Returns 0 or a consumer's error. */
TK_API int tk_ipt_flow_decode(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *opts,
		       const struct tk_ipt_flow_consumer *c, struct tk_ipt_flow_stats *stats);

/* The chunks tk_ipt_flow_decode makes of BUF with OPTS (the PSB split, and the breaks):
 * their start offsets into STARTS (N at most: -TK_E_INVAL if more), or with STARTS NULL
 * only how many. Returns the count (0: no PSB) or -TK_E_*. */
TK_API int64_t tk_ipt_flow_chunks(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *o,
			   uint64_t *starts, size_t n);

/* Convenience: all events, in order, to one sink (chunks buffered when parallel). */
TK_API int tk_ipt_flow_events(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *opts,
		       struct tk_sink sink, struct tk_ipt_flow_stats *stats);

enum tk_ipt_text_flags {
	TK_IPT_TEXT_NO_DISASM = 1,    /* addresses only */
	TK_IPT_TEXT_TIME = 2,         /* prefix lines with the time */
	TK_IPT_TEXT_STAT = 4,         /* no lines, only count */
	TK_IPT_TEXT_IFLAGS = 8,       /* [interrupts enabled/disabled] where IF changes */
	TK_IPT_TEXT_EVENT_IP = 16,    /* events with their IP (ptxed's --event:ip) */
};
/* ptxed-like listing into OUT: one line per instruction, events in brackets. */
TK_API int tk_ipt_flow_text(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *opts,
		     unsigned flags, struct tk_buf *out, struct tk_ipt_flow_stats *stats);

/* ---- execution statistics (tracekit stats) ---------------------------------------------- */
#define TK_IPT_EXEC_NCAT 128          /* instruction categories (Zydis's) */
#define TK_IPT_EXEC_NEXT 128          /* ISA extensions (Zydis's) */
#define TK_IPT_EXEC_NKIND 9           /* what ends a block: the flow's instruction classes */
struct tk_ipt_exec_stats {
	struct tk_ipt_flow_stats flow;  /* decoding: instructions, errors, gaps */
	uint64_t insns, block_execs;    /* executions */
	uint64_t cond_taken, cond_not_taken;   /* conditional branches, from the trace */
	/* executions of the blocks that end in each class of instruction (index: the flow's
	 * classes: 0 none (a block cut short), 1 conditional, 2 jump, 3 call, 4 return,
	 * 5 indirect jump, 6 indirect call, 7 far transfer) */
	uint64_t kind[TK_IPT_EXEC_NKIND];
	uint64_t category[TK_IPT_EXEC_NCAT];   /* executions per instruction category */
	uint64_t isa_ext[TK_IPT_EXEC_NEXT];    /* ... per ISA extension */
	uint64_t mem_read, mem_write;   /* executions of instructions that read / write memory */
	uint64_t undecoded;             /* executions whose code no longer decodes (0) */
	uint64_t distinct_blocks, distinct_insns, code_lines;   /* footprint (64-byte lines) */
	uint64_t enables, disables, async_disables, interrupts;
};
struct tk_ipt_exec;
TK_API struct tk_ipt_exec *tk_ipt_exec_new(const struct tk_image *img, int *err);
/* The number of IMG among the images the statistics count code of, added when new (the
 * image given to new is 0), or -TK_E_NOMEM. Each image's code is counted apart: a
 * perf.data session's processes (the same address in two is other code). */
TK_API int tk_ipt_exec_image(struct tk_ipt_exec *x, const struct tk_image *img);
TK_API size_t tk_ipt_exec_nimages(const struct tk_ipt_exec *x);
/* Decode one stream (chunks in parallel, against opts->image, or the one given to new
 * where that is NULL) and add what it executed; ONE (may be NULL) gets this stream's
 * decoding counts. */
TK_API int tk_ipt_exec_add(struct tk_ipt_exec *x, const uint8_t *buf, size_t len,
		    const struct tk_ipt_flow_opts *opts, struct tk_ipt_flow_stats *one);
/* Decode only chunks [FIRST, FIRST + COUNT) of the streams added from now on, numbered
 * across them in the order they are added (the PSB split of tk_ipt_flow_chunks with the
 * same options): a shard of the plan, whose statistics another process adds to the other
 * shards' (tk_partial_exec_save/load, tracekit/partial.h). COUNT SIZE_MAX: all from FIRST.
 * The others are not decoded; ONE and the decoding counts cover the decoded ones only. */
TK_API void tk_ipt_exec_range(struct tk_ipt_exec *x, size_t first, size_t count);
/* Only the flow counts (tk_ipt_exec_stats.flow: decode --stat's) are wanted: the executed
 * blocks and branch outcomes are not counted (finishing then describes no code). */
TK_API void tk_ipt_exec_flow_only(struct tk_ipt_exec *x);
/* The statistics of every stream added (the distinct blocks decoded once, now). */
TK_API int tk_ipt_exec_finish(struct tk_ipt_exec *x, struct tk_ipt_exec_stats *out);
TK_API void tk_ipt_exec_free(struct tk_ipt_exec *x);
/* What the statistics hold before tk_ipt_exec_finish, for a partial result made in one
 * process and merged in another (tracekit/partial.h): the distinct blocks with their
 * executions (FN on each, in no particular order), and the counts gathered while decoding
 * (the flow's, the conditional outcomes, enables, disables, interrupts: the fields
 * tk_ipt_exec_counts fills before finish). Adding both to another tk_ipt_exec gives what
 * decoding the same streams into it would. */
struct tk_ipt_exec_block {
	uint64_t start, last, execs;  /* first and last instruction, executions */
	uint32_t ninsn, mode;         /* instructions; mode: 0 64-bit, 1 32-bit, 2 16-bit */
	uint32_t image;               /* the image's number (tk_ipt_exec_image) */
};
TK_API int tk_ipt_exec_blocks(const struct tk_ipt_exec *x,
			      int (*fn)(void *ctx, const struct tk_ipt_exec_block *b), void *ctx);
TK_API size_t tk_ipt_exec_nblocks(const struct tk_ipt_exec *x);
/* -TK_E_INVAL: B's image is not one of X's (the merging process numbers the images as the
 * others did: tk_ipt_exec_image in the same order). */
TK_API int tk_ipt_exec_add_block(struct tk_ipt_exec *x, const struct tk_ipt_exec_block *b);
TK_API const struct tk_ipt_exec_stats *tk_ipt_exec_counts(const struct tk_ipt_exec *x);
TK_API void tk_ipt_exec_add_counts(struct tk_ipt_exec *x, const struct tk_ipt_exec_stats *s);
/* Names of category and isa_ext indexes (NULL past the last). */
TK_API const char *tk_ipt_exec_category_name(unsigned i);
TK_API const char *tk_ipt_exec_isa_ext_name(unsigned i);

/* ---- re-encoding ------------------------------------------------------------------------ */
/* Write the flow of BUF again as a processor with return compression writes it: a return
 * to the top of the 64-entry stack of call return addresses becomes a taken TNT bit,
 * outcomes go in TNT-8 packets and each IP packet is compressed against the new stream's
 * last IP. A PSB+ (TSC, MODE.Exec, FUP when tracing is on) starts each chunk of the input,
 * stands where the input had one while tracing, and follows psb_period bytes without one,
 * each at an instruction where a block starts. Enables, disables, asynchronous events,
 * mode changes and times keep their place in the flow; lost data (gaps) becomes an OVF,
 * resolved by a FUP or TIP.PGE where decoding resumed. FOPTS (image, threads, chunk size)
 * drive the decoding; the output does not depend on the number of threads. */
struct tk_ipt_reencode_opts {
	size_t sz;                    /* sizeof(struct tk_ipt_reencode_opts) */
	size_t psb_period;            /* most output bytes without a PSB+ (0: 8192) */
};

struct tk_ipt_reencode_stats {
	struct tk_ipt_flow_stats flow;  /* decoding BUF: instructions, errors, gaps */
	uint64_t bytes;               /* written */
	uint64_t returns;             /* returns in the flow */
	uint64_t compressed;          /* of them, written as a taken TNT bit */
	uint64_t tnt_bits, tnt_packets, tips, psbs, overflows;
	uint64_t dropped;             /* events without a packet here (PTWRITE, power, TSX, ...) */
};

TK_API int tk_ipt_reencode(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *fopts,
		    const struct tk_ipt_reencode_opts *opts, struct tk_buf *out,
		    struct tk_ipt_reencode_stats *st);

#ifdef __cplusplus
}
#endif
#endif
