/* A minimal Intel PT packet encoder (Intel SDM vol. 3C ch. 33): just the packets a software
 * branch recorder needs. Header-only, allocation-free and async-signal-safe; the caller owns
 * the output buffer and guarantees PTENC_MAX_PACKET free bytes before each call. */
#ifndef TK_BTRACE_PTENC_H
#define TK_BTRACE_PTENC_H

#include <stdint.h>
#include <string.h>

#define PTENC_MAX_PACKET 48   /* a PSB+ with TSC, MODE.Exec and FUP is 36 bytes */

enum { PT_TIP = 0x0d, PT_TIP_PGE = 0x11, PT_TIP_PGD = 0x01, PT_FUP = 0x1d };

struct ptenc {
	uint8_t *buf;
	size_t len;
	uint64_t last_ip;     /* IP compression state, reset by PSB */
	uint32_t tnt;         /* pending taken/not-taken bits, oldest highest */
	unsigned ntnt;
};

static inline void ptenc_tnt_flush(struct ptenc *e)
{
	if (!e->ntnt)
		return;
	e->buf[e->len++] = (uint8_t)(((1u << e->ntnt) | e->tnt) << 1);
	e->tnt = 0;
	e->ntnt = 0;
}

/* One conditional branch outcome; packed 6 to a short TNT. */
static inline void ptenc_tnt(struct ptenc *e, int taken)
{
	e->tnt = e->tnt << 1 | (taken ? 1 : 0);
	if (++e->ntnt == 6)
		ptenc_tnt_flush(e);
}

/* A packet carrying an IP (TIP, TIP.PGE, TIP.PGD, FUP), compressed against last_ip.
 * SUPPRESS emits no IP (IPBytes = 0). */
static inline void ptenc_ip(struct ptenc *e, unsigned opcode, uint64_t ip, int suppress)
{
	uint64_t last = e->last_ip;
	unsigned ipc, n;

	ptenc_tnt_flush(e);
	if (suppress) {
		e->buf[e->len++] = (uint8_t)opcode;
		return;
	}
	if ((ip >> 16) == (last >> 16))
		ipc = 1, n = 2;
	else if ((ip >> 32) == (last >> 32))
		ipc = 2, n = 4;
	else if ((uint64_t)((int64_t)(ip << 16) >> 16) == ip)
		ipc = 3, n = 6;
	else if ((ip >> 48) == (last >> 48))
		ipc = 4, n = 6;
	else
		ipc = 6, n = 8;
	e->buf[e->len++] = (uint8_t)(ipc << 5 | opcode);
	for (unsigned i = 0; i < n; i++)
		e->buf[e->len++] = (uint8_t)(ip >> (8 * i));
	e->last_ip = ip;
}

/* TSC: the time of the packets that follow (the counter's low 7 bytes). */
static inline void ptenc_tsc(struct ptenc *e, uint64_t tsc)
{
	ptenc_tnt_flush(e);
	e->buf[e->len++] = 0x19;
	for (int i = 0; i < 7; i++)
		e->buf[e->len++] = (uint8_t)(tsc >> (8 * i));
}

/* PSB+: PSB, TSC, MODE.Exec (64-bit), FUP with the current IP when tracing is on, PSBEND. */
static inline void ptenc_psb(struct ptenc *e, uint64_t tsc, int enabled, uint64_t ip)
{
	ptenc_tnt_flush(e);
	for (int i = 0; i < 8; i++) {
		e->buf[e->len++] = 0x02;
		e->buf[e->len++] = 0x82;
	}
	e->last_ip = 0;
	ptenc_tsc(e, tsc);
	e->buf[e->len++] = 0x99;
	e->buf[e->len++] = 0x01;   /* exec mode leaf, CS.L = 1: 64-bit */
	if (enabled)
		ptenc_ip(e, PT_FUP, ip, 0);
	e->buf[e->len++] = 0x02;
	e->buf[e->len++] = 0x23;
}

/* Overflow: data was lost here. */
static inline void ptenc_ovf(struct ptenc *e)
{
	ptenc_tnt_flush(e);
	e->buf[e->len++] = 0x02;
	e->buf[e->len++] = 0xf3;
}

#endif
