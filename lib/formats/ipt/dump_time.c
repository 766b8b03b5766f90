/* ptdump's time columns for tracekit dump (--time, --tcal): the estimated TSC and the
 * cycle calibration, tracked packet by packet with the rules of libipt's time model, so
 * that the columns and the remarks between the lines read as ptdump's do.
 *
 * A second model beside the flow decoder's (flow.c, struct ptime) on purpose: ptdump's
 * carries its calibration across PSBs and learns the cycles-to-ticks ratio (FCR) from the
 * cycles counted between two MTCs (or two TSCs in PSB+) when no CBR with a nominal ratio
 * gives it; the flow's resets at each PSB so that its chunks decode alone. */
#include <stdio.h>

#include "formats/ipt/internal.h"

enum {
	FCR_SHIFT = 8,         /* FCR's fixed point */
	MTC_BITS = 8,          /* CTC bits an MTC carries (at the MTC frequency's bit) */
	TMA_CTC_BITS = 16,     /* CTC bits a TMA carries */
	TSC_BITS = 56,
};
#define TMA_CTC_MASK 0xffffu

/* The remarks' reasons, in libipt's words (pt_errstr), which ptdump prints. */
enum { T_OK, T_INTERNAL, T_BAD_PACKET, T_BAD_CONTEXT, T_BAD_CONFIG, T_NO_TIME };
static const char *const reason[] = {
	[T_INTERNAL] = "internal error", [T_BAD_PACKET] = "unknown packet",
	[T_BAD_CONTEXT] = "unexpected packet context", [T_BAD_CONFIG] = "bad configuration",
	[T_NO_TIME] = "no timing information",
};

/* A remark before the packet's line: "[offset: what: why]" (WHY T_OK: "[offset: what]"). */
static void remark(struct tk_buf *out, uint64_t at, const char *what, int why)
{
	if (why == T_OK)
		tk_buf_printf(out, "[%llx: %s]\n", (unsigned long long)at, what);
	else
		tk_buf_printf(out, "[%llx: %s: %s]\n", (unsigned long long)at, what, reason[why]);
}

static void cal_reset(struct tk_ipt_dump_cal *c)
{
	*c = (struct tk_ipt_dump_cal){ .min_fcr = UINT64_MAX };
}

void tk_ipt_dump_time_reset(struct tk_ipt_dump_time *d)
{
	d->t = (struct tk_ipt_dump_clock){ 0 };
	cal_reset(&d->cal);
	d->shown_tsc = d->shown_fcr = 0;
	d->in_header = 0;
}

void tk_ipt_dump_time_init(struct tk_ipt_dump_time *d, const struct tk_ipt_dump_opts *o)
{
	*d = (struct tk_ipt_dump_time){
		.show = o->tcal ? TK_IPT_SHOW_FCR : o->time ? TK_IPT_SHOW_TSC : TK_IPT_SHOW_NONE,
		.delta = o->time_delta,
		.no_tcal = o->no_tcal, .no_wall_clock = o->no_wall_clock,
		.keep_tcal_on_ovf = o->keep_tcal_on_ovf, .no_cyc = o->no_cyc,
		.no_pad = o->no_pad, .no_timing = o->no_timing,
		/* the MTC frequency is 4 bits in IA32_RTIT_CTL; more would overflow the CTC */
		.mtc_freq = o->mtc_freq < 16 ? o->mtc_freq : 0, .nom_freq = o->nom_freq,
		.eax = o->cpuid_15_eax, .ebx = o->cpuid_15_ebx,
		.skl168 = (o->errata & TK_IPT_ERRATUM_SKL168) != 0,
	};
	tk_ipt_dump_time_reset(d);
}

/* ---- the clock (libipt's pt_time) ------------------------------------------------------- */

/* CTC - LAST, allowing for one wrap of the bits MTCs give. */
static int ctc_delta(const struct tk_ipt_dump_time *d, uint32_t ctc, uint32_t last, uint32_t *delta)
{
	if (ctc < last) {
		ctc += 1u << (d->mtc_freq + MTC_BITS);
		if (ctc < last)
			return T_BAD_PACKET;
	}
	*delta = ctc - last;
	return T_OK;
}

/* CTC ticks in TSC ticks (CPUID 0x15: TSC = CTC * EBX / EAX). */
static int ctc_ticks(const struct tk_ipt_dump_time *d, uint64_t ctc, uint64_t *ticks)
{
	if (!d->eax || !d->ebx)
		return T_BAD_CONFIG;
	*ticks = ctc * d->ebx / d->eax;
	return T_OK;
}

