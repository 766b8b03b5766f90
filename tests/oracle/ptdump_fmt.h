/* A ptdump-style packet printer on libipt's struct pt_packet: fixed-width fields filled
 * with snprintf, then printed, as ptdump does (our own code, written from ptdump's
 * documented output layout). It is the oracle for tracekit's dump layout and the anchor
 * of the dump benchmark. Covers the packets libipt 2.0 knows. */
#ifndef TK_TEST_PTDUMP_FMT_H
#define TK_TEST_PTDUMP_FMT_H

#include <inttypes.h>
#include <intel-pt.h>
#include <stdio.h>
#include <string.h>

struct pd_last_ip {
	uint64_t ip;
	int have, supp;
};

struct pd_line {
	char offset[17], opcode[10], payload[48], tid[5], tpl[17];
};

#define PD_SET(f, ...) snprintf(f, sizeof(f), __VA_ARGS__)

static inline void pd_ip(struct pd_line *l, const struct pt_packet_ip *p, struct pd_last_ip *last)
{
	switch (p->ipc) {
	case pt_ipc_suppressed: PD_SET(l->payload, "%x: ????????????????", 0); break;
	case pt_ipc_update_16: PD_SET(l->payload, "%x: ????????????%04" PRIx64, 1, p->ip); break;
	case pt_ipc_update_32: PD_SET(l->payload, "%x: ????????%08" PRIx64, 2, p->ip); break;
	case pt_ipc_update_48: PD_SET(l->payload, "%x: ????%012" PRIx64, 4, p->ip); break;
	case pt_ipc_sext_48:
		PD_SET(l->payload, "%x: %016" PRIx64, 3,
		       (uint64_t)(p->ip & (1ULL << 47) ? p->ip | ~((1ULL << 48) - 1) : p->ip));
		break;
	default: PD_SET(l->payload, "%x: %016" PRIx64, p->ipc, p->ip); break;
	}
	if (!last)
		return;
	PD_SET(l->tid, "ip");
	switch (p->ipc) {
	case pt_ipc_suppressed: last->supp = 1; break;
	case pt_ipc_update_16: last->ip = (last->ip & ~0xffffULL) | p->ip; last->have = 1; last->supp = 0; break;
	case pt_ipc_update_32: last->ip = (last->ip & ~0xffffffffULL) | p->ip; last->have = 1; last->supp = 0; break;
	case pt_ipc_update_48: last->ip = (last->ip & ~0xffffffffffffULL) | p->ip; last->have = 1; last->supp = 0; break;
	case pt_ipc_sext_48:
		last->ip = p->ip & (1ULL << 47) ? p->ip | ~((1ULL << 48) - 1) : p->ip;
		last->have = 1; last->supp = 0; break;
	default: last->ip = p->ip; last->have = 1; last->supp = 0; break;
	}
	if (!last->have)
		PD_SET(l->tpl, "<unavailable>");
	else if (last->supp)
		PD_SET(l->tpl, "<suppressed>");
	else
		PD_SET(l->tpl, "%016" PRIx64, last->ip);
}

