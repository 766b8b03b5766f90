/* The Intel PT packet encoder against libipt's packet decoder: random packets of every
 * kind tk_ipt_encode writes, with every IP compression, decoded by pt_pkt_next with the
 * same fields and sizes (and by our decoder); the compression tk_ipt_ip_packet picks
 * rebuilds the IP and is the shortest one that does; bad fields are refused. */
#include <intel-pt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "formats/ipt/internal.h"
#include "tracekit/ipt.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const enum tk_ipt_pkt_kind kinds[] = {
	TK_IPT_PKT_PAD, TK_IPT_PKT_PSB, TK_IPT_PKT_PSBEND, TK_IPT_PKT_OVF, TK_IPT_PKT_TNT8,
	TK_IPT_PKT_TNT64, TK_IPT_PKT_TIP, TK_IPT_PKT_TIP_PGE, TK_IPT_PKT_TIP_PGD,
	TK_IPT_PKT_FUP, TK_IPT_PKT_MODE_EXEC, TK_IPT_PKT_TSC,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static const uint8_t ipcs[] = { TK_IPT_IPC_SUPPRESSED, TK_IPT_IPC_UPDATE_16, TK_IPT_IPC_UPDATE_32,
				TK_IPT_IPC_SEXT_48, TK_IPT_IPC_UPDATE_48, TK_IPT_IPC_FULL };
static const unsigned ipc_bits[8] = { 0, 16, 32, 48, 48, 0, 64, 0 };

static uint64_t mask(unsigned bits)
{
	return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

static void random_packet(struct tk_ipt_packet *p, unsigned i)
{
	memset(p, 0, sizeof(*p));
	p->kind = kinds[i % NKINDS];
	switch (p->kind) {
	case TK_IPT_PKT_TNT8:
		p->tnt.count = (uint8_t)(1 + rnd() % 6);
		p->tnt.bits = rnd() & mask(p->tnt.count);
		break;
	case TK_IPT_PKT_TNT64:
		p->tnt.count = (uint8_t)(1 + rnd() % 47);
		p->tnt.bits = rnd() & mask(p->tnt.count);
		break;
	case TK_IPT_PKT_TIP: case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP:
		/* every compression in turn, with random payloads that fill it */
		p->ip.ipc = ipcs[(i / NKINDS) % sizeof(ipcs)];
		p->ip.ip = rnd() & mask(ipc_bits[p->ip.ipc]);
		break;
	case TK_IPT_PKT_MODE_EXEC:
		p->exec.csl = rnd() & 1;
		p->exec.csd = rnd() & 1;
		p->exec.iflag = rnd() & 1;
		break;
	case TK_IPT_PKT_TSC:
		p->tsc.tsc = rnd() & mask(56);
		break;
	default:
		break;
	}
}

static enum pt_packet_type pt_type(enum tk_ipt_pkt_kind k)
{
	switch (k) {
	case TK_IPT_PKT_PAD: return ppt_pad;
	case TK_IPT_PKT_PSB: return ppt_psb;
	case TK_IPT_PKT_PSBEND: return ppt_psbend;
	case TK_IPT_PKT_OVF: return ppt_ovf;
	case TK_IPT_PKT_TNT8: return ppt_tnt_8;
	case TK_IPT_PKT_TNT64: return ppt_tnt_64;
	case TK_IPT_PKT_TIP: return ppt_tip;
	case TK_IPT_PKT_TIP_PGE: return ppt_tip_pge;
	case TK_IPT_PKT_TIP_PGD: return ppt_tip_pgd;
	case TK_IPT_PKT_FUP: return ppt_fup;
	case TK_IPT_PKT_MODE_EXEC: return ppt_mode;
	case TK_IPT_PKT_TSC: return ppt_tsc;
	default: return ppt_invalid;
	}
}

static void same_fields(const struct tk_ipt_packet *want, const struct pt_packet *got)
{
	assert_int_equal(got->type, pt_type(want->kind));
	switch (want->kind) {
	case TK_IPT_PKT_TNT8: case TK_IPT_PKT_TNT64:
		assert_int_equal(got->payload.tnt.bit_size, want->tnt.count);
		assert_int_equal(got->payload.tnt.payload, want->tnt.bits);
		break;
	case TK_IPT_PKT_TIP: case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP:
		assert_int_equal(got->payload.ip.ipc, want->ip.ipc);
		assert_int_equal(got->payload.ip.ip, want->ip.ip);
		break;
	case TK_IPT_PKT_MODE_EXEC:
		assert_int_equal(got->payload.mode.leaf, pt_mol_exec);
		assert_int_equal(got->payload.mode.bits.exec.csl, want->exec.csl);
		assert_int_equal(got->payload.mode.bits.exec.csd, want->exec.csd);
		break;
	case TK_IPT_PKT_TSC:
		assert_int_equal(got->payload.tsc.tsc, want->tsc.tsc);
		break;
	default:
		break;
	}
}

/* libipt's packet decoder on B's bytes, from the first (no PSB needed). */
static struct pt_packet_decoder *libipt_at_start(struct tk_buf *b)
{
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)b->data;
	cfg.end = (uint8_t *)b->data + b->len;
	struct pt_packet_decoder *ref = pt_pkt_alloc_decoder(&cfg);
	assert_non_null(ref);
	assert_int_equal(pt_pkt_sync_set(ref, 0), 0);
	return ref;
}

