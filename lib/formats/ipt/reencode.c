/* Re-encoding: a PT stream decoded into its flow (tk_ipt_flow_decode with branch events)
 * and written back as a processor with return compression writes it (SDM vol. 3C, Intel
 * PT, "Indirect Transfer Compression for Returns"). A return whose target is the top of a
 * 64-entry stack of call return addresses becomes one taken TNT bit; calls push (not a
 * direct call to the next instruction), and the stack is emptied at each PSB and overflow.
 * The processor pops it at every near return it traces, compressed or not (a return is
 * compressed only to the call of matching stack depth, SDM 36.2.1.2), as perf's decoder
 * and lib/flow/walk.c do. libipt's decoders pop only at compressed returns; the two
 * readings part after an uncompressed return while the stack holds entries (a traced
 * function called from untraced code returning out of the trace: an IFUNC resolver run
 * by the lazy binder). A return is compressed only where both readings give its target,
 * so either kind of decoder reads the output right; where they part, the processor may
 * compress a few returns more (a TIP is never wrong: compression is optional).
 *
 * Each chunk of the input (from one of its PSBs) is re-encoded alone into its own
 * buffer, starting with a PSB+ of its own, so chunks run in parallel and the output does
 * not depend on the number of threads. A PSB+ goes at the start of a block (its FUP is
 * the next instruction, where a parallel decoder's chunk ends): where the input had one
 * while tracing (the time changed without a tick: same time from the same instruction),
 * where the execution mode changed, and when psb_period bytes passed without one. Ticks
 * (timing packets between branches) become a TSC at the same place in the flow, and so
 * does a new time where tracing is enabled again (a TSC before the TIP.PGE).
 *
 * The IP packet of an indirect branch or return waits for the next block, which tells the
 * execution mode it leads to (a MODE.Exec goes first when that changes) and whether a
 * return left the traced code (then its TIP.PGD is all there is). Lost data becomes OVF,
 * then timing packets and a FUP where tracing goes on (or TIP.PGE), as the SDM has it. */
#include <stdlib.h>

#include "formats/ipt/internal.h"
#include "tracekit/ipt_flow.h"

#define RET_STACK 64
/* Without a PSB in the input for this long: the input's own, every 4 KiB of input,
 * come first unless nothing could be compressed. */
#define PSB_PERIOD 8192

enum { PEND_NONE, PEND_RET, PEND_TIP, PEND_PGE, PEND_ASYNC };

struct rstack {
	uint64_t ret[RET_STACK];       /* ring: top = next slot */
	unsigned top, depth;
};

struct renc {
	struct tk_buf out;             /* this chunk's bytes */
	struct tk_ipt_last_ip last;
	struct rstack hw, lib;         /* the processor's stack and libipt's reading of it */
	uint64_t tnt;                  /* pending outcomes, oldest highest */
	unsigned ntnt;
	size_t since_psb, period;
	int on;                        /* tracing is on as the output tells it */
	int need_psb;                  /* the next block or enable starts with a PSB+ */
	int need_fup;                  /* after an overflow: a FUP where tracing goes on */
	int tick;                      /* the next PSB+ carries a tick (its TSC after it) */
	unsigned walked;               /* blocks since the last packet the flow stops at */
	int wrote;                     /* something written in this chunk */
	int starts_on;                 /* it starts with a PSB+ with a FUP, at first_ip */
	uint64_t first_ip;
	int first_mode;                /* ... in this mode */
	int input_on;                  /* the input chunk's PSB+ has a FUP, at input_ip */
	int input_whole;               /* and ends with its PSBEND (else the decoder's error) */
	int input_mode;                /* ... and its mode (-1: none) */
	uint64_t start;                /* the input chunk's offset */
	uint64_t input_ip;
	int mode;                      /* of the last MODE.Exec written; -1 none */
	uint64_t time;                 /* of the last TSC written */
	struct {
		int kind;
		uint64_t from, ip, time;
	} pend;
	struct tk_ipt_reencode_stats st;
};