/* The full time: what MTCs and CYCs lost before it no longer counts. */
static void clock_tsc(struct tk_ipt_dump_clock *t, uint64_t tsc)
{
	t->have_tsc = 1;
	t->have_tma = t->have_mtc = 0;
	t->tsc = t->base = tsc;
	t->ctc = 0;
	t->fc = 0;
	t->lost_cyc = 0;
}

static int clock_tma(struct tk_ipt_dump_time *d, uint16_t ctc, uint16_t fc)
{
	struct tk_ipt_dump_clock *t = &d->t;
	uint32_t hi = d->mtc_freq + MTC_BITS;

	if (!t->have_tsc || t->have_tma)
		return T_BAD_CONTEXT;   /* one TMA after each TSC */
	if (t->have_mtc)
		return T_INTERNAL;
	t->have_tma = 1;
	t->base -= fc;
	t->fc += fc;
	/* at a low enough MTC frequency the TMA carries all the bits an MTC would */
	if (hi <= TMA_CTC_BITS)
		t->have_mtc = 1;
	t->ctc = t->ctc_cyc = ctc & ((1u << hi) - 1);
	return T_OK;
}

static int clock_mtc(struct tk_ipt_dump_time *d, uint8_t payload)
{
	struct tk_ipt_dump_clock *t = &d->t;
	uint32_t last = t->ctc, ctc = (uint32_t)payload << d->mtc_freq, delta;
	int had_mtc = t->have_mtc;
	uint64_t ticks;

	if (t->have_tsc && !t->have_tma)
		return T_OK;   /* between a TSC and its TMA: the CTC would seem to wrap */
	if (t->fc || t->lost_cyc || !had_mtc)
		t->ctc_cyc = ctc;   /* where the cycles counted from now begin */
	t->have_mtc = 1;
	t->fc = 0;
	t->ctc = ctc;
	t->lost_cyc = 0;
	if (!had_mtc) {
		/* the first MTC: without a TMA, where in its period did tracing begin? */
		if (!t->have_tma)
			return T_OK;
		if (last & ~TMA_CTC_MASK)
			return T_INTERNAL;
		/* the TMA gave the low CTC bits; the high ones are this MTC's, one period
		   back if the low ones wrapped in between */
		uint32_t lo = ctc & TMA_CTC_MASK, hi = ctc & ~TMA_CTC_MASK;
		if (lo < last) {
			hi -= 1u << TMA_CTC_BITS;
			hi &= 0xffu << d->mtc_freq;
		}
		last |= hi;
	}
	int r = ctc_delta(d, ctc, last, &delta);
	if (r == T_OK)
		r = ctc_ticks(d, delta, &ticks);
	if (r != T_OK)
		return r;
	t->base += ticks;
	t->tsc = t->base;
	return T_OK;
}

static int clock_cyc(struct tk_ipt_dump_time *d, uint64_t cyc, uint64_t fcr)
{
	struct tk_ipt_dump_clock *t = &d->t;

	if (!fcr) {
		t->lost_cyc++;
		return T_OK;
	}
	if (!t->fc && t->ctc != t->ctc_cyc) {
		/* the first CYC since an MTC counts cycles from before it: those of the
		   earlier MTC periods (at FCR) are time the MTCs already gave */
		uint32_t delta;
		uint64_t ticks;
		int r = ctc_delta(d, t->ctc, t->ctc_cyc, &delta);
		if (r == T_OK)
			r = ctc_ticks(d, delta, &ticks);
		if (r != T_OK)
			return r;
		uint64_t old = (ticks << FCR_SHIFT) / fcr;
		cyc = cyc < old ? 0 : cyc - old;   /* rather too slow than too fast */
	}
	t->fc += (cyc * fcr) >> FCR_SHIFT;
	t->tsc = t->base + t->fc;
	return T_OK;
}

/* ---- the calibration (libipt's pt_time_cal) ---------------------------------------------- */

static int have_fcr(const struct tk_ipt_dump_cal *c)
{
	return c->min_fcr <= c->max_fcr;
}

static void set_fcr(struct tk_ipt_dump_cal *c, uint64_t fcr)
{
	c->fcr = fcr;
	if (fcr < c->min_fcr)
		c->min_fcr = fcr;
	if (fcr > c->max_fcr)
		c->max_fcr = fcr;
}

