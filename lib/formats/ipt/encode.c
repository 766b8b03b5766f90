/* Intel PT packet encoder: the inverse of the packet decoder for the packets a branch
 * trace needs (SDM vol. 3C, "Intel Processor Trace", packet definitions), and the IP
 * compression a processor chooses against its last IP. */
#include "formats/ipt/internal.h"

/* Payload bytes of each IP compression (the opcode's top 3 bits); 0xff: reserved. */
static const uint8_t ipc_bytes[8] = { 0, 2, 4, 6, 6, 0xff, 8, 0xff };

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int tk_ipt_encode(struct tk_buf *out, const struct tk_ipt_packet *pkt)
{
	uint8_t b[TK_IPT_PSB_SIZE];
	unsigned n = 0;

	switch (pkt->kind) {
	case TK_IPT_PKT_PAD:
		b[n++] = 0x00;
		break;
	case TK_IPT_PKT_PSB:
		for (; n < TK_IPT_PSB_SIZE; n += 2)
			b[n] = 0x02, b[n + 1] = 0x82;
		break;
	case TK_IPT_PKT_PSBEND:
		b[n++] = 0x02, b[n++] = 0x23;
		break;
	case TK_IPT_PKT_OVF:
		b[n++] = 0x02, b[n++] = 0xf3;
		break;
	case TK_IPT_PKT_TNT8:
		/* bits above a stop bit, shifted over the header's 0 */
		if (!pkt->tnt.count || pkt->tnt.count > 6 || pkt->tnt.bits >> pkt->tnt.count)
			return -TK_E_INVAL;
		b[n++] = (uint8_t)((1u << pkt->tnt.count | pkt->tnt.bits) << 1);
		break;
	case TK_IPT_PKT_TNT64:
		if (!pkt->tnt.count || pkt->tnt.count > 47 || pkt->tnt.bits >> pkt->tnt.count)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0xa3;
		put_le(b + n, 1ull << pkt->tnt.count | pkt->tnt.bits, 6);
		n += 6;
		break;
	case TK_IPT_PKT_TIP:
	case TK_IPT_PKT_TIP_PGE:
	case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP: {
		static const uint8_t op[] = { [TK_IPT_PKT_TIP] = 0x0d, [TK_IPT_PKT_TIP_PGE] = 0x11,
					      [TK_IPT_PKT_TIP_PGD] = 0x01, [TK_IPT_PKT_FUP] = 0x1d };
		unsigned m = pkt->ip.ipc < 8 ? ipc_bytes[pkt->ip.ipc] : 0xff;

		if (m == 0xff || (m < 8 && pkt->ip.ip >> (8 * m)))
			return -TK_E_INVAL;
		b[n++] = (uint8_t)(pkt->ip.ipc << 5 | op[pkt->kind]);
		put_le(b + n, pkt->ip.ip, m);
		n += m;
		break;
	}
	case TK_IPT_PKT_MODE_EXEC:
		if ((pkt->exec.csl | pkt->exec.csd | pkt->exec.iflag) > 1)
			return -TK_E_INVAL;
		b[n++] = 0x99;
		b[n++] = (uint8_t)(pkt->exec.csl | pkt->exec.csd << 1 | pkt->exec.iflag << 2);
		break;
	case TK_IPT_PKT_TSC:
		if (pkt->tsc.tsc >> 56)
			return -TK_E_INVAL;
		b[n++] = 0x19;
		put_le(b + n, pkt->tsc.tsc, 7);
		n += 7;
		break;
	case TK_IPT_PKT_MODE_TSX:
		if ((pkt->tsx.intx | pkt->tsx.abrt) > 1)
			return -TK_E_INVAL;
		b[n++] = 0x99;
		b[n++] = (uint8_t)(0x20 | pkt->tsx.intx | pkt->tsx.abrt << 1);
		break;
	case TK_IPT_PKT_PIP:
		if ((pkt->pip.cr3 & 0x1f) || pkt->pip.cr3 >> 52 || pkt->pip.nr > 1)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0x43;
		put_le(b + n, pkt->pip.cr3 >> 5 << 1 | pkt->pip.nr, 6);
		n += 6;
		break;
	case TK_IPT_PKT_VMCS:
		if ((pkt->vmcs.base & 0xfff) || pkt->vmcs.base >> 52)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0xc8;
		put_le(b + n, pkt->vmcs.base >> 12, 5);
		n += 5;
		break;
	case TK_IPT_PKT_CBR:
		b[n++] = 0x02, b[n++] = 0x03, b[n++] = pkt->cbr.ratio, b[n++] = 0;
		break;
	case TK_IPT_PKT_STOP:
		b[n++] = 0x02, b[n++] = 0x83;
		break;
	case TK_IPT_PKT_TMA:
		if (pkt->tma.fc >> 9)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0x73;
		put_le(b + n, pkt->tma.ctc, 2);
		b[n + 2] = 0;
		put_le(b + n + 3, pkt->tma.fc, 2);
		n += 5;
		break;
	case TK_IPT_PKT_MTC:
		b[n++] = 0x59, b[n++] = pkt->mtc.ctc;
		break;
	case TK_IPT_PKT_CYC: {
		/* 5 bits in the header, then 7 per byte while the low bit says more follow */
		uint64_t v = pkt->cyc.value >> 5;

		if (pkt->cyc.value >> 61)
			return -TK_E_INVAL;
		b[n++] = (uint8_t)((pkt->cyc.value & 0x1f) << 3 | (v ? 4 : 0) | 3);
		for (; v; v >>= 7)
			b[n++] = (uint8_t)((v & 0x7f) << 1 | (v >> 7 ? 1 : 0));
		break;
	}
	case TK_IPT_PKT_MNT:
		b[n++] = 0x02, b[n++] = 0xc3, b[n++] = 0x88;
		put_le(b + n, pkt->mnt.payload, 8);
		n += 8;
		break;
	case TK_IPT_PKT_PTW:
		if (pkt->ptw.plc > 1 || pkt->ptw.ip > 1 ||
		    (!pkt->ptw.plc && pkt->ptw.payload >> 32))
			return -TK_E_INVAL;
		b[n++] = 0x02;
		b[n++] = (uint8_t)(pkt->ptw.ip << 7 | pkt->ptw.plc << 5 | 0x12);
		put_le(b + n, pkt->ptw.payload, pkt->ptw.plc ? 8 : 4);
		n += pkt->ptw.plc ? 8 : 4;
		break;
	case TK_IPT_PKT_EXSTOP:
		b[n++] = 0x02, b[n++] = pkt->exstop.ip ? 0xe2 : 0x62;
		break;
	case TK_IPT_PKT_MWAIT:
		b[n++] = 0x02, b[n++] = 0xc2;
		put_le(b + n, pkt->mwait.hints, 4);
		put_le(b + n + 4, pkt->mwait.ext, 4);
		n += 8;
		break;
	case TK_IPT_PKT_PWRE:
		if (pkt->pwre.state > 15 || pkt->pwre.sub_state > 15 || pkt->pwre.hw > 1)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0x22;
		b[n++] = (uint8_t)(pkt->pwre.hw << 3);
		b[n++] = (uint8_t)(pkt->pwre.state << 4 | pkt->pwre.sub_state);
		break;
	case TK_IPT_PKT_PWRX:
		if (pkt->pwrx.last > 15 || pkt->pwrx.deepest > 15 ||
		    (pkt->pwrx.interrupt | pkt->pwrx.store | pkt->pwrx.autonomous) > 1)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0xa2;
		b[n++] = (uint8_t)(pkt->pwrx.last << 4 | pkt->pwrx.deepest);
		b[n++] = (uint8_t)(pkt->pwrx.interrupt | pkt->pwrx.store << 2 |
				   pkt->pwrx.autonomous << 3);
		b[n++] = 0, b[n++] = 0, b[n++] = 0;
		break;
	case TK_IPT_PKT_CFE:
		if (pkt->cfe.type > 0x1f || pkt->cfe.ip > 1)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0x13;
		b[n++] = (uint8_t)(pkt->cfe.ip << 7 | pkt->cfe.type);
		b[n++] = pkt->cfe.vector;
		break;
	case TK_IPT_PKT_EVD:
		if (pkt->evd.type > 0x3f)
			return -TK_E_INVAL;
		b[n++] = 0x02, b[n++] = 0x53, b[n++] = pkt->evd.type;
		put_le(b + n, pkt->evd.payload, 8);
		n += 8;
		break;
	case TK_IPT_PKT_TRIG:
		if ((pkt->trig.ip | pkt->trig.icntv | pkt->trig.mult) > 1)
			return -TK_E_INVAL;
		b[n++] = 0xd9;
		b[n++] = (uint8_t)(pkt->trig.ip << 7 | pkt->trig.icntv << 6 | pkt->trig.mult << 5);
		b[n++] = pkt->trig.trbv;
		if (pkt->trig.icntv) {
			put_le(b + n, pkt->trig.icnt, 2);
			n += 2;
		}
		break;
	default:
		return -TK_E_INVAL;
	}
	tk_buf_put(out, b, n);
	return out->err ? out->err : (int)n;
}

