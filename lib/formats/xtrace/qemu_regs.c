/* qemu-aarch64 `-d cpu,fpu` register dumps: "X00=hex", " SP=hex", "PSTATE=hex", "FPCR=",
 * "FPSR=", "P00=h:h", "FFR=h", and SVE vectors as "Z00[3-2]=h:h:h:h" continued on lines
 * "   [1-0]=h:h:h:h", the most significant 64-bit word first. */
#include <string.h>

#include "tracekit/internal/qemu_regs.h"

#define MAX_Z_WORDS (TK_QEMU_MAX_VL_BYTES / 8)

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* A hex number at *P (before END), as strtoull reads QEMU's: too large saturates. */
static uint64_t hex(const char **p, const char *end)
{
	uint64_t v = 0;
	int over = 0;
	for (; *p < end && is_hex(**p); (*p)++) {
		char c = **p;
		unsigned d = c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
		over |= v >> 60 != 0;
		v = v << 4 | d;
	}
	return over ? UINT64_MAX : v;
}

/* A decimal register number (at most 2 digits, else -1). */
static int regno(const char *s, const char *end)
{
	int n = 0, k = 0;
	for (; s < end && *s >= '0' && *s <= '9'; s++)
		if (++k > 2)
			return -1;
		else
			n = n * 10 + (*s - '0');
	return k ? n : -1;
}

/* Words "h:h:h" at V, high first, into W (at most MAX); how many. */
static int hex_words(const char *v, const char *end, uint64_t *w, int max)
{
	int n = 0;
	while (v < end && n < max) {
		w[n++] = hex(&v, end);
		if (v >= end || *v != ':')
			break;
		v++;
	}
	return n;
}

/* Words (high first) into little-endian bytes. */
static void words_le(const uint64_t *w, int n, uint8_t *out)
{
	for (int i = 0; i < n; i++)
		memcpy(out + 8 * (size_t)(n - 1 - i), &w[i], 8);
}

static int name_is(const char *tok, const char *eq, const char *name)
{
	size_t l = strlen(name);
	return (size_t)(eq - tok) == l && !memcmp(tok, name, l);
}

void tk_qemu_regs_parse(const char *text, size_t n, unsigned flags, struct tk_qemu_regs *r)
{
	uint64_t zw[32][MAX_Z_WORDS], w[4];
	int zn[32] = { 0 }, cur_z = -1;
	const char *p = text, *end = text + n;

	memset(r, 0, sizeof *r);
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\n'))
			p++;
		const char *tok = p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		const char *eq = memchr(tok, '=', (size_t)(p - tok));
		if (!eq)
			continue;
		const char *v = eq + 1;
		int reg = regno(tok + 1, eq);
		if (tok[0] == 'X' && reg >= 0) {
			if (reg < 31)
				r->x[reg] = hex(&v, p);
		} else if (name_is(tok, eq, "SP")) {
			r->x[31] = hex(&v, p);
		} else if (name_is(tok, eq, "PSTATE")) {
			r->nzcv = hex(&v, p) & 0xf0000000u;
			if (flags & TK_QEMU_REGS_GPRS)
				return;
		} else if (flags & TK_QEMU_REGS_GPRS) {
			continue;
		} else if (name_is(tok, eq, "FPCR")) {
			r->fpcr = hex(&v, p);
		} else if (name_is(tok, eq, "FPSR")) {
			r->fpsr = hex(&v, p);
		} else if (tok[0] == 'P' && reg >= 0) {
			int k = hex_words(v, p, w, 4);
			if (reg < 16)
				words_le(w, k, r->p + 32 * reg);
		} else if (name_is(tok, eq, "FFR")) {
			words_le(w, hex_words(v, p, w, 4), r->ffr);
		} else if (tok[0] == 'Z' && tok + 1 < eq && tok[1] >= '0' && tok[1] <= '9') {
			/* "Z00[3-2]=": the number ends at the bracket */
			const char *b = tok + 1;
			while (b < eq && *b >= '0' && *b <= '9')
				b++;
			cur_z = regno(tok + 1, b);
			if (cur_z >= 0 && cur_z < 32)
				zn[cur_z] += hex_words(v, p, zw[cur_z] + zn[cur_z], MAX_Z_WORDS - zn[cur_z]);
		} else if (tok[0] == '[' && cur_z >= 0 && cur_z < 32) {
			zn[cur_z] += hex_words(v, p, zw[cur_z] + zn[cur_z], MAX_Z_WORDS - zn[cur_z]);
		}
	}
	r->vl_bits = (uint32_t)zn[0] * 64;
	for (int i = 0; i < 32; i++) {
		/* one length for all, Z0's: a longer register keeps its low words, a shorter
		 * one is zero-extended (R is zeroed) */
		int k = zn[i] < zn[0] ? zn[i] : zn[0];
		words_le(zw[i] + (zn[i] - k), k, r->z + (size_t)i * (r->vl_bits / 8));
	}
}