static void test_random_packets(void **state)
{
	(void)state;
	enum { N = 20000 };
	static struct tk_ipt_packet want[N];
	static int size[N];
	struct tk_buf b;
	size_t n = 0;

	assert_int_equal(tk_buf_init(&b, -1, 1 << 16), 0);
	for (unsigned i = 0; i < N; i++) {
		random_packet(&want[i], i);
		size[i] = tk_ipt_encode(&b, &want[i]);
		assert_true(size[i] > 0);
		n += (size_t)size[i];
	}
	assert_int_equal(b.len, n);

	struct pt_packet_decoder *ref = libipt_at_start(&b);
	int err;
	struct tk_ipt_pkt_decoder *tk = tk_ipt_pkt_decoder_new((const uint8_t *)b.data, b.len, NULL, &err);
	assert_non_null(tk);
	assert_int_equal(tk_ipt_pkt_sync_set(tk, 0), 0);
	for (unsigned i = 0; i < N; i++) {
		struct pt_packet p;
		struct tk_ipt_packet q;

		assert_int_equal(pt_pkt_next(ref, &p, sizeof(p)), size[i]);
		assert_int_equal(p.size, size[i]);
		same_fields(&want[i], &p);
		/* and our decoder reads back exactly what was encoded */
		assert_int_equal(tk_ipt_pkt_next(tk, &q), size[i]);
		assert_int_equal(q.kind, want[i].kind);
		switch (q.kind) {
		case TK_IPT_PKT_TNT8: case TK_IPT_PKT_TNT64:
			assert_int_equal(q.tnt.count, want[i].tnt.count);
			assert_int_equal(q.tnt.bits, want[i].tnt.bits);
			break;
		case TK_IPT_PKT_TIP: case TK_IPT_PKT_TIP_PGE: case TK_IPT_PKT_TIP_PGD:
		case TK_IPT_PKT_FUP:
			assert_int_equal(q.ip.ipc, want[i].ip.ipc);
			assert_int_equal(q.ip.ip, want[i].ip.ip);
			break;
		case TK_IPT_PKT_MODE_EXEC:
			assert_int_equal(q.exec.csl, want[i].exec.csl);
			assert_int_equal(q.exec.csd, want[i].exec.csd);
			assert_int_equal(q.exec.iflag, want[i].exec.iflag);
			break;
		case TK_IPT_PKT_TSC:
			assert_int_equal(q.tsc.tsc, want[i].tsc.tsc);
			break;
		default:
			break;
		}
	}
	struct pt_packet p;
	assert_int_equal(pt_pkt_next(ref, &p, sizeof(p)), -pte_eos);
	pt_pkt_free_decoder(ref);
	tk_ipt_pkt_decoder_free(tk);
	tk_buf_free(&b);
}

/* The SDM's rule for rebuilding an IP from a payload, written out independently. */
static uint64_t rebuild(uint64_t last, uint8_t ipc, uint64_t v)
{
	switch (ipc) {
	case pt_ipc_update_16: return (last & ~0xffffull) | v;
	case pt_ipc_update_32: return (last & ~0xffffffffull) | v;
	case pt_ipc_sext_48: return (uint64_t)((int64_t)(v << 16) >> 16);
	case pt_ipc_update_48: return (last & ~0xffffffffffffull) | v;
	default: return v;
	}
}

/* IPs near each other, far apart, in the upper half, non-canonical: each IP packet's
 * compression, decoded by libipt and applied to the last IP, gives the IP back; no
 * shorter compression would have; update forms never follow a reset. */
