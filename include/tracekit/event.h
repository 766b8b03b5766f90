/* The neutral event model: every decoder produces struct tk_event in batches to a sink. */
#ifndef TRACEKIT_EVENT_H
#define TRACEKIT_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_TIME_NONE UINT64_MAX

enum tk_event_kind {
	/* instruction-level flow */
	TK_EV_BLOCK = 1,     /* executed basic block: addr = first insn, addr2 = last insn,
				count = instructions; arg = instructions run before it in
				unreported blocks (as TK_EV_CALL's count) */
	TK_EV_CALL,          /* addr = call insn, addr2 = target, arg = return address;
				count = instructions run before it in unreported blocks (as
				TK_EV_INSNS; 0 unless the producer counts blocks) */
	TK_EV_RETURN,        /* addr = return insn, addr2 = target (return site); count as
				TK_EV_CALL */
	TK_EV_BRANCH,        /* addr = branch insn, addr2 = target, flags: TK_BR_* */
	TK_EV_MODE,          /* flags = TK_MODE_*; arg = mode-specific value (e.g. CR3 for paging) */
	TK_EV_ENABLE,        /* tracing (re)started at addr */
	TK_EV_DISABLE,       /* tracing stopped; addr = last known IP (0 if unknown), addr2 =
				where control went if the trace says (else 0) */
	TK_EV_SYSCALL,       /* addr = syscall insn, arg = number (TK_NONE if unknown) */
	TK_EV_INTERRUPT,     /* asynchronous transfer: addr = interrupted IP, addr2 = handler */

	/* function-level (XRay-like instrumentation) */
	TK_EV_FUNC_ENTER,    /* addr = function id or address, flags TK_FN_ADDR if address */
	TK_EV_FUNC_EXIT,
	TK_EV_FUNC_TAIL_EXIT,
	TK_EV_FUNC_ARG,      /* argument of the last enter: arg = value */

	/* payloads */
	TK_EV_CUSTOM,        /* data = payload, count = size */
	TK_EV_TYPED,         /* data = payload, count = size, arg = type */
	TK_EV_MEM_READ,      /* addr = data address, count = size, arg = value (if size <= 8) */
	TK_EV_MEM_WRITE,
	TK_EV_PTWRITE,       /* arg = value, addr = IP if known */
	TK_EV_POWER,         /* flags = TK_PWR_*, arg = C-state / frequency ratio */
	TK_EV_TIME,          /* time reference only (e.g. a TSC packet) */

	/* pipeline (Kanata) */
	TK_EV_INSN_BEGIN,    /* addr = instruction id, arg = thread id in the simulated machine,
				addr2 = id in the simulator (0 if none) */
	TK_EV_STAGE_BEGIN,   /* addr = instruction id, arg = stage id, flags = lane */
	TK_EV_STAGE_END,     /* addr = instruction id, arg = stage id, flags = lane */
	TK_EV_RETIRE,        /* addr = instruction id, arg = retire id */
	TK_EV_FLUSH,         /* addr = instruction id */
	TK_EV_DEPENDENCY,    /* addr = consumer id, addr2 = producer id, arg = type */
	/* (an instruction's label is a TK_EV_TYPED with flags = TK_TYPED_INSN_LABEL,
	   addr = instruction id, data/count = text, sent before its RETIRE or FLUSH) */

	/* lost or undecodable data: never silent */
	TK_EV_GAP,           /* arg = byte offset in the input, count = bytes skipped,
				flags = enum tk_gap_reason, addr = IP if relevant */

	/* instruction-level producers in count mode (tk_flow_set_count_mode) */
	TK_EV_INSNS,         /* count = instructions executed since the previous event in
				blocks not reported one by one (their executions reach the
				consumer in bulk, e.g. tk_prof_add_block) */
	/* core cycles (Intel PT CYC): arg = the cycles the instructions since the previous
	   TK_EV_CYCLES took; flags TK_CYC_START: the first after a sync point or loss,
	   whose cycles began before it (arg 0): it only starts the count */
	TK_EV_CYCLES,
	TK_EV__COUNT
};

enum tk_branch_flags { TK_BR_TAKEN = 1, TK_BR_CONDITIONAL = 2, TK_BR_INDIRECT = 4 };

