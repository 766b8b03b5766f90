/* Intel PT packet decoder: one 256-entry class table on the first byte, a switch on the
 * extended opcode, no allocation per packet. Field meanings, sizes and error cases
 * follow the Intel SDM vol. 3 "Intel Processor Trace" chapter and match libipt's
 * pt_pkt_next where libipt knows the packet. */
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "formats/ipt/internal.h"
#include "formats/ipt/fast_table.h"

/* The fast path writes every simple packet through the ip member, and kind + size as
 * one 8-byte header, the union's second word as one 8-byte store. */
_Static_assert(offsetof(struct tk_ipt_packet, kind) == 0 &&
	       offsetof(struct tk_ipt_packet, size) == sizeof(enum tk_ipt_pkt_kind) &&
	       sizeof(enum tk_ipt_pkt_kind) == 4 && offsetof(struct tk_ipt_packet, offset) == 8 &&
	       offsetof(struct tk_ipt_packet, ip.ip) == 16 &&
	       offsetof(struct tk_ipt_packet, ip.ipc) == 24 && sizeof(struct tk_ipt_packet) == 32,
	       "packet header layout");
_Static_assert(offsetof(struct tk_ipt_packet, exec.csl) == offsetof(struct tk_ipt_packet, ip.ip) &&
	       offsetof(struct tk_ipt_packet, exec.csd) == offsetof(struct tk_ipt_packet, ip.ip) + 1 &&
	       offsetof(struct tk_ipt_packet, exec.iflag) == offsetof(struct tk_ipt_packet, ip.ip) + 2,
	       "MODE.Exec bits written as one word");
_Static_assert(offsetof(struct fast_entry, hdr) == 8 && offsetof(struct fast_entry, val) == 16 &&
	       offsetof(struct fast_entry, aux) == 24 && sizeof(struct fast_entry) == 32,
	       "fast table entries: {mask, hdr} and {val, aux} are 16-byte vectors");
_Static_assert(offsetof(struct tk_ipt_packet, ip.ip) == offsetof(struct tk_ipt_packet, tnt.bits) &&
	       offsetof(struct tk_ipt_packet, ip.ipc) == offsetof(struct tk_ipt_packet, tnt.count) &&
	       offsetof(struct tk_ipt_packet, ip.ip) == offsetof(struct tk_ipt_packet, tsc.tsc) &&
	       offsetof(struct tk_ipt_packet, ip.ip) == offsetof(struct tk_ipt_packet, cyc.value) &&
	       offsetof(struct tk_ipt_packet, ip.ip) == offsetof(struct tk_ipt_packet, mtc.ctc),
	       "simple packet fields share the ip member's layout");

enum {
	PA, /* PAD */
	TN, /* TNT-8 */
	EX, /* 0x02: extended opcode follows */
	CY, /* CYC */
	TI, GE, GD, FU, /* TIP, TIP.PGE, TIP.PGD, FUP */
	MO, TS, MT, TR, /* MODE, TSC, MTC, TRIG */
	BA, /* not an opcode */
};

static const uint8_t op_class[256] = {
	/* 00 */ PA, GD, EX, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* 10 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, TS, TN, CY, TN, FU, TN, CY,
	/* 20 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* 30 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, FU, TN, CY,
	/* 40 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* 50 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, MT, TN, CY, TN, FU, TN, CY,
	/* 60 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* 70 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, FU, TN, CY,
	/* 80 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* 90 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, MO, TN, CY, TN, FU, TN, CY,
	/* a0 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* b0 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, FU, TN, CY,
	/* c0 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* d0 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, TR, TN, CY, TN, FU, TN, CY,
	/* e0 */ TN, GD, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, TI, TN, CY,
	/* f0 */ TN, GE, TN, CY, TN, BA, TN, CY, TN, BA, TN, CY, TN, FU, TN, CY,
};

/* Payload bytes per IP compression; -1: reserved (5 and 7). */
static const int8_t ipc_bytes[8] = { 0, 2, 4, 6, 6, -1, 8, -1 };

static const char *const pkt_names[TK_IPT_PKT__COUNT] = {
	[TK_IPT_PKT_INVALID] = "<invalid>", [TK_IPT_PKT_PAD] = "pad",
	[TK_IPT_PKT_PSB] = "psb", [TK_IPT_PKT_PSBEND] = "psbend",
	[TK_IPT_PKT_TNT8] = "tnt.8", [TK_IPT_PKT_TNT64] = "tnt.64",
	[TK_IPT_PKT_TIP] = "tip", [TK_IPT_PKT_TIP_PGE] = "tip.pge",
	[TK_IPT_PKT_TIP_PGD] = "tip.pgd", [TK_IPT_PKT_FUP] = "fup",
	[TK_IPT_PKT_MODE_EXEC] = "mode.exec", [TK_IPT_PKT_MODE_TSX] = "mode.tsx",
	[TK_IPT_PKT_PIP] = "pip", [TK_IPT_PKT_TSC] = "tsc", [TK_IPT_PKT_MTC] = "mtc",
	[TK_IPT_PKT_TMA] = "tma", [TK_IPT_PKT_CYC] = "cyc", [TK_IPT_PKT_VMCS] = "vmcs",
	[TK_IPT_PKT_OVF] = "ovf", [TK_IPT_PKT_CBR] = "cbr", [TK_IPT_PKT_STOP] = "stop",
	[TK_IPT_PKT_MNT] = "mnt", [TK_IPT_PKT_PTW] = "ptw", [TK_IPT_PKT_EXSTOP] = "exstop",
	[TK_IPT_PKT_MWAIT] = "mwait", [TK_IPT_PKT_PWRE] = "pwre", [TK_IPT_PKT_PWRX] = "pwrx",
	[TK_IPT_PKT_BBP] = "bbp", [TK_IPT_PKT_BIP] = "bip", [TK_IPT_PKT_BEP] = "bep",
	[TK_IPT_PKT_CFE] = "cfe", [TK_IPT_PKT_EVD] = "evd", [TK_IPT_PKT_TRIG] = "trig",
};

const char *tk_ipt_pkt_name(enum tk_ipt_pkt_kind kind)
{
	return (unsigned)kind < TK_IPT_PKT__COUNT ? pkt_names[kind] : "<invalid>";
}

static inline uint64_t rd48(const uint8_t *p)
{
	return (uint64_t)tk_le32(p) | (uint64_t)tk_le16(p + 4) << 32;
}

/* TNT payload with its stop bit: the stop bit is the highest set bit. */
static inline int tnt_split(uint64_t payload, struct tk_ipt_packet *pkt)
{
	if (payload < 2)
		return -TK_E_BAD_FORMAT;
	int top = 63 - __builtin_clzll(payload);
	pkt->tnt.count = (uint8_t)top;
	pkt->tnt.bits = payload & ~(1ULL << top);
	return 0;
}

#define NEED(n) do { if (rem < (size_t)(n)) return -TK_E_TRUNCATED; } while (0)

static __attribute__((noinline)) int decode_ext(const uint8_t *p, size_t rem, struct tk_ipt_ctx *ctx,
		      struct tk_ipt_packet *pkt)
{
	NEED(2);
	uint8_t e = p[1];

