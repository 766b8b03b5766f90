/* Test-stream generator: walks real code in a memory image the way a CPU would and emits,
 * with libipt's encoder, the Intel PT packets the hardware would write: TNT-8/TNT-64,
 * TIP with every legal IP compression, return compression (64-entry stack, reset at PSB
 * and overflow; see ptgen_cret), FUP + TIP (interrupts), FUP + TIP.PGD and
 * TIP.PGD/TIP.PGE around syscalls and far transfers, PSB+ every few KiB, MODE.Exec, OVF
 * with lost packets.
 * Header-only: used by the oracle tests and the benchmark generator. */
#ifndef TK_TESTS_PTGEN_H
#define TK_TESTS_PTGEN_H

#include <intel-pt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa/isa.h"
#include "tracekit/image.h"

struct ptgen_opts {
	uint64_t seed;
	uint64_t max_bytes;          /* stop after about this much trace */
	uint64_t psb_every;          /* bytes between PSBs (default 4096) */
	int psb_anywhere;            /* a due PSB may come before any instruction, as the
					hardware's does, not only after a branch: chunk seams
					then fall inside blocks */
	unsigned p_taken;            /* percent of conditional branches taken (default 50) */
	unsigned p_async;            /* per-mille of branches followed by FUP+TIP (default 2) */
	unsigned p_async_disable;    /* per-mille FUP+TIP.PGD ... TIP.PGE (default 1) */
	unsigned p_ovf;              /* per-mille of branches starting an overflow (0 default) */
	unsigned max_depth;          /* call depth beyond which calls become returns (30) */
	unsigned timing;             /* PTGEN_MTC | PTGEN_CYC: timing packets between TNTs */
	unsigned mtc_freq;           /* CTC bit of MTC's payload (IA32_RTIT_CTL.MTCFreq) */
	int no_retcomp;              /* every return a TIP (perf's noretcomp, a branch trace); the
					compression stack is kept as if compressing, and counted */
	int hw_retcomp;              /* compress every return the processor would, also where
					libipt's reading of the stack parts from it (ptgen_cret) */
	const uint64_t *entries;     /* function starts: restart and indirect targets */
	size_t nentries;
	void (*on_insn)(void *ctx, uint64_t ip);   /* each instruction run while tracing */
	void *ctx;
};

enum { PTGEN_MTC = 1, PTGEN_CYC = 2 };

struct ptgen_rstack {
	uint64_t ret[64];            /* ring: top = next slot */
	unsigned top, depth;
};

struct ptgen {
	struct ptgen_opts o;
	const struct tk_image *img;
	struct tk_isa isa;
	struct pt_encoder *enc;
	struct pt_config cfg;
	uint8_t *buf;
	size_t cap;
	uint64_t rng;
	uint64_t last_ip;            /* encoder's last IP */
	uint64_t tnt;                /* pending TNT bits, oldest highest */
	unsigned ntnt, tnt_max;
	uint64_t stack[4096];        /* the program's real call stack */
	unsigned depth;
	struct ptgen_rstack hw, lib; /* the processor's compression stack, libipt's reading */
	uint64_t next_psb;
	uint64_t psbs;               /* PSBs written */
	uint64_t psbs_inside;        /* PSBs written after an instruction that is no branch */
	unsigned psb_wait;           /* psb_anywhere: instructions until the due PSB */
	unsigned psb_tries;          /* waits for it begun (each cut short by a branch) */
	uint64_t insns;              /* instructions executed while tracing */
	uint64_t compressible;       /* returns to the compression stack's top while tracing */
	uint64_t parted;             /* ... of them, where libipt's reading has another top */
	uint64_t tsc;
	uint32_t ctc;                /* the crystal clock (with timing) */
	int ovf_lost;                /* instructions left to run without packets */
	uint64_t silent;             /* instructions since the last packet */
};