static void put(struct renc *r, const struct tk_ipt_packet *p);

static void flush_tnt(struct renc *r)
{
	struct tk_ipt_packet p = { .kind = TK_IPT_PKT_TNT8 };

	if (!r->ntnt)
		return;
	p.tnt.bits = r->tnt;
	p.tnt.count = (uint8_t)r->ntnt;
	r->tnt = 0;
	r->ntnt = 0;
	r->st.tnt_packets++;
	put(r, &p);
}

/* Every packet goes through here: outcomes still waiting go out first. */
static void put(struct renc *r, const struct tk_ipt_packet *p)
{
	int n;

	if (p->kind != TK_IPT_PKT_TNT8)
		flush_tnt(r);
	if ((n = tk_ipt_encode(&r->out, p)) > 0) {
		r->since_psb += (size_t)n;
		r->st.bytes += (uint64_t)n;
		r->wrote = 1;
	}
}

static void put_kind(struct renc *r, enum tk_ipt_pkt_kind kind)
{
	struct tk_ipt_packet p = { .kind = kind };

	put(r, &p);
}

static void put_ip(struct renc *r, enum tk_ipt_pkt_kind kind, uint64_t ip)
{
	struct tk_ipt_packet p = { .kind = kind };

	tk_ipt_ip_packet(&r->last, kind, ip, &p);
	if (kind == TK_IPT_PKT_TIP)
		r->st.tips++;
	put(r, &p);
	r->walked = 0;
}

/* TIP.PGD with its target, or without an IP when the trace did not say (0). */
static void put_pgd(struct renc *r, uint64_t ip)
{
	struct tk_ipt_packet p = { .kind = TK_IPT_PKT_TIP_PGD };

	if (ip)
		put_ip(r, TK_IPT_PKT_TIP_PGD, ip);
	else
		put(r, &p);
	r->walked = 0;
}

static void put_mode(struct renc *r, int mode)
{
	struct tk_ipt_packet p = { .kind = TK_IPT_PKT_MODE_EXEC };

	p.exec.csl = mode == TK_FLOW_64;
	p.exec.csd = mode == TK_FLOW_32;
	r->mode = mode;
	put(r, &p);
}

static void put_time(struct renc *r, uint64_t time)
{
	struct tk_ipt_packet p = { .kind = TK_IPT_PKT_TSC };

	if (time == TK_TIME_NONE || time == r->time)
		return;
	p.tsc.tsc = time & ((1ull << 56) - 1);
	r->time = time;
	put(r, &p);
}

static void bit(struct renc *r, int taken)
{
	r->tnt = r->tnt << 1 | (taken != 0);
	r->st.tnt_bits++;
	r->walked = 0;
	if (++r->ntnt == 6)
		flush_tnt(r);
}

/* PSB+: PSB, TSC, MODE.Exec, FUP with the next instruction when tracing is on, PSBEND.
 * The last IP and the return stack start afresh after it. */
static void psb(struct renc *r, int on, uint64_t ip, int mode, uint64_t time)
{
	struct tk_ipt_packet p = { .kind = TK_IPT_PKT_PSB };

	if (mode < 0)
		mode = TK_FLOW_64;   /* as written below, and as re_merge's MODE.Exec says */
	flush_tnt(r);
	if (!r->wrote && on) {
		r->starts_on = 1;
		r->first_ip = ip;
		r->first_mode = mode;
	}
	r->since_psb = 0;
	r->walked = 0;
	put(r, &p);
	r->st.psbs++;
	tk_ipt_last_ip_init(&r->last);
	r->hw.depth = r->lib.depth = 0;
	r->time = TK_TIME_NONE;
	if (!r->tick)
		put_time(r, time);
	put_mode(r, mode);
	if (on)
		put_ip(r, TK_IPT_PKT_FUP, ip);
	put_kind(r, TK_IPT_PKT_PSBEND);
	if (r->tick) {
		/* the input's PSB+ time is not known; TIME is the time after its tick, so
		 * the PSB+ goes without TSC and the TSC follows it: a tick again */
		put_time(r, time);
		r->tick = 0;
	}
	r->need_psb = 0;
	r->need_fup &= !on;
	r->on = on;
}