static void test_ip_compression(void **state)
{
	(void)state;
	enum { N = 20000 };
	static uint64_t ips[N];
	static uint8_t reset[N];
	struct tk_ipt_last_ip l;
	struct tk_buf b;
	uint64_t ip = 0x7f0012345678ull;
	unsigned used[8] = { 0 };

	assert_int_equal(tk_buf_init(&b, -1, 1 << 16), 0);
	tk_ipt_last_ip_init(&l);
	for (unsigned i = 0; i < N; i++) {
		switch (rnd() % 7) {
		case 0: ip += rnd() % 0x100; break;
		case 1: ip ^= rnd() & 0xffffff; break;
		case 6: ip ^= rnd() & 0xffffffff; break;
		case 2: ip = rnd() & 0x7fffffffffffull; break;
		case 3: ip = 0xffff800000000000ull | (rnd() & 0x7fffffffffffull); break;
		case 4: ip = rnd(); break;
		default: ip = (ip & ~0xffffffffffffull) | (rnd() & 0xffffffffffffull); break;
		}
		if (!(rnd() % 50)) {
			tk_ipt_last_ip_init(&l);
			reset[i] = 1;
		}
		struct tk_ipt_packet p;
		tk_ipt_ip_packet(&l, kinds[6 + rnd() % 4], ip, &p);
		assert_true(tk_ipt_encode(&b, &p) > 0);
		ips[i] = ip;
	}

	struct pt_packet_decoder *ref = libipt_at_start(&b);
	uint64_t last = 0;
	int have = 0;
	for (unsigned i = 0; i < N; i++) {
		struct pt_packet p;

		assert_true(pt_pkt_next(ref, &p, sizeof(p)) > 0);
		if (reset[i])
			have = 0, last = 0;
		uint8_t ipc = (uint8_t)p.payload.ip.ipc;
		used[ipc]++;
		assert_int_equal(rebuild(last, ipc, p.payload.ip.ip), ips[i]);
		if (!have)
			assert_true(ipc == pt_ipc_sext_48 || ipc == pt_ipc_full);
		/* nothing shorter would do */
		for (unsigned k = 1; k < 8; k++) {
			if (!ipc_bits[k] || ipc_bits[k] >= ipc_bits[ipc] || (!have && k != pt_ipc_sext_48))
				continue;
			assert_true(rebuild(last, (uint8_t)k, ips[i] & mask(ipc_bits[k])) != ips[i]);
		}
		last = ips[i];
		have = 1;
	}
	pt_pkt_free_decoder(ref);
	tk_buf_free(&b);
	/* the walk exercised every compression */
	assert_true(used[pt_ipc_update_16] && used[pt_ipc_update_32] && used[pt_ipc_sext_48] &&
		    used[pt_ipc_update_48] && used[pt_ipc_full]);
}

static void test_bad_fields(void **state)
{
	(void)state;
	struct tk_buf b;
	struct tk_ipt_packet p;

	assert_int_equal(tk_buf_init(&b, -1, 64), 0);
	memset(&p, 0, sizeof(p));
	p.kind = TK_IPT_PKT_TNT8;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);    /* no bits */
	p.tnt.count = 7;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);    /* too many for TNT-8 */
	p.tnt.count = 2;
	p.tnt.bits = 4;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);    /* a bit above the count */
	p.kind = TK_IPT_PKT_TNT64;
	p.tnt.count = 48;
	p.tnt.bits = 0;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	p.kind = TK_IPT_PKT_TIP;
	p.ip.ipc = 5;                                             /* reserved */
	p.ip.ip = 0;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	p.ip.ipc = TK_IPT_IPC_UPDATE_16;
	p.ip.ip = 0x10000;                                        /* does not fit */
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	p.ip.ipc = TK_IPT_IPC_SUPPRESSED;
	p.ip.ip = 1;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	memset(&p, 0, sizeof(p));
	p.kind = TK_IPT_PKT_TSC;
	p.tsc.tsc = 1ull << 56;
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	p.kind = TK_IPT_PKT_BIP;                                  /* not written by the encoder */
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	memset(&p, 0, sizeof(p));
	p.kind = TK_IPT_PKT_PIP;
	p.pip.cr3 = 0x1010;                                       /* bits 4:0 must be 0 */
	assert_int_equal(tk_ipt_encode(&b, &p), -TK_E_INVAL);
	assert_int_equal(b.len, 0);
	tk_buf_free(&b);
}

/* The other kinds (the .ptt tests' packets): random fields, encoded, read back by our
 * decoder field for field, and by libipt (size and kind) where 2.0.5 knows the kind. */