enum tk_mode_flags {
	TK_MODE_EXEC_16 = 1, TK_MODE_EXEC_32, TK_MODE_EXEC_64,
	TK_MODE_PAGING,      /* arg = CR3, addr2 = 1 in VMX non-root operation (PT PIP.NR) */
	TK_MODE_VMCS,        /* arg = VMCS base */
	TK_MODE_TSX_BEGIN, TK_MODE_TSX_COMMIT, TK_MODE_TSX_ABORT,
	TK_MODE_EL,          /* AArch64 exception level: arg = EL */
	TK_MODE_IFLAG,       /* the interrupt flag (PT MODE.Exec's IF): arg = 1 set, 0 clear */
};

enum tk_gap_reason {
	TK_GAP_UNKNOWN = 0,
	TK_GAP_OVERFLOW,     /* the tracer's buffer overflowed (e.g. PT OVF) */
	TK_GAP_DECODE_ERROR, /* bytes could not be decoded; resynced */
	TK_GAP_WRAP,         /* ring buffer wrapped: older data is gone */
	TK_GAP_NO_IMAGE,     /* code at addr is not in the memory image */
	TK_GAP_TRUNCATED,    /* input ended inside a record */
	TK_GAP_ORPHAN,       /* an end without its beginning (e.g. exit without enter) */
	TK_GAP_BAD_CONTEXT,  /* a packet where the format does not allow it (e.g. PT's CFE
				without the FUP it announces); resynced */
	TK_GAP__COUNT
};

enum tk_fn_flags { TK_FN_ADDR = 1 };

enum tk_cyc_flags { TK_CYC_START = 1 };

/* TK_EV_TYPED flags of pipeline decoders (other producers put their record type there). */
enum { TK_TYPED_INSN_LABEL = 0x4c41 };

struct tk_event {
	uint64_t time;   /* trace ticks (see tk_trace_clock); TK_TIME_NONE if unknown */
	uint64_t addr;   /* code address, function id or instruction id, per kind */
	uint64_t addr2;  /* second address: block end, branch/call target, producer id */
	uint64_t count;  /* instruction count, payload size, bytes skipped, per kind */
	union {
		uint64_t arg;      /* argument, byte offset, stage id, per kind */
		const void *data;  /* payload (valid only during the sink call) */
	};
	uint32_t track;  /* thread, CPU or pipeline thread; see the decoder's track table */
	uint16_t kind;   /* enum tk_event_kind */
	uint16_t flags;  /* kind-specific */
};

/* How a trace's ticks relate to seconds; ticks_per_second == 0 means unknown. */
struct tk_trace_clock {
	uint64_t ticks_per_second;
};

/* The kernel's conversion of TSC ticks to its clock (perf_event_mmap_page; a perf.data
 * session's AUXTRACE_INFO): ns = zero + ticks * mult / 2^shift, computed as perf does
 * (quotient and remainder by 2^shift apart, 64-bit, mult 32 bits, shift 16 bits), so the
 * times are perf's to the nanosecond. mult 0: no conversion. */
struct tk_tsc_conv {
	uint64_t zero;
	uint32_t mult;
	uint16_t shift;
};

static inline uint64_t tk_tsc_conv_ns(const struct tk_tsc_conv *c, uint64_t ticks)
{
	unsigned shift = c->shift & 63;
	uint64_t quot = ticks >> shift, rem = ticks & ((1ull << shift) - 1);

	return c->zero + quot * c->mult + ((rem * c->mult) >> shift);
}