static void push(struct rstack *s, uint64_t ret)
{
	s->ret[s->top] = ret;
	s->top = (s->top + 1) % RET_STACK;
	if (s->depth < RET_STACK)
		s->depth++;
}

/* Whether the top is IP; pops it either way. */
static int pop(struct rstack *s, uint64_t ip)
{
	if (!s->depth)
		return 0;
	s->top = (s->top + RET_STACK - 1) % RET_STACK;
	s->depth--;
	return s->ret[s->top] == ip;
}

static int top_is(const struct rstack *s, uint64_t ip)
{
	return s->depth && s->ret[(s->top + RET_STACK - 1) % RET_STACK] == ip;
}

/* The IP packet waiting for the block it leads to (in MODE; -1: not known). */
static void resolve(struct renc *r, int mode)
{
	int kind = r->pend.kind;
	uint64_t ip = r->pend.ip;

	r->pend.kind = PEND_NONE;
	if (mode < 0)
		mode = r->mode >= 0 ? r->mode : TK_FLOW_64;
	switch (kind) {
	case PEND_RET: {
		/* compressed where both readings give IP (see the top) */
		int lib = mode == r->mode && top_is(&r->lib, ip);

		r->st.returns++;
		if (pop(&r->hw, ip) && lib) {
			pop(&r->lib, ip);
			r->st.compressed++;
			bit(r, 1);
			return;
		}
	}
		/* else a TIP */
		__attribute__((fallthrough));
	case PEND_TIP:
		if (mode != r->mode)
			put_mode(r, mode);
		put_ip(r, TK_IPT_PKT_TIP, ip);
		return;
	case PEND_PGE:
		r->need_fup = 0;               /* an overflow may resolve with TIP.PGE */
		/* a new time while tracing was off (the input's PSB+ without FUP, or a TSC
		 * before the TIP.PGE, as the branch-trace recorder writes it) goes in a TSC */
		if (r->need_psb || r->since_psb >= r->period) {
			psb(r, 0, 0, mode, r->pend.time);
		} else {
			put_time(r, r->pend.time);
			if (mode != r->mode)
				put_mode(r, mode);
		}
		put_ip(r, TK_IPT_PKT_TIP_PGE, ip);
		r->on = 1;
		return;
	case PEND_ASYNC:
		put_ip(r, TK_IPT_PKT_FUP, r->pend.from);
		if (mode != r->mode)
			put_mode(r, mode);
		put_ip(r, TK_IPT_PKT_TIP, ip);
		return;
	default:
		return;
	}
}

static void pend(struct renc *r, int kind, uint64_t from, uint64_t ip, uint64_t time)
{
	r->pend.kind = kind;
	r->pend.from = from;
	r->pend.ip = ip;
	r->pend.time = time;
}

/* Tracing goes on at IP after an overflow: OVF, timing packets, FUP (the SDM's form; a
 * PSB+ between them would hide the FUP from libipt). */
static void resume_at(struct renc *r, uint64_t ip, int mode, uint64_t time)
{
	put_time(r, time);
	if (mode != r->mode)
		put_mode(r, mode);
	put_ip(r, TK_IPT_PKT_FUP, ip);
	r->need_fup = 0;
	r->on = 1;
}

/* Before an event bound to an IP while tracing: a chunk's first packets are a PSB+. */
static void sync_at(struct renc *r, uint64_t ip, uint64_t time)
{
	if (r->need_psb)
		psb(r, 1, ip, r->mode, time);
	else if (r->need_fup)
		resume_at(r, ip, r->mode, time);
	else
		put_time(r, time);
}