static void test_other_kinds(void **state)
{
	(void)state;
	static const enum tk_ipt_pkt_kind other[] = {
		TK_IPT_PKT_MODE_TSX, TK_IPT_PKT_PIP, TK_IPT_PKT_VMCS, TK_IPT_PKT_CBR,
		TK_IPT_PKT_STOP, TK_IPT_PKT_TMA, TK_IPT_PKT_MTC, TK_IPT_PKT_CYC, TK_IPT_PKT_MNT,
		TK_IPT_PKT_PTW, TK_IPT_PKT_EXSTOP, TK_IPT_PKT_MWAIT, TK_IPT_PKT_PWRE,
		TK_IPT_PKT_PWRX, TK_IPT_PKT_CFE, TK_IPT_PKT_EVD, TK_IPT_PKT_TRIG,
	};
	enum { NO = sizeof(other) / sizeof(other[0]) };

	for (unsigned i = 0; i < 4000; i++) {
		struct tk_ipt_packet p, q;
		struct tk_buf b;
		struct tk_ipt_ctx ctx = { 0 };

		memset(&p, 0, sizeof(p));
		p.kind = other[i % NO];
		switch (p.kind) {
		case TK_IPT_PKT_MODE_TSX: p.tsx.intx = rnd() & 1; p.tsx.abrt = rnd() & 1; break;
		case TK_IPT_PKT_PIP: p.pip.cr3 = rnd() & mask(52) & ~0x1full; p.pip.nr = rnd() & 1; break;
		case TK_IPT_PKT_VMCS: p.vmcs.base = rnd() & mask(52) & ~0xfffull; break;
		case TK_IPT_PKT_CBR: p.cbr.ratio = (uint8_t)rnd(); break;
		case TK_IPT_PKT_TMA: p.tma.ctc = (uint16_t)rnd(); p.tma.fc = rnd() & 0x1ff; break;
		case TK_IPT_PKT_MTC: p.mtc.ctc = (uint8_t)rnd(); break;
		case TK_IPT_PKT_CYC: p.cyc.value = rnd() & mask((unsigned)(rnd() % 61)); break;
		case TK_IPT_PKT_MNT: p.mnt.payload = rnd(); break;
		case TK_IPT_PKT_PTW:
			p.ptw.plc = rnd() & 1;
			p.ptw.ip = rnd() & 1;
			p.ptw.payload = rnd() & mask(p.ptw.plc ? 64 : 32);
			break;
		case TK_IPT_PKT_EXSTOP: p.exstop.ip = rnd() & 1; break;
		case TK_IPT_PKT_MWAIT: p.mwait.hints = (uint32_t)rnd(); p.mwait.ext = (uint32_t)rnd(); break;
		case TK_IPT_PKT_PWRE:
			p.pwre.state = rnd() & 15; p.pwre.sub_state = rnd() & 15; p.pwre.hw = rnd() & 1;
			break;
		case TK_IPT_PKT_PWRX:
			p.pwrx.last = rnd() & 15; p.pwrx.deepest = rnd() & 15;
			p.pwrx.interrupt = rnd() & 1; p.pwrx.store = rnd() & 1;
			p.pwrx.autonomous = rnd() & 1;
			break;
		case TK_IPT_PKT_CFE:
			p.cfe.type = rnd() & 0x1f; p.cfe.ip = rnd() & 1; p.cfe.vector = (uint8_t)rnd();
			break;
		case TK_IPT_PKT_EVD: p.evd.type = rnd() & 0x3f; p.evd.payload = rnd(); break;
		case TK_IPT_PKT_TRIG:
			p.trig.ip = rnd() & 1; p.trig.icntv = rnd() & 1; p.trig.mult = rnd() & 1;
			p.trig.trbv = (uint8_t)rnd();
			p.trig.icnt = p.trig.icntv ? (uint16_t)rnd() : 0;
			break;
		default:
			break;
		}
		assert_int_equal(tk_buf_init(&b, -1, 64), 0);
		int n = tk_ipt_encode(&b, &p);

		assert_true(n > 0);
		memset(&q, 0, sizeof(q));
		assert_int_equal(tk_ipt_decode_one((const uint8_t *)b.data, b.len, 0, &ctx, &q), n);
		q.size = 0;
		q.offset = 0;
		assert_memory_equal(&p, &q, sizeof(p));
		if (p.kind != TK_IPT_PKT_CFE && p.kind != TK_IPT_PKT_EVD &&
		    p.kind != TK_IPT_PKT_TRIG) {
			struct pt_packet_decoder *ref = libipt_at_start(&b);
			struct pt_packet r;

			assert_int_equal(pt_pkt_next(ref, &r, sizeof(r)), n);
			pt_pkt_free_decoder(ref);
		}
		tk_buf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_packets),
		cmocka_unit_test(test_ip_compression),
		cmocka_unit_test(test_bad_fields),
		cmocka_unit_test(test_other_kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