static __attribute__((unused)) uint64_t ptgen_rand(struct ptgen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

static __attribute__((unused)) size_t ptgen_off(struct ptgen *g)
{
	uint64_t off = 0;

	pt_enc_get_offset(g->enc, &off);
	return (size_t)off;
}

static __attribute__((unused)) int ptgen_put(struct ptgen *g, struct pt_packet *p)
{
	g->silent = 0;
	if (ptgen_off(g) + 64 > g->cap)
		return -1;
	return pt_enc_next(g->enc, p) < 0 ? -1 : 0;
}

static __attribute__((unused)) int ptgen_flush_tnt(struct ptgen *g)
{
	struct pt_packet p;

	if (!g->ntnt)
		return 0;
	memset(&p, 0, sizeof(p));
	p.type = g->ntnt <= 6 && g->tnt_max == 6 ? ppt_tnt_8 : ppt_tnt_64;
	p.payload.tnt.bit_size = (uint8_t)g->ntnt;
	p.payload.tnt.payload = g->tnt;
	g->ntnt = 0;
	g->tnt = 0;
	g->tnt_max = ptgen_rand(g) % 3 ? 6 : 47;
	return ptgen_put(g, &p);
}

/* Timing packets as the hardware sends them while code runs: MTC each CTC period (some
 * periods without a packet), CYC with the cycles since the last one. */
static __attribute__((unused)) int ptgen_timing(struct ptgen *g)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	if ((g->o.timing & PTGEN_MTC) && (!(g->o.timing & PTGEN_CYC) || ptgen_rand(g) % 2)) {
		g->ctc += (1 + (uint32_t)(ptgen_rand(g) % 3)) << g->o.mtc_freq;
		p.type = ppt_mtc;
		p.payload.mtc.ctc = (uint8_t)(g->ctc >> g->o.mtc_freq);
	} else {
		p.type = ppt_cyc;
		p.payload.cyc.value = 1 + ptgen_rand(g) % 5000;
	}
	if (ptgen_flush_tnt(g) < 0)
		return -1;
	return ptgen_put(g, &p);
}

static __attribute__((unused)) int ptgen_bit(struct ptgen *g, int taken)
{
	if (g->o.timing && ptgen_rand(g) % 100 < 8 && ptgen_timing(g) < 0)
		return -1;
	g->tnt = g->tnt << 1 | (taken ? 1 : 0);
	if (++g->ntnt == g->tnt_max)
		return ptgen_flush_tnt(g);
	return 0;
}

/* An IP packet with a random legal compression against the last IP. */
static __attribute__((unused)) int ptgen_ip(struct ptgen *g, enum pt_packet_type type, uint64_t ip, int suppress)
{
	struct pt_packet p;
	enum pt_ip_compression c[6];
	int n = 0;

	if (ptgen_flush_tnt(g) < 0)
		return -1;
	memset(&p, 0, sizeof(p));
	p.type = type;
	if (suppress) {
		p.payload.ip.ipc = pt_ipc_suppressed;
		return ptgen_put(g, &p);
	}
	c[n++] = pt_ipc_full;
	if ((ip >> 16) == (g->last_ip >> 16))
		c[n++] = pt_ipc_update_16;
	if ((ip >> 32) == (g->last_ip >> 32))
		c[n++] = pt_ipc_update_32;
	if ((ip >> 48) == (g->last_ip >> 48))
		c[n++] = pt_ipc_update_48;
	if ((uint64_t)((int64_t)(ip << 16) >> 16) == ip)
		c[n++] = pt_ipc_sext_48;
	p.payload.ip.ipc = c[ptgen_rand(g) % (unsigned)n];
	switch (p.payload.ip.ipc) {
	case pt_ipc_update_16: p.payload.ip.ip = ip & 0xffff; break;
	case pt_ipc_update_32: p.payload.ip.ip = ip & 0xffffffff; break;
	case pt_ipc_update_48:
	case pt_ipc_sext_48: p.payload.ip.ip = ip & 0xffffffffffffull; break;
	default: p.payload.ip.ip = ip; break;
	}
	g->last_ip = ip;
	return ptgen_put(g, &p);
}

static __attribute__((unused)) int ptgen_simple(struct ptgen *g, enum pt_packet_type type)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = type;
	return ptgen_put(g, &p);
}

static __attribute__((unused)) int ptgen_mode64(struct ptgen *g)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	return ptgen_put(g, &p);
}

static __attribute__((unused)) int ptgen_tsc(struct ptgen *g)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tsc;
	g->tsc += 1000 + ptgen_rand(g) % 1000;
	p.payload.tsc.tsc = g->tsc;
	return ptgen_put(g, &p);
}

