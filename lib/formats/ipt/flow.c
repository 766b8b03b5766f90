/* Intel PT event and flow layer: packets are combined into flow items (TNT bits, TIP
 * targets, disables) for the generic walker and into events bound to IPs (FUP + TIP,
 * FUP + TIP.PGD, MODE.TSX, PTWRITE, EXSTOP, PSB+), in the spirit of libipt's query and
 * block decoders. A chunk starts at a PSB and ends exactly at the IP in the next chunk's
 * PSB+ FUP, so chunks decoded in parallel join without duplicated or missing
 * instructions. Return compression uses the walker's 64-entry stack, reset at each PSB
 * (the seam) so every chunk decodes alone. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "formats/ipt/internal.h"
#include "isa/isa.h"
#include "tracekit/ipt_flow.h"

enum action {
	ACT_NONE,
	ACT_PSB,            /* a PSB+ starts at d->pos: process it */
	ACT_CHUNK_END,      /* the PSB at d->pos begins the next chunk */
	ACT_ASYNC_BRANCH,   /* FUP + TIP: interrupt/exception to act_ip */
	ACT_ASYNC_DISABLE,  /* FUP + TIP.PGD */
	ACT_TSX,            /* MODE.TSX + FUP */
	ACT_PTW,            /* PTW + FUP */
	ACT_EXSTOP,         /* EXSTOP + FUP */
	ACT_EXEC_MODE,      /* a TIP changed the exec mode: [exec mode] at its target */
	ACT_PTW_AFTER,      /* [ptwrite] after its PTWRITE instruction */
	ACT_TRIG,           /* TRIG (IP bit) + FUP: [trig] at the FUP's IP */
	ACT_TRIG_STEP,      /* TRIG with ICNT: [trig] that many instructions on */
	ACT_ET,             /* CFE (IP bit) + FUP: its event at the FUP's IP (d->et_act) */
	ACT_MODE_FUP,       /* MODE.Exec + FUP: the mode and IF from the FUP's IP on */
};

/* An Event Trace event as TK_IPT_POWER_EVENT tells it (arg, addr2, count). */
struct et_ev {
	uint32_t arg;
	uint64_t a2, cnt;
};
enum { ET_FUP_MAX = 4, ET_FAR_MAX = 2 };

/* Time from the timing packets, after the SDM (Intel PT, "Timing Information"): TSC sets
 * the time; TMA in PSB+ gives the CTC and the FastCounter at that TSC; each MTC advances
 * the time by the CTC delta converted to TSC ticks (cpuid 0x15 ebx/eax); CYC adds core
 * cycles converted to TSC ticks with the nominal/current ratio (nom_freq/CBR). The state
 * is reset at each PSB (whose TSC, TMA and CBR set it again), so chunks decode alone. */
enum { FCR_SHIFT = 8 };             /* fixed point of the cycle -> tick ratio */

struct ptime {
	uint64_t tsc;               /* the current time */
	uint64_t base;              /* time at the last TSC/MTC, minus FastCounter */
	uint64_t fc;                /* ticks since base from CYC (or TMA's FastCounter) */
	uint64_t fcr;               /* ticks per cycle << FCR_SHIFT, 0 = unknown */
	uint32_t ctc, ctc_cyc;      /* CTC at the last MTC/TMA; at the last FC reset */
	uint32_t mtc_freq, nom_freq, eax, ebx;
	uint8_t have_tsc, have_tma, have_mtc;
};

static void ptime_reset(struct ptime *t)
{
	t->tsc = t->base = t->fc = t->fcr = 0;
	t->ctc = t->ctc_cyc = 0;
	t->have_tsc = t->have_tma = t->have_mtc = 0;
}

static void ptime_tsc(struct ptime *t, uint64_t tsc)
{
	t->have_tsc = 1;
	t->have_tma = t->have_mtc = 0;
	t->tsc = t->base = tsc;
	t->ctc = 0;
	t->fc = 0;
}

static void ptime_tma(struct ptime *t, uint32_t ctc, uint32_t fc)
{
	uint32_t hi = t->mtc_freq + 8;

	/* only the first TMA after a TSC counts */
	if (!t->have_tsc || t->have_tma || t->have_mtc)
		return;
	t->have_tma = 1;
	t->base -= fc;
	t->fc += fc;
	/* TMA carries 16 CTC bits: enough to stand in for an MTC at low MTC rates */
	if (hi <= 16)
		t->have_mtc = 1;
	t->ctc = t->ctc_cyc = ctc & ((1u << hi) - 1);
}

/* CTC delta to TSC ticks; 0 when the ratio is unknown. */
static int ctc_ticks(const struct ptime *t, uint64_t ctc, uint64_t *ticks)
{
	if (!t->eax || !t->ebx)
		return -1;
	*ticks = ctc * t->ebx / t->eax;
	return 0;
}

static int ctc_delta(const struct ptime *t, uint32_t ctc, uint32_t last, uint32_t *delta)
{
	if (ctc < last) {
		ctc += 1u << (t->mtc_freq + 8);   /* one wrap-around */
		if (ctc < last)
			return -1;
	}
	*delta = ctc - last;
	return 0;
}

static void ptime_mtc(struct ptime *t, uint8_t payload)
{
	uint32_t ctc = (uint32_t)payload << t->mtc_freq, last = t->ctc, delta;
	int had_mtc = t->have_mtc;
	uint64_t ticks;

	if (t->have_tsc && !t->have_tma)
		return;   /* between TSC and TMA: the CTC would look like it overflowed */
	if (t->fc || !had_mtc)
		t->ctc_cyc = ctc;
	t->have_mtc = 1;
	t->fc = 0;
	t->ctc = ctc;
	if (!had_mtc) {
		if (!t->have_tma)
			return;   /* no reference: where in the period did tracing start? */
		/* the TMA gave the low 16 CTC bits; take the high ones from this MTC */
		uint32_t lo = ctc & 0xffff, hi = ctc & ~0xffffu;

		if (last & ~0xffffu)
			return;
		if (lo < last) {
			hi -= 1u << 16;
			hi &= 0xffu << t->mtc_freq;
		}
		last |= hi;
	}
	if (ctc_delta(t, ctc, last, &delta) < 0 || ctc_ticks(t, delta, &ticks) < 0)
		return;
	t->base += ticks;
	t->tsc = t->base;
}

static void ptime_cyc(struct ptime *t, uint64_t cyc)
{
	if (!t->fcr)
		return;
	if (!t->fc && t->ctc != t->ctc_cyc) {
		/* the cycles span MTC periods: drop the part of earlier ones */
		uint32_t delta;
		uint64_t ticks, old;

		if (ctc_delta(t, t->ctc, t->ctc_cyc, &delta) < 0 || ctc_ticks(t, delta, &ticks) < 0)
			return;
		old = (ticks << FCR_SHIFT) / t->fcr;
		cyc = cyc < old ? 0 : cyc - old;
	}
	t->fc += (cyc * t->fcr) >> FCR_SHIFT;
	t->tsc = t->base + t->fc;
}

static void ptime_cbr(struct ptime *t, uint8_t ratio)
{
	if (ratio && t->nom_freq)
		t->fcr = ((uint64_t)t->nom_freq << FCR_SHIFT) / ratio;
}

#define BOUND_HELD 8   /* PIPs and VMCSs held for instructions ahead */

struct ptd {
	const uint8_t *buf;
	size_t len;
	uint32_t track;             /* of every event (tk_ipt_flow_opts.track) */
	size_t start, end;          /* chunk [start, end) */
	uint32_t break_reason;      /* the chunk starts at a break (tk_ipt_flow_opts.breaks) */
	size_t pos;                 /* next packet */
	size_t last_off;            /* offset of the last packet read */
	/* The TNT-8 packets of the walker's current TNT item: run_n consecutive one-byte
	 * packets from run_off (errors name the packet of an outcome). */
	size_t run_off;
	unsigned run_n;
	size_t err_off;             /* offset of the last packet that failed to decode */
	int pkt_err;                /* that failure is pending (reported by the walker) */
	size_t next_psb;            /* the first PSB after the last one read (at most the
				       chunk's end): a sync point however the packets before
				       it decode, in one chunk as at a chunk's start */
	int overran;                /* a packet ran over next_psb: resync lands there */
	int over;                   /* a resync found nothing more in this chunk */
	size_t psb_read;            /* the PSB whose PSB+ was read last (SIZE_MAX: none) */
	size_t last_resync;         /* where the last resync landed: the next must go further */
	int resynced;
	int eos;                    /* the oracle reached the end of the trace */
	int psb_off;                /* the oracle's end is a PSB+ without FUP (tracing off) */
	int after_ovf;              /* an overflow: the next FUP gives the IP */
	int ovf_pending;            /* its [overflow] waits for that FUP (events before it
				       come first, as in libipt); at ovf_off */
	int ovf_off_ahead;          /* ovf_resolves_off's answer for it (-1: not asked yet),
				       once per overflow: a scan ahead per event is quadratic */
	size_t ovf_off;
	unsigned tnt_given;         /* outcomes in the last TNT item given to the walker */
	struct tk_ipt_ctx pctx;
	uint32_t errata;            /* enum tk_ipt_erratum (the packet-level ones also in pctx) */
	struct tk_ipt_last_ip last;
	struct tk_flow *flow;
	struct tk_event_batch *out;
	struct tk_ipt_flow_stats *st;
	int mode, pending_mode;     /* exec mode; MODE.Exec waiting for its TIP/PGE/FUP (-1) */
	int pending_if;             /* that MODE.Exec's IF bit */
	int shown_mode;             /* the mode as events told it (-1: unknown since the PSB) */
	int iflag;                  /* IF as events told it (-1: unknown since the PSB) */
	int bound_if;               /* IF of the MODE.Exec taken last, to be told (-1: none) */
	int qstop;                  /* the oracle's next item: a stop at qstop_ip for this
				       action (ACT_EXEC_MODE, ACT_PTW_AFTER), or 0 */
	uint64_t qstop_ip;
	int enabled, have_ip;
	uint64_t ip;
	uint64_t resume_ip;         /* where tracing resumes after the last disable (0: unknown) */
	uint64_t ptw_ip;            /* the PTWRITE of ACT_PTW_AFTER */
	const struct tk_image *image;
	struct ipt_insns *ins;      /* classifies the instruction that disabled tracing, and
				       remembers what it found by address (insn_at) */
	uint64_t time;
	struct ptime tm;
	int walking;                /* inside tk_flow_walk: time published at TNT/TIP */
	int hold_time;              /* the sink reads only the last time event (counted_blocks) */
	int time_held;              /* a time event held back: sent at the chunk's end */
	int cyc_on;                 /* a CYC came since the last PSB or loss (TK_EV_CYCLES) */
	int action;
	int act_async;              /* ACT_ASYNC_BRANCH/DISABLE after the action, or NONE */
	uint64_t stop_ip;           /* the FUP's IP, where the action binds */
	int psb_mode;               /* the exec mode in the PSB+ ahead of ACT_PSB (-1: none) */
	uint64_t act_ip;
	int act_has_ip;
	uint64_t act_arg;
	uint16_t act_flags;
	uint16_t trig;              /* the TRIG of ACT_TRIG: TRBV | mult << 8 */
	/* Power events held to be told in libipt's (2.2) order: an MWAIT with the EXSTOP that
	 * follows it (both at its FUP's IP when it has one), PWREs with the PWRX that ends the
	 * C-state; and while tracing is off, an EXSTOP waiting for its FUP. Told before an
	 * overflow, at a PSB and at the end. A PTWRITE or TRIG with IP while tracing is off
	 * waits for its FUP the same way. */
	int held_mwait, held_exstop, held_ptw, held_trig;
	uint64_t held_ptw_payload;
	uint16_t held_trig_val;     /* TRBV | mult << 8 */
	uint32_t mwait_hints, mwait_ext;
	unsigned held_pwre;
	unsigned mwait_pwre;        /* PWREs held before the MWAIT was read */
	uint16_t pwre[8];           /* state << 8 | sub-state << 1 | hw */
	/* PIP and VMCS between an asynchronous event's FUP and its TIP or TIP.PGD: told after
	 * the [interrupt] or [async disabled], VMCS first, as libipt binds them */
	int held_pip, held_vmcs, pip_nr;
	uint64_t pip_cr3, vmcs_base;
	/* PIPs, VMCSs and PTWs without IP read while walking, for the instructions that
	 * caused them, still ahead of the walker (a MOV CR3 or a far transfer, a PTWRITE, as
	 * libipt binds them): each told after the next such instruction, in the order read
	 * (two PIPs read before the walk, two MOV CR3s on). bind is what the walker stops for
	 * (enum tk_flow_bind); B, which of them an item waits for. */
	unsigned bind, nbound;
	struct { uint64_t arg; uint16_t flags, nr; uint8_t b; } bound[BOUND_HELD];
	/* Event Trace (SDM, "Event Trace"; libipt 2.1's rules): the data of the EVDs read,
	 * for the CFE that follows them (et_want.arg 0: none); events waiting for the next
	 * FUP, told at its IP before what it starts (et_armed of them: that FUP was read);
	 * IRET, VM entry and UIRET told after the next far transfer (TK_FLOW_BIND_FAR); the
	 * event of ACT_ET. bad_ctx: the error at hand is an Event Trace packet out of place. */
	struct et_ev et_want, et_act, et_fup[ET_FUP_MAX], et_far[ET_FAR_MAX];
	unsigned n_et_fup, n_et_far, et_armed;
	int bad_ctx;
	const struct tk_ipt_addr_filter *filter;   /* for SKL014, NULL: not read */
};