/* Print one packet line to F. LAST: NULL without --lastip. */
static inline void pd_print(FILE *f, uint64_t offset, const struct pt_packet *p, int show_offset,
			    struct pd_last_ip *last)
{
	struct pd_line l;
	memset(&l, 0, sizeof l);
	PD_SET(l.offset, "%016" PRIx64, offset);
	switch (p->type) {
	case ppt_psb: PD_SET(l.opcode, "psb"); break;
	case ppt_psbend: PD_SET(l.opcode, "psbend"); break;
	case ppt_pad: PD_SET(l.opcode, "pad"); break;
	case ppt_ovf: PD_SET(l.opcode, "ovf"); break;
	case ppt_stop: PD_SET(l.opcode, "stop"); break;
	case ppt_fup: PD_SET(l.opcode, "fup"); pd_ip(&l, &p->payload.ip, last); break;
	case ppt_tip: PD_SET(l.opcode, "tip"); pd_ip(&l, &p->payload.ip, last); break;
	case ppt_tip_pge: PD_SET(l.opcode, "tip.pge"); pd_ip(&l, &p->payload.ip, last); break;
	case ppt_tip_pgd: PD_SET(l.opcode, "tip.pgd"); pd_ip(&l, &p->payload.ip, last); break;
	case ppt_pip:
		PD_SET(l.opcode, "pip");
		PD_SET(l.payload, "%" PRIx64 "%s", p->payload.pip.cr3, p->payload.pip.nr ? ", nr" : "");
		PD_SET(l.tid, "cr3");
		PD_SET(l.tpl, "%016" PRIx64, p->payload.pip.cr3);
		break;
	case ppt_vmcs:
		PD_SET(l.opcode, "vmcs");
		PD_SET(l.payload, "%" PRIx64, p->payload.vmcs.base);
		PD_SET(l.tid, "vmcs");
		PD_SET(l.tpl, "%016" PRIx64, p->payload.vmcs.base);
		break;
	case ppt_tnt_8:
	case ppt_tnt_64: {
		PD_SET(l.opcode, p->type == ppt_tnt_8 ? "tnt.8" : "tnt.64");
		int bits = p->payload.tnt.bit_size, i = 0;
		for (; bits > 0; bits--)
			l.payload[i++] = p->payload.tnt.payload & (1ULL << (bits - 1)) ? '!' : '.';
		break;
	}
	case ppt_mode:
		if (p->payload.mode.leaf == pt_mol_exec) {
			const char *d = p->payload.mode.bits.exec.csd ? "cs.d" : "";
			const char *c = p->payload.mode.bits.exec.csl ? "cs.l" : "";
			PD_SET(l.opcode, "mode.exec");
			PD_SET(l.payload, "%s%s%s", d, d[0] && c[0] ? ", " : "", c);
		} else {
			const char *x = p->payload.mode.bits.tsx.intx ? "intx" : "";
			const char *a = p->payload.mode.bits.tsx.abrt ? "abrt" : "";
			PD_SET(l.opcode, "mode.tsx");
			PD_SET(l.payload, "%s%s%s", x, x[0] && a[0] ? ", " : "", a);
		}
		break;
	case ppt_tsc: PD_SET(l.opcode, "tsc"); PD_SET(l.payload, "%" PRIx64, p->payload.tsc.tsc); break;
	case ppt_cbr: PD_SET(l.opcode, "cbr"); PD_SET(l.payload, "%x", p->payload.cbr.ratio); break;
	case ppt_tma:
		PD_SET(l.opcode, "tma");
		PD_SET(l.payload, "%x, %x", p->payload.tma.ctc, p->payload.tma.fc);
		break;
	case ppt_mtc: PD_SET(l.opcode, "mtc"); PD_SET(l.payload, "%x", p->payload.mtc.ctc); break;
	case ppt_cyc: PD_SET(l.opcode, "cyc"); PD_SET(l.payload, "%" PRIx64, p->payload.cyc.value); break;
	case ppt_mnt: PD_SET(l.opcode, "mnt"); PD_SET(l.payload, "%" PRIx64, p->payload.mnt.payload); break;
	case ppt_exstop:
		PD_SET(l.opcode, "exstop");
		PD_SET(l.payload, "%s", p->payload.exstop.ip ? "ip" : "");
		break;
	case ppt_mwait:
		PD_SET(l.opcode, "mwait");
		PD_SET(l.payload, "%08x, %08x", p->payload.mwait.hints, p->payload.mwait.ext);
		break;
	case ppt_pwre:
		PD_SET(l.opcode, "pwre");
		PD_SET(l.payload, "c%u.%u%s", (p->payload.pwre.state + 1) & 0xf,
		       (p->payload.pwre.sub_state + 1) & 0xf, p->payload.pwre.hw ? ", hw" : "");
		break;
	case ppt_pwrx: {
		int n = p->payload.pwrx.interrupt + p->payload.pwrx.store + p->payload.pwrx.autonomous;
		const char *wr = n != 1 ? "bad" : p->payload.pwrx.interrupt ? "int" :
				 p->payload.pwrx.store ? " st" : " hw";
		PD_SET(l.opcode, "pwrx");
		PD_SET(l.payload, "%s: c%u, c%u", wr, (p->payload.pwrx.last + 1) & 0xf,
		       (p->payload.pwrx.deepest + 1) & 0xf);
		break;
	}
	case ppt_ptw:
		PD_SET(l.opcode, "ptw");
		PD_SET(l.payload, "%x: %" PRIx64 "%s", p->payload.ptw.plc, p->payload.ptw.payload,
		       p->payload.ptw.ip ? ", ip" : "");
		break;
	default:
		PD_SET(l.opcode, "<unknown>");
		break;
	}
	const char *sep = "";
	if (show_offset) {
		fprintf(f, "%-*s", (int)sizeof l.offset, l.offset);
		sep = " ";
	}
	if (l.payload[0])
		fprintf(f, "%s%-*s", sep, (int)sizeof l.opcode, l.opcode);
	else
		fprintf(f, "%s%s", sep, l.opcode);
	if (l.tid[0]) {
		fprintf(f, " %-*s", 25, l.payload);
		fprintf(f, " %-*s", (int)sizeof l.tid, l.tid);
		fprintf(f, "%s", l.tpl);
	} else if (l.payload[0]) {
		fprintf(f, " %s", l.payload);
	}
	fputc('\n', f);
}

#endif