/* PSB+ at the current IP (tracing on). The hardware flushes TNT first. */
static __attribute__((unused)) int ptgen_psb(struct ptgen *g, uint64_t ip, int enabled)
{
	if (ptgen_flush_tnt(g) < 0 || ptgen_simple(g, ppt_psb) < 0 || ptgen_tsc(g) < 0)
		return -1;
	g->psbs++;
	if (g->o.timing) {
		/* TMA (CTC and FastCounter at the TSC), then the core:bus ratio */
		struct pt_packet p;

		memset(&p, 0, sizeof(p));
		g->ctc += (uint32_t)(ptgen_rand(g) % 7);
		p.type = ppt_tma;
		p.payload.tma.ctc = (uint16_t)g->ctc;
		p.payload.tma.fc = (uint16_t)(ptgen_rand(g) % 512);
		if (ptgen_put(g, &p) < 0)
			return -1;
		memset(&p, 0, sizeof(p));
		p.type = ppt_cbr;
		p.payload.cbr.ratio = (uint8_t)(16 + ptgen_rand(g) % 24);
		if (ptgen_put(g, &p) < 0)
			return -1;
	}
	if (ptgen_mode64(g) < 0)
		return -1;
	g->last_ip = 0;
	g->hw.depth = g->lib.depth = 0;
	if (enabled && ptgen_ip(g, ppt_fup, ip, 0) < 0)
		return -1;
	if (ptgen_simple(g, ppt_psbend) < 0)
		return -1;
	g->psb_wait = g->psb_tries = 0;
	g->next_psb = ptgen_off(g) + g->o.psb_every - g->o.psb_every / 4 +
		      ptgen_rand(g) % (g->o.psb_every / 2 + 1);
	return 0;
}

static __attribute__((unused)) uint64_t ptgen_entry(struct ptgen *g)
{
	return g->o.entries[ptgen_rand(g) % g->o.nentries];
}

static __attribute__((unused)) int ptgen_init(struct ptgen *g, const struct tk_image *img, const struct ptgen_opts *o)
{
	memset(g, 0, sizeof(*g));
	g->o = *o;
	if (!g->o.psb_every)
		g->o.psb_every = 4096;
	if (!g->o.p_taken)
		g->o.p_taken = 50;
	if (!g->o.max_depth)
		g->o.max_depth = 30;
	g->img = img;
	g->rng = o->seed ? o->seed : 0x9e3779b97f4a7c15ull;
	g->tnt_max = 6;
	tk_isa_init(&g->isa);
	g->cap = (size_t)o->max_bytes + (1 << 16);
	g->buf = malloc(g->cap);
	if (!g->buf)
		return -1;
	pt_config_init(&g->cfg);
	g->cfg.begin = g->buf;
	g->cfg.end = g->buf + g->cap;
	g->enc = pt_alloc_encoder(&g->cfg);
	return g->enc ? 0 : -1;
}

static __attribute__((unused)) void ptgen_fini(struct ptgen *g)
{
	pt_free_encoder(g->enc);
	free(g->buf);
}

/* (Re)start tracing at a random function: TIP.PGE (after MODE.Exec). */
static __attribute__((unused)) int ptgen_enable(struct ptgen *g, uint64_t *ip)
{
	*ip = ptgen_entry(g);
	g->depth = 0;
	if (ptgen_mode64(g) < 0)
		return -1;
	return ptgen_ip(g, ppt_tip_pge, *ip, 0);
}

static __attribute__((unused)) void ptgen_cpush(struct ptgen *g, uint64_t ret)
{
	struct ptgen_rstack *s[2] = { &g->hw, &g->lib };

	for (int i = 0; i < 2; i++) {
		s[i]->ret[s[i]->top] = ret;
		s[i]->top = (s[i]->top + 1) % 64;
		if (s[i]->depth < 64)
			s[i]->depth++;
	}
}

/* Whether the top of S was TO; pops it either way. */
static inline int ptgen_cpop(struct ptgen_rstack *s, uint64_t to)
{
	if (!s->depth)
		return 0;
	s->top = (s->top + 63) % 64;
	s->depth--;
	return s->ret[s->top] == to;
}

