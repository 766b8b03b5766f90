/* Intel PT stream walk with resync, packet statistics (tracekit info) and the ptdump-
 * layout dump (tracekit dump). Formatting writes straight into the output buffer. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/ipt/internal.h"
#include "tracekit/internal/util.h"

#define BATCH 512

static const char hex_digits[] = "0123456789abcdef";

static inline char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

/* Exactly N hex digits. */
/* "00" .. "ff": two digits per table load. */
static const char hex_pairs[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

static inline char *put_hexw(char *p, uint64_t v, int n)
{
	int i = n;
	while (i >= 2) {
		i -= 2;
		memcpy(p + i, hex_pairs + 2 * (v & 0xff), 2);
		v >>= 8;
	}
	if (i)
		p[0] = hex_digits[v & 15];
	return p + n;
}

/* Minimal hex digits (printf "%x"). */
static inline char *put_hex(char *p, uint64_t v)
{
	int n = v ? (64 - __builtin_clzll(v) + 3) / 4 : 1;
	return put_hexw(p, v, n);
}

static inline char *put_dec(char *p, unsigned v)
{
	char t[10];
	int n = 0;
	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = t[--n];
	return p;
}

static inline char *pad_to(char *p, char *start, int width)
{
	while (p - start < width)
		*p++ = ' ';
	return p;
}

static const char *err_text(int err)
{
	switch (-err) {
	case TK_E_BAD_OPCODE: return "unknown opcode";
	case TK_E_BAD_FORMAT: return "bad packet";
	case TK_E_TRUNCATED: return "truncated packet";
	default: return tk_strerror(err);
	}
}

/* The payload column of ptdump ("standard" payload, at most 24 characters); returns
 * the end. Empty for packets without payload. */
static char *format_payload(char *p, const struct tk_ipt_packet *k)
{
	switch (k->kind) {
	case TK_IPT_PKT_TNT8:
	case TK_IPT_PKT_TNT64:
		for (int i = k->tnt.count - 1; i >= 0; i--)
			*p++ = (k->tnt.bits >> i) & 1 ? '!' : '.';
		return p;
	case TK_IPT_PKT_TIP:
	case TK_IPT_PKT_TIP_PGE:
	case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP:
		*p++ = hex_digits[k->ip.ipc];
		*p++ = ':';
		*p++ = ' ';
		switch (k->ip.ipc) {
		case TK_IPT_IPC_SUPPRESSED:
			return put_str(p, "????????????????");
		case TK_IPT_IPC_UPDATE_16:
			return put_hexw(put_str(p, "????????????"), k->ip.ip, 4);
		case TK_IPT_IPC_UPDATE_32:
			return put_hexw(put_str(p, "????????"), k->ip.ip, 8);
		case TK_IPT_IPC_UPDATE_48:
			return put_hexw(put_str(p, "????"), k->ip.ip, 12);
		case TK_IPT_IPC_SEXT_48:
			return put_hexw(p, (uint64_t)((int64_t)(k->ip.ip << 16) >> 16), 16);
		default:
			return put_hexw(p, k->ip.ip, 16);
		}
	case TK_IPT_PKT_MODE_EXEC: {
		int any = 0;
		if (k->exec.csd) {
			p = put_str(p, "cs.d");
			any = 1;
		}
		if (k->exec.csl) {
			p = put_str(p, any ? ", cs.l" : "cs.l");
			any = 1;
		}
		if (k->exec.iflag)
			p = put_str(p, any ? ", if" : "if");
		return p;
	}
	case TK_IPT_PKT_MODE_TSX:
		if (k->tsx.intx)
			p = put_str(p, "intx");
		if (k->tsx.abrt)
			p = put_str(p, k->tsx.intx ? ", abrt" : "abrt");
		return p;
	case TK_IPT_PKT_PIP:
		p = put_hex(p, k->pip.cr3);
		return k->pip.nr ? put_str(p, ", nr") : p;
	case TK_IPT_PKT_VMCS:
		return put_hex(p, k->vmcs.base);
	case TK_IPT_PKT_TSC:
		return put_hex(p, k->tsc.tsc);
	case TK_IPT_PKT_CBR:
		return put_hex(p, k->cbr.ratio);
	case TK_IPT_PKT_TMA:
		p = put_hex(p, k->tma.ctc);
		*p++ = ',';
		*p++ = ' ';
		return put_hex(p, k->tma.fc);
	case TK_IPT_PKT_MTC:
		return put_hex(p, k->mtc.ctc);
	case TK_IPT_PKT_CYC:
		return put_hex(p, k->cyc.value);
	case TK_IPT_PKT_MNT:
		return put_hex(p, k->mnt.payload);
	case TK_IPT_PKT_EXSTOP:
		return k->exstop.ip ? put_str(p, "ip") : p;
	case TK_IPT_PKT_MWAIT:
		p = put_hexw(p, k->mwait.hints, 8);
		*p++ = ',';
		*p++ = ' ';
		return put_hexw(p, k->mwait.ext, 8);
	case TK_IPT_PKT_PWRE:
		*p++ = 'c';
		p = put_dec(p, (k->pwre.state + 1u) & 0xf);
		*p++ = '.';
		p = put_dec(p, (k->pwre.sub_state + 1u) & 0xf);
		return k->pwre.hw ? put_str(p, ", hw") : p;
	case TK_IPT_PKT_PWRX: {
		const char *wr = NULL;
		int n = k->pwrx.interrupt + k->pwrx.store + k->pwrx.autonomous;
		if (n != 1)
			wr = "bad";
		else
			wr = k->pwrx.interrupt ? "int" : k->pwrx.store ? " st" : " hw";
		p = put_str(p, wr);
		p = put_str(p, ": c");
		p = put_dec(p, (k->pwrx.last + 1u) & 0xf);
		p = put_str(p, ", c");
		return put_dec(p, (k->pwrx.deepest + 1u) & 0xf);
	}
	case TK_IPT_PKT_PTW:
		*p++ = hex_digits[k->ptw.plc];
		*p++ = ':';
		*p++ = ' ';
		p = put_hex(p, k->ptw.payload);
		return k->ptw.ip ? put_str(p, ", ip") : p;
	case TK_IPT_PKT_CFE:
		p = put_dec(p, k->cfe.type);
		switch (k->cfe.type) {
		case 1: case 9: case 12: case 14:   /* INTR, VMEXIT_INTR, UINTR, SWINTR:
							decimal vector */
			p = put_str(p, ": ");
			p = put_dec(p, k->cfe.vector);
			break;
		case 5:                    /* SIPI: hex vector */
			p = put_str(p, ": ");
			p = put_hex(p, k->cfe.vector);
			break;
		default:
			break;
		}
		return k->cfe.ip ? put_str(p, ", ip") : p;
	case TK_IPT_PKT_EVD:
		p = put_dec(p, k->evd.type);
		p = put_str(p, ": ");
		return put_hex(p, k->evd.payload);
	case TK_IPT_PKT_BBP:
		p = put_hex(p, k->bbp.type);
		return put_str(p, k->bbp.sz ? ": 4" : ": 8");
	case TK_IPT_PKT_BIP:
		p = put_hex(p, k->bip.id);
		p = put_str(p, ": ");
		return put_hex(p, k->bip.value);
	case TK_IPT_PKT_BEP:
		return k->bep.ip ? put_str(p, "ip") : p;
	case TK_IPT_PKT_TRIG:   /* as libipt 2.2's ptdump */
		p = put_hexw(p, k->trig.trbv, 2);
		if (k->trig.ip)
			p = put_str(p, ", ip");
		if (k->trig.mult)
			p = put_str(p, ", mult");
		if (k->trig.icntv) {
			p = put_str(p, ", icnt: ");
			p = put_dec(p, k->trig.icnt);
		}
		return p;
	default:
		return p;
	}
}

/* One line without newline into P (at least 160 bytes); returns the end. */
/* Packet names padded to ptdump's 10-column opcode field. */
static char padded_names[TK_IPT_PKT__COUNT][16];
static uint8_t name_len[TK_IPT_PKT__COUNT];

static void init_names(void)
{
	for (int k = 0; k < TK_IPT_PKT__COUNT; k++) {
		const char *n = tk_ipt_pkt_name((enum tk_ipt_pkt_kind)k);
		size_t l = strlen(n);
		memset(padded_names[k], ' ', sizeof padded_names[k]);
		memcpy(padded_names[k], n, l);
		name_len[k] = (uint8_t)l;
	}
}

/* The names libipt's ptdump (2.1 on) gives Event Trace's CFE and EVD types in its tracking
 * column; "unknown" for a number the SDM does not name. */
static const char *cfe_type_name(unsigned type)
{
	static const char *const names[] = {
		[1] = "intr", [2] = "iret", [3] = "smi", [4] = "rsm", [5] = "sipi", [6] = "init",
		[7] = "vmentry", [8] = "vmexit", [9] = "vmexit_intr", [10] = "shutdown",
		[12] = "uintr", [13] = "uiret", [14] = "swintr", [15] = "syscall",
	};
	return type < sizeof names / sizeof *names && names[type] ? names[type] : "unknown";
}

static const char *evd_type_name(unsigned type)
{
	static const char *const names[] = { "cr2", "vmxq", "vmxr" };
	return type < sizeof names / sizeof *names ? names[type] : "unknown";
}

/* The columns a line has beside the packet's own (ptdump's options). */
struct cols {
	int offset;               /* the offset */
	const uint8_t *raw;       /* --raw: the stream, whose packet bytes are shown */
	int exec_mode;            /* --exec-mode: mode.exec's mode tracked */
};
#define RAW_COL 32                /* ptdump's: 16 bytes in hex at most, then cut */
/* ptdump's widths: the offset and its two spaces, the opcode field, the payload field
 * (the tracking column comes after it), the tracking column's name */
#define OFFSET_COL 18
#define OPCODE_COL 11
#define PAYLOAD_COL 25
#define TRACK_ID_COL 5

/* After a payload ending at P that began at PAYLOAD: the tracking column's name ID, padded
 * as ptdump pads it; returns where its value goes. */
static inline char *put_track_id(char *p, char *payload, const char *id)
{
	p = pad_to(p, payload, PAYLOAD_COL);
	*p++ = ' ';
	char *ts = p;
	return pad_to(put_str(p, id), ts, TRACK_ID_COL);
}

/* ptdump's name of the mode a mode.exec packet sets. */
static const char *exec_mode_name(const struct tk_ipt_packet *k)
{
	if (k->exec.csl)
		return k->exec.csd ? "unknown" : "64-bit";
	return k->exec.csd ? "32-bit" : "16-bit";
}

/* One line without newline into P (at least DUMP_LINE_MAX bytes); returns the end. The
 * opcode is written padded, then cut back when the packet has no payload. */
#define DUMP_LINE_MAX 224
static inline __attribute__((always_inline)) char *
format_line(char *p, const struct tk_ipt_packet *k, const struct cols cols, struct tk_ipt_last_ip *last)
{
	const struct cols *c = &cols;   /* (a copy: the line's stores cannot change it) */
	const char *tid = NULL;
	uint64_t tval = 0;
	const char *ttext = NULL;

	if (c->offset) {
		p = put_hexw(p, k->offset, OFFSET_COL - 2);
		*p++ = ' ';
		*p++ = ' ';
	}
	if (c->raw) {
		char *r = p;
		for (unsigned i = 0; i < k->size && i < RAW_COL / 2; i++)
			p = put_hexw(p, c->raw[k->offset + i], 2);
		p = pad_to(p, r, RAW_COL + 2);
	}
	char *op = p;
	memcpy(p, padded_names[k->kind], 16);
	p += OPCODE_COL;
	char *pe = format_payload(p, k);
	if (k->kind == TK_IPT_PKT_MODE_EXEC && c->exec_mode) {
		tid = "em";
		ttext = exec_mode_name(k);
		if (pe == p)   /* (no payload: the name as it is, the payload's room after it) */
			pe = p = op + name_len[k->kind] + 1;
	} else if (pe == p) {
		return op + name_len[k->kind];
	}
	switch (k->kind) {
	case TK_IPT_PKT_PIP:
		tid = "cr3";
		tval = k->pip.cr3;
		break;
	case TK_IPT_PKT_VMCS:
		tid = "vmcs";
		tval = k->vmcs.base;
		break;
	case TK_IPT_PKT_CFE:
		tid = "type";
		ttext = cfe_type_name(k->cfe.type);
		break;
	case TK_IPT_PKT_EVD:
		tid = "type";
		ttext = evd_type_name(k->evd.type);
		break;
	case TK_IPT_PKT_TIP:
	case TK_IPT_PKT_TIP_PGE:
	case TK_IPT_PKT_TIP_PGD:
	case TK_IPT_PKT_FUP:
		if (last) {
			tid = "ip";
			if (tk_ipt_last_ip_update(last, k) < 0)
				ttext = "<unavailable>";
			else {
				int r = tk_ipt_last_ip_query(last, &tval);
				if (r == -TK_E_NOSYNC)
					ttext = "<suppressed>";
				else if (r < 0)
					ttext = "<unavailable>";
			}
		}
		break;
	default:
		break;
	}
	if (!tid)
		return pe;
	p = put_track_id(pe, p, tid);
	return ttext ? put_str(p, ttext) : put_hexw(p, tval, 16);
}

static pthread_once_t names_once = PTHREAD_ONCE_INIT;

/* PK[0..n) with ptdump's time columns or lines left out: each packet tracked in turn, its
 * remarks written before its line (ptdump prints them as they arise, the line after). A
 * timing packet has a payload and no other tracking column: its time goes after the line
 * format_line made, where that would put one. (Not a column parameter of format_line:
 * one there, even NULL at every usual call, cost the usual lines 1 % more instructions.) */
static __attribute__((noinline)) void format_timed(struct tk_buf *out, const struct tk_ipt_packet *pk,
						   int n, const struct cols cols, struct tk_ipt_last_ip *last,
						   struct tk_ipt_dump_time *tm)
{
	struct tk_ipt_dump_col col;
	size_t payload_at = (cols.offset ? OFFSET_COL : 0) + (cols.raw ? RAW_COL + 2 : 0) + OPCODE_COL;

	for (int i = 0; i < n; i++) {
		if (tk_buf_reserve(out, 4 * DUMP_LINE_MAX) < 0)
			break;
		if (tk_ipt_dump_time_packet(tm, &pk[i], out, &col))
			continue;   /* left out */
		if (tk_buf_reserve(out, DUMP_LINE_MAX) < 0)
			break;
		char *start = out->data + out->len, *p = format_line(start, &pk[i], cols, last);
		if (col.id)
			p = put_str(put_track_id(p, start + payload_at, col.id), col.text);
		*p++ = '\n';
		out->len = (size_t)(p - out->data);
	}
}

/* PK[0..n) a line each onto OUT. The usual columns (the offset or not) are spelt out, so
 * that their lines are made without the tests of the others (+4 % instructions). */
static void format_lines(struct tk_buf *out, const struct tk_ipt_packet *pk, int n,
			 const struct cols cols, struct tk_ipt_last_ip *last)
{
	const struct cols plain[2] = { { .offset = 0 }, { .offset = 1 } };
	int usual = !cols.raw && !cols.exec_mode;

	for (int i = 0; i < n; i++) {
		if (tk_buf_reserve(out, DUMP_LINE_MAX) < 0)
			break;
		char *p = out->data + out->len;
		if (usual && cols.offset)
			p = format_line(p, &pk[i], plain[1], last);
		else if (usual)
			p = format_line(p, &pk[i], plain[0], last);
		else
			p = format_line(p, &pk[i], cols, last);
		*p++ = '\n';
		out->len = (size_t)(p - out->data);
	}
}

void tk_ipt_format_packet(struct tk_buf *out, const struct tk_ipt_packet *pkt, int show_offset,
			  struct tk_ipt_last_ip *last)
{
	struct cols c = { .offset = show_offset };

	pthread_once(&names_once, init_names);
	if (tk_buf_reserve(out, DUMP_LINE_MAX) < 0)
		return;
	char *p = format_line(out->data + out->len, pkt, c, last);
	out->len = (size_t)(p - out->data);
}

/* ---- walking a whole stream ---------------------------------------------------------- */

struct walk {
	const uint8_t *buf;
	size_t len;
	struct tk_ipt_pkt_decoder *dec;
	struct tk_gap_stats *gaps;
	tk_ipt_error_fn on_error;
	void *ctx;
};

/* After error ERR at the decoder's position: count the bytes up to the next PSB as
 * skipped and move there. Returns 1 to continue, 0 at the end, < 0 to stop. */
static int walk_resync(struct walk *w, int err, uint64_t *bad_off)
{
	uint64_t at, skipped;
	int more = tk_ipt_pkt_resync(w->dec, w->len, &at, &skipped);
	if (w->gaps)
		tk_gap_stats_add(w->gaps, at, skipped);
	*bad_off = at;
	if (w->on_error) {
		int r = w->on_error(w->ctx, at, err, skipped);
		if (r < 0)
			return r;
	}
	return more;
}

/* Where the walk starts: the first PSB (what lies before it skipped), or with NO_SYNC the
 * first byte. 0: nothing to walk. */
static int walk_start(struct walk *w, int no_sync)
{
	uint64_t first;
	if (no_sync)
		return w->len && tk_ipt_pkt_sync_set(w->dec, 0) == 0;
	if (tk_ipt_pkt_sync_forward(w->dec) < 0) {
		if (w->gaps && w->len)
			tk_gap_stats_add(w->gaps, 0, w->len);
		if (w->on_error && w->len)
			w->on_error(w->ctx, 0, -TK_E_NOSYNC, w->len);
		return 0;
	}
	tk_ipt_pkt_get_offset(w->dec, &first);
	if (first) {
		if (w->gaps)
			tk_gap_stats_add(w->gaps, 0, first);
		if (w->on_error)
			w->on_error(w->ctx, 0, -TK_E_NOSYNC, first);
	}
	return 1;
}

/* Writing to a file costs the kernel about as much as formatting costs us (the page-
 * cache copy of GBs of text), so a big dump into a descriptor formats into one buffer
 * while a writer thread writes the other: the output is the same bytes in the same
 * order, and tk_buf's own flush never runs while the thread owns a buffer (each batch
 * starts with room for all its lines). */
#define ASYNC_MIN_INPUT (4u << 20)
#define ASYNC_BUF (8u << 20)    /* few hand-overs: each may wait for a scheduler tick */
#define ROOM (BATCH * DUMP_LINE_MAX + 256)

/* 0: OUT (a descriptor) now has room for ASYNC_BUF bytes and writes through *W. */
static int writer_open(struct tk_buf *out, struct tk_writer **w)
{
	if (out->fd < 0 || out->err)
		return -1;
	if (out->cap < ASYNC_BUF) {
		/* (on huge pages, as the writer's second buffer: two of 8 MiB on small pages
		 * were 4,100 faults, most of a dump's at -j 1) */
		char *d = tk_realloc_huge(out->data, out->len, ASYNC_BUF);
		if (!d)
			return -1;
		out->data = d;
		out->cap = ASYNC_BUF;
	}
	*w = tk_writer_start(out->fd, NULL);
	return *w ? 0 : -1;
}

/* The spot of a decode error, marked in the output as ptdump marks it, in its words (a
 * payload it rejects is an "unknown packet" there; the message on stderr says "bad
 * packet"). */
static void put_error_line(struct tk_buf *b, uint64_t at, int err)
{
	tk_buf_putc(b, '[');
	tk_buf_hex(b, at, 0);
	tk_buf_puts(b, ": error decoding packet: ");
	tk_buf_puts(b, err == -TK_E_BAD_FORMAT ? "unknown packet" : err_text(err));
	tk_buf_puts(b, "]\n");
}

/* ---- chunks at once (-j N) ------------------------------------------------------------- */
/* A chunk starts at a PSB and its walk goes on until it reaches the start of a later chunk
 * at a packet boundary: from there the walk in order would do what that chunk's walk does
 * (a PSB decodes the same whatever came before, and clears the block state; lastip is not
 * dumped in parallel, its IP goes on across PSBs). A chunk that the walk before it went
 * past (a packet over the seam, or a resync beyond it) is not used. */
#define DUMP_CHUNK ((size_t)256 << 10)   /* ~4 MB of text; a few held */
#define PSB_GAP_MAX ((size_t)4 << 20)    /* PSBs further apart: the stream in order */

struct perr {
	uint64_t at, skipped;
	int err;
};

struct pchunk {
	struct tk_buf *text;        /* from pdump.texts, until merged */
	struct perr *errs;
	size_t nerrs, cap_errs;
	struct tk_gap_stats gaps;
	size_t end;                 /* the chunk its walk stopped at (nchunks: the end) */
	uint64_t end_off;
};

/* The columns O asks for, BUF the stream. */
static struct cols cols_of(const struct tk_ipt_dump_opts *o, const uint8_t *buf)
{
	int has = o->sz >= offsetof(struct tk_ipt_dump_opts, exec_mode) + sizeof o->exec_mode;
	return (struct cols){ .offset = !o->no_offset, .raw = has && o->raw_bytes ? buf : NULL,
			      .exec_mode = has && o->exec_mode };
}

static int no_sync(const struct tk_ipt_dump_opts *o)
{
	return o->sz >= offsetof(struct tk_ipt_dump_opts, no_sync) + sizeof o->no_sync && o->no_sync;
}

/* The packet decoder's options for O's stream. */
static struct tk_ipt_pkt_opts pkt_opts(const struct tk_ipt_dump_opts *o)
{
	return (struct tk_ipt_pkt_opts){
		.sz = sizeof(struct tk_ipt_pkt_opts),
		.errata = o->sz >= offsetof(struct tk_ipt_dump_opts, errata) + sizeof o->errata ?
			  o->errata : 0,
	};
}

struct pdump {
	const uint8_t *buf;
	size_t len, chunk;
	const struct tk_ipt_dump_opts *o;
	struct tk_progress *prog;
	uint64_t base;
	uint64_t *offs;
	size_t n;
	struct pchunk *ch;
	size_t next;                /* the next chunk the merge uses */
	int release;                /* tk_ipt_dump_opts.release_read */
	uint64_t released;          /* the pages before this were given back */
	struct tk_gap_stats *gaps;  /* NULL: not kept */
	struct tk_buf *out;
	struct tk_writer *w;
	struct tk_bufs *texts;      /* the chunks' text, each filled on one thread */
};

static int perr_add(struct pchunk *c, uint64_t at, int err, uint64_t skipped)
{
	if (c->nerrs == c->cap_errs) {
		size_t cap = c->cap_errs ? 2 * c->cap_errs : 8;
		struct perr *p = realloc(c->errs, cap * sizeof *p);
		if (!p)
			return -TK_E_NOMEM;
		c->errs = p;
		c->cap_errs = cap;
	}
	c->errs[c->nerrs++] = (struct perr){ at, skipped, err };
	return 0;
}

static int pchunk_walk(void *ctx, size_t i)
{
	struct pdump *D = ctx;
	struct pchunk *c = &D->ch[i];
	const struct tk_ipt_dump_opts *o = D->o;
	struct tk_buf *t;
	int err = 0, rc = 0;
	size_t next = i + 1;

	if (!(t = c->text = tk_bufs_take_room(D->texts, o->quiet ? 256 : 16 * D->chunk)))
		return -TK_E_NOMEM;
	struct tk_ipt_pkt_opts po = pkt_opts(o);
	struct tk_ipt_pkt_decoder *dec = tk_ipt_pkt_decoder_new(D->buf, D->len, &po, &err);
	struct tk_ipt_packet *pk = malloc(BATCH * sizeof *pk);
	if (!dec || !pk) {
		tk_ipt_pkt_decoder_free(dec);
		free(pk);
		return dec ? -TK_E_NOMEM : err;
	}
	tk_ipt_pkt_sync_set(dec, D->offs[i]);
	const struct cols cols = cols_of(o, D->buf);
	c->end = D->n;
	for (int more = 1; more && rc >= 0;) {
		int k = tk_ipt_pkt_next_batch(dec, pk, BATCH, &err);
		/* -q with the batch short of the next seam: nothing to do per packet (the loop
		 * below was a sixth of `dump -q -j 2`'s samples on a branch trace) */
		int j0 = o->quiet && k > 0 && (next >= D->n || pk[k - 1].offset < D->offs[next]) ? k : 0;
		for (int j = j0; j < k; j++) {
			while (next < D->n && D->offs[next] < pk[j].offset)
				next++;     /* gone past that seam */
			if (next < D->n && D->offs[next] == pk[j].offset) {
				c->end = next;
				more = 0;
				break;
			}
			if (o->quiet)
				continue;
			if (tk_buf_reserve(t, DUMP_LINE_MAX) < 0)
				break;
			char *p = format_line(t->data + t->len, &pk[j], cols, NULL);
			*p++ = '\n';
			t->len = (size_t)(p - t->data);
			tk_buf_write_ahead(t);
		}
		if (t->err)
			rc = t->err;
		if (!more || err == 0 || rc < 0)
			continue;
		if (err == -TK_E_EOF)
			break;
		uint64_t at, skipped;
		more = tk_ipt_pkt_resync(dec, D->len, &at, &skipped);
		tk_gap_stats_add(&c->gaps, at, skipped);
		rc = perr_add(c, at, err, skipped);
		if (!o->quiet)
			put_error_line(t, at, err);
	}
	tk_ipt_pkt_decoder_free(dec);
	free(pk);
	c->end_off = c->end < D->n ? D->offs[c->end] : D->len;
	return rc < 0 ? rc : t->err;
}

/* Chunk I to the output, in order, if the walk before it stopped at its start. */
static int pchunk_merge(void *ctx, size_t i)
{
	struct pdump *D = ctx;
	struct pchunk *c = &D->ch[i];
	int rc = 0;

	if (i == D->next) {
		if (D->w && tk_writer_submit(D->w, c->text) < 0 && !D->out->err) {
			D->out->err = c->text->err;   /* (c->text: the writer's last buffer) */
			D->out->errnum = c->text->errnum;
		} else if (!D->w) {
			tk_buf_put_large(D->out, c->text->data, c->text->len);
		}
		for (size_t k = 0; k < c->nerrs && rc >= 0; k++)
			if (D->o->on_error)
				rc = D->o->on_error(D->o->ctx, c->errs[k].at, c->errs[k].err,
						    c->errs[k].skipped);
		if (D->gaps)
			tk_gap_stats_merge(D->gaps, &c->gaps);
		D->next = c->end;
		if (D->release && c->end_off - D->released >= ((uint64_t)8 << 20)) {
			/* (a madvise and TLB flush per 8 MiB, not per chunk) */
			tk_release_pages(D->buf, D->released, c->end_off);
			D->released = c->end_off;
		}
		if (D->prog)
			tk_progress_set(D->prog, D->base + c->end_off);
	}
	free(c->errs);
	c->errs = NULL;
	c->nerrs = c->cap_errs = 0;
	/* the text buffer for a later chunk: not given back and faulted in again */
	tk_bufs_give(D->texts, c->text);
	c->text = NULL;
	return rc < 0 ? rc : D->out->err;
}

static int release_read(const struct tk_ipt_dump_opts *o)
{
	return o->sz >= offsetof(struct tk_ipt_dump_opts, release_read) + sizeof o->release_read &&
	       o->release_read;
}

/* BUF dumped in chunks at once; *DONE 0: fewer than two chunks, nothing done. */
static int dump_parallel(const uint8_t *buf, size_t len, size_t chunk,
			 const struct tk_ipt_dump_opts *o, struct tk_progress *prog,
			 struct tk_buf *out, struct tk_gap_stats *gaps, int *done)
{
	struct pdump D = { .buf = buf, .len = len, .chunk = chunk, .o = o, .prog = prog,
			   .gaps = gaps, .out = out, .base = prog ? prog->done : 0,
			   .release = release_read(o) };
	const struct tk_input *in = o->sz >= offsetof(struct tk_ipt_dump_opts, in_offset) +
					      sizeof o->in_offset ? o->in : NULL;
	int64_t n = ipt_split_starts(in, in ? o->in_offset : 0, buf, len, chunk, o->nthreads, 0,
				     &D.offs);
	int rc = 0;

	*done = 0;
	if (n < 2) {
		free(D.offs);
		return n < 0 ? (int)n : 0;
	}
	D.n = (size_t)n;
	if (!(D.ch = calloc(D.n, sizeof *D.ch))) {
		free(D.offs);
		return -TK_E_NOMEM;
	}
	/* a chunk's text waits in memory for its turn: PSBs far apart are dumped in order,
	 * which writes as it goes */
	for (size_t i = 0; i < D.n; i++)
		if ((i + 1 < D.n ? D.offs[i + 1] : len) - D.offs[i] > PSB_GAP_MAX) {
			free(D.offs);
			free(D.ch);
			return 0;
		}
	*done = 1;
	if (D.offs[0] && no_sync(o)) {
		D.offs[0] = 0;   /* (the first chunk from the first byte) */
	} else if (D.offs[0]) {   /* before the first PSB: as the walk in order says it */
		if (gaps)
			tk_gap_stats_add(gaps, 0, D.offs[0]);
		if (o->on_error)
			rc = o->on_error(o->ctx, 0, -TK_E_NOSYNC, D.offs[0]);
	}
	unsigned nt = o->nthreads ? o->nthreads : 1;
	if (rc >= 0 && !(D.texts = tk_bufs_new(2 * (size_t)nt + 2)))
		rc = -TK_E_NOMEM;
	if (rc >= 0 && !o->quiet && writer_open(out, &D.w) == 0 && tk_writer_submit(D.w, out) < 0)
		rc = out->err;
	if (rc >= 0) {
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = o->nthreads };
		rc = tk_pool_run(&po, D.n, pchunk_walk, pchunk_merge, &D);
	}
	if (D.w) {
		int werr = tk_writer_stop(D.w);
		if (werr < 0 && !out->err) {
			out->err = werr;
			out->errnum = errno;
		}
	}
	for (size_t i = 0; i < D.n; i++)
		free(D.ch[i].errs);
	tk_bufs_free(D.texts);
	free(D.ch);
	free(D.offs);
	if (prog)
		prog->done = D.base + len;
	if (rc >= 0 && out->err)
		rc = out->err;
	return rc < 0 ? rc : 0;
}