/* A TSC: in PSB+ the cycles since the last one calibrate (unless MTCs do); outside it, a
 * TSC may follow lost time and only starts the next count. */
static int cal_tsc(struct tk_ipt_dump_time *d, uint64_t tsc)
{
	struct tk_ipt_dump_cal *c = &d->cal;
	uint64_t last = c->tsc, cyc = c->cyc_tsc;

	c->tsc = tsc;
	c->cyc_tsc = 0;
	if (!d->in_header || !last || !cyc || c->have_mtc)
		return T_OK;
	if (tsc < last) {
		tsc += 1ull << TSC_BITS;
		if (tsc < last)
			return T_BAD_PACKET;
	}
	uint64_t delta = tsc - last;
	if (delta & ~(~0ull >> FCR_SHIFT))
		return T_INTERNAL;
	set_fcr(c, (delta << FCR_SHIFT) / cyc);
	return T_OK;
}

/* A CBR: the nominal ratio over it, when known; outside PSB+ it is a frequency change
 * that ends what was learnt. */
static int cal_cbr(struct tk_ipt_dump_time *d, uint8_t ratio)
{
	if (!d->in_header)
		cal_reset(&d->cal);
	if (!d->nom_freq)
		return T_OK;
	if (!ratio)
		return T_BAD_PACKET;
	set_fcr(&d->cal, (d->nom_freq << FCR_SHIFT) / ratio);
	return T_OK;
}

static int cal_mtc(struct tk_ipt_dump_time *d, uint8_t payload)
{
	struct tk_ipt_dump_cal *c = &d->cal;
	uint32_t last = c->ctc, ctc = (uint32_t)payload << d->mtc_freq, delta;
	uint64_t cyc = c->cyc_mtc, ticks;
	int check_skl168 = c->check_skl168;

	c->check_skl168 = 0;   /* only the first MTC after a PSB */
	if (!c->have_mtc) {
		c->cyc_mtc = 0;
		c->ctc = ctc;
		c->have_mtc = 1;
		return T_OK;
	}
	if (!cyc)
		return T_OK;   /* no cycles yet: the next MTC calibrates over both periods */
	c->cyc_mtc = 0;
	c->ctc = ctc;
	int r = ctc_delta(d, ctc, last, &delta);
	if (r == T_OK)
		r = ctc_ticks(d, delta, &ticks);
	if (r != T_OK)
		return r;
	if (ticks & ~(~0ull >> FCR_SHIFT))
		return T_INTERNAL;
	uint64_t fcr = (ticks << FCR_SHIFT) / cyc;
	/* SKL168: a CYC right before a PSB may be lost. After a PSB, skip an MTC period
	   that lost MTCs, or (at high MTC rates, knowing an FCR) whose cycles look short
	   by a wrapping CYC's 4096 */
	if (check_skl168) {
		if ((1u << d->mtc_freq) < delta)
			return T_OK;
		if (d->mtc_freq < 10 && have_fcr(c) && ((c->fcr * (cyc + 0xf00)) >> FCR_SHIFT) < ticks)
			return T_OK;
	}
	set_fcr(c, fcr);
	return T_OK;
}

/* ---- the columns ---------------------------------------------------------------------- */

/* The tracking column after a timing packet at AT: "tsc" (SKIP_TIME: none) or "fcr"
 * (SKIP_CAL: none), as D shows them. */
static void show(struct tk_ipt_dump_time *d, struct tk_buf *out, uint64_t at, int skip_time,
		 int skip_cal, struct tk_ipt_dump_col *col)
{
	if (d->show == TK_IPT_SHOW_FCR && !skip_cal) {
		col->id = "fcr";
		if (!have_fcr(&d->cal)) {
			snprintf(col->text, sizeof col->text, "<unavailable>");
			remark(out, at, "error printing time", T_NO_TIME);
			return;
		}
		double fcr = (double)d->cal.fcr / (double)(1u << FCR_SHIFT);
		if (d->delta) {
			double old = (double)d->shown_fcr / (double)(1u << FCR_SHIFT);
			snprintf(col->text, sizeof col->text, "%+.3f", fcr - old);
			d->shown_fcr = d->cal.fcr;
		} else {
			snprintf(col->text, sizeof col->text, "%.3f", fcr);
		}
	} else if (d->show == TK_IPT_SHOW_TSC && !skip_time) {
		col->id = "tsc";
		uint64_t tsc = d->t.tsc;
		if (!d->t.have_tsc && !d->no_wall_clock) {
			remark(out, at, "error printing time", T_NO_TIME);
			snprintf(col->text, sizeof col->text, "<unavailable>");
			return;
		}
		if (d->delta) {
			uint64_t old = d->shown_tsc;
			snprintf(col->text, sizeof col->text, "%c%llx", old <= tsc ? '+' : '-',
				 (unsigned long long)(old <= tsc ? tsc - old : old - tsc));
			d->shown_tsc = tsc;
		} else {
			snprintf(col->text, sizeof col->text, "%016llx", (unsigned long long)tsc);
		}
	}
}

