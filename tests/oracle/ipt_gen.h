/* Random Intel PT streams written by libipt's encoder (pt_enc_next): every packet kind
 * libipt knows and every IP compression. Shared by the oracle test and the bench tool. */
#ifndef TK_TEST_IPT_GEN_H
#define TK_TEST_IPT_GEN_H

#include <intel-pt.h>
#include <stdint.h>
#include <string.h>

static uint64_t gen_rng = 0x9e3779b97f4a7c15ULL;
static inline uint64_t gen_rand(void)
{
	gen_rng ^= gen_rng << 13;
	gen_rng ^= gen_rng >> 7;
	gen_rng ^= gen_rng << 17;
	return gen_rng;
}

static inline uint64_t gen_bits(int n)
{
	return n >= 64 ? gen_rand() : gen_rand() & ((1ULL << n) - 1);
}

/* A random packet. MIX 0: uniform over kinds; 1: a realistic mix (TNT-heavy). */
static inline void gen_packet(struct pt_packet *p, int mix)
{
	static const enum pt_packet_type all[] = {
		ppt_pad, ppt_psb, ppt_psbend, ppt_fup, ppt_tip, ppt_tip_pge, ppt_tip_pgd,
		ppt_tnt_8, ppt_tnt_64, ppt_mode, ppt_pip, ppt_vmcs, ppt_cbr, ppt_tsc,
		ppt_tma, ppt_mtc, ppt_cyc, ppt_stop, ppt_ovf, ppt_mnt, ppt_exstop,
		ppt_mwait, ppt_pwre, ppt_pwrx, ppt_ptw,
	};
	static const enum pt_ip_compression ipcs[] = {
		pt_ipc_suppressed, pt_ipc_update_16, pt_ipc_update_32, pt_ipc_sext_48,
		pt_ipc_update_48, pt_ipc_full,
	};
	memset(p, 0, sizeof *p);
	if (mix == 0) {
		p->type = all[gen_rand() % (sizeof all / sizeof all[0])];
	} else {
		unsigned r = gen_rand() % 100;
		p->type = r < 45 ? ppt_tnt_8 : r < 60 ? ppt_tip : r < 68 ? ppt_tnt_64 :
			  r < 76 ? ppt_cyc : r < 82 ? ppt_mtc : r < 86 ? ppt_fup :
			  r < 89 ? ppt_pad : r < 91 ? ppt_tsc : r < 93 ? ppt_tip_pge :
			  r < 95 ? ppt_tip_pgd : r < 96 ? ppt_mode : r < 97 ? ppt_pip :
			  r < 98 ? ppt_cbr : ppt_ptw;
	}
	switch (p->type) {
	case ppt_tnt_8:
		p->payload.tnt.bit_size = (uint8_t)(1 + gen_rand() % 6);
		p->payload.tnt.payload = gen_bits(p->payload.tnt.bit_size);
		break;
	case ppt_tnt_64:
		p->payload.tnt.bit_size = (uint8_t)(1 + gen_rand() % 47);
		p->payload.tnt.payload = gen_bits(p->payload.tnt.bit_size);
		break;
	case ppt_fup: case ppt_tip: case ppt_tip_pge: case ppt_tip_pgd: {
		enum pt_ip_compression c = ipcs[gen_rand() % 6];
		int bits = c == pt_ipc_update_16 ? 16 : c == pt_ipc_update_32 ? 32 :
			   c == pt_ipc_full ? 64 : c == pt_ipc_suppressed ? 0 : 48;
		p->payload.ip.ipc = c;
		p->payload.ip.ip = bits ? gen_bits(bits) : 0;
		break;
	}
	case ppt_mode:
		if (gen_rand() & 1) {
			p->payload.mode.leaf = pt_mol_exec;
			p->payload.mode.bits.exec.csl = gen_rand() & 1;
			p->payload.mode.bits.exec.csd = gen_rand() & 1;
		} else {
			p->payload.mode.leaf = pt_mol_tsx;
			p->payload.mode.bits.tsx.intx = gen_rand() & 1;
			p->payload.mode.bits.tsx.abrt = gen_rand() & 1;
		}
		break;
	case ppt_pip:
		p->payload.pip.cr3 = gen_bits(52) & ~0x1fULL;
		p->payload.pip.nr = gen_rand() & 1;
		break;
	case ppt_vmcs:
		p->payload.vmcs.base = gen_bits(52) & ~0xfffULL;
		break;
	case ppt_cbr: p->payload.cbr.ratio = (uint8_t)gen_rand(); break;
	case ppt_tsc: p->payload.tsc.tsc = gen_bits(56); break;
	case ppt_tma:
		p->payload.tma.ctc = (uint16_t)gen_rand();
		p->payload.tma.fc = (uint16_t)gen_bits(9);
		break;
	case ppt_mtc: p->payload.mtc.ctc = (uint8_t)gen_rand(); break;
	case ppt_cyc: p->payload.cyc.value = gen_bits((int)(1 + gen_rand() % 40)); break;
	case ppt_mnt: p->payload.mnt.payload = gen_rand(); break;
	case ppt_exstop: p->payload.exstop.ip = gen_rand() & 1; break;
	case ppt_mwait:
		p->payload.mwait.hints = (uint32_t)gen_rand();
		p->payload.mwait.ext = (uint32_t)gen_rand();
		break;
	case ppt_pwre:
		p->payload.pwre.state = (uint8_t)gen_bits(4);
		p->payload.pwre.sub_state = (uint8_t)gen_bits(4);
		p->payload.pwre.hw = gen_rand() & 1;
		break;
	case ppt_pwrx:
		p->payload.pwrx.last = (uint8_t)gen_bits(4);
		p->payload.pwrx.deepest = (uint8_t)gen_bits(4);
		p->payload.pwrx.interrupt = gen_rand() & 1;
		p->payload.pwrx.store = gen_rand() & 1;
		p->payload.pwrx.autonomous = gen_rand() & 1;
		break;
	case ppt_ptw:
		p->payload.ptw.plc = gen_rand() & 1;
		p->payload.ptw.payload = gen_bits(p->payload.ptw.plc ? 64 : 32);
		p->payload.ptw.ip = gen_rand() & 1;
		break;
	default:
		break;
	}
}

/* Fill BUF[0, CAP) with a PSB+ header and random packets; a PSB every ~PSB_EVERY bytes.
 * Returns the bytes written. */
static inline size_t gen_stream(uint8_t *buf, size_t cap, int mix, size_t psb_every)
{
	struct pt_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.size = sizeof cfg;
	cfg.begin = buf;
	cfg.end = buf + cap;
	struct pt_encoder *enc = pt_alloc_encoder(&cfg);
	uint64_t off = 0, last_psb = 0;
	struct pt_packet p;

	memset(&p, 0, sizeof p);
	p.type = ppt_psb;
	pt_enc_next(enc, &p);
	p.type = ppt_psbend;
	pt_enc_next(enc, &p);
	for (;;) {
		pt_enc_get_offset(enc, &off);
		if (psb_every && off - last_psb >= psb_every) {
			memset(&p, 0, sizeof p);
			p.type = ppt_psb;
			last_psb = off;
		} else {
			gen_packet(&p, mix);
		}
		if (pt_enc_next(enc, &p) < 0)
			break;
	}
	pt_enc_get_offset(enc, &off);
	pt_free_encoder(enc);
	return (size_t)off;
}

#endif