	if ((e & 0x1f) == 0x12) {       /* PTWRITE */
		uint8_t plc = (e >> 5) & 3;
		if (plc > 1)
			return -TK_E_BAD_FORMAT;
		int n = plc ? 8 : 4;
		NEED(2 + n);
		pkt->kind = TK_IPT_PKT_PTW;
		pkt->ptw.payload = plc ? tk_le64(p + 2) : tk_le32(p + 2);
		pkt->ptw.plc = plc;
		pkt->ptw.ip = e >> 7;
		return 2 + n;
	}
	switch (e) {
	case 0x82:                      /* PSB */
		NEED(TK_IPT_PSB_SIZE);
		for (int i = 2; i < TK_IPT_PSB_SIZE; i += 2)
			if (p[i] != 0x02 || p[i + 1] != 0x82)
				return -TK_E_BAD_FORMAT;
		pkt->kind = TK_IPT_PKT_PSB;
		ctx->blk = 0;
		return TK_IPT_PSB_SIZE;
	case 0xa3: {                    /* TNT-64 */
		NEED(8);
		int r = tnt_split(rd48(p + 2), pkt);
		if (r < 0)
			return r;
		pkt->kind = TK_IPT_PKT_TNT64;
		return 8;
	}
	case 0x43: {                    /* PIP */
		NEED(8);
		uint64_t v = rd48(p + 2);
		pkt->kind = TK_IPT_PKT_PIP;
		pkt->pip.nr = v & 1;
		pkt->pip.cr3 = (v >> 1) << 5;
		return 8;
	}
	case 0xf3:
		pkt->kind = TK_IPT_PKT_OVF;
		return 2;
	case 0x23:
		pkt->kind = TK_IPT_PKT_PSBEND;
		return 2;
	case 0x83:
		pkt->kind = TK_IPT_PKT_STOP;
		return 2;
	case 0x03:                      /* CBR: ratio, reserved byte */
		NEED(4);
		pkt->kind = TK_IPT_PKT_CBR;
		pkt->cbr.ratio = p[2];
		return 4;
	case 0x73: {                    /* TMA: ctc[15:0], reserved, fc[8:0] */
		NEED(7);
		uint16_t fc = tk_le16(p + 5);
		if ((fc & ~0x1ffu) || p[4]) {
			if (!(ctx->errata & TK_IPT_ERRATUM_SKZ84))
				return -TK_E_BAD_FORMAT;
			/* SKZ84: corrupt, and a bogus byte after it; what else is corrupt
			 * cannot be told (libipt skips the same 8 bytes) */
			NEED(8);
			pkt->kind = TK_IPT_PKT_INVALID;
			return 8;
		}
		pkt->kind = TK_IPT_PKT_TMA;
		pkt->tma.ctc = tk_le16(p + 2);
		pkt->tma.fc = fc;
		return 7;
	}
	case 0xc8:                      /* VMCS: base[51:12] */
		NEED(7);
		pkt->kind = TK_IPT_PKT_VMCS;
		pkt->vmcs.base = ((uint64_t)tk_le32(p + 2) | (uint64_t)p[6] << 32) << 12;
		return 7;
	case 0xc3:                      /* second extension: MNT */
		NEED(3);
		if (p[2] != 0x88)
			return -TK_E_BAD_OPCODE;
		NEED(11);
		pkt->kind = TK_IPT_PKT_MNT;
		pkt->mnt.payload = tk_le64(p + 3);
		return 11;
	case 0x62:
	case 0xe2:
		pkt->kind = TK_IPT_PKT_EXSTOP;
		pkt->exstop.ip = e >> 7;
		return 2;
	case 0xc2:                      /* MWAIT: hints (EAX), extensions (ECX) */
		NEED(10);
		pkt->kind = TK_IPT_PKT_MWAIT;
		pkt->mwait.hints = tk_le32(p + 2);
		pkt->mwait.ext = tk_le32(p + 6);
		return 10;
	case 0x22: {                    /* PWRE */
		NEED(4);
		uint16_t v = tk_le16(p + 2);
		pkt->kind = TK_IPT_PKT_PWRE;
		pkt->pwre.state = (v >> 12) & 0xf;
		pkt->pwre.sub_state = (v >> 8) & 0xf;
		pkt->pwre.hw = (v >> 3) & 1;
		return 4;
	}
	case 0xa2: {                    /* PWRX */
		NEED(7);
		uint16_t v = tk_le16(p + 2);
		pkt->kind = TK_IPT_PKT_PWRX;
		pkt->pwrx.deepest = v & 0xf;
		pkt->pwrx.last = (v >> 4) & 0xf;
		pkt->pwrx.interrupt = (v >> 8) & 1;
		pkt->pwrx.store = (v >> 10) & 1;
		pkt->pwrx.autonomous = (v >> 11) & 1;
		return 7;
	}
	case 0x13:                      /* CFE: ip, type[4:0]; vector */
		NEED(4);
		pkt->kind = TK_IPT_PKT_CFE;
		pkt->cfe.type = p[2] & 0x1f;
		pkt->cfe.ip = p[2] >> 7;
		pkt->cfe.vector = p[3];
		return 4;
	case 0x53:                      /* EVD: type[5:0]; 8-byte payload */
		NEED(11);
		pkt->kind = TK_IPT_PKT_EVD;
		pkt->evd.type = p[2] & 0x3f;
		pkt->evd.payload = tk_le64(p + 3);
		return 11;
	case 0x63:                      /* BBP: sz, type[4:0] */
		NEED(3);
		pkt->kind = TK_IPT_PKT_BBP;
		pkt->bbp.sz = p[2] >> 7;
		pkt->bbp.type = p[2] & 0x1f;
		ctx->blk = pkt->bbp.sz ? 4 : 8;
		return 3;
	case 0x33:
	case 0xb3:                      /* BEP, BEP.IP */
		pkt->kind = TK_IPT_PKT_BEP;
		pkt->bep.ip = e >> 7;
		ctx->blk = 0;
		return 2;
	default:
		return -TK_E_BAD_OPCODE;
	}
}

static inline __attribute__((always_inline)) int decode_at(const uint8_t *p, size_t rem, struct tk_ipt_ctx *ctx,
			    struct tk_ipt_packet *pkt)
{
	uint8_t b = p[0];