/* A consumer of events. Returning < 0 stops the producer, which returns that value. */
struct tk_sink {
	int (*events)(void *ctx, const struct tk_event *ev, size_t n);
	void *ctx;
	/* Optional, for producers that hold a chunk's events until its turn: copies to OUT
	 * (room for N) the events of EV[0..n), a contiguous part of the stream, less those
	 * that would change nothing for this sink (some merged); returns how many. Called on
	 * the producer's threads, concurrently with events(). */
	size_t (*thin)(void *ctx, const struct tk_event *ev, size_t n, struct tk_event *out);
	/* Nonzero: of executed blocks the sink reads only their track and time, and times
	 * never go back, so an instruction-flow producer may count blocks in its walker
	 * instead of sending each (TK_EV_INSNS, tk_flow_set_count_mode); and of time events
	 * only the last before another event, which carries the time itself, so the producer
	 * may hold them back and send the last at a chunk's end. */
	int counted_blocks;
	/* Optional, with thin: the part of the sink's work on a held chunk that needs none of
	 * the events before it, done on the producer's thread as the chunk's events are held:
	 * called with each run of events thin kept (their payloads not readable yet), after
	 * the chunk's earlier ones, with what the last call returned (NULL the first time),
	 * and returns what it made so far, or NULL to give up on the chunk (having freed it);
	 * a producer that holds only what need_from asks for may instead call it with the
	 * events before thin, all of them (need_from's index then counts those), which must
	 * come to the same. take then gets the chunk's events in its turn, in place of events(), with what
	 * prepare made (take owns it); drop frees it if the turn never comes. A producer that
	 * can decode a chunk again holds only the events from need_from (the chunk's index of
	 * the first event take still needs; SIZE_MAX: none so far) on: take gets them with
	 * FIRST, their index in the chunk, and returns TK_SINK_AGAIN when it needs the whole
	 * chunk after all (the producer then hands all its events to events()). */
	void *(*prepare)(void *ctx, void *prepared, const struct tk_event *ev, size_t n);
	int (*take)(void *ctx, const struct tk_event *ev, size_t n, size_t first, void *prepared);
	void (*drop)(void *ctx, void *prepared);
	size_t (*need_from)(void *ctx, const void *prepared);
	/* Nonzero: take also accepts a chunk's events in consecutive parts (FIRST from 0 on,
	 * never falling, the last part ending where what prepare saw ends), with events() of other
	 * events between the parts; a TK_SINK_AGAIN comes only from the first part. Take owns
	 * PREPARED from the first call: freed by the last part, an error or TK_SINK_AGAIN
	 * (drop frees it if the parts stop early). A producer that replays commands about
	 * earlier chunks between a chunk's events (Kanata's) needs this. Such a producer
	 * cannot decode a chunk in its sink's place, but it may ask need_from before (PREPARED
	 * NULL) or after prepare has seen a chunk's events: SIZE_MAX says that take reads none
	 * of them, so the producer need not keep them (take then gets EV NULL); if take
	 * refuses such a chunk (its first part, which may be empty) or prepare gives up on it,
	 * the producer makes its events again itself. */
	int take_in_parts;
};

/* tk_sink.take's answer: the chunk's events again, all of them, to events(). */
#define TK_SINK_AGAIN 2

/* What a chunked decoder's "begin this chunk" callback (tracekit/source.h's consumer, and
 * the formats' own protocols behind it) returns to leave the chunk out: it is not decoded
 * (another process decodes it, a shard), and its merge still comes in order. */
#define TK_CHUNK_SKIP 1

/* A fixed batch that producers fill and flush into a sink. */
#define TK_EVENT_BATCH 1024
struct tk_event_batch {
	struct tk_sink sink;
	size_t n;
	struct tk_event ev[TK_EVENT_BATCH];
};

static inline void tk_event_batch_init(struct tk_event_batch *b, struct tk_sink sink)
{
	b->sink = sink;
	b->n = 0;
}
static inline int tk_event_batch_flush(struct tk_event_batch *b)
{
	int rc = 0;
	if (b->n && b->sink.events)
		rc = b->sink.events(b->sink.ctx, b->ev, b->n);
	b->n = 0;
	return rc;
}
/* Reserve the next event slot; flushes when full. Returns NULL if the sink said stop
 * (*rc receives its code). The caller fills the returned event. */
static inline struct tk_event *tk_event_batch_next(struct tk_event_batch *b, int *rc)
{
	if (b->n == TK_EVENT_BATCH) {
		int r = tk_event_batch_flush(b);
		if (r < 0) {
			*rc = r;
			return NULL;
		}
	}
	return &b->ev[b->n++];
}

TK_API const char *tk_event_kind_name(unsigned kind);
TK_API const char *tk_gap_reason_name(unsigned reason);

#ifdef __cplusplus
}
#endif
#endif