/* Whether FILTER restricts tracing (a region of either kind set). */
static int filter_on(const struct tk_ipt_addr_filter *filter)
{
	for (int n = 0; filter && n < 4; n++)
		if (filter->cfg[n] == 1 || filter->cfg[n] == 2)
			return 1;
	return 0;
}

/* Erratum SKL014: a direct branch to TARGET clears FilterEn (tk_flow_set_pgd_direct) when
 * TARGET lies in a TraceStop region, or outside every FilterEn region while there is one
 * (the SDM's IP filtering; regions include both ends). */
static int leaves_filter(void *ctx, uint64_t target)
{
	const struct tk_ipt_addr_filter *flt = ((struct ptd *)ctx)->filter;
	int has_filter = 0, in_filter = 0;

	for (int n = 0; n < 4; n++) {
		int inside = flt->a[n] <= target && target <= flt->b[n];

		if (flt->cfg[n] == 2 && inside)
			return 1;
		if (flt->cfg[n] == 1) {
			has_filter = 1;
			in_filter |= inside;
		}
	}
	return has_filter && !in_filter;
}

static int exec_mode(const struct tk_ipt_packet *p)
{
	return p->exec.csl ? TK_FLOW_64 : p->exec.csd ? TK_FLOW_32 : TK_FLOW_16;
}

static int ovf_resolves_off(const struct ptd *d);
static int flush_ovf(struct ptd *d);

static inline int emit(struct ptd *d, unsigned kind, uint64_t addr, uint64_t addr2,
		       uint64_t count, uint64_t arg, uint16_t flags)
{
	int rc = 0;

	/* an overflow that resolves with packets off is told before what follows it */
	if (__builtin_expect(d->ovf_pending, 0) && kind != TK_EV_GAP) {
		if (d->ovf_off_ahead < 0)
			d->ovf_off_ahead = ovf_resolves_off(d);
		if (d->ovf_off_ahead && (rc = flush_ovf(d)) < 0)
			return rc;
	}
	struct tk_event *e = tk_event_batch_next(d->out, &rc);

	if (!e)
		return rc;
	*e = (struct tk_event){ .time = d->time, .addr = addr, .addr2 = addr2, .count = count,
				.arg = arg, .kind = (uint16_t)kind, .flags = flags,
				.track = d->track };
	if (kind != TK_EV_GAP && kind != TK_EV_CYCLES)
		d->st->events++;
	return 0;
}

/* The first PSB at or after FROM within the chunk; its end (the next chunk's PSB) if
 * none comes before. */
static size_t psb_after(const struct ptd *d, size_t from)
{
	size_t s;

	if (from >= d->end || tk_ipt_psb_find(d->buf, d->len, from, &s) < 0 || s > d->end)
		return d->end;
	return s;
}

/* Read the packet at d->pos. Returns its size, -TK_E_EOF at the end of the buffer, or a
 * decode error (d->pos unchanged). */
static inline int fetch(struct ptd *d, struct tk_ipt_packet *p)
{
	/* The last packet ran over the start of a PSB (corrupt data, or a loss right before
	 * the PSB): an error at that packet, and resync at the PSB, as a chunk starting
	 * there would (what the walker did after that packet may be wrong). */
	if (__builtin_expect(d->pos > d->next_psb, 0)) {
		if (d->overran || d->over)
			return -TK_E_EOF;
		d->overran = 1;
		d->err_off = d->last_off;
		d->pkt_err = 1;
		return -TK_E_TRUNCATED;
	}
	int rc = tk_ipt_decode_one(d->buf, d->len, d->pos, &d->pctx, p);

	if (rc > 0) {
		d->last_off = d->pos;
		d->pos += (size_t)rc;
		if (d->last_off == d->next_psb)
			d->next_psb = psb_after(d, d->last_off + 1);
	} else if (rc != -TK_E_EOF) {
		d->err_off = d->pos;
		d->pkt_err = 1;
	}
	return rc;
}

static int last_ip(struct ptd *d, const struct tk_ipt_packet *p, uint64_t *ip)
{
	if (tk_ipt_last_ip_update(&d->last, p) < 0)
		return -TK_E_BAD_FORMAT;
	return tk_ipt_last_ip_query(&d->last, ip) == 0;
}

/* A TIP to IP gives the walker's item Q the mode of a MODE.Exec before it. Where that
 * changes the mode, [exec mode] is told at IP (after the far branch, as libipt binds the
 * event to the TIP): the oracle's next item is a stop there. */
static inline void tip_mode(struct ptd *d, struct tk_flow_q *q, uint64_t ip)
{
	q->mode = d->pending_mode;
	if (__builtin_expect(d->pending_mode >= 0, 0)) {
		if ((d->shown_mode >= 0 && d->pending_mode != d->shown_mode) ||
		    d->pending_if != d->iflag) {
			d->qstop = ACT_EXEC_MODE;   /* told there by mode_event */
			d->qstop_ip = ip;
			d->bound_if = d->pending_if;
		} else {
			d->shown_mode = d->pending_mode;
		}
		d->pending_mode = -1;
	}
}

/* A MODE.Exec read: it waits for the packet it binds to (TIP, TIP.PGE, or a FUP). */
static inline void read_mode_exec(struct ptd *d, int mode, int iflag)
{
	d->pending_mode = mode;
	d->pending_if = iflag;
}

/* The waiting MODE.Exec takes effect: its mode from here on, its IF for mode_event. */
static inline void take_mode(struct ptd *d)
{
	if (d->pending_mode >= 0) {
		d->mode = d->pending_mode;
		d->bound_if = d->pending_if;
		d->pending_mode = -1;
	}
}

/* [exec mode] and [interrupts enabled/disabled] at IP (where tracing starts, an interrupt
 * lands, a TIP or FUP bound a MODE.Exec): the mode where it differs from the one told
 * last; IF where it differs or was not known (libipt 2.2's iflags events). */
static int mode_told(struct ptd *d, uint64_t ip)
{
	int rc = 0, f = d->bound_if;

	if (d->shown_mode >= 0 && d->mode != d->shown_mode)
		rc = emit(d, TK_EV_MODE, ip, 0, 0, 0, (uint16_t)(TK_MODE_EXEC_64 - d->mode));
	d->shown_mode = d->mode;
	d->bound_if = -1;
	if (rc < 0 || f < 0 || f == d->iflag)
		return rc;
	d->iflag = f;
	return emit(d, TK_EV_MODE, ip, 0, 0, (uint64_t)f, TK_MODE_IFLAG);
}

/* (inline: nothing to tell at most of a user-only trace's enables, around each syscall) */
static inline int mode_event(struct ptd *d, uint64_t ip)
{
	if (__builtin_expect(d->shown_mode == d->mode &&
			     (d->bound_if < 0 || d->bound_if == d->iflag), 1)) {
		d->bound_if = -1;
		return 0;
	}
	return mode_told(d, ip);
}

/* Flow and power packets, which never come inside a PSB+: one of them means its PSBEND is
 * missing. */
static int never_in_psb_plus(unsigned kind)
{
	switch (kind) {
	case TK_IPT_PKT_TNT8: case TK_IPT_PKT_TNT64: case TK_IPT_PKT_TIP:
	case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_TIP_PGD: case TK_IPT_PKT_PTW:
	case TK_IPT_PKT_EXSTOP: case TK_IPT_PKT_MWAIT: case TK_IPT_PKT_PWRE:
	case TK_IPT_PKT_PWRX: case TK_IPT_PKT_STOP:
		return 1;
	default:
		return 0;
	}
}

/* Intel's erratum BDM70 (SKD024, SKL021, KBL021; libipt applies it on most cores since
 * Broadwell): a PSB+ just before a TIP.PGE may hold a FUP although packets are off. The
 * PSBEND ends at POS: 1 if the next packet past status and timing ones is a TIP.PGE. No
 * sound trace has that (a TIP.PGE says packets were off, a FUP in PSB+ that they were on),
 * so the FUP is taken for the erratum's on every CPU, not only on those listed. */
static int bdm70_fup(const uint8_t *buf, size_t len, uint8_t errata, size_t pos)
{
	struct tk_ipt_ctx ctx = { .errata = errata };
	struct tk_ipt_packet p;
	int rc;

	while ((rc = tk_ipt_decode_one(buf, len, pos, &ctx, &p)) > 0) {
		pos += (size_t)rc;
		switch (p.kind) {
		case TK_IPT_PKT_TIP_PGE:
			return 1;
		case TK_IPT_PKT_PAD: case TK_IPT_PKT_TSC: case TK_IPT_PKT_CBR:
		case TK_IPT_PKT_PIP: case TK_IPT_PKT_MODE_EXEC: case TK_IPT_PKT_MODE_TSX:
		case TK_IPT_PKT_VMCS: case TK_IPT_PKT_TMA: case TK_IPT_PKT_MTC:
		case TK_IPT_PKT_CYC: case TK_IPT_PKT_MNT: case TK_IPT_PKT_INVALID:
			break;
		default:
			return 0;
		}
	}
	return 0;
}

static int psb_plus(const uint8_t *buf, size_t len, uint8_t errata, size_t pos, uint64_t *ip,
		    int *mode, int *whole);

/* Erratum APL12 (Apollo Lake, Gemini Lake): after an OVF that resolved while packets were
 * off, a FUP may follow although no flow resumes. The FUP ends at POS: 1 if what follows
 * says packets are off (a TIP.PGE or STOP, or a PSB+ without FUP, before any TNT, TIP or
 * TIP.PGD); sound traces never have that after a FUP, so this holds on every CPU. */
static int apl12_fup(const uint8_t *buf, size_t len, uint8_t errata, size_t pos)
{
	struct tk_ipt_ctx ctx = { .errata = errata };
	struct tk_ipt_packet p;
	uint64_t ip;
	int rc;

	while ((rc = tk_ipt_decode_one(buf, len, pos, &ctx, &p)) > 0) {
		pos += (size_t)rc;
		switch (p.kind) {
		case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_STOP:
			return 1;
		case TK_IPT_PKT_PSB:
			return !psb_plus(buf, len, errata, pos, &ip, NULL, NULL);
		case TK_IPT_PKT_TNT8: case TK_IPT_PKT_TNT64: case TK_IPT_PKT_TIP:
		case TK_IPT_PKT_TIP_PGD: case TK_IPT_PKT_PSBEND: case TK_IPT_PKT_OVF:
		case TK_IPT_PKT_BBP: case TK_IPT_PKT_BIP: case TK_IPT_PKT_BEP:
			return 0;
		default:   /* timing, status, power and event packets, FUPs */
			break;
		}
	}
	return 0;
}

/* The PSB+ whose PSB ends at POS: 1 and *IP if it has a FUP (not one of bdm70_fup's), else
 * 0; *MODE (if MODE) its MODE.Exec, -1 without one (or after an OVF in it). */
static int psb_plus(const uint8_t *buf, size_t len, uint8_t errata, size_t pos, uint64_t *ip,
		    int *mode, int *whole)
{
	struct tk_ipt_ctx ctx = { .errata = errata };
	struct tk_ipt_last_ip l;
	struct tk_ipt_packet p;
	int rc, fup = 0;

	tk_ipt_last_ip_init(&l);
	if (mode)
		*mode = -1;
	if (whole)
		*whole = 0;
	while ((rc = tk_ipt_decode_one(buf, len, pos, &ctx, &p)) > 0) {
		pos += (size_t)rc;
		if (p.kind == TK_IPT_PKT_PSBEND && whole)
			*whole = 1;
		/* the end of the PSB+ (do_psb reports one cut short) */
		if (p.kind == TK_IPT_PKT_OVF && mode)
			*mode = -1;   /* the state after an overflow is not the PSB+'s */
		if (p.kind == TK_IPT_PKT_PSBEND || p.kind == TK_IPT_PKT_PSB ||
		    p.kind == TK_IPT_PKT_OVF || never_in_psb_plus(p.kind))
			break;
		if (p.kind == TK_IPT_PKT_MODE_EXEC && mode)
			*mode = exec_mode(&p);
		if (p.kind == TK_IPT_PKT_FUP && !fup)
			fup = tk_ipt_last_ip_update(&l, &p) == 0 && tk_ipt_last_ip_query(&l, ip) == 0;
	}
	if (fup && rc > 0 && p.kind == TK_IPT_PKT_PSBEND && bdm70_fup(buf, len, errata, pos))
		fup = 0;
	return fup;
}