	if (__builtin_expect(ctx->blk != 0, 0) && (b & 7) == 4) {     /* BIP */
		int n = ctx->blk;
		NEED(1 + n);
		pkt->kind = TK_IPT_PKT_BIP;
		pkt->bip.id = b >> 3;
		pkt->bip.value = n == 4 ? tk_le32(p + 1) : tk_le64(p + 1);
		return 1 + n;
	}
	switch (op_class[b]) {
	case PA:
		pkt->kind = TK_IPT_PKT_PAD;
		return 1;
	case TN:
		pkt->kind = TK_IPT_PKT_TNT8;
		tnt_split(b >> 1, pkt);  /* b >= 4: the stop bit is there */
		return 1;
	case TI:
	case GE:
	case GD:
	case FU: {
		static const uint8_t kinds[4] = { TK_IPT_PKT_TIP, TK_IPT_PKT_TIP_PGE,
						  TK_IPT_PKT_TIP_PGD, TK_IPT_PKT_FUP };
		uint8_t ipc = b >> 5;
		int n = ipc_bytes[ipc];
		if (n < 0)
			return -TK_E_BAD_FORMAT;
		NEED(1 + n);
		pkt->kind = kinds[op_class[b] - TI];
		pkt->ip.ipc = ipc;
		switch (n) {
		case 0: pkt->ip.ip = 0; break;
		case 2: pkt->ip.ip = tk_le16(p + 1); break;
		case 4: pkt->ip.ip = tk_le32(p + 1); break;
		case 6: pkt->ip.ip = rd48(p + 1); break;
		default: pkt->ip.ip = tk_le64(p + 1); break;
		}
		return 1 + n;
	}
	case CY: {
		uint64_t v = b >> 3;
		size_t i = 1;
		if (b & 4) {
			unsigned shl = 5;
			uint8_t x;
			do {
				if (i >= rem)
					return -TK_E_TRUNCATED;
				x = p[i++];
				v |= (uint64_t)(x >> 1) << shl;
				shl += 7;
				if (shl > 64)
					return -TK_E_BAD_FORMAT;
			} while (x & 1);
		}
		if (__builtin_expect(ctx->errata & TK_IPT_ERRATUM_SKD007, 0) && i == 2 &&
		    p[1] == 0x02 && rem > 2 && p[2] == 0xf3) {
			/* SKD007: the OVF 02 F3 written after the CYC's first byte; no sound
			 * trace has two short CYCs in a row (only a wrapped counter sends
			 * back-to-back CYCs, full ones) */
			pkt->kind = TK_IPT_PKT_OVF;
			return 3;
		}
		pkt->kind = TK_IPT_PKT_CYC;
		pkt->cyc.value = v;
		return (int)i;
	}
	case EX:
		return decode_ext(p, rem, ctx, pkt);
	case MO: {
		NEED(2);
		uint8_t m = p[1];
		switch (m >> 5) {
		case 0:
			pkt->kind = TK_IPT_PKT_MODE_EXEC;
			pkt->exec.csl = m & 1;
			pkt->exec.csd = (m >> 1) & 1;
			pkt->exec.iflag = (m >> 2) & 1;
			return 2;
		case 1:
			pkt->kind = TK_IPT_PKT_MODE_TSX;
			pkt->tsx.intx = m & 1;
			pkt->tsx.abrt = (m >> 1) & 1;
			return 2;
		default:
			return -TK_E_BAD_FORMAT;
		}
	}
	case TS:
		NEED(8);
		pkt->kind = TK_IPT_PKT_TSC;
		pkt->tsc.tsc = tk_le64(p) >> 8;
		return 8;
	case MT:
		NEED(2);
		pkt->kind = TK_IPT_PKT_MTC;
		pkt->mtc.ctc = p[1];
		return 2;
	case TR: {                      /* TRIG: ip, icntv, mult; trbv; [icnt] */
		NEED(3);
		int n = 3;
		pkt->kind = TK_IPT_PKT_TRIG;
		pkt->trig.ip = p[1] >> 7;
		pkt->trig.icntv = (p[1] >> 6) & 1;
		pkt->trig.mult = (p[1] >> 5) & 1;
		pkt->trig.trbv = p[2];
		pkt->trig.icnt = 0;
		if (pkt->trig.icntv) {
			NEED(5);
			pkt->trig.icnt = tk_le16(p + 3);
			n = 5;
		}
		return n;
	}
	default:
		return -TK_E_BAD_OPCODE;
	}
}

int tk_ipt_decode_one(const uint8_t *buf, size_t len, size_t pos, struct tk_ipt_ctx *ctx,
		      struct tk_ipt_packet *pkt)
{
	if (pos >= len)
		return -TK_E_EOF;
	pkt->offset = pos;
	int n = decode_at(buf + pos, len - pos, ctx, pkt);
	if (n > 0)
		pkt->size = (uint8_t)n;
	return n;
}

/* ---- PSB search --------------------------------------------------------------------- */

/* Any 16-byte PSB contains one 8-byte-aligned word of its payload, which reads either
 * 02 82 02 82... or 82 02 82 02...: test one word per 8 bytes (memory-bound), then find
 * the end of the run of 02 82 pairs: the PSB is its last 16 bytes, as in libipt. */
#define PSB_WORD_A 0x8202820282028202ULL   /* 02 82 02 82 02 82 02 82, little-endian */
#define PSB_WORD_B 0x0282028202820282ULL   /* 82 02 82 02 ... */

static inline int psb_word(uint64_t w)
{
	return w == PSB_WORD_A || w == PSB_WORD_B;
}

/* HIT: index of a 0x02 inside a run of 02 82 pairs. */
static int psb_at_run_end(const uint8_t *buf, size_t len, size_t hit, size_t *psb)
{
	size_t e = hit;
	while (e + 1 < len && buf[e] == 0x02 && buf[e + 1] == 0x82)
		e += 2;
	if (e < TK_IPT_PSB_SIZE)
		return -1;
	size_t s = e - TK_IPT_PSB_SIZE;
	for (size_t i = s; i < e; i += 2)
		if (buf[i] != 0x02 || buf[i + 1] != 0x82)
			return -1;
	*psb = s;
	return 0;
}

static inline int psb_from_word(const uint8_t *buf, size_t len, size_t i, size_t *psb)
{
	return psb_at_run_end(buf, len, buf[i] == 0x02 ? i : i + 1, psb);
}

#ifdef __SSE2__
/* Index of the first 8-aligned word at or after I (8-aligned) that is a PSB payload
 * word, or LEN if none: 64 bytes per step with SSE2, words checked exactly after a
 * cheap byte-level filter. */
static size_t psb_scan(const uint8_t *buf, size_t len, size_t i)
{
	const __m128i a = _mm_set1_epi32((int)0x82028202);
	const __m128i b = _mm_set1_epi32((int)0x02820282);

	for (; i + 64 <= len; i += 64) {
		/* 32-bit lanes equal to either half-pattern, OR-ed over 64 bytes: a PSB
		 * word sets two neighbouring lanes. Mixed hits are rare and re-checked. */
		__m128i acc = _mm_setzero_si128();
		for (int v = 0; v < 4; v++) {
			__m128i x = _mm_loadu_si128((const __m128i *)(buf + i + 16 * v));
			acc = _mm_or_si128(acc, _mm_or_si128(_mm_cmpeq_epi32(x, a),
							     _mm_cmpeq_epi32(x, b)));
		}
		unsigned m = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(acc));
		if (__builtin_expect((m & (m >> 1) & 5) != 0, 0)) {
			for (int w = 0; w < 8; w++)
				if (psb_word(tk_le64(buf + i + 8 * w)))
					return i + 8 * (size_t)w;
		}
	}
	for (; i + 8 <= len; i += 8)
		if (psb_word(tk_le64(buf + i)))
			return i;
	return len;
}
#else
static size_t psb_scan(const uint8_t *buf, size_t len, size_t i)
{
	for (; i + 8 <= len; i += 8)
		if (psb_word(tk_le64(buf + i)))
			return i;
	return len;
}
#endif

int tk_ipt_psb_find(const uint8_t *buf, size_t len, size_t from, size_t *psb)
{
	size_t i = (from + 7) & ~(size_t)7, s;

	while ((i = psb_scan(buf, len, i)) < len) {
		if (psb_from_word(buf, len, i, &s) == 0) {
			if (s >= from) {
				*psb = s;
				return 0;
			}
			/* Every word of this run ends at the same PSB: skip the run, so a
			 * long run costs linear time. */
			size_t next = (s + TK_IPT_PSB_SIZE + 7) & ~(size_t)7;
			i = next > i ? next : i + 8;
			continue;
		}
		i += 8;
	}
	return -TK_E_NOSYNC;
}

int tk_ipt_psb_next(const uint8_t *buf, size_t len, uint64_t from, uint64_t *psb)
{
	size_t s;
	if (!buf || !psb || from > len)
		return -TK_E_NOSYNC;
	int r = tk_ipt_psb_find(buf, len, (size_t)from, &s);
	if (r == 0)
		*psb = s;
	return r;
}