/* A traced near return to TO (CAN: it may be compressed, it stays in the traced code):
 * whether it is compressed. The processor pops its stack at every near return and
 * compresses one whose target is the top (SDM 36.2.1.2: the call of matching stack
 * depth); libipt's decoders pop only at compressed returns. Unless hw_retcomp, a return
 * is compressed only where both readings give TO, so libipt decodes the stream right. */
static __attribute__((unused)) int ptgen_cret(struct ptgen *g, uint64_t to, int can)
{
	int lib = can && g->lib.depth && g->lib.ret[(g->lib.top + 63) % 64] == to;

	if (!ptgen_cpop(&g->hw, to) || !can || !(lib || g->o.hw_retcomp))
		return 0;
	g->parted += !lib;
	ptgen_cpop(&g->lib, to);
	return 1;
}

/* Generate the stream; returns its size or -1. */
static __attribute__((unused)) long ptgen_run(struct ptgen *g)
{
	uint64_t ip;
	int quiet = 0;   /* during an overflow: run without packets */

	if (ptgen_psb(g, 0, 0) < 0 || ptgen_enable(g, &ip) < 0)
		return -1;
	while (ptgen_off(g) < g->o.max_bytes) {
		uint8_t code[16];
		struct tk_isa_insn in;
		int n = tk_image_read(g->img, ip, code, sizeof(code));

		/* Wandered off the code (undecodable or unmapped: #UD, #PF), or at a hlt,
		 * which faults in user mode too: tracing stops at the instruction, as at any
		 * exception into the untraced kernel (FUP + TIP.PGD), and restarts elsewhere.
		 * (Walking on past a hlt would spin in the jump around it, abort's, where no
		 * decoder can tell one pass from the next: libipt ran past 100 M
		 * instructions there now and then, with ASLR placing the code.) */
		int fault = n <= 0 || tk_isa_classify(&g->isa, TK_ISA_64, code, (size_t)n, ip, &in) < 0 ||
			    tk_image_read(g->img, ip + in.len - 1, code, 1) <= 0 ||
			    (in.len == 1 && code[0] == 0xf4);

		if (fault) {
			if (quiet) {
				quiet = 0;
				if (ptgen_enable(g, &ip) < 0)
					return -1;
				continue;
			}
			if (ptgen_ip(g, ppt_fup, ip, 0) < 0 || ptgen_ip(g, ppt_tip_pgd, 0, 1) < 0 ||
			    ptgen_enable(g, &ip) < 0)
				return -1;
			continue;
		}
		if (!quiet) {
			g->insns++;
			if (g->o.on_insn)
				g->o.on_insn(g->o.ctx, ip);
		}
		if (++g->silent > 20000 && !quiet) {
			/* a loop of direct jumps: no trace would ever come. Stop tracing here
			 * (asynchronously) and restart elsewhere. */
			if (ptgen_ip(g, ppt_fup, ip, 0) < 0 || ptgen_ip(g, ppt_tip_pgd, 0, 1) < 0 ||
			    ptgen_enable(g, &ip) < 0)
				return -1;
			continue;
		}
		uint64_t next = ip + in.len;

		if (in.cls == TK_ISA_OTHER) {
			ip = next;
			if (g->psb_wait && !quiet && !--g->psb_wait) {
				if (ptgen_psb(g, ip, 1) < 0)
					return -1;
				g->psbs_inside++;
			}
			continue;
		}
		/* after a branch: maybe an overflow, a PSB, an interrupt */
		switch (in.cls) {
		case TK_ISA_JCC: {
			int taken = ptgen_rand(g) % 100 < g->o.p_taken;

			if (!quiet && ptgen_bit(g, taken) < 0)
				return -1;
			ip = taken ? in.target : next;
			break;
		}
		case TK_ISA_JMP:
			ip = in.target;
			break;
		case TK_ISA_CALL:
			if (g->depth < 4096)
				g->stack[g->depth++] = next;
			if (!in.zero_call)
				ptgen_cpush(g, next);
			ip = in.target;
			break;
		case TK_ISA_CALL_IND:
		case TK_ISA_JMP_IND: {
			uint64_t to = ptgen_entry(g);

			if (in.cls == TK_ISA_CALL_IND) {
				if (g->depth < 4096)
					g->stack[g->depth++] = next;
				ptgen_cpush(g, next);
			}
			if (!quiet && ptgen_ip(g, ppt_tip, to, 0) < 0)
				return -1;
			ip = to;
			break;
		}
		case TK_ISA_RET: {
			uint64_t to;

			if (g->depth) {
				to = g->stack[--g->depth];
			} else {
				to = ptgen_entry(g);
			}
			if (ptgen_cret(g, to, 1)) {
				g->compressible += !quiet;
				if (!quiet && (g->o.no_retcomp ? ptgen_ip(g, ppt_tip, to, 0)
							       : ptgen_bit(g, 1)) < 0)
					return -1;
			} else if (!quiet && ptgen_ip(g, ppt_tip, to, 0) < 0) {
				return -1;
			}
			ip = to;
			break;
		}
		case TK_ISA_FAR:
		default:
			/* syscall & co: user-only tracing stops in the kernel and resumes after
			 * the instruction */
			if (!quiet) {
				if (ptgen_ip(g, ppt_tip_pgd, 0, 1) < 0 || ptgen_mode64(g) < 0 ||
				    ptgen_ip(g, ppt_tip_pge, next, 0) < 0)
					return -1;
			}
			ip = next;
			break;
		}
		if (quiet) {
			if (--g->ovf_lost <= 0) {
				/* trace resumes: FUP with the IP where packets start again */
				quiet = 0;
				g->hw.depth = g->lib.depth = 0;
				if (ptgen_ip(g, ppt_fup, ip, 0) < 0)
					return -1;
			}
			continue;
		}
		if (g->o.p_ovf && ptgen_rand(g) % 1000 < g->o.p_ovf) {
			if (ptgen_flush_tnt(g) < 0 || ptgen_simple(g, ppt_ovf) < 0)
				return -1;
			quiet = 1;
			g->last_ip = 0;   /* the packet state is reset after an overflow */
			g->ovf_lost = 1 + (int)(ptgen_rand(g) % 50);
			continue;
		}
		if (ptgen_off(g) >= g->next_psb && g->o.psb_anywhere && g->psb_tries < 8) {
			/* packets are written at branches: the PSB waits a few instructions;
			 * when a branch comes first it waits again from there (in code with a
			 * branch every few instructions, as ASan's, most waits are cut short),
			 * at most 8 times */
			g->psb_wait = 1 + (unsigned)(ptgen_rand(g) % 4);
			g->psb_tries++;
		} else if (ptgen_off(g) >= g->next_psb) {
			if (ptgen_psb(g, ip, 1) < 0)
				return -1;
			continue;
		}
		if (g->o.p_async && ptgen_rand(g) % 1000 < g->o.p_async) {
			/* an interrupt before the instruction at ip: handler elsewhere */
			uint64_t to = ptgen_entry(g);

			if (ptgen_ip(g, ppt_fup, ip, 0) < 0 || ptgen_ip(g, ppt_tip, to, 0) < 0)
				return -1;
			if (g->depth < 4096)
				g->stack[g->depth++] = ip;   /* the handler "returns" there */
			ip = to;
			continue;
		}
		if (g->o.p_async_disable && ptgen_rand(g) % 1000 < g->o.p_async_disable) {
			if (ptgen_ip(g, ppt_fup, ip, 0) < 0 || ptgen_ip(g, ppt_tip_pgd, 0, 1) < 0 ||
			    ptgen_mode64(g) < 0 || ptgen_ip(g, ppt_tip_pge, ip, 0) < 0)
				return -1;
			continue;
		}
	}
	/* Tracing stops where the stream ends (FUP + TIP.PGD), so no decoder walks on past
	 * the last packet: code that needs no trace (a loop of direct jumps) would let it
	 * run for ever. */
	if (ptgen_flush_tnt(g) < 0)
		return -1;
	if (!quiet && (ptgen_ip(g, ppt_fup, ip, 0) < 0 || ptgen_ip(g, ppt_tip_pgd, 0, 1) < 0))
		return -1;
	return (long)ptgen_off(g);
}

#endif
