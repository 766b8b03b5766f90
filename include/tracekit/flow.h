/* Generic control-flow walker: follows the code in a memory image from an IP, asking a
 * branch oracle (the trace) for conditional outcomes and indirect targets. Shared by every
 * instruction-level format (Intel PT, branch traces, xtrace). */
#ifndef TRACEKIT_FLOW_H
#define TRACEKIT_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/image.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tk_flow;

enum tk_flow_mode { TK_FLOW_64 = 0, TK_FLOW_32, TK_FLOW_16 };

/* What the oracle says comes next in the trace. */
enum tk_flow_q_kind {
	TK_FLOWQ_NONE = 0,
	TK_FLOWQ_TNT,    /* ntnt conditional outcomes in tnt; the next one is bit ntnt-1 */
	TK_FLOWQ_TIP,    /* target of the next indirect branch, far transfer or uncompressed RET */
	TK_FLOWQ_PGD,    /* the next branch leaves the traced region; ip = target if has_ip */
	TK_FLOWQ_STOP,   /* an event bound to ip: stop there, before executing it */
	TK_FLOWQ_END,    /* no more flow data (end of chunk or stream): stop before ip */
	TK_FLOWQ_STEP,   /* an event ntnt instructions ahead: stop after them (straight,
			    direct flow; a branch that needs trace before is an error) */
};

struct tk_flow_q {
	int kind;
	unsigned ntnt;
	uint64_t tnt;
	uint64_t ip;
	int has_ip;
	int mode;        /* TIP: execution mode from the target on; -1 = unchanged */
	/* STOP: if the walk, right after a branch, cannot get to IP by straight code and
	 * direct branches, that branch's trace was wrong and IP is where it went (erratum
	 * BDM64: a transaction's abort just after a branch) */
	int jump_ok;
};

/* Fill Q with the next item. Return < 0 on a trace error (the walker returns it). */
struct tk_flow_oracle {
	int (*next)(void *ctx, struct tk_flow_q *q);
	void *ctx;
	/* Optional: an indirect branch or far transfer needs a TIP while the pending item
	 * is TNT. Fill T with the branch's target (ip, mode) from a TIP that comes after
	 * the TNT, keeping the TNT for the branches after it; < 0 if there is none. */
	int (*deferred_tip)(void *ctx, struct tk_flow_q *t);
};

/* Why tk_flow_walk returned (values >= 0). */
enum tk_flow_status {
	TK_FLOW_STOPPED = 0,  /* reached a STOP item's ip or a STEP's end; *ip is it */
	TK_FLOW_DISABLED,     /* a branch consumed a PGD: res.from = branch, *ip = target or 0 */
	TK_FLOW_ENDED,        /* reached END; *ip (and res.from) = the next insn, not run */
	TK_FLOW_BOUND,        /* ran an instruction that a held event binds to (see
				 tk_flow_set_bind): res.from = it, *ip = where the flow goes on */
};

/* Events the oracle has read but that belong to an instruction still ahead (Intel PT's
 * PIP, VMCS and PTW without IP: libipt binds them to the next one that can cause them). */
enum tk_flow_bind {
	TK_FLOW_BIND_PAGING = 1,   /* a MOV CR3 or a far transfer (VM entry included) */
	TK_FLOW_BIND_VMCS = 2,     /* a far transfer or a VMPTRLD */
	TK_FLOW_BIND_FAR = 4,      /* a far transfer (IRET, VM entry, UIRET of Event Trace) */
	TK_FLOW_BIND_PTWRITE = 8,  /* a PTWRITE */
	/* the trace ended with some of the above held: an END item walks on first, through
	 * the instructions that need no trace, to the next one they bind to (the event says
	 * it ran), and ends before one that would need trace */
	TK_FLOW_BIND_AT_END = 16,
};

struct tk_flow_result {
	uint64_t from;        /* DISABLED/ENDED/errors: the instruction where it happened */
	uint64_t insns;       /* instructions walked in this call */
};

TK_API struct tk_flow *tk_flow_new(const struct tk_image *img, int *err);
TK_API void tk_flow_free(struct tk_flow *f);

/* Forget the return-compression call stack (at a PSB or after lost data). */
TK_API void tk_flow_reset_stack(struct tk_flow *f);
/* Time stamped on the events produced from now on. */
TK_API void tk_flow_set_time(struct tk_flow *f, uint64_t time);
TK_API void tk_flow_set_track(struct tk_flow *f, uint32_t track);
/* ON = 0: walk without emitting TK_EV_BLOCK/CALL/RETURN events (instruction counts still
 * come back in tk_flow_result), for consumers that only count. Default 1. */
TK_API void tk_flow_set_flow_events(struct tk_flow *f, int on);

/* ON = 1: also report how the trace resolved each branch, for consumers that write the
 * flow back as packets: a TK_EV_BRANCH for every conditional branch (addr = the branch,
 * addr2 = where it went, flags TK_BR_CONDITIONAL, | TK_BR_TAKEN if taken) and for every
 * indirect jump or call or far transfer given a target (flags TK_BR_INDIRECT | TK_BR_TAKEN,
 * ahead of an indirect call's TK_EV_CALL). Returns stay TK_EV_RETURN only. The walk goes
 * block by block then (no bulk TNT path). Off by default. */