int tk_ipt_psb_prev(const uint8_t *buf, size_t len, uint64_t before, uint64_t *psb)
{
	size_t s;
	if (!buf || !psb || len < TK_IPT_PSB_SIZE)
		return -TK_E_NOSYNC;
	if (before > len)
		before = len;
	/* As libipt: the highest aligned payload word wholly below BEFORE decides; but a
	 * PSB must start below BEFORE (libipt may move forward inside long 02 82 runs,
	 * which makes a backward loop spin). */
	size_t i = (size_t)before & ~(size_t)7;
	while (i >= 8) {
		i -= 8;
		uint64_t w = tk_le64(buf + i);
		if (!psb_word(w))
			continue;
		if (psb_from_word(buf, len, i, &s) == 0 && s < before) {
			*psb = s;
			return 0;
		}
		/* The lower words of this run (the same word value; a run of the other
		 * parity is another run) end at the same place: skip them. */
		while (i >= 8 && tk_le64(buf + i - 8) == w)
			i -= 8;
	}
	return -TK_E_NOSYNC;
}

uint64_t tk_ipt_psb_count(const uint8_t *buf, size_t len)
{
	uint64_t n = 0;
	size_t pos = 0, s;
	while (tk_ipt_psb_find(buf, len, pos, &s) == 0) {
		n++;
		pos = s + TK_IPT_PSB_SIZE;
	}
	return n;
}

/* ---- the PSB split read with pread ------------------------------------------------- */
#define PSB_WINDOW ((size_t)8 << 10)
/* the first window's size: traces put a PSB every few KiB (libc's recording: every 3.3 KiB,
 * the Linux driver's default period of 4 KiB of packets), so the first PSB past a split
 * point is within this one nearly always, and the copy of the window is most of a search's
 * cost (8 KiB windows: 2,073 searches were 15 ms of libc-tl's serial part) */
#define PSB_FIRST_WINDOW ((size_t)4 << 10)

/* tk_ipt_psb_find(BUF, LEN, FROM) with BUF's bytes read from IN at OFF on, a window at a
 * time. A window starts 8-aligned in BUF, so its words are the ones the search over BUF
 * looks at, and its answer is that search's when the PSB's run of 02 82 ends inside it
 * (or the window reaches LEN); a PSB whose run reaches the window's end is read again in
 * the next window, which begins with it. A read that fails, or a run longer than a window,
 * gives -1: the caller looks in the mapping. */
static int psb_find_read(const struct tk_input *in, uint64_t off, size_t len, size_t from,
			 size_t *psb)
{
	uint8_t w[PSB_WINDOW];
	size_t w0 = from & ~(size_t)7, want = PSB_FIRST_WINDOW;

	while (w0 < len) {
		size_t n = len - w0 < want ? len - w0 : want, s;
		if (tk_input_pread(in, w, n, off + w0) != (long)n)
			return -1;
		want = PSB_WINDOW;
		if (tk_ipt_psb_find(w, n, from > w0 ? from - w0 : 0, &s) == 0) {
			if (w0 + n < len && s + TK_IPT_PSB_SIZE + 2 > n) {
				size_t at = (w0 + s) & ~(size_t)7;
				if (at == w0)
					return -1;
				w0 = at;
				continue;
			}
			*psb = w0 + s;
			return 0;
		}
		if (w0 + n == len)
			break;
		w0 += n - 32;   /* a PSB across the window's end is whole in the next */
	}
	return -TK_E_NOSYNC;
}

/* Where the search for the chunk after one that starts at S begins: the next multiple of
 * CHUNK. Chunks start at the first PSB at or after each multiple (one start for multiples
 * with no PSB between them), so the multiples of a part of the trace can be searched apart
 * from the rest, on a thread of their own, and find what one search of the whole would. */
static size_t split_next(size_t s, size_t chunk)
{
	return (s / chunk + 1) * chunk;
}

/* The chunk starts in [FROM, TO) (up to MAX of them into OFFSETS), FROM a multiple of
 * CHUNK; the searches read IN's file where BUF lies at OFF of it (IN NULL: BUF). */
static int64_t split_range(const struct tk_input *in, uint64_t off, const uint8_t *buf,
			   size_t len, size_t chunk, size_t from, size_t to, uint64_t *offsets,
			   size_t max)
{
	size_t s, pos = from;
	int64_t n = 0;

	while (pos < len && pos < to) {
		int r = in ? psb_find_read(in, off, len, pos, &s) : -1;
		if (r == -1)
			r = tk_ipt_psb_find(buf, len, pos, &s);
		if (r < 0 || s >= to)
			break;
		if ((size_t)n < max && offsets)
			offsets[n] = s;
		n++;
		pos = split_next(s, chunk);
	}
	return n;
}

int64_t tk_ipt_split(const uint8_t *buf, size_t len, size_t chunk_bytes, uint64_t *offsets,
		     size_t max)
{
	if (!buf)
		return 0;
	if (chunk_bytes < TK_IPT_PSB_SIZE)
		chunk_bytes = TK_IPT_PSB_SIZE;
	return split_range(NULL, 0, buf, len, chunk_bytes, 0, SIZE_MAX, offsets, max);
}

/* IN when BUF, at IN_OFFSET of IN's file, holds the file's bytes there (NULL, or a copy
 * read in, from a pipe or decompressed, has none: the split searches BUF). */
static const struct tk_input *split_in(const struct tk_input *in, uint64_t in_offset,
				       const uint8_t *buf, size_t len)
{
	uint8_t head[TK_IPT_PSB_SIZE];

	if (!in || !buf || len < sizeof head ||
	    tk_input_pread(in, head, sizeof head, in_offset) != (long)sizeof head ||
	    memcmp(head, buf, sizeof head) != 0)
		return NULL;
	return in;
}

/* tk_ipt_split(BUF, LEN, CHUNK, OFFSETS, MAX) with its searches' bytes read from IN, where
 * BUF lies at IN_OFFSET of IN's file (NULL, or bytes not the file's: the mapping is read):
 * through a mapping, each chunk's start is a first touch of the trace on the calling
 * thread, before any chunk is decoded (a fault of 12-130 us on this project's VMs). */
int64_t ipt_split_read(const struct tk_input *in, uint64_t in_offset, const uint8_t *buf,
		       size_t len, size_t chunk, uint64_t *offsets, size_t max)
{
	if (!buf)
		return 0;
	if (chunk < TK_IPT_PSB_SIZE)
		chunk = TK_IPT_PSB_SIZE;
	return split_range(split_in(in, in_offset, buf, len), in_offset, buf, len, chunk, 0,
			   SIZE_MAX, offsets, max);
}

size_t ipt_split_max(size_t len, size_t chunk)
{
	return len / (chunk < TK_IPT_PSB_SIZE ? TK_IPT_PSB_SIZE : chunk) + 1;
}

/* The split's searches on the pool: each job the multiples of CHUNK in a range of them, its
 * starts written from the range's first multiple's index in OFFS on (a start per multiple
 * at most), moved together once all are done. With 64 KiB chunks (a timeline's) the
 * 2,073 searches of libc's 140 MB trace took 4-14 ms of the calling thread before any chunk
 * was decoded, the pread of each window mostly (a system call: 2-7 us in this project's
 * VMs). */
#define SPLIT_JOB_MULTIPLES 256
struct split_par {
	const struct tk_input *in;
	uint64_t off;
	const uint8_t *buf;
	size_t len, chunk, multiples;
	uint64_t *offs;
	int64_t *found;   /* per job */
};

static int split_job(void *ctx, size_t k)
{
	struct split_par *P = ctx;
	size_t a = k * SPLIT_JOB_MULTIPLES, b = a + SPLIT_JOB_MULTIPLES;

	if (b > P->multiples)
		b = P->multiples;
	P->found[k] = split_range(P->in, P->off, P->buf, P->len, P->chunk, a * P->chunk,
				  b == P->multiples ? SIZE_MAX : b * P->chunk, P->offs + a, b - a);
	return 0;
}