int tk_ipt_psb_state(const uint8_t *buf, size_t len, uint32_t errata, size_t pos, uint64_t *ip,
		     int *mode, int *whole)
{
	return psb_plus(buf, len, (uint8_t)(errata & TK_IPT_ERRATA_PACKET), pos, ip, mode, whole);
}

/* The clock becomes the time stamped on events. While the walker runs this happens at
 * each TNT or TIP packet (the time of the branches it resolves), as libipt's query
 * decoder does; timing packets read ahead of it wait for it. */
static inline int publish_time(struct ptd *d)
{
	if (d->tm.have_tsc && d->tm.tsc != d->time) {
		d->time = d->tm.tsc;
		tk_flow_set_time(d->flow, d->time);
		/* a tick: the time changed between two blocks of the flow */
		if (d->walking && d->hold_time) {   /* every event after it carries it */
			d->time_held = 1;
			d->st->events++;
			return 0;
		}
		if (d->walking)
			return emit(d, TK_EV_TIME, 0, 0, 0, 0, 0);
	}
	return 0;
}

/* A CYC's cycles, for IPC: they are the cycles of the instructions walked since the CYC
 * before (the walker is where the packet after it is needed), so those are sent first.
 * The first CYC after a PSB or a loss counts cycles from before it: it only starts. */
static int cycles(struct ptd *d, uint64_t cyc)
{
	int start = !d->cyc_on, rc;

	d->cyc_on = 1;
	if (d->walking && (rc = tk_flow_send_insns(d->flow, d->out)) < 0)
		return rc;
	return emit(d, TK_EV_CYCLES, 0, 0, 0, start ? 0 : cyc, start ? TK_CYC_START : 0);
}

/* A timing packet: update the clock. */
static int timing(struct ptd *d, const struct tk_ipt_packet *p)
{
	struct ptime *t = &d->tm;
	int rc = 0;

	switch (p->kind) {
	case TK_IPT_PKT_TSC: ptime_tsc(t, p->tsc.tsc); break;
	case TK_IPT_PKT_TMA: ptime_tma(t, p->tma.ctc, p->tma.fc); break;
	case TK_IPT_PKT_MTC: ptime_mtc(t, p->mtc.ctc); break;
	case TK_IPT_PKT_CYC:
		ptime_cyc(t, p->cyc.value);
		rc = cycles(d, p->cyc.value);
		break;
	default: return 0;
	}
	if (!d->walking)
		(void)publish_time(d);
	return rc;
}

/* The held MWAIT (at IP, 0: unknown) and then EXSTOP (if EXSTOP) are told. */
static int tell_exstop(struct ptd *d, uint64_t ip, int exstop)
{
	int rc = 0;

	if (d->held_mwait) {
		d->held_mwait = 0;
		rc = emit(d, TK_EV_POWER, ip, 0, d->mwait_ext, d->mwait_hints, TK_IPT_POWER_MWAIT);
	}
	if (rc >= 0 && exstop)
		rc = emit(d, TK_EV_POWER, ip, 0, 0, 0, TK_IPT_POWER_EXSTOP);
	return rc;
}

/* The first N held PWREs are told, in order (N >= held_pwre: all). */
static int tell_pwre_first(struct ptd *d, unsigned n)
{
	int rc = 0;

	if (n > d->held_pwre)
		n = d->held_pwre;
	for (unsigned i = 0; i < n && rc >= 0; i++)
		rc = emit(d, TK_EV_POWER, 0, d->pwre[i] & 1, d->pwre[i] >> 1 & 0x7f,
			  d->pwre[i] >> 8, TK_IPT_POWER_PWRE);
	d->held_pwre -= n;
	memmove(d->pwre, d->pwre + n, d->held_pwre * sizeof d->pwre[0]);
	d->mwait_pwre = d->mwait_pwre > n ? d->mwait_pwre - n : 0;
	return rc;
}

static int tell_pwre(struct ptd *d)
{
	return tell_pwre_first(d, d->held_pwre);
}

/* The held VMCS and PIP are told (after the asynchronous event they bound to). */
static int tell_paging(struct ptd *d)
{
	int rc = 0;

	if (d->held_vmcs)
		rc = emit(d, TK_EV_MODE, 0, 0, 0, d->vmcs_base, TK_MODE_VMCS);
	if (rc >= 0 && d->held_pip)
		rc = emit(d, TK_EV_MODE, 0, d->pip_nr, 0, d->pip_cr3, TK_MODE_PAGING);
	d->held_vmcs = d->held_pip = 0;
	return rc;
}

/* The events held for instructions ahead are told: with ALL, those of WHAT (enum
 * tk_flow_bind), where the flow stops before their instructions; else the first of each
 * kind in WHAT, after the instruction AT they bound to (the others wait for the next). */
static int tell_bound(struct ptd *d, unsigned what, int all, uint64_t at)
{
	unsigned i, n = 0, told = 0, held = 0;
	int rc = 0;

	for (i = 0; i < d->nbound && rc >= 0; i++) {
		unsigned b = d->bound[i].b;

		if ((what & b) && (all || !(told & b))) {
			rc = b == TK_FLOW_BIND_PTWRITE
				? emit(d, TK_EV_PTWRITE, all ? 0 : at, 0, 0, d->bound[i].arg, TK_IPT_PTW_BOUND)
				: emit(d, TK_EV_MODE, 0, d->bound[i].nr, 0, d->bound[i].arg,
				       d->bound[i].flags);
			told |= b;
		} else {
			d->bound[n++] = d->bound[i];   /* still ahead */
			held |= b;
		}
	}
	d->nbound = n;
	/* at the end of the trace the walk goes on to what they bind to */
	d->bind = held | (held && d->eos ? TK_FLOW_BIND_AT_END : 0);
	if (d->n_et_far)
		d->bind |= TK_FLOW_BIND_FAR;   /* still waiting for their far transfer */
	tk_flow_set_bind(d->flow, d->bind);
	return rc;
}

/* A PIP, VMCS or PTW without IP while walking: held for the instruction ahead that caused
 * it. */
static int hold_bound(struct ptd *d, const struct tk_ipt_packet *p)
{
	int pip = p->kind == TK_IPT_PKT_PIP, ptw = p->kind == TK_IPT_PKT_PTW, rc = 0;
	unsigned b = pip ? TK_FLOW_BIND_PAGING : ptw ? TK_FLOW_BIND_PTWRITE : TK_FLOW_BIND_VMCS;

	if (d->nbound == BOUND_HELD && (rc = tell_bound(d, ~0u, 1, 0)) < 0)
		return rc;   /* more than a walk ever holds (a crafted trace): told now */
	d->bound[d->nbound].arg = pip ? p->pip.cr3 : ptw ? p->ptw.payload : p->vmcs.base;
	d->bound[d->nbound].nr = pip ? p->pip.nr : 0;
	d->bound[d->nbound].b = (uint8_t)b;
	d->bound[d->nbound++].flags = pip ? TK_MODE_PAGING : ptw ? 0 : TK_MODE_VMCS;
	tk_flow_set_bind(d->flow, d->bind |= b);
	return 0;
}

/* The packet just read is out of place (libipt's "unexpected packet context"): an error
 * there, resynced at the next PSB. */
static int bad_context(struct ptd *d)
{
	d->bad_ctx = 1;
	d->err_off = d->last_off;
	d->pkt_err = 1;
	return -TK_E_BAD_FORMAT;
}

static int et_emit(struct ptd *d, uint64_t ip, const struct et_ev *ev)
{
	return emit(d, TK_EV_POWER, ip, ev->a2, ev->cnt, ev->arg, TK_IPT_POWER_EVENT);
}

/* An EVD: data for the CFE that must follow it (SDM: a CFE's EVDs come right before it).
 * Data of two events, twice the same datum, or no CFE after them is out of context (as in
 * libipt). Kinds tracekit does not know are passed over, as libipt does. */
static int et_evd(struct ptd *d, const struct tk_ipt_packet *p)
{
	struct et_ev *w = &d->et_want;
	unsigned t = p->evd.type, kind = t ? TK_IPT_ET_VMEXIT : TK_IPT_ET_INTR;
	uint32_t has = t == 0 ? TK_IPT_ET_HAS_CR2 : t == 1 ? TK_IPT_ET_HAS_VMXQ : TK_IPT_ET_HAS_VMXR;
	struct tk_ipt_ctx c = d->pctx;
	struct tk_ipt_packet n;
	size_t at = d->pos;
	int rc;

	if (t > 2)
		return 0;
	if (w->arg && ((w->arg & 0xff) != kind || (w->arg & has) || !t))
		return bad_context(d);
	w->arg |= kind | has;
	if (t == 2)
		w->cnt = p->evd.payload;
	else
		w->a2 = p->evd.payload;
	/* the CFE must follow (after more EVDs, timing or padding) */
	while ((rc = tk_ipt_decode_one(d->buf, d->len, at, &c, &n)) > 0) {
		if (n.kind == TK_IPT_PKT_CFE)
			return 0;
		if (n.kind != TK_IPT_PKT_EVD && n.kind != TK_IPT_PKT_PAD && n.kind != TK_IPT_PKT_TSC &&
		    n.kind != TK_IPT_PKT_MTC && n.kind != TK_IPT_PKT_CYC && n.kind != TK_IPT_PKT_TMA)
			break;
		at += (size_t)rc;
	}
	return bad_context(d);
}

/* A CFE into *EV, with the data of the EVDs before it: its kind (enum tk_ipt_et), 0 for a
 * kind tracekit does not know (passed over, as libipt does; with the IP bit, its FUP too),
 * or an error where the EVDs were another event's or the kind has no IP. */
static int et_cfe(struct ptd *d, const struct tk_ipt_packet *p, struct et_ev *ev)
{
	unsigned t = p->cfe.type, want = d->et_want.arg & 0xff;

	*ev = d->et_want;
	d->et_want = (struct et_ev){ 0 };
	if (t == 9)                      /* a VM exit with an event vector */
		ev->arg |= TK_IPT_ET_HAS_VECTOR, t = TK_IPT_ET_VMEXIT;
	if (want && want != t)
		return bad_context(d);
	if (!((t >= TK_IPT_ET_INTR && t <= TK_IPT_ET_SHUTDOWN) ||
	      (t >= TK_IPT_ET_UINTR && t <= TK_IPT_ET_SYSCALL)))
		return 0;
	if (p->cfe.ip && (t == TK_IPT_ET_RSM || t == TK_IPT_ET_SIPI))
		return bad_context(d);
	if (t == TK_IPT_ET_INTR || t == TK_IPT_ET_SIPI || t == TK_IPT_ET_UINTR ||
	    t == TK_IPT_ET_SWINTR || (ev->arg & TK_IPT_ET_HAS_VECTOR))
		ev->arg |= (uint32_t)p->cfe.vector << 8;
	ev->arg |= t;
	return (int)t;
}

/* IRET, VM entry and UIRET are told after the instruction (libipt binds them to it). */
static int et_after_insn(const struct et_ev *ev)
{
	unsigned t = ev->arg & 0xff;

	return t == TK_IPT_ET_IRET || t == TK_IPT_ET_VMENTRY || t == TK_IPT_ET_UIRET;
}

/* EV waits for the next far transfer while tracing is on. */
static int et_hold_far(struct ptd *d, const struct et_ev *ev)
{
	if (d->n_et_far == ET_FAR_MAX)
		return bad_context(d);
	d->et_far[d->n_et_far++] = *ev;
	tk_flow_set_bind(d->flow, d->bind |= TK_FLOW_BIND_FAR);
	return 0;
}

/* A CFE without the IP bit, its event EV: while tracing is on, an asynchronous event's
 * waits for the FUP of that event and IRET, VM entry, UIRET for their instruction; else
 * (and a shutdown or a SYSCALL) it is told here, without an IP (libipt). */
static int et_no_ip(struct ptd *d, const struct et_ev *ev)
{
	unsigned t = ev->arg & 0xff;

	if (!t)
		return 0;
	if (d->enabled && et_after_insn(ev))
		return et_hold_far(d, ev);
	if (d->enabled && t != TK_IPT_ET_SHUTDOWN && t != TK_IPT_ET_SYSCALL) {
		if (d->n_et_fup == ET_FUP_MAX)
			return bad_context(d);
		d->et_fup[d->n_et_fup++] = *ev;
		return 0;
	}
	return et_emit(d, 0, ev);
}

/* The events that waited for the FUP now reached are told, at its IP. */
static int tell_et_fup(struct ptd *d, uint64_t ip)
{
	unsigned i, n = d->et_armed;
	int rc = 0;

	for (i = 0; i < n && rc >= 0; i++)
		rc = et_emit(d, ip, &d->et_fup[i]);
	d->n_et_fup -= n;
	memmove(d->et_fup, d->et_fup + n, d->n_et_fup * sizeof d->et_fup[0]);
	d->et_armed = 0;
	return rc;
}