static int renc_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct renc *r = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];

		switch (e->kind) {
		case TK_EV_BLOCK: {
			int mode = e->flags <= TK_FLOW_16 ? e->flags : TK_FLOW_64;

			if (r->pend.kind)
				resolve(r, mode);
			if (r->need_fup && !r->need_psb) {
				resume_at(r, e->addr, mode, e->time);
			} else if (!r->on && !r->need_psb) {
				/* on again with no enable after the output said tracing was
				 * off (a loss at the chunk's start: OVF, PSB+ without FUP);
				 * libipt takes tracing back only from a TIP.PGE */
				pend(r, PEND_PGE, 0, e->addr, e->time);
				resolve(r, mode);
			} else if (r->need_psb || mode != r->mode || e->time != r->time ||
				   r->since_psb >= r->period) {
				/* a time that changed without a tick came from a PSB+ in the
				 * input (its TSC): one here gives the same time from the same
				 * instruction */
				psb(r, 1, e->addr, mode, e->time);
			}
			r->walked++;
			break;
		}
		case TK_EV_BRANCH:
			if (r->pend.kind)
				resolve(r, -1);
			if (e->flags & TK_BR_CONDITIONAL)
				bit(r, e->flags & TK_BR_TAKEN);
			else
				pend(r, PEND_TIP, e->addr, e->addr2, e->time);
			break;
		case TK_EV_CALL:
			/* not for a direct call to the next instruction (an indirect call's
			 * TIP is still waiting) */
			if (e->addr2 != e->arg || (r->pend.kind == PEND_TIP && r->pend.from == e->addr)) {
				push(&r->hw, e->arg);
				push(&r->lib, e->arg);
			}
			break;
		case TK_EV_RETURN:
			if (r->pend.kind)
				resolve(r, -1);
			pend(r, PEND_RET, e->addr, e->addr2, e->time);
			break;
		case TK_EV_ENABLE:
			if (r->pend.kind)
				resolve(r, -1);
			/* on again without a disable: the trace had ended (a PSB without FUP) */
			if (r->on)
				r->need_psb = 1;
			pend(r, PEND_PGE, 0, e->addr, e->time);
			break;
		case TK_EV_DISABLE:
			if (e->flags & TK_IPT_DISABLE_END) {
				/* the trace ends here: its last packets, and nothing more */
				if (r->pend.kind)
					resolve(r, -1);
				break;
			}
			if (r->need_fup && !r->need_psb && !e->addr) {
				/* stopped somewhere after the loss (the decoder's resync found a
				 * TIP.PGD): the OVF already says tracing is lost until a FUP or
				 * TIP.PGE */
				r->on = 0;
				break;
			}
			if (r->pend.kind == PEND_RET && !(e->flags & TK_IPT_DISABLE_ASYNC) &&
			    r->pend.from == e->addr) {
				/* a return out of the traced code: the TIP.PGD says where */
				r->pend.kind = PEND_NONE;
				r->st.returns++;
				pop(&r->hw, 0);
			} else if (r->pend.kind) {
				resolve(r, -1);
			}
			sync_at(r, e->addr, e->time);
			if (e->flags & TK_IPT_DISABLE_ASYNC)
				put_ip(r, TK_IPT_PKT_FUP, e->addr);
			put_pgd(r, e->addr2);
			r->on = 0;
			break;
		case TK_EV_INTERRUPT:
			if (r->pend.kind)
				resolve(r, -1);
			sync_at(r, e->addr, e->time);
			pend(r, PEND_ASYNC, e->addr, e->addr2, e->time);
			break;
		case TK_EV_GAP:
			if (r->pend.kind)
				resolve(r, -1);
			if (!r->wrote && e->arg == r->start && (e->flags == TK_GAP_OVERFLOW ||
								e->flags == TK_GAP_WRAP)) {
				/* a break (tk_ipt_flow_opts.breaks): the trace before it ended
				 * there, so an OVF ends it, and this chunk's PSB+ follows as in
				 * the input */
				put_kind(r, TK_IPT_PKT_OVF);
				r->st.overflows++;
				psb(r, r->input_on, r->input_ip,
				    r->input_mode >= 0 ? r->input_mode : r->mode, e->time);
				break;
			}
			/* lost right at the chunk's start: its PSB+ as in the input, so the
			 * last chunk's flow stops where this one starts; nothing decodes at
			 * its IP, so an overflow of the chunk before does not resume there
			 * (re_merge's FUP would lead the decoder into the loss). Not its FUP
			 * when the PSB+ is cut short (the decoder took no IP from it): the
			 * flow before ended where it stood, so the OVF goes first here (a
			 * PSB+ without FUP while the flow is on is a decode error). */
			if (!r->wrote && r->input_on && !r->input_whole) {
				put_kind(r, TK_IPT_PKT_OVF);
				r->st.overflows++;
				psb(r, 0, 0, r->input_mode >= 0 ? r->input_mode : r->mode, e->time);
				r->starts_on = 0;
				break;
			}
			if (!r->wrote) {
				psb(r, r->input_on, r->input_ip,
				    r->input_mode >= 0 ? r->input_mode : r->mode, e->time);
				r->starts_on = 0;
			}
			put_kind(r, TK_IPT_PKT_OVF);
			r->st.overflows++;
			tk_ipt_last_ip_init(&r->last);
			r->hw.depth = r->lib.depth = 0;
			r->on = 0;
			r->need_fup = 1;
			break;
		case TK_EV_TIME:
			if (r->pend.kind)
				resolve(r, -1);
			/* A decoder tells a tick where it reads the packet after the timing
			 * one, before the blocks that led there: a TSC here would move this one
			 * back over the blocks walked since the last packet (the input's came
			 * from a PSB+ whose FUP stops the flow past a direct jump). A PSB+ at
			 * the next block stops the flow there again, its TSC after it. */
			if (r->need_psb || (r->on && r->walked)) {
				r->tick = 1;
				r->need_psb = 1;
			} else {
				put_time(r, e->time);
			}
			break;
		case TK_EV_CYCLES:   /* the times carry what timing is written */
			break;
		default:
			/* PTWRITE, power, TSX, paging: no packet of their own here */
			r->st.dropped++;
			break;
		}
	}
	return r->out.err;
}