/* ipt_split_read's starts into OFFS (room for one per multiple of CHUNK below LEN) on
 * NTHREADS threads, the calling thread one of them with CALLER_WORKS: their number, or -1
 * when the pool could not run them. */
static int64_t split_parallel(const struct tk_input *in, uint64_t in_offset, const uint8_t *buf,
			      size_t len, size_t chunk, uint64_t *offs, unsigned nthreads,
			      int caller_works)
{
	if (chunk < TK_IPT_PSB_SIZE)
		chunk = TK_IPT_PSB_SIZE;
	struct split_par P = { split_in(in, in_offset, buf, len), in_offset, buf, len, chunk,
			       (len + chunk - 1) / chunk, offs, NULL };
	size_t jobs = (P.multiples + SPLIT_JOB_MULTIPLES - 1) / SPLIT_JOB_MULTIPLES;
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nthreads,
				   .caller_works = caller_works };
	int64_t n = 0;

	if (!(P.found = malloc(jobs * sizeof *P.found)))
		return -1;
	if (tk_pool_run(&po, jobs, split_job, NULL, &P) < 0) {
		free(P.found);
		return -1;
	}
	for (size_t k = 0; k < jobs; k++) {
		memmove(offs + n, offs + k * SPLIT_JOB_MULTIPLES, (size_t)P.found[k] * sizeof *offs);
		n += P.found[k];
	}
	free(P.found);
	return n;
}

int64_t ipt_split_starts(const struct tk_input *in, uint64_t in_offset, const uint8_t *buf,
			 size_t len, size_t chunk, unsigned nthreads, int caller_works,
			 uint64_t **offs)
{
	size_t room = ipt_split_max(len, chunk);
	int64_t n;

	*offs = NULL;
	if (room > IPT_ROOM_BOUND_MAX) {
		n = ipt_split_read(in, in_offset, buf, len, chunk, NULL, 0);
		room = n > 0 ? (size_t)n : 0;
	}
	if (!room)
		return 0;
	if (!(*offs = malloc(room * sizeof **offs)))
		return -TK_E_NOMEM;
	/* (after a count, the bound is far past what a pool's jobs would be given) */
	int on_pool = buf && nthreads > 1 && room == ipt_split_max(len, chunk) &&
		      room > 2 * SPLIT_JOB_MULTIPLES;
	n = on_pool ? split_parallel(in, in_offset, buf, len, chunk, *offs, nthreads, caller_works)
		    : -1;
	if (n < 0)
		n = ipt_split_read(in, in_offset, buf, len, chunk, *offs, room);
	if (n <= 0) {
		free(*offs);
		*offs = NULL;
	}
	return n;
}

/* ---- last IP ------------------------------------------------------------------------ */

int tk_ipt_last_ip_update(struct tk_ipt_last_ip *l, const struct tk_ipt_packet *pkt)
{
	switch (pkt->kind) {
	case TK_IPT_PKT_TIP:
	case TK_IPT_PKT_TIP_PGE:
	case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP:
		break;
	default:
		return 0;
	}
	uint64_t v = pkt->ip.ip;
	switch (pkt->ip.ipc) {
	case TK_IPT_IPC_SUPPRESSED:
		l->suppressed = 1;
		return 0;
	case TK_IPT_IPC_UPDATE_16:
		l->ip = (l->ip & ~0xffffULL) | (v & 0xffff);
		break;
	case TK_IPT_IPC_UPDATE_32:
		l->ip = (l->ip & ~0xffffffffULL) | (v & 0xffffffff);
		break;
	case TK_IPT_IPC_SEXT_48:
		l->ip = (uint64_t)((int64_t)(v << 16) >> 16);
		break;
	case TK_IPT_IPC_UPDATE_48:
		l->ip = (l->ip & ~0xffffffffffffULL) | (v & 0xffffffffffffULL);
		break;
	case TK_IPT_IPC_FULL:
		l->ip = v;
		break;
	default:
		return -TK_E_BAD_FORMAT;
	}
	l->have_ip = 1;
	l->suppressed = 0;
	return 0;
}

int tk_ipt_last_ip_query(const struct tk_ipt_last_ip *l, uint64_t *ip)
{
	if (!l->have_ip)
		return -TK_E_NOT_FOUND;
	if (l->suppressed)
		return -TK_E_NOSYNC;
	if (ip)
		*ip = l->ip;
	return 0;
}

/* ---- decoder handle ------------------------------------------------------------------- */

struct tk_ipt_pkt_decoder {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	int synced;           /* POS is valid */
	size_t psb;           /* last sync point (sync_forward/backward), or SIZE_MAX */
	uint64_t base;
	struct tk_ipt_ctx ctx;
	/* a CYC longer than one byte seen: cycle-accurate, the window walk takes two-byte
	 * CYCs from then on (it costs a little on every packet, so not before) */
	uint8_t long_cyc;
};