/* The events held for a far transfer are told: after the one at FROM (0: none came). */
static int tell_et_far(struct ptd *d, uint64_t from)
{
	int rc = 0;

	for (unsigned i = 0; i < d->n_et_far && rc >= 0; i++)
		rc = et_emit(d, from, &d->et_far[i]);
	d->n_et_far = 0;
	tk_flow_set_bind(d->flow, d->bind &= ~(unsigned)TK_FLOW_BIND_FAR);
	return rc;
}

static int tell_trig(struct ptd *d, uint64_t ip, uint16_t trig);

/* The PTWRITE and TRIG held while tracing is off, at IP (their FUP's; 0: none came). */
static int tell_held_off(struct ptd *d, uint64_t ip)
{
	int rc = 0;

	if (d->held_ptw) {
		d->held_ptw = 0;
		rc = emit(d, TK_EV_PTWRITE, ip, 0, 0, d->held_ptw_payload, 0);
	}
	if (rc >= 0 && d->held_trig) {
		d->held_trig = 0;
		rc = tell_trig(d, ip, d->held_trig_val);
	}
	return rc;
}

/* Everything held is told (an overflow, a PSB, the end): PWREs, MWAIT, EXSTOP, and the
 * PTWRITE and TRIG held while tracing was off. */
static int tell_held(struct ptd *d)
{
	int exstop = d->held_exstop, rc;

	d->et_armed = d->n_et_fup;
	if ((rc = tell_et_fup(d, 0)) < 0 || (rc = tell_et_far(d, 0)) < 0)
		return rc;
	d->et_want = (struct et_ev){ 0 };
	rc = tell_bound(d, ~0u, 1, 0);

	/* an MWAIT no EXSTOP took comes where it was read among the PWREs (libipt's queue
	 * order); one an EXSTOP with IP took comes with it, after them */
	if (rc >= 0 && d->held_mwait && !exstop && (rc = tell_pwre_first(d, d->mwait_pwre)) >= 0)
		rc = tell_exstop(d, 0, 0);
	if (rc >= 0)
		rc = tell_pwre(d);

	d->held_exstop = 0;
	if (rc >= 0)
		rc = tell_held_off(d, 0);
	return rc < 0 ? rc : tell_exstop(d, 0, exstop);
}

/* A TRIG at IP (0: none known) */
static int tell_trig(struct ptd *d, uint64_t ip, uint16_t trig)
{
	return emit(d, TK_EV_POWER, ip, trig >> 8, 0, trig & 0xff, TK_IPT_POWER_TRIG);
}

/* Events that do not depend on an IP, wherever they occur. Returns 1 if P was one. */
static int side_event(struct ptd *d, const struct tk_ipt_packet *p, int *rc)
{
	*rc = 0;
	switch (p->kind) {
	case TK_IPT_PKT_TSC: case TK_IPT_PKT_TMA: case TK_IPT_PKT_MTC: case TK_IPT_PKT_CYC:
		*rc = timing(d, p);
		return 1;
	case TK_IPT_PKT_PIP:
		*rc = emit(d, TK_EV_MODE, 0, p->pip.nr, 0, p->pip.cr3, TK_MODE_PAGING);
		return 1;
	case TK_IPT_PKT_VMCS:
		*rc = emit(d, TK_EV_MODE, 0, 0, 0, p->vmcs.base, TK_MODE_VMCS);
		return 1;
	case TK_IPT_PKT_CBR:
		ptime_cbr(&d->tm, p->cbr.ratio);
		*rc = emit(d, TK_EV_POWER, 0, 0, 0, p->cbr.ratio, TK_IPT_POWER_CBR);
		return 1;
	case TK_IPT_PKT_MWAIT:
		/* told with the EXSTOP that follows */
		if (d->held_mwait)
			*rc = tell_exstop(d, 0, 0);
		d->held_mwait = 1;
		d->mwait_pwre = d->held_pwre;
		d->mwait_hints = p->mwait.hints;
		d->mwait_ext = p->mwait.ext;
		return 1;
	case TK_IPT_PKT_PWRE:
		/* told with the PWRX that ends the C-state */
		if (d->held_pwre == sizeof(d->pwre) / sizeof(d->pwre[0]))
			*rc = tell_pwre(d);
		d->pwre[d->held_pwre++] = (uint16_t)(p->pwre.state << 8 | (p->pwre.sub_state & 0x7f) << 1 |
						     (p->pwre.hw & 1));
		return 1;
	case TK_IPT_PKT_PWRX:
		if ((*rc = tell_pwre(d)) < 0)
			return 1;
		*rc = emit(d, TK_EV_POWER, 0,
			   TK_IPT_WAKE_INT * p->pwrx.interrupt | TK_IPT_WAKE_ST * p->pwrx.store |
			   TK_IPT_WAKE_HW * p->pwrx.autonomous, p->pwrx.deepest, p->pwrx.last,
			   TK_IPT_POWER_PWRX);
		return 1;
	case TK_IPT_PKT_STOP:
		*rc = emit(d, TK_EV_POWER, 0, 0, 0, 0, TK_IPT_POWER_STOP);
		return 1;
	case TK_IPT_PKT_EXSTOP:
		if (p->exstop.ip)
			return 0;
		*rc = tell_exstop(d, 0, 1);
		return 1;
	case TK_IPT_PKT_PTW:
		if (p->ptw.ip)
			return 0;
		*rc = emit(d, TK_EV_PTWRITE, 0, 0, 0, p->ptw.payload, TK_IPT_PTW_BOUND);
		return 1;
	case TK_IPT_PKT_MNT:
		*rc = emit(d, TK_EV_POWER, 0, 0, 0, p->mnt.payload, TK_IPT_POWER_MNT);
		return 1;
	case TK_IPT_PKT_TRIG:
		/* with no IP and no instruction count (or while tracing is off, or bound
		 * to a FUP that is lost), where it is read: libipt 2.2 reports it there */
		*rc = tell_trig(d, 0, p->trig.trbv | p->trig.mult << 8);
		return 1;
	case TK_IPT_PKT_PAD: case TK_IPT_PKT_BBP: case TK_IPT_PKT_BIP: case TK_IPT_PKT_BEP:
	case TK_IPT_PKT_INVALID:   /* an erratum's corrupt packet (SKZ84): nothing to take */
		return 1;
	default:
		return 0;
	}
}

static int is_vm_entry(struct ptd *d, uint64_t ip);

/* A TIP.PGD (HAS_IP: with IP) for the walker, which binds it where the walk needs it. */
static int pgd_query(struct ptd *d, struct tk_flow_q *q, int has_ip, uint64_t ip)
{
	int rc = publish_time(d);

	if (rc < 0)
		return rc;
	q->kind = TK_FLOWQ_PGD;
	q->has_ip = has_ip;
	q->ip = has_ip ? ip : 0;
	return 0;
}

/* A FUP (or an event packet that a FUP completes) was read: find what it binds to and
 * tell the walker to stop at the FUP's IP. ACT is the pending event, ACT_NONE if the
 * FUP itself was just read (then a TIP or TIP.PGD must follow). A transaction's abort
 * (MODE.TSX with abort + FUP) is an asynchronous branch to the abort handler: its TIP
 * (or TIP.PGD) follows too, and d->act_async says which (SDM, "TSX"). */
static int bind_fup(struct ptd *d, struct tk_flow_q *q, int act, const struct tk_ipt_packet *fup)
{
	struct tk_ipt_packet p;
	uint64_t fip = 0, ip;
	int rc, have_fup = 0;

	d->act_async = ACT_NONE;
	if (fup) {
		if ((rc = last_ip(d, fup, &fip)) < 0)
			return rc;
		if (!rc)
			return -TK_E_BAD_FORMAT;
		have_fup = 1;
	}
	/* a FUP a MODE.Exec binds to is all there is: no branch follows */
	while (act != ACT_MODE_FUP) {
		if ((rc = fetch(d, &p)) < 0) {
			int trc = tell_paging(d);   /* nothing to bind to */

			if (trc >= 0 && rc == -TK_E_EOF && act == ACT_ET && !have_fup)
				return bad_context(d);   /* the CFE's FUP never came */
			if (trc >= 0 && rc == -TK_E_EOF && act == ACT_NONE) {
				/* the trace ends after a FUP whose TIP or TIP.PGD was not
				 * sent: the end of the trace, where the walker stands (as
				 * libipt: ptxed prints [end of trace]), not an error */
				q->kind = TK_FLOWQ_END;
				d->eos = 1;
				return 0;
			}
			return trc < 0 ? trc : rc == -TK_E_EOF ? -TK_E_TRUNCATED : rc;
		}
		if (have_fup && p.kind == TK_IPT_PKT_PIP) {
			d->held_pip = 1;
			d->pip_cr3 = p.pip.cr3;
			d->pip_nr = p.pip.nr;
			continue;
		}
		if (have_fup && p.kind == TK_IPT_PKT_VMCS) {
			d->held_vmcs = 1;
			d->vmcs_base = p.vmcs.base;
			continue;
		}
		if (side_event(d, &p, &rc)) {
			if (rc < 0)
				return rc;
			continue;
		}
		if (!have_fup) {
			if (p.kind == TK_IPT_PKT_OVF && (act == ACT_EXSTOP || act == ACT_PTW)) {
				/* its FUP was lost: the event is kept, without an IP (libipt) */
				rc = act == ACT_PTW ? emit(d, TK_EV_PTWRITE, 0, 0, 0, d->act_arg, 0)
				     : (rc = tell_pwre(d)) < 0 ? rc : tell_exstop(d, 0, 1);
				return rc < 0 ? rc : -TK_E_OVERFLOW;
			}
			if (p.kind != TK_IPT_PKT_FUP)
				return act == ACT_ET ? bad_context(d) : -TK_E_BAD_FORMAT;
			if ((rc = last_ip(d, &p, &fip)) < 0)
				return rc;
			if (!rc)
				return -TK_E_BAD_FORMAT;
			have_fup = 1;
			if (act == ACT_TSX && d->act_flags == TK_MODE_TSX_ABORT)
				continue;
			break;
		}
		/* a plain FUP or an abort: an asynchronous branch or disable follows */
		if (p.kind == TK_IPT_PKT_MODE_EXEC) {
			read_mode_exec(d, exec_mode(&p), p.exec.iflag);
			continue;
		}
		if (p.kind == TK_IPT_PKT_TIP) {
			if ((rc = last_ip(d, &p, &ip)) < 0)
				return rc;
			if (!rc)
				return -TK_E_BAD_FORMAT;
			d->act_async = ACT_ASYNC_BRANCH;
			d->act_ip = ip;
			break;
		}
		if (p.kind == TK_IPT_PKT_TIP_PGD) {
			if ((rc = last_ip(d, &p, &ip)) < 0)
				return rc;
			/* SKD022: the FUP of a VM entry that cleared TraceEn; the TIP.PGD is
			 * the entry's own, bound to it as one alone is */
			if (act == ACT_NONE && (d->errata & TK_IPT_ERRATUM_SKD022) &&
			    is_vm_entry(d, fip))
				return pgd_query(d, q, rc, ip);
			d->act_async = ACT_ASYNC_DISABLE;
			d->act_ip = rc ? ip : 0;
			break;
		}
		return (rc = tell_paging(d)) < 0 ? rc : -TK_E_BAD_FORMAT;
	}
	if (act == ACT_NONE) {
		act = d->act_async;
		d->act_async = ACT_NONE;
	}
	d->et_armed = d->n_et_fup;   /* they bind to this FUP */
	d->action = act;
	d->stop_ip = fip;
	q->kind = TK_FLOWQ_STOP;
	q->ip = fip;
	q->has_ip = 1;
	/* BDM64: an abort just after a branch may follow a wrong trace of that branch */
	q->jump_ok = act == ACT_TSX && d->act_flags == TK_MODE_TSX_ABORT &&
		     (d->errata & TK_IPT_ERRATUM_BDM64);
	return 0;
}

/* The IP packet (TIP, TIP.PGE, TIP.PGD, FUP) at AT with an IP, decoded in place of the
 * general decoder and applied to the last IP: its size, and *IP; 0 where the general
 * path must take it (suppressed or reserved compression, too short, nothing to update). */
static inline unsigned fast_ip(struct ptd *d, size_t at, uint64_t *ip)
{
	static const uint8_t sz[8] = { 0, 2, 4, 6, 6, 0, 8, 0 };
	unsigned ipc = d->buf[at] >> 5, n = sz[ipc];
	uint64_t v = 0, last = d->last.ip;

	if (!n || d->len - at <= n || !d->last.have_ip)
		return 0;
	if (d->len - at > 8)   /* one load, the bytes past the packet masked off */
		v = tk_le64(d->buf + at + 1) & (~0ull >> (64 - 8 * n));
	else
		memcpy(&v, d->buf + at + 1, n);
	switch (ipc) {
	case 1: *ip = (last & ~0xffffull) | v; break;
	case 2: *ip = (last & ~0xffffffffull) | v; break;
	case 3: *ip = (uint64_t)((int64_t)(v << 16) >> 16); break;
	case 4: *ip = (last & ~0xffffffffffffull) | v; break;
	default: *ip = v; break;
	}
	d->last.ip = *ip;
	d->last.suppressed = 0;
	return 1 + n;
}