static int is_timing(enum tk_ipt_pkt_kind k)
{
	return k == TK_IPT_PKT_TSC || k == TK_IPT_PKT_CBR || k == TK_IPT_PKT_TMA ||
	       k == TK_IPT_PKT_MTC || k == TK_IPT_PKT_CYC;
}

int tk_ipt_dump_time_packet(struct tk_ipt_dump_time *d, const struct tk_ipt_packet *k,
			    struct tk_buf *out, struct tk_ipt_dump_col *col)
{
	int track = d->show != TK_IPT_SHOW_NONE, cal = track && !d->no_tcal, r;
	uint64_t at = k->offset;

	col->id = NULL;
	switch (k->kind) {
	case TK_IPT_PKT_PSB:
		if (track && d->skl168)
			d->cal.check_skl168 = 1;
		d->in_header = 1;
		break;
	case TK_IPT_PKT_PSBEND:
		d->in_header = 0;
		break;
	case TK_IPT_PKT_OVF:
		if (!track)
			break;
		if (d->keep_tcal_on_ovf) {
			/* keep the FCR; what was being counted towards the next one is lost */
			struct tk_ipt_dump_cal *c = &d->cal;
			c->tsc = c->cyc_tsc = c->cyc_mtc = 0;
			c->ctc = 0;
			c->have_mtc = 0;
		} else {
			cal_reset(&d->cal);
		}
		break;
	case TK_IPT_PKT_TSC:
		if (!track)
			break;
		if (cal && (r = cal_tsc(d, k->tsc.tsc)) != T_OK)
			remark(out, at, "error calibrating time", r);
		clock_tsc(&d->t, k->tsc.tsc);
		show(d, out, at, 0, 0, col);
		break;
	case TK_IPT_PKT_CBR:
		if (!track)
			break;
		if (cal && (r = cal_cbr(d, k->cbr.ratio)) != T_OK)
			remark(out, at, "error calibrating time", r);
		if (!k->cbr.ratio)   /* (the clock keeps no CBR: only this check of it) */
			remark(out, at, "error updating time", T_BAD_PACKET);
		show(d, out, at, 1, 0, col);   /* the time did not move */
		break;
	case TK_IPT_PKT_TMA:
		if (!track)
			break;
		if ((r = clock_tma(d, k->tma.ctc, k->tma.fc)) != T_OK)
			remark(out, at, "error updating time", r);
		show(d, out, at, 0, 1, col);   /* nothing to calibrate with */
		break;
	case TK_IPT_PKT_MTC:
		if (!track)
			break;
		if (cal && (r = cal_mtc(d, k->mtc.ctc)) != T_OK)
			remark(out, at, "error calibrating time", r);
		if ((r = clock_mtc(d, k->mtc.ctc)) != T_OK)
			remark(out, at, "error updating time", r);
		show(d, out, at, 0, 0, col);
		break;
	case TK_IPT_PKT_CYC: {
		if (!track || d->no_cyc)
			break;
		uint64_t fcr = 0;
		if (cal) {
			if (have_fcr(&d->cal))
				fcr = d->cal.fcr;
			else
				remark(out, at, "calibration error", T_NO_TIME);
			d->cal.cyc_mtc += k->cyc.value;
			d->cal.cyc_tsc += k->cyc.value;
		}
		if ((r = clock_cyc(d, k->cyc.value, fcr)) != T_OK)
			remark(out, at, "error updating time", r);
		else if (!fcr)
			remark(out, at, "error updating time: no calibration", T_OK);
		show(d, out, at, 0, 1, col);
		break;
	}
	default:
		break;
	}
	return (k->kind == TK_IPT_PKT_PAD && d->no_pad) || (is_timing(k->kind) && d->no_timing) ||
	       (k->kind == TK_IPT_PKT_CYC && d->no_cyc);
}