struct tk_ipt_pkt_decoder *tk_ipt_pkt_decoder_new(const uint8_t *buf, size_t len,
						  const struct tk_ipt_pkt_opts *opts, int *err)
{
	struct tk_ipt_pkt_decoder *d;

	if (!buf && len) {
		if (err)
			*err = -TK_E_INVAL;
		return NULL;
	}
	d = calloc(1, sizeof *d);
	if (!d) {
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	d->buf = buf;
	d->len = len;
	d->psb = SIZE_MAX;
	if (opts && opts->sz >= offsetof(struct tk_ipt_pkt_opts, base_offset) + sizeof(uint64_t))
		d->base = opts->base_offset;
	if (opts && opts->sz >= offsetof(struct tk_ipt_pkt_opts, errata) + sizeof(uint32_t))
		d->ctx.errata = (uint8_t)(opts->errata & TK_IPT_ERRATA_PACKET);
	if (err)
		*err = 0;
	return d;
}

void tk_ipt_pkt_decoder_free(struct tk_ipt_pkt_decoder *dec)
{
	free(dec);
}

int tk_ipt_pkt_next(struct tk_ipt_pkt_decoder *d, struct tk_ipt_packet *pkt)
{
	if (!d || !pkt)
		return -TK_E_INVAL;
	if (!d->synced)
		return -TK_E_BAD_STATE;
	if (d->pos >= d->len)
		return -TK_E_EOF;
	int n = decode_at(d->buf + d->pos, d->len - d->pos, &d->ctx, pkt);
	if (n < 0)
		return n;
	pkt->offset = d->base + d->pos;
	pkt->size = (uint8_t)n;
	d->pos += (size_t)n;
	return n;
}

/* One packet of the fast table at P into K: kind+size, offset, and the union's two words
 * from (8 payload bytes & mask) | {val, aux}. Needs 9 readable bytes at P. */
static inline __attribute__((always_inline)) void fast_emit(struct tk_ipt_packet *k,
							     const struct fast_entry *f,
							     const uint8_t *p, uint64_t off)
{
	memcpy(k, &f->hdr, 8);
	k->offset = off;
#ifdef __SSE2__
	__m128i x = _mm_loadl_epi64((const __m128i *)(const void *)(p + 1));
	x = _mm_and_si128(x, _mm_load_si128((const __m128i *)(const void *)&f->mask));
	x = _mm_or_si128(x, _mm_load_si128((const __m128i *)(const void *)&f->val));
	_mm_storeu_si128((__m128i *)(void *)&k->ip, x);
#else
	k->ip.ip = (tk_le64(p + 1) & f->mask) | f->val;
	memcpy((char *)k + offsetof(struct tk_ipt_packet, ip.ipc), &f->aux, 8);
#endif
}

/* The other frequent extended packets (one each in every PSB+, on CR3 writes, PTWRITE)
 * for the batch walk, with 16 bytes readable at P: the same fields as decode_ext,
 * without its two jump tables (each a likely mispredict when kinds mix). Out of line,
 * so that the walk's own code stays as it is. Returns the size, or 0: the decoder. */
static __attribute__((noinline)) unsigned ext_inline(const uint8_t *p, struct tk_ipt_packet *k)
{
	uint8_t e = p[1];
	if (e == 0x43) {
		uint64_t v = rd48(p + 2);
		k->kind = TK_IPT_PKT_PIP;
		k->pip.nr = v & 1;
		k->pip.cr3 = (v >> 1) << 5;
		return 8;
	}
	if (e == 0x03) {
		k->kind = TK_IPT_PKT_CBR;
		k->cbr.ratio = p[2];
		return 4;
	}
	if ((e & 0x1f) == 0x12 && !(e & 0x40)) {
		unsigned plc = (e >> 5) & 1;
		k->kind = TK_IPT_PKT_PTW;
		k->ptw.payload = tk_le64(p + 2) & (plc ? ~0ULL : 0xffffffffULL);
		k->ptw.plc = (uint8_t)plc;
		k->ptw.ip = e >> 7;
		return plc ? 10 : 6;
	}
	return 0;
}

/* The longest packet the fast table describes: TIP/FUP with a full IP. */
#define FAST_MAX 9
#define UNROLL 4

/* Sizes ahead of time. Looking up fast_size[*p] puts two loads (the byte, then its
 * size) on the loop-carried chain p -> p + size, which bounds the walk at about 9
 * cycles a packet however few instructions it runs. So with AVX2, the next packet's
 * index (j + size) for a packet starting at each byte j of a window of SZW bytes, and
 * its table slot, are computed first, 32 bytes per step and no chain, and the walk
 * then needs one load per packet on the chain: i = nxv[i]. The sizes equal fast_size[]
 * for the table packets, and the pass adds MODE.Exec and TNT-64 (checked once at first
 * use). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SZW 256
#define WIN_UNROLL 4   /* WIN_LOOP's steps */

__attribute__((target("avx2"))) static void nexts_avx2(const uint8_t *p, uint8_t *out, uint8_t *key,
							size_t n, int cyc2)
{
	/* By the low nibble L: 1 for even L (TNT-8, PAD) and L = 3, b (one-byte CYC);
	 * with CYC2, 2 for L = 7, f if the next byte has bit 0 clear (two-byte CYC);
	 * TIP/TIP.PGE/TIP.PGD/FUP (L = 1, d) take their size from the IPC (high nibble
	 * / 2); L = 9 is TSC (0x19) or MTC (0x59) by the high nibble; 0x02 and all else:
	 * 0 (slow path). */
	const __m256i fix = cyc2 ? _mm256_setr_epi8(1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2,
						    1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2)
				 : _mm256_setr_epi8(1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0,
						    1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0);
	const __m256i ipm = _mm256_setr_epi8(0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0,
					     0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0);
	const __m256i l9m = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0,
					     0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0);
	const __m256i ips = _mm256_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, 7, 7, 0, 0, 9, 9, 0, 0,
					     1, 1, 3, 3, 5, 5, 7, 7, 7, 7, 0, 0, 9, 9, 0, 0);
	const __m256i l9s = _mm256_setr_epi8(0, 8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					     0, 8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	const __m256i lo = _mm256_set1_epi8(0x0f), ext = _mm256_set1_epi8(0x02);
	const __m256i step = _mm256_set1_epi8(32);
	const __m256i mode = _mm256_set1_epi8((char)0x99), hi3 = _mm256_set1_epi8((char)0xe0);
	const __m256i two = _mm256_set1_epi8(2), k70 = _mm256_set1_epi8(0x70);
	const __m256i a3 = _mm256_set1_epi8((char)0xa3), eight = _mm256_set1_epi8(8);
	__m256i idx = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
				       16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);

	for (size_t i = 0; i < n; i += 32) {
		__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
		__m256i l = _mm256_and_si256(b, lo);
		__m256i h = _mm256_and_si256(_mm256_srli_epi16(b, 4), lo);
		__m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 1));
		/* two-byte CYC: 2 from fix (the only size there with bit 1), dropped if
		 * the next byte has bit 0 set (b1 << 1 in 16-bit lanes: the bit carried in
		 * from the byte below lands in bit 0, not in bit 1) */
		__m256i s = _mm256_shuffle_epi8(fix, l);
		s = _mm256_andnot_si256(_mm256_and_si256(_mm256_slli_epi16(b1, 1), two), s);
		s = _mm256_or_si256(s, _mm256_and_si256(_mm256_shuffle_epi8(ipm, l),
							_mm256_shuffle_epi8(ips, h)));
		s = _mm256_or_si256(s, _mm256_and_si256(_mm256_shuffle_epi8(l9m, l),
							_mm256_shuffle_epi8(l9s, h)));
		__m256i isx = _mm256_cmpeq_epi8(b, ext);
		s = _mm256_andnot_si256(isx, s);
		/* MODE.Exec (99, then 000xxxxx): 2 bytes, its table slot by the mode bits
		 * it reports, 0x99 ^ (mode & 7) << 4 (the free slots x9 of no packet of
		 * the table); every other packet's slot is its first byte. */
		__m256i ex = _mm256_and_si256(_mm256_cmpeq_epi8(b, mode),
					      _mm256_cmpeq_epi8(_mm256_and_si256(b1, hi3),
								_mm256_setzero_si256()));
		s = _mm256_or_si256(s, _mm256_and_si256(ex, two));
		/* TNT-64 (02 a3): 8 bytes, slot 0x02 (finished after the walk) */
		s = _mm256_or_si256(s, _mm256_and_si256(_mm256_and_si256(isx, _mm256_cmpeq_epi8(b1, a3)),
							eight));
		__m256i kx = _mm256_and_si256(_mm256_slli_epi16(b1, 4), k70);
		_mm256_store_si256((__m256i *)(void *)(key + i),
				   _mm256_xor_si256(b, _mm256_and_si256(ex, kx)));
		/* out[j] = j + size (mod 256: the walk never starts a packet past
		 * SZW - 9): its chain is then one load, j = out[j], with no add on it
		 * (size 0: out[j] = j, the exit test). */
		_mm256_store_si256((__m256i *)(void *)(out + i), _mm256_add_epi8(s, idx));
		idx = _mm256_add_epi8(idx, step);
	}
}

/* 1: AVX2 present and nexts_avx2 agrees with fast_size[] on every byte value. */
static int szv_usable(void)
{
	static int usable = -1;
	int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);
	if (u >= 0)
		return u;
	u = 0;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2")) {
		uint8_t all[256 + 32] = { 0 };
		uint8_t nx[256] __attribute__((aligned(32))), key[256] __attribute__((aligned(32)));
		u = 1;
		for (int cyc2 = 0; cyc2 < 2; cyc2++) {
			for (int i = 0; i < 256; i++)
				all[i] = (uint8_t)i;
			nexts_avx2(all, nx, key, 256, cyc2);
			/* all[i + 1] is even after each xxxxx111: a two-byte CYC */
			for (int i = 0; i < 256; i++)
				u &= nx[i] == (uint8_t)(i + (cyc2 && (i & 7) == 7 ? 2 : fast_size[i])) &&
				     key[i] == i;
			all[0] = 0x99, all[1] = 0x05;   /* MODE.Exec, csl and iflag */
			nexts_avx2(all, nx, key, 32, cyc2);
			u &= nx[0] == 2 && key[0] == (0x99 ^ 0x50);
			all[0] = 0x02, all[1] = 0xa3;   /* TNT-64 */
			nexts_avx2(all, nx, key, 32, cyc2);
			u &= nx[0] == 8 && key[0] == 0x02 && nx[1] == 1 + fast_size[0xa3];
			all[0] = 0x0f, all[1] = 0x03;   /* CYC of three bytes or more */
			nexts_avx2(all, nx, key, 32, cyc2);
			u &= nx[0] == 0;
		}
	}
	__atomic_store_n(&usable, u, __ATOMIC_RELAXED);
	return u;
}
#else
#define SZW 0
#endif