static int renc_init(struct renc *r, size_t period)
{
	memset(r, 0, sizeof(*r));
	r->period = period;
	r->need_psb = 1;
	r->mode = -1;
	r->time = TK_TIME_NONE;
	tk_ipt_last_ip_init(&r->last);
	return tk_buf_init(&r->out, -1, 64 << 10) < 0 ? -TK_E_NOMEM : 0;
}

/* ---- the chunked driver ----------------------------------------------------------------- */

struct run {
	const uint8_t *buf;
	size_t len;
	uint64_t *offs;                /* where the decoder's chunks start (its PSBs) */
	uint64_t *seg_end;             /* how far each chunk's decoder reads (a break) */
	struct tk_buf *out;
	size_t period;
	struct renc *chunks;
	struct tk_ipt_reencode_stats *st;
	uint32_t errata;               /* the decoder's (tk_ipt_flow_opts.errata) */
};

static int re_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct run *u = ctx;
	struct renc *r = &u->chunks[i];

	tk_flow_set_branch_events(flow, 1);
	if (renc_init(r, u->period) < 0)
		return -TK_E_NOMEM;
	/* the PSB+ as the chunk's decoder reads it: not past a break, where the trace before
	 * was cut (a FUP cut there is no IP the flow goes to) */
	r->input_on = tk_ipt_psb_state(u->buf, u->seg_end[i], u->errata, u->offs[i] + TK_IPT_PSB_SIZE,
					&r->input_ip, &r->input_mode, &r->input_whole);
	r->start = u->offs[i];
	sink->events = renc_events;
	sink->ctx = r;
	return 0;
}

static int re_end(void *ctx, size_t i, struct tk_flow *flow)
{
	struct run *u = ctx;
	struct renc *r = &u->chunks[i];

	(void)flow;
	if (r->pend.kind)
		resolve(r, -1);
	/* a chunk with nothing to write whose PSB+ says tracing is off: that PSB+ still ends
	 * the flow before it (the input's decoder stopped there), so it stands here too */
	if (!r->wrote && !r->input_on)
		psb(r, 0, 0, r->input_mode >= 0 ? r->input_mode : TK_FLOW_64, TK_TIME_NONE);
	flush_tnt(r);
	return r->out.err;
}