/* A byte as a TNT-8 packet: its number of outcomes << 8 | the outcomes (the oldest
 * highest), or 0 where the byte is no TNT-8 packet with outcomes (odd, PAD, 0x02). */
static const uint16_t tnt8_byte[256] = {
	0x000, 0x000, 0x000, 0x000, 0x100, 0x000, 0x101, 0x000,
	0x200, 0x000, 0x201, 0x000, 0x202, 0x000, 0x203, 0x000,
	0x300, 0x000, 0x301, 0x000, 0x302, 0x000, 0x303, 0x000,
	0x304, 0x000, 0x305, 0x000, 0x306, 0x000, 0x307, 0x000,
	0x400, 0x000, 0x401, 0x000, 0x402, 0x000, 0x403, 0x000,
	0x404, 0x000, 0x405, 0x000, 0x406, 0x000, 0x407, 0x000,
	0x408, 0x000, 0x409, 0x000, 0x40a, 0x000, 0x40b, 0x000,
	0x40c, 0x000, 0x40d, 0x000, 0x40e, 0x000, 0x40f, 0x000,
	0x500, 0x000, 0x501, 0x000, 0x502, 0x000, 0x503, 0x000,
	0x504, 0x000, 0x505, 0x000, 0x506, 0x000, 0x507, 0x000,
	0x508, 0x000, 0x509, 0x000, 0x50a, 0x000, 0x50b, 0x000,
	0x50c, 0x000, 0x50d, 0x000, 0x50e, 0x000, 0x50f, 0x000,
	0x510, 0x000, 0x511, 0x000, 0x512, 0x000, 0x513, 0x000,
	0x514, 0x000, 0x515, 0x000, 0x516, 0x000, 0x517, 0x000,
	0x518, 0x000, 0x519, 0x000, 0x51a, 0x000, 0x51b, 0x000,
	0x51c, 0x000, 0x51d, 0x000, 0x51e, 0x000, 0x51f, 0x000,
	0x600, 0x000, 0x601, 0x000, 0x602, 0x000, 0x603, 0x000,
	0x604, 0x000, 0x605, 0x000, 0x606, 0x000, 0x607, 0x000,
	0x608, 0x000, 0x609, 0x000, 0x60a, 0x000, 0x60b, 0x000,
	0x60c, 0x000, 0x60d, 0x000, 0x60e, 0x000, 0x60f, 0x000,
	0x610, 0x000, 0x611, 0x000, 0x612, 0x000, 0x613, 0x000,
	0x614, 0x000, 0x615, 0x000, 0x616, 0x000, 0x617, 0x000,
	0x618, 0x000, 0x619, 0x000, 0x61a, 0x000, 0x61b, 0x000,
	0x61c, 0x000, 0x61d, 0x000, 0x61e, 0x000, 0x61f, 0x000,
	0x620, 0x000, 0x621, 0x000, 0x622, 0x000, 0x623, 0x000,
	0x624, 0x000, 0x625, 0x000, 0x626, 0x000, 0x627, 0x000,
	0x628, 0x000, 0x629, 0x000, 0x62a, 0x000, 0x62b, 0x000,
	0x62c, 0x000, 0x62d, 0x000, 0x62e, 0x000, 0x62f, 0x000,
	0x630, 0x000, 0x631, 0x000, 0x632, 0x000, 0x633, 0x000,
	0x634, 0x000, 0x635, 0x000, 0x636, 0x000, 0x637, 0x000,
	0x638, 0x000, 0x639, 0x000, 0x63a, 0x000, 0x63b, 0x000,
	0x63c, 0x000, 0x63d, 0x000, 0x63e, 0x000, 0x63f, 0x000,
};

/* The branch oracle for the walker. */
static int oracle_next(void *ctx, struct tk_flow_q *q)
{
	struct ptd *d = ctx;
	struct tk_ipt_packet p;
	uint64_t ip;
	unsigned n;
	int rc;

	if (__builtin_expect(d->qstop, 0)) {
		d->action = d->qstop;
		d->qstop = 0;
		d->stop_ip = q->ip = d->qstop_ip;
		q->kind = TK_FLOWQ_STOP;
		q->has_ip = 1;
		q->jump_ok = 0;
		return 0;
	}
	for (;;) {
		size_t at = d->pos;

		/* Fast paths for the two packets that dominate: TNT-8 and TIP. */
		if (!d->pctx.blk && at < d->len && at < d->next_psb) {
			uint8_t b = d->buf[at];

			if (tnt8_byte[b]) {
				/* A run of TNT-8 packets is one item of up to 64 outcomes: no
				 * packet between them, so no time or event between them. */
				unsigned nb = tnt8_byte[b] >> 8;
				uint64_t bits = tnt8_byte[b] & 0xff;
				size_t end = d->len, first = at;

				d->run_off = at;
				while (++at < end) {
					unsigned t = tnt8_byte[d->buf[at]], m = t >> 8;

					if (!t || nb + m > 64)
						break;
					bits = bits << m | (t & 0xff);
					nb += m;
				}
				d->run_n = (unsigned)(at - first);
				d->last_off = at - 1;
				d->pos = at;
				q->kind = TK_FLOWQ_TNT;
				q->ntnt = d->tnt_given = nb;
				q->tnt = bits;
				return publish_time(d);
			}
			if (b == 0x02 && d->len - at >= 8 && d->buf[at + 1] == 0xa3) {
				/* TNT-64: the outcomes below the highest set bit of 48 */
				uint64_t v = 0;

				memcpy(&v, d->buf + at + 2, 6);
				if (v >= 2) {
					unsigned top = 63 - (unsigned)__builtin_clzll(v);

					d->run_n = 0;
					d->last_off = at;
					d->pos = at + 8;
					q->kind = TK_FLOWQ_TNT;
					q->ntnt = d->tnt_given = top;
					q->tnt = v & ~(1ull << top);
					return publish_time(d);
				}
			}
			if ((b & 0x1f) == 0x0d && (n = fast_ip(d, at, &ip))) {
				d->last_off = at;
				d->pos = at + n;
				q->kind = TK_FLOWQ_TIP;
				q->ip = ip;
				tip_mode(d, q, ip);
				return publish_time(d);
			}
			if ((b & 0x1f) == 0x01 && (n = b >> 5 ? fast_ip(d, at, &ip) : 1)) {
				/* TIP.PGD, often without IP (a syscall in a user-only trace) */
				if (n == 1)
					d->last.suppressed = 1;
				d->last_off = at;
				d->pos = at + n;
				return pgd_query(d, q, n > 1, ip);
			}
		}
		rc = fetch(d, &p);
		if (rc == -TK_E_EOF) {
			q->kind = TK_FLOWQ_END;
			d->eos = 1;
			if (d->nbound) {
				/* a PIP, VMCS or PTW says its instruction ran: the walk goes
				 * on to it, and an error there is at the end (no packet of
				 * it to read again) */
				tk_flow_set_bind(d->flow, d->bind |= TK_FLOW_BIND_AT_END);
				d->last_off = d->pos;
			}
			return 0;
		}
		if (rc < 0)
			return rc;
		switch (p.kind) {
		case TK_IPT_PKT_TNT8:
		case TK_IPT_PKT_TNT64:
			if (!p.tnt.count)
				continue;
			d->run_n = 0;
			q->kind = TK_FLOWQ_TNT;
			q->tnt = p.tnt.bits;
			q->ntnt = d->tnt_given = p.tnt.count;
			return publish_time(d);
		case TK_IPT_PKT_TIP:
			if ((rc = last_ip(d, &p, &ip)) < 0)
				return rc;
			if (!rc)
				return -TK_E_BAD_FORMAT;
			q->kind = TK_FLOWQ_TIP;
			q->ip = ip;
			tip_mode(d, q, ip);
			return publish_time(d);
		case TK_IPT_PKT_TIP_PGD:
			if ((rc = last_ip(d, &p, &ip)) < 0)
				return rc;
			return pgd_query(d, q, rc, ip);
		case TK_IPT_PKT_FUP:
			/* libipt 2.2 and perf: a MODE.Exec binds to the FUP that comes before
			 * any TIP (Event Trace's IF changes: STI, CLI, POPF) */
			return bind_fup(d, q, d->pending_mode >= 0 ? ACT_MODE_FUP : ACT_NONE, &p);
		case TK_IPT_PKT_MODE_TSX:
			d->act_flags = p.tsx.abrt ? TK_MODE_TSX_ABORT
				     : p.tsx.intx ? TK_MODE_TSX_BEGIN : TK_MODE_TSX_COMMIT;
			return bind_fup(d, q, ACT_TSX, NULL);
		case TK_IPT_PKT_PTW:
			if (!p.ptw.ip) {
				/* for the next PTWRITE, which the walk has not passed yet */
				if ((rc = hold_bound(d, &p)) < 0)
					return rc;
				continue;
			}
			d->act_arg = p.ptw.payload;
			return bind_fup(d, q, ACT_PTW, NULL);
		case TK_IPT_PKT_EXSTOP:
			if (!p.exstop.ip)
				break;
			return bind_fup(d, q, ACT_EXSTOP, NULL);
		case TK_IPT_PKT_MODE_EXEC:
			read_mode_exec(d, exec_mode(&p), p.exec.iflag);
			continue;
		case TK_IPT_PKT_OVF:
			return -TK_E_OVERFLOW;
		case TK_IPT_PKT_PSB:
			/* Rewind: the top level processes the PSB+ once the walker stops at
			 * its FUP (or runs out of trace if tracing is off). */
			d->pos = at;
			d->action = at >= d->end ? ACT_CHUNK_END : ACT_PSB;
			if (psb_plus(d->buf, d->len, d->pctx.errata, at + (size_t)rc, &ip, &d->psb_mode, NULL)) {
				q->kind = TK_FLOWQ_STOP;
				q->ip = ip;
				q->has_ip = 1;
				q->jump_ok = 0;
			} else {
				q->kind = TK_FLOWQ_END;
				d->psb_off = 1;
			}
			return 0;
		case TK_IPT_PKT_TIP_PGE:
			return -TK_E_BAD_FORMAT;
		case TK_IPT_PKT_PIP: case TK_IPT_PKT_VMCS:
			if ((rc = hold_bound(d, &p)) < 0)
				return rc;
			continue;
		case TK_IPT_PKT_EVD:
			if ((rc = et_evd(d, &p)) < 0)
				return rc;
			continue;
		case TK_IPT_PKT_CFE:
			if ((rc = et_cfe(d, &p, &d->et_act)) < 0)
				return rc;
			if (p.cfe.ip)
				return bind_fup(d, q, ACT_ET, NULL);
			if ((rc = et_no_ip(d, &d->et_act)) < 0)
				return rc;
			continue;
		case TK_IPT_PKT_TRIG:
			/* libipt 2.2: with the IP bit the next FUP gives the trigger's IP;
			 * else with ICNT it is that many instructions after the last IP the
			 * trace gave (the walker stands there: the oracle reads on right
			 * after the branch that used the last TNT or TIP) */
			if (!p.trig.icntv || (!p.trig.ip && !p.trig.icnt))
				break;
			if (p.trig.ip && p.trig.icnt)
				return -TK_E_BAD_FORMAT;
			d->trig = (uint16_t)(p.trig.trbv | p.trig.mult << 8);
			if (p.trig.ip)
				return bind_fup(d, q, ACT_TRIG, NULL);
			d->action = ACT_TRIG_STEP;
			q->kind = TK_FLOWQ_STEP;
			q->ntnt = p.trig.icnt;
			return 0;
		default:
			break;
		}
		if (side_event(d, &p, &rc) && rc < 0)
			return rc;
	}
}

/* Outcomes of the I-th packet of the current TNT-8 run. */
static unsigned run_outcomes(const struct ptd *d, unsigned i)
{
	return tnt8_byte[d->buf[d->run_off + i]] >> 8;
}

/* An indirect branch needs a TIP and the next item is TNT: as libipt's query decoder,
 * accept one TNT packet, none of whose outcomes was used yet, before the branch's TIP
 * (the order in which the processor may send them). The outcomes left must be those of
 * the last packet of the item, whole. */