#if SZW
/* TNT-64 packets of the window walk, emitted with their raw payload << 8 in ip.ip
 * (count 0): split the stop bit off. Out of the walk, in a loop of their own, so that
 * the walk does not branch on them (TNT-64 after TNT-8 comes at random, each exit from
 * the walk a mispredicted branch). Returns the index in TL of one without a stop bit
 * (an error at that packet), or NT. */
#define TL_MAX 48   /* > TNT-64 packets starting in one window: SZW / 8 + WIN_UNROLL */
static inline size_t tnt64_finish(struct tk_ipt_packet *const *tl, size_t nt)
{
	for (size_t f = 0; f < nt; f++) {
		struct tk_ipt_packet *o = tl[f];
		uint64_t v = o->tnt.bits >> 8;
		if (__builtin_expect(v < 2, 0))
			return f;
		int top = 63 - __builtin_clzll(v);
		o->tnt.bits = v & ~(1ULL << top);
		o->tnt.count = (uint8_t)top;
	}
	return nt;
}

/* Two-byte CYCs of the window walk, emitted raw (fast_table.h): the value from the
 * first byte's bits 7:3 (raw 12:8) and the second's 7:1 (raw 7:1). Out of the walk for
 * the same reason as TNT-64: in a cycle-accurate trace one CYC in eight or so is long,
 * at random. A list of their own: one loop over both kinds would branch on the kind or
 * compute both (each measured slower). */
#define CL_MAX (SZW / 2 + WIN_UNROLL + 1)   /* > two-byte CYCs starting in one window */
static inline void cyc2_finish(struct tk_ipt_packet *const *cl, size_t nc)
{
	for (size_t f = 0; f < nc; f++) {
		uint64_t raw = cl[f]->cyc.value;
		cl[f]->cyc.value = raw >> 8 | (raw & 0xfe) << 4;
	}
}
#endif

int tk_ipt_pkt_next_batch(struct tk_ipt_pkt_decoder *d, struct tk_ipt_packet *pkts,
			  size_t n, int *err)
{
	struct tk_ipt_packet *k = pkts, *kend = pkts + n;
	int e = 0;

	if (!d || (!pkts && n)) {
		if (err)
			*err = -TK_E_INVAL;
		return 0;
	}
	if (!d->synced) {
		if (err)
			*err = -TK_E_BAD_STATE;
		return 0;
	}
	const uint8_t *buf = d->buf, *p = buf + d->pos, *end = buf + d->len;
	/* offset of P = P + obias (mod 2^64) */
	const uint64_t obias = d->base - (uint64_t)(uintptr_t)buf;
	/* A packet starting before fast_end has 16 readable bytes; before fast4_end, so
	 * have UNROLL packets of the fast table in a row. */
	const size_t len = d->len;
	const uint8_t *fast_end = len >= 16 ? end - 15 : buf;
	const uint8_t *fast4_end = len >= 16 + UNROLL * FAST_MAX ? end - 15 - UNROLL * FAST_MAX : buf;
	uint8_t blk = d->ctx.blk;
	/* erratum SKD007 is read in decode_at: two-byte CYCs go there, not through the fast
	 * paths (SKZ84's TMA always does) */
	const int skd007 = (d->ctx.errata & TK_IPT_ERRATUM_SKD007) != 0;
#if SZW
	/* Window [wb, wb + SZW) with next indices nxv and table slots keyv; packets
	 * starting before wlim are walked with it (UNROLL of them stay inside). A window
	 * starts only where SZW + 16 bytes are readable, so every packet in it has its 16. */
	uint8_t nxv[SZW] __attribute__((aligned(32))), keyv[SZW] __attribute__((aligned(32)));
	/* TNT-64 packets and two-byte CYCs emitted raw in the current window, for
	 * tnt64_finish and cyc2_finish (size_t: no zero extension per packet) */
	struct tk_ipt_packet *tl[TL_MAX], *cl[CL_MAX];
	size_t nt = 0, nc = 0, bad;
	const uint8_t *wb = p, *wlim = p;
	const int win = szv_usable() && len >= SZW + 16;
	int wcyc2 = 0;   /* the window takes two-byte CYCs (d->long_cyc at its start) */
	const uint8_t *win_end = win ? end - SZW - 16 : buf;
#endif

	while (k < kend) {
		if (__builtin_expect(!blk, 1)) {
#if SZW
			for (;;) {
				if (p >= wlim) {
					if (!win || p > win_end)
						break;
					cyc2_finish(cl, nc);
					nc = 0;
					if ((bad = tnt64_finish(tl, nt)) < nt)
						goto tnt64_bad;
					nt = 0;
					wb = p;
					wlim = p + SZW - WIN_UNROLL * FAST_MAX;
					wcyc2 = d->long_cyc && !skd007;
					nexts_avx2(wb, nxv, keyv, SZW, wcyc2);
				}
				size_t i = (size_t)(p - wb);
				if (kend - k < WIN_UNROLL)
					break;
				/* The hot loop: per packet the chain i -> nxv[i]. Every packet
				 * is stored in tl[nt] (and cl[nc] if the window takes two-byte
				 * CYCs), kept (+ 1) only for a TNT-64 (a two-byte CYC): no
				 * branch on the kind. */
#define WIN_STEP(j, cyc2)							\
				{							\
					size_t nx = nxv[i];				\
					if (__builtin_expect(nx == i, 0)) {		\
						k += j;					\
						p = wb + i;				\
						goto slow;				\
					}						\
					const uint8_t *q = wb + i;			\
					unsigned key = keyv[i];				\
					fast_emit(k + j, &fast_table[key], q,		\
						  (uint64_t)(uintptr_t)q + obias);	\
					tl[nt] = k + j;					\
					nt += key == 0x02;				\
					if (cyc2) {					\
						cl[nc] = k + j;				\
						nc += (key & 7) == 7;			\
					}						\
					i = nx;						\
				}
#define WIN_LOOP(cyc2)								\
				do {						\
					WIN_STEP(0, cyc2)			\
					WIN_STEP(1, cyc2)			\
					WIN_STEP(2, cyc2)			\
					WIN_STEP(3, cyc2)			\
					k += WIN_UNROLL;			\
				} while (kend - k >= WIN_UNROLL && i < SZW - WIN_UNROLL * FAST_MAX)
				if (wcyc2)
					WIN_LOOP(1);
				else
					WIN_LOOP(0);
#undef WIN_LOOP
#undef WIN_STEP
				p = wb + i;
			}
#endif
			/* The hot loop: per packet one byte, one size byte on the position's
			 * dependency chain, "in the table or not" the only data-dependent
			 * branch; the loop test once per UNROLL packets. */
			while (kend - k >= UNROLL && p < fast4_end) {
#define FAST_STEP(j)								\
				{							\
					unsigned sz = fast_size[*p];			\
					if (__builtin_expect(sz == 0, 0)) {		\
						k += j;					\
						goto slow;				\
					}						\
					fast_emit(k + j, &fast_table[*p], p,		\
						  (uint64_t)(uintptr_t)p + obias);	\
					p += sz;					\
				}
				FAST_STEP(0)
				FAST_STEP(1)
				FAST_STEP(2)
				FAST_STEP(3)
#undef FAST_STEP
				k += UNROLL;
			}
			while (k < kend && p < fast_end) {
				unsigned sz = fast_size[*p];
				if (__builtin_expect(sz == 0, 0))
					break;
				fast_emit(k, &fast_table[*p], p, (uint64_t)(uintptr_t)p + obias);
				p += sz;
				k++;
			}
			if (k == kend)
				break;
		}
slow:
		if (p >= end) {
			e = -TK_E_EOF;
			break;
		}
		uint64_t off = (uint64_t)(uintptr_t)p + obias;
		if (p < fast_end && !blk) {
			/* The frequent packets outside the table, inline: TNT-64, PSBEND,
			 * MODE.Exec (around every syscall of a user-only trace), long CYC. */
			uint8_t b = p[0];
			if (b == 0x02) {
				if (p[1] == 0xa3) {
					uint64_t v = rd48(p + 2);
					if (__builtin_expect(v >= 2, 1)) {
						int top = 63 - __builtin_clzll(v);
						k->kind = TK_IPT_PKT_TNT64;
						k->size = 8;
						k->offset = off;
						k->tnt.bits = v & ~(1ULL << top);
						k->tnt.count = (uint8_t)top;
						p += 8;
						k++;
						continue;
					}
				} else if (p[1] == 0x23) {
					k->kind = TK_IPT_PKT_PSBEND;
					k->size = 2;
					k->offset = off;
					p += 2;
					k++;
					continue;
				}
				unsigned n = ext_inline(p, k);
				if (n) {
					k->size = (uint8_t)n;
					k->offset = off;
					p += n;
					k++;
					continue;
				}
			} else if (b == 0x99) {
				uint8_t m = p[1];
				if ((m >> 5) == 0) {
					/* csl, csd, iflag: bits 0..2 of M spread to bytes */
					uint64_t w = (m & 1) | (uint64_t)(m & 2) << 7 |
						     (uint64_t)(m & 4) << 14;
					uint64_t hdr = TK_IPT_PKT_MODE_EXEC | (uint64_t)2 << 32;
					memcpy(k, &hdr, 8);
					k->offset = off;
					k->ip.ip = w;
					p += 2;
					k++;
					continue;
				}
				if ((m >> 5) == 1) {
					k->kind = TK_IPT_PKT_MODE_TSX;
					k->size = 2;
					k->offset = off;
					k->tsx.intx = m & 1;
					k->tsx.abrt = (m >> 1) & 1;
					p += 2;
					k++;
					continue;
				}
			} else if ((b & 7) == 7) {
				/* Up to 8 more bytes, 7 bits each above the ext bit, the last one's
				 * ext bit clear: found and packed without a loop (whose trip count,
				 * the packet's size, would be one more branch to mispredict). */
				uint64_t x = tk_le64(p + 1);
				uint64_t stop = ~x & 0x0101010101010101ULL;
				if (__builtin_expect(stop != 0, 1) && !(skd007 && (x & 0xff) == 0x02)) {
					unsigned nb = (unsigned)__builtin_ctzll(stop) / 8 + 1;
					uint64_t y = (x & (~0ULL >> (64 - 8 * nb))) >> 1 &
						     0x7f7f7f7f7f7f7f7fULL;
					y = (y & 0x007f007f007f007fULL) | (y & 0x7f007f007f007f00ULL) >> 1;
					y = (y & 0x00003fff00003fffULL) | (y & 0x3fff00003fff0000ULL) >> 2;
					y = (y & 0x000000000fffffffULL) | (y & 0x0fffffff00000000ULL) >> 4;
					k->kind = TK_IPT_PKT_CYC;
					k->size = (uint8_t)(1 + nb);
					k->offset = off;
					k->cyc.value = (uint64_t)(b >> 3) | y << 5;
					d->long_cyc = 1;
					p += 1 + nb;
					k++;
					continue;
				}
			}
		}
		int r = decode_at(p, (size_t)(end - p), &d->ctx, k);
		blk = d->ctx.blk;
		if (r < 0) {
			e = r;
			break;
		}
		k->offset = off;
		k->size = (uint8_t)r;
		p += r;
		k++;
	}
#if SZW
	cyc2_finish(cl, nc);
	if ((bad = tnt64_finish(tl, nt)) < nt) {
tnt64_bad:
		/* A TNT-64 without stop bit: the batch ends before it, with the
		 * decoder's error for it; what followed it is dropped (the window walk
		 * ran with blk 0 there). */
		k = tl[bad];
		p = (const uint8_t *)(uintptr_t)(k->offset - obias);
		d->ctx.blk = 0;
		e = decode_at(p, (size_t)(end - p), &d->ctx, k);
	}
#endif
	d->pos = (size_t)(p - buf);
	if (err)
		*err = e;
	return (int)(k - pkts);
}