static int re_merge(void *ctx, size_t i)
{
	struct run *u = ctx;
	struct renc *r = &u->chunks[i];
	struct tk_ipt_reencode_stats *st = u->st;

	if (i && u->chunks[i - 1].need_fup && r->starts_on) {
		/* The last chunk ended in an overflow that resolves where this one starts:
		 * OVF, [MODE.Exec,] FUP (libipt does not take a PSB+ FUP for it); the mode
		 * first when it changed, or the PSB+ after would contradict the decoder */
		struct tk_ipt_last_ip l;
		struct tk_ipt_packet p = { .kind = TK_IPT_PKT_MODE_EXEC };
		int n;

		p.exec.csl = r->first_mode == TK_FLOW_64;
		p.exec.csd = r->first_mode == TK_FLOW_32;
		if (r->first_mode != u->chunks[i - 1].mode && (n = tk_ipt_encode(u->out, &p)) > 0)
			st->bytes += (uint64_t)n;
		tk_ipt_last_ip_init(&l);
		tk_ipt_ip_packet(&l, TK_IPT_PKT_FUP, r->first_ip, &p);
		if ((n = tk_ipt_encode(u->out, &p)) > 0)
			st->bytes += (uint64_t)n;
	}
	tk_buf_put(u->out, r->out.data, r->out.len);
	tk_buf_free(&r->out);
	st->bytes += r->st.bytes;
	st->returns += r->st.returns;
	st->compressed += r->st.compressed;
	st->tnt_bits += r->st.tnt_bits;
	st->tnt_packets += r->st.tnt_packets;
	st->tips += r->st.tips;
	st->psbs += r->st.psbs;
	st->overflows += r->st.overflows;
	st->dropped += r->st.dropped;
	return u->out->err;
}

int tk_ipt_reencode(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *fopts,
		    const struct tk_ipt_reencode_opts *opts, struct tk_buf *out,
		    struct tk_ipt_reencode_stats *st)
{
	struct tk_ipt_reencode_opts o = { 0 };
	struct run u = { .buf = buf, .len = len, .out = out, .st = st };
	struct tk_ipt_flow_consumer c = { sizeof c, re_begin, re_end, re_merge, &u, NULL };
	int64_t n;
	int rc;

	if (!fopts || !out || !st)
		return -TK_E_INVAL;
	if (opts)
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	memset(st, 0, sizeof(*st));
	u.period = o.psb_period ? o.psb_period : PSB_PERIOD;
	if (fopts->sz >= offsetof(struct tk_ipt_flow_opts, errata) + sizeof(uint32_t))
		u.errata = fopts->errata;
	if ((n = tk_ipt_flow_chunks(buf, len, fopts, NULL, 0)) < 0)
		return (int)n;
	u.chunks = calloc(n > 0 ? (size_t)n : 1, sizeof(*u.chunks));
	u.offs = calloc(n > 0 ? (size_t)n : 1, sizeof(*u.offs));
	u.seg_end = calloc(n > 0 ? (size_t)n : 1, sizeof(*u.seg_end));
	if (!u.chunks || !u.offs || !u.seg_end)
		rc = -TK_E_NOMEM;
	else if ((rc = n > 0 ? (int)tk_ipt_flow_chunks(buf, len, fopts, u.offs, (size_t)n) : 0) >= 0) {
		ipt_segment_ends(fopts, u.offs, (size_t)n, len, u.seg_end);
		rc = tk_ipt_flow_decode(buf, len, fopts, &c, &st->flow);
	}
	for (int64_t i = 0; u.chunks && i < n; i++)
		tk_buf_free(&u.chunks[i].out);
	free(u.chunks);
	free(u.offs);
	free(u.seg_end);
	return rc;
}