static int oracle_deferred_tip(void *ctx, struct tk_flow_q *t)
{
	struct ptd *d = ctx;
	struct tk_ipt_packet p;
	int rc;

	unsigned whole = d->run_n ? run_outcomes(d, d->run_n - 1) : d->tnt_given;

	if (tk_flow_pending_tnt(d->flow) != whole)
		return -TK_E_BAD_FORMAT;
	for (;;) {
		if ((rc = fetch(d, &p)) < 0)
			return rc == -TK_E_EOF ? -TK_E_BAD_FORMAT : rc;
		if (side_event(d, &p, &rc)) {
			if (rc < 0)
				return rc;
			continue;
		}
		if (p.kind == TK_IPT_PKT_MODE_EXEC) {
			read_mode_exec(d, exec_mode(&p), p.exec.iflag);
			continue;
		}
		if (p.kind != TK_IPT_PKT_TIP || (rc = last_ip(d, &p, &t->ip)) <= 0)
			return rc < 0 ? rc : -TK_E_BAD_FORMAT;
		t->mode = d->pending_mode;
		if (d->pending_mode >= 0) {
			d->shown_mode = d->pending_mode;
			d->iflag = d->pending_if;
		}
		d->pending_mode = -1;
		return publish_time(d);
	}
}

/* Offset of the packet the walker was reading when it failed: with outcomes of a TNT-8
 * run still unused, the packet of the first of them; else the last packet read. */
static size_t walk_error_off(struct ptd *d)
{
	unsigned left = tk_flow_pending_tnt(d->flow), total = 0, i;

	if (!left || !d->run_n)
		return d->last_off;
	for (i = 0; i < d->run_n; i++)
		total += run_outcomes(d, i);
	if (left > total)
		return d->last_off;
	for (i = 0; total - run_outcomes(d, i) >= left; i++)
		total -= run_outcomes(d, i);
	return d->run_off + i;
}

static void reset_flow_state(struct ptd *d)
{
	tk_flow_reset_stack(d->flow);
	tk_flow_clear_pending(d->flow);
	d->action = ACT_NONE;
	d->qstop = 0;
	d->cyc_on = 0;
	d->et_want = (struct et_ev){ 0 };
	d->n_et_fup = d->n_et_far = d->et_armed = 0;
	if (d->bind & TK_FLOW_BIND_FAR)
		tk_flow_set_bind(d->flow, d->bind &= ~(unsigned)TK_FLOW_BIND_FAR);
}

/* Record a decode error at OFF and move to the next PSB (or the chunk's end). */
static int flush_ovf(struct ptd *d);

static int resync(struct ptd *d, uint64_t off, int err, unsigned reason, uint64_t addr)
{
	int frc = flush_ovf(d);

	if (frc < 0)
		return frc;
	if (d->bad_ctx)
		reason = TK_GAP_BAD_CONTEXT;
	d->bad_ctx = 0;
	d->pkt_err = 0;
	size_t psb, from = d->pos > off ? d->pos : (size_t)off + 1;
	uint64_t skipped;

	if (d->resynced && from <= d->last_resync)
		from = d->last_resync + 1;   /* never land on the same PSB twice */
	/* The error is at a PSB (what came before cannot reach its IP, or expected some
	 * other packet): the PSB itself is sound, and decoding goes on there, as in a chunk
	 * that starts at it; not when its own PSB+ failed. */
	int ran_over = d->overran || (d->pos > d->next_psb && !d->over);
	int at_psb = !ran_over && off != d->psb_read && !(d->resynced && off <= d->last_resync) &&
		     tk_ipt_psb_find(d->buf, d->len, (size_t)off, &psb) == 0 && psb == off;

	d->overran = 0;
	if (ran_over) {
		psb = d->next_psb;           /* the PSB that the last packet ran over */
	} else if (at_psb) {
		psb = (size_t)off;
	} else if (tk_ipt_psb_find(d->buf, d->len, from, &psb) < 0 || psb > d->end) {
		psb = d->end > d->len ? d->len : d->end;
	}
	if (psb < off || (psb == off && !at_psb)) {
		/* already past this chunk's end: nothing more to decode here */
		psb = d->end + 1;
		skipped = 0;
		d->over = 1;
	} else {
		skipped = psb - off;
	}
	d->last_resync = psb;
	d->resynced = 1;
	d->st->errors++;
	tk_gap_stats_add(&d->st->gaps, off, skipped);
	d->pos = psb;
	d->enabled = d->have_ip = 0;
	reset_flow_state(d);
	(void)err;
	return emit(d, TK_EV_GAP, addr, 0, skipped, off, (uint16_t)reason);
}

/* The instruction at IP in the current mode: its bytes and *IN, or NULL without code. */
static const uint8_t *classify(struct ptd *d, uint64_t ip, struct tk_isa_insn *in)
{
	const uint8_t *p;
	size_t n = 0;

	if (!d->image)
		return NULL;
	if (!d->ins->isa && (d->ins->isa = malloc(sizeof(*d->ins->isa))))
		tk_isa_init(d->ins->isa);
	if (!d->ins->isa || !(p = tk_image_ptr(d->image, ip, &n)) ||
	    tk_isa_classify(d->ins->isa, d->mode, p, n, ip, in) < 0)
		return NULL;
	return p;
}

/* An instruction as insn_at remembers it: LEN 0 when there is no code. */
struct insn_memo {
	uint64_t ip;
	uint8_t mode, len, cls, far_call, valid;
};
#define INSN_MEMO 4096

/* The bytes of P (LEN of them) before the opcode: operand and address size prefixes and,
 * in 64-bit MODE, REX. */
static size_t size_prefixes(const uint8_t *p, size_t len, int mode)
{
	size_t i = 0;

	while (i < len && (p[i] == 0x66 || p[i] == 0x67 ||
			   ((p[i] & 0xf0) == 0x40 && mode == TK_FLOW_64)))
		i++;
	return i;
}

/* A call that leaves the flow: syscall, sysenter, int n/3/o, call far (P: its bytes). */
static int is_far_call(const uint8_t *p, size_t len, int mode)
{
	size_t i = size_prefixes(p, len, mode);
	uint8_t b0 = i < len ? p[i] : 0, b1 = i + 1 < len ? p[i + 1] : 0;
	return (b0 == 0x0f && (b1 == 0x05 || b1 == 0x34)) || b0 == 0xcc || b0 == 0xcd ||
	       b0 == 0xce || b0 == 0x9a || (b0 == 0xff && (b1 >> 3 & 7) == 3);
}

/* Whether the instruction at IP is a VM entry: VMLAUNCH (0F 01 C2) or VMRESUME (0F 01 C3). */
static int is_vm_entry(struct ptd *d, uint64_t ip)
{
	size_t n = 0, i;
	const uint8_t *p = d->image ? tk_image_ptr(d->image, ip, &n) : NULL;

	if (!p)
		return 0;
	i = size_prefixes(p, n, d->mode);
	return n - i >= 3 && p[i] == 0x0f && p[i + 1] == 0x01 && (p[i + 2] == 0xc2 || p[i + 2] == 0xc3);
}

/* The instruction at IP, remembered: the few instructions that disable tracing or hold a
 * PTWRITE come back again and again, and decoding them each time cost a fifth of a
 * trace with frequent disables. NULL only without memory. */
static const struct insn_memo *insn_at(struct ptd *d, uint64_t ip)
{
	struct tk_isa_insn in;
	struct insn_memo *m;
	const uint8_t *p;

	if (!d->ins->memo && !(d->ins->memo = calloc(INSN_MEMO, sizeof *d->ins->memo)))
		return NULL;
	m = &d->ins->memo[(ip ^ ip >> 8) & (INSN_MEMO - 1)];
	if (m->valid && m->ip == ip && m->mode == d->mode)
		return m;
	p = classify(d, ip, &in);
	*m = (struct insn_memo){ ip, (uint8_t)d->mode, p ? (uint8_t)in.len : 0,
				 p ? (uint8_t)in.cls : 0, p && is_far_call(p, in.len, d->mode), 1 };
	return m;
}

static uint64_t insn_len(struct ptd *d, uint64_t ip)
{
	const struct insn_memo *m = insn_at(d, ip);

	return m ? m->len : 0;
}

/* Which held events (enum tk_flow_bind) bind to the instruction at IP: a far transfer
 * takes a PIP, a VMCS and Event Trace's far events, a MOV CR3 the PIP, a VMPTRLD the
 * VMCS, a PTWRITE a PTW without IP, others none. */
static unsigned bound_at(struct ptd *d, uint64_t ip)
{
	struct tk_isa_insn in;

	if (!classify(d, ip, &in))
		return 0;
	return in.sys == TK_ISA_SYS_MOV_CR3 ? TK_FLOW_BIND_PAGING
	       : in.sys == TK_ISA_SYS_VMPTRLD ? TK_FLOW_BIND_VMCS
	       : in.sys == TK_ISA_SYS_PTWRITE ? TK_FLOW_BIND_PTWRITE
	       : in.cls == TK_ISA_FAR ? TK_FLOW_BIND_PAGING | TK_FLOW_BIND_VMCS | TK_FLOW_BIND_FAR
	       : 0;
}

/* Where tracing is expected to resume after a TIP.PGD bound to the instruction at FROM,
 * which went to TARGET (0: unknown), as libipt has it: after a call (near or far: syscall,
 * int, call far) the next instruction; after an instruction that needs no trace where it
 * goes; else unknown (0). */
static uint64_t resume_ip(struct ptd *d, uint64_t from, uint64_t target)
{
	const struct insn_memo *m = insn_at(d, from);

	if (!m || !m->len)
		return 0;
	switch (m->cls) {
	case TK_ISA_OTHER: return from + m->len;   /* MOV CR3 */
	case TK_ISA_JMP: case TK_ISA_CALL: return target;
	case TK_ISA_CALL_IND: return from + m->len;
	case TK_ISA_FAR: return m->far_call ? from + m->len : 0;
	default: return 0;
	}
}

static int do_action(struct ptd *d);

/* The trace does not fit the code (REASON TK_GAP_DECODE_ERROR), or code is missing from the
 * image (TK_GAP_NO_IMAGE), at the packet at OFF, the packets themselves being sound: record
 * the error and go on at the next packet in this PSB segment that gives an IP (a TIP, FUP
 * + TIP, an event packet + FUP, TIP.PGD, TIP.PGE, OVF, or the next PSB), as libipt's
 * resync does, rather than lose the segment. The packet the walker failed on may be that
 * one: it is read again. An event bound to a FUP the walker did not reach takes effect at
 * the FUP. Nothing of the input is skipped (0 bytes); the conditional outcomes between
 * are. */
static int recover(struct ptd *d, uint64_t off, unsigned reason, uint64_t addr)
{
	int act = d->action, rc;

	d->pkt_err = 0;
	if (reason != TK_GAP_NO_IMAGE)
		d->st->errors++;
	tk_gap_stats_add(&d->st->gaps, off, 0);
	d->have_ip = 0;
	reset_flow_state(d);
	if ((rc = emit(d, TK_EV_GAP, addr, 0, 0, off, (uint16_t)reason)) < 0)
		return rc;
	if (act == ACT_PSB || act == ACT_CHUNK_END) {
		return 0;   /* d->pos is at the PSB: it is read next */
	}
	if (act == ACT_TRIG_STEP) {   /* not reached: told here, without its place */
		if ((rc = tell_trig(d, 0, d->trig)) < 0)
			return rc;
		act = ACT_NONE;
	}
	if (act != ACT_NONE) {
		d->ip = d->stop_ip;
		d->have_ip = 1;
		d->action = act;
		return do_action(d);
	}
	if (d->last_off < d->pos && d->last_off >= d->start)
		d->pos = d->last_off;
	return 0;
}

/* The OVF at AT: packets were lost; tracing goes on at the next FUP or TIP.PGE. */
static int overflow(struct ptd *d, size_t at)
{
	int rc = tell_held(d);

	if (rc < 0)
		return rc;
	d->st->overflows++;
	tk_gap_stats_add(&d->st->gaps, at, 0);
	d->enabled = d->have_ip = 0;
	d->resume_ip = 0;
	d->after_ovf = 1;
	tk_ipt_last_ip_init(&d->last);
	reset_flow_state(d);
	d->ovf_pending = 1;
	d->ovf_off_ahead = -1;
	d->ovf_off = at;
	return 0;
}

/* Whether the pending overflow resolves with packets off: a TIP.PGE (or a TIP.PGD, a
 * STOP, a PSB+ without FUP, APL12's FUP, another OVF or the end) comes before a FUP, TIP
 * or PSB+ with FUP says where tracing goes on. libipt tells such an overflow at once, and
 * one that resolves at a FUP there, after the status events between. */
static int ovf_resolves_off(const struct ptd *d)
{
	struct tk_ipt_ctx ctx = { .errata = d->pctx.errata };
	struct tk_ipt_packet p;
	size_t pos = d->pos;
	uint64_t ip;
	int rc;

	while ((rc = tk_ipt_decode_one(d->buf, d->len, pos, &ctx, &p)) > 0) {
		pos += (size_t)rc;
		switch (p.kind) {
		case TK_IPT_PKT_FUP:
			if (!p.ip.ipc)
				break;   /* no IP: not where tracing goes on */
			return apl12_fup(d->buf, d->len, d->pctx.errata, pos);
		case TK_IPT_PKT_TIP:
			return 0;
		case TK_IPT_PKT_PSB:
			return !psb_plus(d->buf, d->len, d->pctx.errata, pos, &ip, NULL, NULL);
		case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_TIP_PGD: case TK_IPT_PKT_STOP:
		case TK_IPT_PKT_OVF:
			return 1;
		default:
			break;
		}
	}
	return 1;
}