int tk_ipt_pkt_sync_forward(struct tk_ipt_pkt_decoder *d)
{
	size_t from, s;
	if (!d)
		return -TK_E_INVAL;
	from = d->pos;
	if (from == d->psb)
		from += TK_IPT_PSB_SIZE;
	/* As libipt: start a little earlier to find a PSB that a preceding (bad)
	 * packet has partly eaten. */
	from -= from < TK_IPT_PSB_SIZE - 1 ? from : TK_IPT_PSB_SIZE - 1;
	if (from > d->len || tk_ipt_psb_find(d->buf, d->len, from, &s) < 0)
		return -TK_E_EOF;
	d->pos = d->psb = s;
	d->synced = 1;
	d->ctx.blk = 0;
	return 0;
}

int tk_ipt_pkt_resync(struct tk_ipt_pkt_decoder *d, uint64_t end, uint64_t *at,
		      uint64_t *skipped)
{
	uint64_t next = end;

	tk_ipt_pkt_get_offset(d, at);
	int more = tk_ipt_pkt_sync_forward(d) == 0;
	if (more)
		tk_ipt_pkt_get_offset(d, &next);
	*skipped = next > *at ? next - *at : 0;
	return more;
}

int tk_ipt_pkt_sync_backward(struct tk_ipt_pkt_decoder *d)
{
	uint64_t s;
	if (!d)
		return -TK_E_INVAL;
	size_t before = d->synced ? d->pos : d->len;
	if (tk_ipt_psb_prev(d->buf, d->len, before, &s) < 0)
		return -TK_E_EOF;
	d->pos = d->psb = (size_t)s;
	d->synced = 1;
	d->ctx.blk = 0;
	return 0;
}

int tk_ipt_pkt_sync_set(struct tk_ipt_pkt_decoder *d, uint64_t offset)
{
	if (!d)
		return -TK_E_INVAL;
	if (offset < d->base || offset - d->base > d->len)
		return -TK_E_EOF;
	d->pos = d->psb = (size_t)(offset - d->base);
	d->synced = 1;
	d->ctx.blk = 0;
	return 0;
}

int tk_ipt_pkt_get_offset(const struct tk_ipt_pkt_decoder *d, uint64_t *offset)
{
	if (!d || !offset)
		return -TK_E_INVAL;
	*offset = d->base + d->pos;
	return 0;
}

int tk_ipt_pkt_get_sync_offset(const struct tk_ipt_pkt_decoder *d, uint64_t *offset)
{
	if (!d || !offset)
		return -TK_E_INVAL;
	if (d->psb == SIZE_MAX)
		return -TK_E_BAD_STATE;
	*offset = d->base + d->psb;
	return 0;
}