void tk_ipt_ip_packet(struct tk_ipt_last_ip *l, enum tk_ipt_pkt_kind kind, uint64_t ip,
		      struct tk_ipt_packet *pkt)
{
	uint64_t last = l->ip;
	enum tk_ipt_ipc ipc;

	/* Without a last IP (after a PSB or an overflow) the processor sends the IP whole. */
	if (l->have_ip && (ip >> 16) == (last >> 16))
		ipc = TK_IPT_IPC_UPDATE_16;
	else if (l->have_ip && (ip >> 32) == (last >> 32))
		ipc = TK_IPT_IPC_UPDATE_32;
	else if ((uint64_t)((int64_t)(ip << 16) >> 16) == ip)
		ipc = TK_IPT_IPC_SEXT_48;
	else if (l->have_ip && (ip >> 48) == (last >> 48))
		ipc = TK_IPT_IPC_UPDATE_48;
	else
		ipc = TK_IPT_IPC_FULL;
	pkt->kind = kind;
	pkt->ip.ipc = (uint8_t)ipc;
	pkt->ip.ip = ipc == TK_IPT_IPC_FULL ? ip : ip & (~0ull >> (64 - 8 * ipc_bytes[ipc]));
	l->ip = ip;
	l->have_ip = 1;
	l->suppressed = 0;
}