/* The overflow is reported where what follows it resolves it: the FUP or TIP.PGE where
 * tracing goes on, a PSB, an error or the end. */
static int flush_ovf(struct ptd *d)
{
	if (!d->ovf_pending)
		return 0;
	d->ovf_pending = 0;
	return emit(d, TK_EV_GAP, 0, 0, 0, d->ovf_off, TK_GAP_OVERFLOW);
}

/* The walker stopped at a PSB+ without FUP while tracing was on: that PSB+ says packets
 * were off (the SDM puts a FUP in PSB+ whenever PacketEn=1), but no TIP.PGD turned them
 * off, so the flow's end was lost (libipt fails the next query). An error at the PSB,
 * whose state decoding goes on from; a chunk ending there says the same, so that -j N
 * gives -j 1's listing. */
static int psb_cut_flow(struct ptd *d)
{
	d->psb_off = 0;
	d->st->errors++;
	tk_gap_stats_add(&d->st->gaps, d->pos, 0);
	return emit(d, TK_EV_GAP, d->ip, 0, 0, d->pos, TK_GAP_DECODE_ERROR);
}

/* Process the PSB+ at d->pos: state from its packets, IP from its FUP. An OVF ends
 * the PSB+ (no PSBEND follows it): an overflow, after which the next FUP or TIP.PGE
 * says where tracing goes on, as libipt has it. */
static int do_psb(struct ptd *d)
{
	struct tk_ipt_packet p;
	uint64_t ip;
	int rc;

	d->psb_read = d->pos;
	d->psb_off = 0;
	if ((rc = tell_held(d)) < 0 || (rc = fetch(d, &p)) < 0)
		return rc;
	tk_ipt_last_ip_init(&d->last);
	reset_flow_state(d);
	d->enabled = d->have_ip = 0;
	d->pending_mode = -1;
	d->shown_mode = d->iflag = d->bound_if = -1;   /* known from the PSB+ only: -j N == -j 1 */
	d->resume_ip = 0;
	ptime_reset(&d->tm);   /* as a chunk starting here would: -j N == -j 1 */
	d->time = TK_TIME_NONE;
	tk_flow_set_time(d->flow, d->time);
	for (;;) {
		if ((rc = fetch(d, &p)) < 0)
			return rc == -TK_E_EOF ? 0 : rc;
		switch (p.kind) {
		case TK_IPT_PKT_PSBEND:
			if (d->have_ip && bdm70_fup(d->buf, d->len, d->pctx.errata, d->pos))
				d->enabled = d->have_ip = 0;
			return 0;
		case TK_IPT_PKT_FUP:
			if ((rc = last_ip(d, &p, &ip)) < 0)
				return rc;
			if (rc) {
				d->ip = ip;
				d->enabled = d->have_ip = 1;
			}
			break;
		case TK_IPT_PKT_MODE_EXEC:
			d->mode = d->shown_mode = exec_mode(&p);
			d->iflag = p.exec.iflag;
			break;
		case TK_IPT_PKT_TSC: case TK_IPT_PKT_TMA: case TK_IPT_PKT_MTC:
		case TK_IPT_PKT_CYC:
			if ((rc = timing(d, &p)) < 0)
				return rc;
			break;
		case TK_IPT_PKT_CBR:
			ptime_cbr(&d->tm, p.cbr.ratio);
			break;
		case TK_IPT_PKT_MNT:
			if ((rc = emit(d, TK_EV_POWER, 0, 0, 0, p.mnt.payload, TK_IPT_POWER_MNT)) < 0)
				return rc;
			break;
		case TK_IPT_PKT_OVF:
			return overflow(d, d->last_off);
		case TK_IPT_PKT_PSB:
			/* a PSB+ cut short (no PSBEND): an error at this PSB, which starts
			 * the next one */
			return -TK_E_BAD_FORMAT;
		default:
			/* a flow packet (PSBEND missing) is an error at it, not a flow
			 * taken as state and lost without a word */
			if (never_in_psb_plus(p.kind))
				return -TK_E_BAD_FORMAT;
			break;   /* PIP, VMCS, PAD, MODE.TSX, MNT, block and event packets:
				    state only */
		}
	}
}

/* What happens after the walker stopped at an IP-bound event. Returns 1 at chunk end. */
static int do_action(struct ptd *d)
{
	int act = d->action, rc = 0;

	d->action = ACT_NONE;
	if (d->et_armed && (rc = tell_et_fup(d, d->ip)) < 0)
		return rc;
	switch (act) {
	case ACT_CHUNK_END:
	case ACT_PSB:
		if (d->psb_mode >= 0 && d->psb_mode != d->mode) {
			/* The PSB+ says another exec mode than the one decoded in, which
			 * changes only at a far branch or MODE.Exec + TIP: what came before
			 * is wrong (libipt's "bad status update"). An error at the PSB;
			 * decoding goes on from its state, as a chunk starting there does. */
			d->st->errors++;
			tk_gap_stats_add(&d->st->gaps, d->pos, 0);
			if ((rc = emit(d, TK_EV_GAP, d->ip, 0, 0, d->pos, TK_GAP_DECODE_ERROR)) < 0)
				return rc;
		}
		return act == ACT_PSB ? do_psb(d) : 1;
	case ACT_ASYNC_BRANCH:
		if ((rc = emit(d, TK_EV_INTERRUPT, d->ip, d->act_ip, 0, 0, 0)) < 0)
			return rc;
		d->ip = d->act_ip;
		take_mode(d);
		if ((rc = tell_paging(d)) < 0)
			return rc;
		return mode_event(d, d->ip);
	case ACT_EXEC_MODE:
		return mode_event(d, d->ip);
	case ACT_MODE_FUP:
		take_mode(d);
		return mode_event(d, d->ip);
	case ACT_ASYNC_DISABLE:
		d->enabled = 0;
		d->resume_ip = d->ip;
		if ((rc = emit(d, TK_EV_DISABLE, d->ip, d->act_ip, 0, 0, TK_IPT_DISABLE_ASYNC)) < 0)
			return rc;
		return tell_paging(d);
	case ACT_TSX:
		if ((rc = emit(d, TK_EV_MODE, d->ip, 0, 0, 0, d->act_flags)) < 0)
			return rc;
		/* an abort goes on to the abort handler (or tracing stops) */
		d->action = d->act_async;
		d->act_async = ACT_NONE;
		return d->action ? do_action(d) : 0;
	case ACT_PTW: {
		/* the FUP gives the PTWRITE's IP; libipt reports it after the instruction */
		uint64_t len = insn_len(d, d->ip);

		if (!len)
			return emit(d, TK_EV_PTWRITE, d->ip, 0, 0, d->act_arg, 0);
		d->qstop = ACT_PTW_AFTER;
		d->qstop_ip = d->ip + len;
		d->ptw_ip = d->ip;
		return 0;
	}
	case ACT_PTW_AFTER:
		return emit(d, TK_EV_PTWRITE, d->ptw_ip, 0, 0, d->act_arg, 0);
	case ACT_EXSTOP:
		return tell_exstop(d, d->ip, 1);
	case ACT_TRIG: case ACT_TRIG_STEP:   /* at the FUP's IP, or where the count ends */
		return tell_trig(d, d->ip, d->trig);
	case ACT_ET:
		/* at the FUP's IP: before the instruction there, or after it for IRET, VM
		 * entry and UIRET (while tracing is on); a kind not known: nothing */
		if (!(d->et_act.arg & 0xff))
			return 0;
		if (d->enabled && et_after_insn(&d->et_act))
			return et_hold_far(d, &d->et_act);
		return et_emit(d, d->ip, &d->et_act);
	default:
		return 0;
	}
}

/* TIP.PGE at IP: tracing (re)starts there. While it was on with the IP lost (recover),
 * the TIP.PGD before it was lost: [disabled] first, as libipt has it. */
static int enable_at(struct ptd *d, uint64_t ip)
{
	int rc;

	if ((rc = flush_ovf(d)) < 0)
		return rc;
	take_mode(d);
	if (d->enabled) {
		if ((rc = emit(d, TK_EV_DISABLE, 0, 0, 0, 0, 0)) < 0)
			return rc;
		d->resume_ip = 0;
	}
	d->ip = ip;
	d->enabled = d->have_ip = 1;
	d->after_ovf = 0;
	if ((rc = emit(d, TK_EV_ENABLE, ip, 0, 0, 0,
		       d->resume_ip && ip == d->resume_ip ? TK_IPT_ENABLE_RESUMED : 0)) < 0)
		return rc;
	return mode_event(d, ip);   /* after [enabled], as libipt orders them */
}

/* recover: a FUP (or the event packet ACT that a FUP completes) gives the IP to go on at,
 * where its event takes effect. */
static int bind_lost(struct ptd *d, int act, const struct tk_ipt_packet *fup)
{
	struct tk_flow_q q;
	int rc = bind_fup(d, &q, act, fup);

	if (rc < 0)
		return resync(d, d->pkt_err ? d->err_off : d->last_off, rc, TK_GAP_DECODE_ERROR, 0);
	if (q.kind == TK_FLOWQ_END)
		return 1;   /* the trace ends after the FUP */
	d->ip = q.ip;
	d->have_ip = 1;
	return do_action(d);
}

/* Packets while not walking: tracing off, or waiting for an IP after an error (recover)
 * or an overflow. Returns 1 at the chunk's end, 0 when walking can go on, < 0 on error. */