TK_API void tk_flow_set_branch_events(struct tk_flow *f, int on);

/* BIND (enum tk_flow_bind bits, 0: none): the walk stops with TK_FLOW_BOUND right after
 * the next instruction such an event binds to (after a far transfer, at its target), block
 * by block until then. Kept until set again. */
TK_API void tk_flow_set_bind(struct tk_flow *f, unsigned bind);

/* A TIP.PGD without IP may also bind to a direct JMP or CALL whose target PGD_DIRECT says
 * (nonzero) tracing stops at (Intel PT erratum SKL014: a branch out of the address
 * filter's regions). NULL (the default): only to a MOV CR3, or a branch that needs trace.
 * Kept until set again. */
TK_API void tk_flow_set_pgd_direct(struct tk_flow *f, int (*pgd_direct)(void *ctx, uint64_t target),
				   void *ctx);

/* Count mode, for profiles: blocks are counted in the walker's block cache instead of
 * being reported one TK_EV_BLOCK each. Only the first block of a walk, a block that
 * starts at one of ENTRIES (function entry points, any order: tail calls are seen there)
 * and a block cut short are still reported. The instructions of the others go with the
 * next TK_EV_BLOCK (its arg), TK_EV_CALL or TK_EV_RETURN (its count) or as a TK_EV_INSNS
 * ahead of any other event (and at the end of each tk_flow_walk); their executions come
 * through tk_flow_take_counts. Off by default. */
TK_API int tk_flow_set_count_mode(struct tk_flow *f, int on, const uint64_t *entries, size_t n);
typedef int (*tk_flow_count_fn)(void *ctx, uint64_t start, uint64_t last, int mode,
				uint64_t execs, uint64_t insns);
/* Count mode: call FN for each block counted since the last call (START and LAST: its
 * first and last instruction, MODE its TK_MODE_* code size; INSNS = EXECS * its length)
 * and start counting afresh. */
TK_API int tk_flow_take_counts(struct tk_flow *f, tk_flow_count_fn fn, void *ctx);
/* Count mode, from the oracle: send the instructions walked but not yet sent (a
 * TK_EV_INSNS) into OUT now, so that an event the oracle adds next follows them. */
TK_API int tk_flow_send_insns(struct tk_flow *f, struct tk_event_batch *out);

/* Walk from *IP in *MODE (updated by TIP items), emitting TK_EV_BLOCK/CALL/RETURN events into OUT, until the oracle
 * stops it. Returns enum tk_flow_status, or -TK_E_NOMAP (code missing at *ip, or at
 * res.from where the direct flow would take TNT outcomes there), -TK_E_BAD_OPCODE
 * (undecodable code at *ip), -TK_E_BAD_FORMAT (the trace does not fit the code at res.from;
 * TNT outcomes with no branch for them in reach stop the walk before *ip), -TK_E_LIMIT (no
 * trace consumed for too long), or the oracle's or
 * sink's error. The oracle's pending item survives between calls. */
TK_API int tk_flow_walk(struct tk_flow *f, uint64_t *ip, int *mode, const struct tk_flow_oracle *o,
		 struct tk_event_batch *out, struct tk_flow_result *res);
/* Count the conditional branches walked, not taken and taken (off by default): exact in
 * count mode and whenever events are produced; the counting walk of decode --stat (no
 * events, paths through calls) does not keep them. tk_flow_take_cond gives the counts
 * since its last call and counts afresh. */
TK_API void tk_flow_set_cond_counts(struct tk_flow *f, int on);
TK_API void tk_flow_take_cond(struct tk_flow *f, uint64_t *not_taken, uint64_t *taken);
/* Conditional outcomes of the oracle's TNT item that the walker holds but has not used
 * (0 if it holds no TNT item): after an error, the failing one is the first of them. */
TK_API unsigned tk_flow_pending_tnt(const struct tk_flow *f);
/* Drop the oracle item the walker holds (after an error or resync). */
TK_API void tk_flow_clear_pending(struct tk_flow *f);

/* Expand a TK_EV_BLOCK event produced by this walker into its instruction addresses:
 * calls fn(ctx, addr, len) for each. */
TK_API int tk_flow_block_insns(struct tk_flow *f, const struct tk_event *blk,
			void (*fn)(void *ctx, uint64_t addr, unsigned len), void *ctx);
/* Write one line per instruction of a block event: 16 hex digits, and with DISASM two
 * spaces and Intel-syntax disassembly (ptxed-like). */
TK_API int tk_flow_print_block(struct tk_flow *f, struct tk_buf *out, const struct tk_event *blk,
			int disasm);
/* Bytes of code classified so far (each byte once per image and mode). */
TK_API uint64_t tk_flow_decoded_bytes(const struct tk_flow *f);

#ifdef __cplusplus
}
#endif
#endif