int tk_ipt_dump(const uint8_t *buf, size_t len, const struct tk_ipt_dump_opts *o,
		struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_ipt_dump_opts def = { .sz = sizeof def };
	struct tk_ipt_packet *pk;
	struct tk_ipt_last_ip last;
	int err = 0, r;

	if (!o)
		o = &def;
	struct tk_progress *prog = o->sz >= offsetof(struct tk_ipt_dump_opts, progress) +
		sizeof o->progress ? o->progress : NULL;
	unsigned nthreads = o->sz >= offsetof(struct tk_ipt_dump_opts, nthreads) +
		sizeof o->nthreads ? o->nthreads : 1;
	size_t chunk = o->sz >= offsetof(struct tk_ipt_dump_opts, chunk_bytes) +
		sizeof o->chunk_bytes && o->chunk_bytes ? o->chunk_bytes : DUMP_CHUNK;
	/* the time columns and lines left out: ptdump's rules over the whole stream (the
	   calibration goes on across PSBs), so one walk */
	struct tk_ipt_dump_time tm_state, *tm = NULL;
	if (o->sz >= offsetof(struct tk_ipt_dump_opts, cpuid_15_ebx) + sizeof o->cpuid_15_ebx &&
	    (o->time || o->tcal || o->no_cyc || o->no_pad || o->no_timing)) {
		tk_ipt_dump_time_init(&tm_state, o);
		tm = &tm_state;
	}
	if (nthreads > 1 && !o->lastip && !tm && len >= 2 * chunk) {
		int done;
		pthread_once(&names_once, init_names);
		r = dump_parallel(buf, len, chunk, o, prog, out, gaps, &done);
		if (done)
			return r;
	}
	struct walk w = { buf, len, NULL, gaps, o->on_error, o->ctx };
	struct tk_ipt_pkt_opts po = pkt_opts(o);
	w.dec = tk_ipt_pkt_decoder_new(buf, len, &po, &err);
	if (!w.dec)
		return err;
	pk = malloc(BATCH * sizeof *pk);
	if (!pk) {
		tk_ipt_pkt_decoder_free(w.dec);
		return -TK_E_NOMEM;
	}
	tk_ipt_last_ip_init(&last);
	pthread_once(&names_once, init_names);
	const struct cols cols = cols_of(o, buf);
	int release = release_read(o);
	uint64_t released = 0;
	uint64_t base = prog ? prog->done : 0;
	struct tk_writer *wr = NULL;
	/* (not with remarks between the lines: each batch's room is for lines alone) */
	int async = !o->quiet && !tm && len >= ASYNC_MIN_INPUT && writer_open(out, &wr) == 0;
	r = walk_start(&w, no_sync(o));
	while (r > 0) {
		if (async && out->cap - out->len < ROOM)
			tk_writer_submit(wr, out);
		int n = tk_ipt_pkt_next_batch(w.dec, pk, BATCH, &err);
		if (prog && n > 0)
			tk_progress_set(prog, base + pk[n - 1].offset);
		if (release && n > 0 && pk[n - 1].offset - released >= ((uint64_t)8 << 20)) {
			tk_release_pages(buf, released, pk[n - 1].offset);
			released = pk[n - 1].offset;
		}
		if (!o->quiet) {
			if (tm)
				format_timed(out, pk, n, cols, o->lastip ? &last : NULL, tm);
			else
				format_lines(out, pk, n, cols, o->lastip ? &last : NULL);
			if (out->err) {
				r = out->err;
				break;
			}
		}
		if (err == 0)
			continue;
		if (err == -TK_E_EOF)
			break;
		uint64_t bad;
		r = walk_resync(&w, err, &bad);
		if (!o->quiet)
			put_error_line(out, bad, err);
		/* ptdump forgets the last IP and the time when it resyncs. */
		tk_ipt_last_ip_init(&last);
		if (tm)
			tk_ipt_dump_time_reset(tm);
	}
	if (async) {
		/* what is left in OUT is the caller's to flush, after all handed over */
		int werr = tk_writer_stop(wr);
		if (werr < 0 && !out->err) {
			out->err = werr;
			out->errnum = errno;
		}
	}
	free(pk);
	tk_ipt_pkt_decoder_free(w.dec);
	if (prog)
		prog->done = base + len;  /* where the next stream's bytes count from */
	if (r >= 0 && out->err)
		r = out->err;
	return r < 0 ? r : 0;
}

const char *tk_ipt_error_text(int err)
{
	return err_text(err);
}