static int idle_step(struct ptd *d)
{
	struct tk_ipt_packet p;
	size_t at = d->pos;
	uint64_t ip;
	unsigned n;
	int rc, lost = d->enabled && !d->after_ovf;   /* tracing on, the IP lost */

	/* MODE.Exec and TIP.PGE around every syscall of a user-only trace, in place */
	if (!d->pctx.blk && at + 1 < d->len && at < d->next_psb) {
		uint8_t b = d->buf[at], m = d->buf[at + 1];

		if (b == 0x99 && !(m >> 5)) {
			d->last_off = at;
			d->pos = at + 2;
			read_mode_exec(d, m & 1 ? TK_FLOW_64 : m & 2 ? TK_FLOW_32 : TK_FLOW_16, m >> 2 & 1);
			if (!d->enabled)
				d->mode = d->pending_mode;
			return 0;
		}
		if ((b & 0x1f) == 0x11 && (n = fast_ip(d, at, &ip))) {
			d->last_off = at;
			d->pos = at + n;
			return enable_at(d, ip);
		}
	}
	rc = fetch(d, &p);
	if (rc == -TK_E_EOF)
		return (rc = flush_ovf(d)) < 0 ? rc : 1;
	if (rc < 0)
		return resync(d, d->err_off, rc, TK_GAP_DECODE_ERROR, 0);
	switch (p.kind) {
	case TK_IPT_PKT_PSB:
		d->pos = at;
		if ((rc = flush_ovf(d)) < 0)
			return rc;
		if (at >= d->end && at != d->start)
			return 1;
		d->after_ovf = 0;
		if ((rc = do_psb(d)) < 0)
			return resync(d, d->last_off, rc, TK_GAP_DECODE_ERROR, 0);
		return 0;
	case TK_IPT_PKT_TIP_PGE:
		if ((rc = last_ip(d, &p, &ip)) < 0 || !rc)
			return resync(d, at, -TK_E_BAD_FORMAT, TK_GAP_DECODE_ERROR, 0);
		return enable_at(d, ip);
	case TK_IPT_PKT_TIP_PGD:
		rc = last_ip(d, &p, &ip);
		d->enabled = d->have_ip = 0;
		d->resume_ip = 0;
		if (rc <= 0)
			ip = 0;
		if (d->pending_mode >= 0) {   /* bound to the TIP.PGD, as in the walk */
			take_mode(d);
			if ((rc = mode_event(d, 0)) < 0)
				return rc;
		}
		/* recover: tracing stops somewhere before */
		return lost ? emit(d, TK_EV_DISABLE, 0, ip, 0, 0, 0) : 0;
	case TK_IPT_PKT_TIP:
		if ((rc = last_ip(d, &p, &ip)) < 0)
			return resync(d, at, rc, TK_GAP_DECODE_ERROR, 0);
		if (rc && d->after_ovf) {
			/* Erratum SKD010 (Skylake, Kaby Lake client): the FUP after an OVF
			 * may be dropped. A TIP comes only while packets are on: the flow
			 * goes on at its IP, as if it were the lost FUP's (every CPU). */
			int frc = flush_ovf(d);

			if (frc < 0)
				return frc;
			d->enabled = 1;
			d->after_ovf = 0;
		}
		if (rc && d->enabled && !d->have_ip) {
			take_mode(d);
			d->ip = ip;
			d->have_ip = 1;
			return mode_event(d, ip);
		}
		return 0;
	case TK_IPT_PKT_FUP:
		if (lost)
			return bind_lost(d, d->pending_mode >= 0 ? ACT_MODE_FUP : ACT_NONE, &p);
		if ((rc = last_ip(d, &p, &ip)) < 0)
			return resync(d, at, rc, TK_GAP_DECODE_ERROR, 0);
		if (d->held_exstop) {
			d->held_exstop = 0;
			if ((rc = tell_exstop(d, rc ? ip : 0, 1)) < 0)
				return rc;
			return 0;
		}
		if (d->held_ptw || d->held_trig)
			return tell_held_off(d, rc ? ip : 0);
		if (rc && d->after_ovf && apl12_fup(d->buf, d->len, d->pctx.errata, d->pos)) {
			d->after_ovf = 0;   /* resolved with packets off */
			return flush_ovf(d);
		}
		if (rc && d->after_ovf) {
			/* tracing goes on after the overflow at this IP, in the mode of a
			 * MODE.Exec between them (it binds to this FUP) */
			d->ip = ip;
			d->enabled = d->have_ip = 1;
			d->after_ovf = 0;
			take_mode(d);
			return (rc = flush_ovf(d)) < 0 ? rc : mode_event(d, ip);
		}
		if (d->pending_mode >= 0 && !d->after_ovf) {
			/* tracing is off: a MODE.Exec bound to this FUP changes the state here */
			take_mode(d);
			return mode_event(d, rc ? ip : 0);
		}
		return 0;
	case TK_IPT_PKT_MODE_EXEC:
		read_mode_exec(d, exec_mode(&p), p.exec.iflag);
		if (!d->enabled)
			d->mode = d->pending_mode;
		return 0;
	case TK_IPT_PKT_MODE_TSX:
		d->act_flags = p.tsx.abrt ? TK_MODE_TSX_ABORT : p.tsx.intx ? TK_MODE_TSX_BEGIN
								    : TK_MODE_TSX_COMMIT;
		if (lost)
			return bind_lost(d, ACT_TSX, NULL);
		/* after an overflow it is told after the [overflow] (its FUP, if SKD010 did
		 * not drop it, resumes the flow next) */
		if (d->after_ovf && (rc = flush_ovf(d)) < 0)
			return rc;
		/* while tracing is off no FUP follows: the state changes here (libipt) */
		return emit(d, TK_EV_MODE, 0, 0, 0, 0, d->act_flags);
	case TK_IPT_PKT_PTW:
		if (!p.ptw.ip)
			break;
		if (d->after_ovf)   /* the FUP that follows resumes the flow: told here */
			return emit(d, TK_EV_PTWRITE, 0, 0, 0, p.ptw.payload, 0);
		if (!lost) {
			/* tracing is off: its FUP gives the IP, and no flow (libipt) */
			if (d->held_ptw && (rc = tell_held_off(d, 0)) < 0)
				return rc;
			d->held_ptw = 1;
			d->held_ptw_payload = p.ptw.payload;
			return 0;
		}
		d->act_arg = p.ptw.payload;
		return bind_lost(d, ACT_PTW, NULL);
	case TK_IPT_PKT_TRIG:
		if (!p.trig.ip || d->after_ovf)
			break;   /* told where read (after an overflow its FUP resumes the flow) */
		d->trig = (uint16_t)(p.trig.trbv | p.trig.mult << 8);
		if (lost)
			return bind_lost(d, ACT_TRIG, NULL);
		if (d->held_trig && (rc = tell_held_off(d, 0)) < 0)
			return rc;
		d->held_trig = 1;   /* as a PTWRITE's while tracing is off */
		d->held_trig_val = d->trig;
		return 0;
	case TK_IPT_PKT_EXSTOP:
		if (!p.exstop.ip)
			break;
		if (lost)
			return bind_lost(d, ACT_EXSTOP, NULL);
		d->held_exstop = 1;   /* tracing is off: its FUP follows, and no flow */
		return 0;
	case TK_IPT_PKT_OVF:
		return overflow(d, at);
	case TK_IPT_PKT_EVD:
		if ((rc = et_evd(d, &p)) < 0)
			return resync(d, at, rc, TK_GAP_DECODE_ERROR, 0);
		return 0;
	case TK_IPT_PKT_CFE:
		if ((rc = et_cfe(d, &p, &d->et_act)) < 0)
			return resync(d, at, rc, TK_GAP_DECODE_ERROR, 0);
		if (p.cfe.ip)
			return bind_lost(d, ACT_ET, NULL);
		return et_no_ip(d, &d->et_act);
	default:
		break;
	}
	if (side_event(d, &p, &rc) && rc < 0)
		return rc;
	return 0;
}

static int decode_chunk(struct ptd *d)
{
	struct tk_flow_oracle o = { oracle_next, d, oracle_deferred_tip };
	int rc;

	d->pos = d->next_psb = d->start;
	d->psb_read = SIZE_MAX;
	d->mode = TK_FLOW_64;
	d->pending_mode = d->shown_mode = d->iflag = d->bound_if = -1;
	d->time = TK_TIME_NONE;
	tk_flow_set_time(d->flow, d->time);
	tk_ipt_last_ip_init(&d->last);
	if (d->break_reason) {
		/* the trace before this chunk's start ended there: what is missing is a gap */
		if (d->break_reason == TK_GAP_OVERFLOW) {
			d->st->overflows++;
			tk_gap_stats_add(&d->st->gaps, d->start, 0);
		}
		if ((rc = emit(d, TK_EV_GAP, 0, 0, 0, d->start, (uint16_t)d->break_reason)) < 0)
			return rc;
	}
	for (;;) {
		if (!(d->enabled && d->have_ip)) {
			rc = idle_step(d);
			if (rc < 0)
				return rc;
			if (rc == 1)
				return 0;
			continue;
		}

		struct tk_flow_result res;

		d->walking = 1;
		rc = tk_flow_walk(d->flow, &d->ip, &d->mode, &o, d->out, &res);
		d->walking = 0;
		(void)publish_time(d);
		d->st->insns += res.insns;
		/* the instruction the held PIP, VMCS or Event Trace event bound to, or no such
		 * instruction before the walk stopped (d->bind is set while any is held) */
		if (__builtin_expect(d->bind != 0, 0) && rc != TK_FLOW_DISABLED) {
			unsigned what = rc == TK_FLOW_BOUND ? bound_at(d, res.from) : 0;
			int trc = (what & TK_FLOW_BIND_FAR) && d->n_et_far ? tell_et_far(d, res.from) : 0;

			if (trc >= 0 && d->nbound)
				trc = tell_bound(d, what ? what : ~0u, !what, res.from);
			if (trc < 0)
				return trc;
		}
		switch (rc) {
		case TK_FLOW_BOUND:
			break;
		case TK_FLOW_STOPPED:
			rc = do_action(d);
			if (rc < 0 && rc != -TK_E_CANCELLED)
				rc = resync(d, d->last_off, rc, TK_GAP_DECODE_ERROR, d->ip);
			if (rc < 0)
				return rc;
			if (rc == 1)
				return 0;
			break;
		case TK_FLOW_DISABLED:
			d->enabled = d->have_ip = 0;
			d->resume_ip = resume_ip(d, res.from, d->ip);
			/* a MODE.Exec before a TIP.PGD binds to it (libipt): the mode is
			 * told before the [disabled], without an IP (none is reached) */
			if (__builtin_expect(d->pending_mode >= 0, 0)) {
				take_mode(d);
				if ((rc = mode_event(d, 0)) < 0)
					return rc;
			}
			/* a PIP or VMCS of the instruction that disabled tracing comes before
			 * the [disabled], one still waiting for an instruction after it */
			if ((d->bind && d->n_et_far && (bound_at(d, res.from) & TK_FLOW_BIND_FAR) &&
			     (rc = tell_et_far(d, res.from)) < 0) ||
			    (d->bind && d->nbound && (rc = tell_bound(d, bound_at(d, res.from), 0, res.from)) < 0) ||
			    (rc = emit(d, TK_EV_DISABLE, res.from, d->ip, 0, 0, 0)) < 0 ||
			    (d->nbound && (rc = tell_bound(d, ~0u, 1, 0)) < 0))
				return rc;
			break;
		case TK_FLOW_ENDED:
			/* No more trace: the rest of the chunk (a PSB without FUP, or EOF). At
			 * the end of the trace, tracing was on: ptxed's "end of trace". */
			d->have_ip = 0;
			tk_flow_clear_pending(d->flow);
			if (d->eos &&
			    (rc = emit(d, TK_EV_DISABLE, d->ip, 0, 0, 0, TK_IPT_DISABLE_END)) < 0)
				return rc;
			if (d->psb_off && (rc = psb_cut_flow(d)) < 0)
				return rc;
			break;
		case -TK_E_OVERFLOW:
			if ((rc = overflow(d, d->last_off)) < 0)
				return rc;
			break;
		case -TK_E_NOMAP:
			if ((rc = recover(d, walk_error_off(d), TK_GAP_NO_IMAGE, res.from)) < 0)
				return rc;
			break;
		case -TK_E_NOMEM:
		case -TK_E_CANCELLED:
			return rc;
		default:
			if (rc < 0 && rc > -TK_E__COUNT) {
				/* A sink error is passed through; trace errors resync. */
				if (d->out->sink.events && rc == -TK_E_IO)
					return rc;
				/* a packet that does not decode: the next PSB; a trace that
				 * does not fit the code: the next IP in this segment */
				if (d->pkt_err)
					rc = resync(d, d->err_off, rc, TK_GAP_DECODE_ERROR, res.from);
				else
					rc = recover(d, walk_error_off(d), TK_GAP_DECODE_ERROR, res.from);
				if (rc < 0)
					return rc;
			} else if (rc < 0) {
				return rc;
			}
			break;
		}
	}
}

void ipt_insns_free(struct ipt_insns *in)
{
	free(in->isa);
	free(in->memo);
	in->isa = NULL;
	in->memo = NULL;
}

/* The part [START, END) of BUF (decoding may read on to SEG_END, where the next break is) that
 * starts at a break of reason BRK, decoded with F and INS: its events to SINK, its counts
 * into ST. */
int ipt_decode_range(const uint8_t *buf, uint64_t seg_end, uint64_t start, uint64_t end,
		     uint32_t brk, const struct tk_ipt_flow_opts *o, struct tk_flow *f,
		     struct ipt_insns *ins, struct tk_sink sink, struct tk_ipt_flow_stats *st)
{
	struct ptd *d = calloc(1, sizeof(*d));
	struct tk_event_batch *batch = malloc(sizeof(*batch));
	int rc = -TK_E_NOMEM;

	if (d && batch) {
		d->buf = buf;
		d->len = seg_end;
		d->start = start;
		d->end = end;
		d->break_reason = brk;
		d->flow = f;
		d->ins = ins;
		d->st = st;
		d->image = o->image;
		d->tm.mtc_freq = o->mtc_freq < 24 ? o->mtc_freq : 0;
		d->tm.nom_freq = o->nom_freq;
		d->tm.eax = o->cpuid_15_eax;
		d->tm.ebx = o->cpuid_15_ebx;
		/* (an older caller's options end before the track) */
		d->track = o->sz >= offsetof(struct tk_ipt_flow_opts, track) + sizeof(uint32_t) ? o->track : 0;
		d->errata = o->sz >= offsetof(struct tk_ipt_flow_opts, errata) + sizeof(uint32_t) ?
			    o->errata : 0;
		d->pctx.errata = (uint8_t)(d->errata & TK_IPT_ERRATA_PACKET);
		tk_flow_set_track(f, d->track);
		/* SKL014, read only where the filter is known (libipt: else it would stop
		 * tracing too early) */
		d->filter = o->sz >= offsetof(struct tk_ipt_flow_opts, addr_filter) + sizeof(void *) &&
			    (d->errata & TK_IPT_ERRATUM_SKL014) ? o->addr_filter : NULL;
		tk_flow_set_pgd_direct(f, filter_on(d->filter) ? leaves_filter : NULL, d);
		d->out = batch;
		tk_event_batch_init(batch, sink);
		d->hold_time = sink.counted_blocks;
		rc = decode_chunk(d);
		if (rc >= 0)
			rc = tell_held(d);   /* the next chunk's PSB, or the end */
		if (rc >= 0 && d->time_held && (rc = emit(d, TK_EV_TIME, 0, 0, 0, 0, 0)) >= 0)
			d->st->events--;     /* (counted when held) */
		if (rc >= 0)
			rc = tk_event_batch_flush(batch);
		tk_flow_set_pgd_direct(f, NULL, NULL);   /* (D goes) */
	}
	free(batch);
	free(d);
	return rc;
}
