/* Intel Processor Trace: packets, sync points, last-IP, dump.
 *
 * The packet layer decodes every packet of the Intel SDM vol. 3 "Intel Processor Trace"
 * chapter with the same field meanings as libipt's struct pt_packet (intel-pt.h), so
 * results can be compared one to one. It never allocates per packet. */
#ifndef TRACEKIT_IPT_H
#define TRACEKIT_IPT_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 that P is a raw PT stream (0: not one). */
TK_API int tk_ipt_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* ---- packets ------------------------------------------------------------------------ */
enum tk_ipt_pkt_kind {
	TK_IPT_PKT_INVALID = 0,
	TK_IPT_PKT_PAD,
	TK_IPT_PKT_PSB,
	TK_IPT_PKT_PSBEND,
	TK_IPT_PKT_TNT8,
	TK_IPT_PKT_TNT64,
	TK_IPT_PKT_TIP,
	TK_IPT_PKT_TIP_PGE,
	TK_IPT_PKT_TIP_PGD,
	TK_IPT_PKT_FUP,
	TK_IPT_PKT_MODE_EXEC,
	TK_IPT_PKT_MODE_TSX,
	TK_IPT_PKT_PIP,
	TK_IPT_PKT_TSC,
	TK_IPT_PKT_MTC,
	TK_IPT_PKT_TMA,
	TK_IPT_PKT_CYC,
	TK_IPT_PKT_VMCS,
	TK_IPT_PKT_OVF,
	TK_IPT_PKT_CBR,
	TK_IPT_PKT_STOP,
	TK_IPT_PKT_MNT,
	TK_IPT_PKT_PTW,
	TK_IPT_PKT_EXSTOP,
	TK_IPT_PKT_MWAIT,
	TK_IPT_PKT_PWRE,
	TK_IPT_PKT_PWRX,
	TK_IPT_PKT_BBP,
	TK_IPT_PKT_BIP,
	TK_IPT_PKT_BEP,
	TK_IPT_PKT_CFE,
	TK_IPT_PKT_EVD,
	TK_IPT_PKT_TRIG,
	TK_IPT_PKT__COUNT
};

/* ptdump's name of a packet kind ("tnt.8", "tip.pge", "mode.exec", ...). */
TK_API const char *tk_ipt_pkt_name(enum tk_ipt_pkt_kind kind);

/* IP compression (the opcode's top 3 bits), values as in the SDM and libipt. */
enum tk_ipt_ipc {
	TK_IPT_IPC_SUPPRESSED = 0,   /* no payload */
	TK_IPT_IPC_UPDATE_16 = 1,    /* replace bits 15:0 of the last IP */
	TK_IPT_IPC_UPDATE_32 = 2,    /* replace bits 31:0 */
	TK_IPT_IPC_SEXT_48 = 3,      /* 48 bits, sign-extended */
	TK_IPT_IPC_UPDATE_48 = 4,    /* replace bits 47:0 */
	TK_IPT_IPC_FULL = 6,         /* all 64 bits */
};

/* One decoded packet. Which union member is valid follows from KIND. Field meanings
 * match libipt's struct pt_packet where libipt has the packet. */
struct tk_ipt_packet {
	enum tk_ipt_pkt_kind kind;
	uint8_t size;                /* bytes, opcode included */
	uint64_t offset;             /* byte offset of the packet in the buffer */
	union {
		/* TNT8/TNT64: COUNT branch bits without the stop bit; the oldest branch is
		 * bit COUNT-1 (ptdump prints from there down to bit 0). 1 = taken. */
		struct { uint64_t bits; uint8_t count; } tnt;
		/* TIP, TIP.PGE, TIP.PGD, FUP: the raw payload, zero-extended (not the
		 * reconstructed address: see tk_ipt_last_ip_update). */
		struct { uint64_t ip; uint8_t ipc; } ip;
		struct { uint8_t csl, csd, iflag; } exec;        /* MODE.Exec */
		struct { uint8_t intx, abrt; } tsx;              /* MODE.TSX */
		struct { uint64_t cr3; uint8_t nr; } pip;        /* cr3 with bits 4:0 zero */
		struct { uint64_t tsc; } tsc;                    /* 56 bits */
		struct { uint8_t ctc; } mtc;
		struct { uint16_t ctc, fc; } tma;                /* fc: 9 bits */
		struct { uint64_t value; } cyc;
		struct { uint64_t base; } vmcs;                  /* payload << 12 */
		struct { uint8_t ratio; } cbr;
		struct { uint64_t payload; } mnt;
		/* PTWRITE: plc 0 = 4-byte payload, 1 = 8-byte; ip: a FUP follows. */
		struct { uint64_t payload; uint8_t plc, ip; } ptw;
		struct { uint8_t ip; } exstop;
		struct { uint32_t hints, ext; } mwait;
		struct { uint8_t state, sub_state, hw; } pwre;
		struct { uint8_t last, deepest, interrupt, store, autonomous; } pwrx;
		/* PEBS via PT: BBP opens a block of BIPs of 4 (sz=1) or 8 (sz=0) bytes. */
		struct { uint8_t type, sz; } bbp;
		struct { uint64_t value; uint8_t id; } bip;
		struct { uint8_t ip; } bep;
		struct { uint8_t type, vector, ip; } cfe;        /* control-flow event */
		struct { uint64_t payload; uint8_t type; } evd;  /* event data */
		/* Trigger: trbv bit vector; icnt valid when icntv. */
		struct { uint8_t trbv, ip, icntv, mult; uint16_t icnt; } trig;
	};
};

/* ---- packet decoder ------------------------------------------------------------------ */
struct tk_ipt_pkt_opts {
	size_t sz;              /* sizeof(struct tk_ipt_pkt_opts) */
	uint64_t base_offset;   /* added to every reported offset (BUF is a slice of a file) */
	uint32_t errata;        /* enum tk_ipt_erratum bits: the packet-level ones apply */
};

/* Errata of Intel's processors that change what a trace says, read as libipt reads them
 * when told the processor (tk_ipt_cpu_errata). Only for a known processor: on others the
 * same bytes mean something else. (BDM70, SKD010, APL11 and APL12 are read on every
 * processor: their sequences have no other reading.) */
enum tk_ipt_erratum {
	/* SKD007: an OVF written after the first byte of a multi-byte CYC, in place of the
	 * rest: a two-byte CYC whose second byte is 02, followed by F3, is that OVF */
	TK_IPT_ERRATUM_SKD007 = 1u << 0,
	/* SKZ84: a TMA with corrupt CTC and FastCounter, and a bogus byte after it (a VMX
	 * guest with TSC offsetting or scaling): a TMA with reserved bits set is skipped
	 * with the byte after it, as an invalid packet */
	TK_IPT_ERRATUM_SKZ84 = 1u << 1,
	/* SKD022: a VM entry that clears TraceEn writes a FUP before its TIP.PGD: a FUP at a
	 * VMLAUNCH or VMRESUME followed by TIP.PGD is the instruction's own disable */
	TK_IPT_ERRATUM_SKD022 = 1u << 2,
	/* BDM64: a transaction's abort just after a branch may follow a wrong TNT or TIP for
	 * that branch: when the abort's IP cannot be reached from where the branch went
	 * without more trace, the branch went there (libipt's reading) */
	TK_IPT_ERRATUM_BDM64 = 1u << 3,
	/* SKL168: a CYC right before a PSB may be dropped: the first MTC period after a PSB
	 * is not used to calibrate cycles when it looks short of one (dump's time columns) */
	TK_IPT_ERRATUM_SKL168 = 1u << 4,
	/* SKL014: a direct JMP or CALL that leaves the address filter's regions may send a
	 * TIP.PGD without IP: with the filter configuration known (tk_ipt_addr_filter), a
	 * TIP.PGD without IP binds to the first such branch whose target is outside */
	TK_IPT_ERRATUM_SKL014 = 1u << 5,
};
#define TK_IPT_ERRATA_PACKET (TK_IPT_ERRATUM_SKD007 | TK_IPT_ERRATUM_SKZ84)

/* The address filter tracing ran with (IA32_RTIT_ADDRn_CFG, _A, _B; ptxed's
 * --filter:addrN_*): cfg 1 traces only inside [a, b] (FilterEn), 2 stops tracing there
 * (TraceStop), 0 unused. Read for erratum SKL014. */
struct tk_ipt_addr_filter {
	uint64_t cfg[4], a[4], b[4];
};


/* The errata above that processor FAMILY/MODEL (CPUID's display family and model, as
 * ptxed's --cpu and perf.data's CPUID header give them) has; 0 for others. */
TK_API uint32_t tk_ipt_cpu_errata(unsigned family, unsigned model);
/* ptxed's --cpu: "FAMILY/MODEL[/STEPPING]" (decimal or 0x hex), "auto" (this machine's
 * processor) or "none": its errata into *ERRATA. 0, or -TK_E_INVAL if S is none of them. */
TK_API int tk_ipt_cpu_parse(const char *s, uint32_t *errata);
/* perf.data's CPUID header, "VENDOR,FAMILY,MODEL,STEPPING": its errata into *ERRATA (0 for
 * another vendor's). 0, or -TK_E_INVAL if CPUID does not read so. */
TK_API int tk_ipt_cpuid_errata(const char *cpuid, uint32_t *errata);
/* ERRATA's names, comma-separated ("SKD007, SKD022"), into BUF; "none" for 0. */
TK_API const char *tk_ipt_errata_names(uint32_t errata, char *buf, size_t size);

struct tk_ipt_pkt_decoder;

/* A decoder over BUF[0, LEN), which must outlive it. It starts unsynchronised at
 * offset 0: call tk_ipt_pkt_sync_forward (or _sync_set) first. OPTS may be NULL. */
TK_API struct tk_ipt_pkt_decoder *tk_ipt_pkt_decoder_new(const uint8_t *buf, size_t len,
						  const struct tk_ipt_pkt_opts *opts, int *err);
TK_API void tk_ipt_pkt_decoder_free(struct tk_ipt_pkt_decoder *dec);

/* Decode the packet at the current position into *PKT and step over it. Returns its
 * size (> 0), or: -TK_E_EOF at the end of the buffer, -TK_E_TRUNCATED if the buffer
 * ends inside the packet, -TK_E_BAD_OPCODE for an unknown opcode, -TK_E_BAD_FORMAT for
 * an invalid payload (reserved IP compression, TNT without stop bit, ...),
 * -TK_E_BAD_STATE if not synchronised. On error the position does not move: resync
 * with tk_ipt_pkt_sync_forward. */
TK_API int tk_ipt_pkt_next(struct tk_ipt_pkt_decoder *dec, struct tk_ipt_packet *pkt);

/* Up to N packets at once (the fast path: no call per packet). Returns how many were
 * decoded (>= 0); stops early at the first error, which *ERR receives (0 if none, or
 * when N packets were decoded). */
TK_API int tk_ipt_pkt_next_batch(struct tk_ipt_pkt_decoder *dec, struct tk_ipt_packet *pkts,
			  size_t n, int *err);

/* Move to the next PSB, as libipt's pt_pkt_sync_forward: the first one starting at
 * most 15 bytes before the current position (so a PSB partly eaten by a bad packet is
 * found), or after the current sync point when standing on it. -TK_E_EOF if none. */
TK_API int tk_ipt_pkt_sync_forward(struct tk_ipt_pkt_decoder *dec);
/* Move to the last PSB before the current position (from the end when unsynced). */
TK_API int tk_ipt_pkt_sync_backward(struct tk_ipt_pkt_decoder *dec);
/* Decode from OFFSET on, whatever is there (no PSB check); OFFSET becomes the sync
 * point. -TK_E_EOF if past the end. */
TK_API int tk_ipt_pkt_sync_set(struct tk_ipt_pkt_decoder *dec, uint64_t offset);
/* Current position and last sync point (offsets include base_offset). */
TK_API int tk_ipt_pkt_get_offset(const struct tk_ipt_pkt_decoder *dec, uint64_t *offset);
TK_API int tk_ipt_pkt_get_sync_offset(const struct tk_ipt_pkt_decoder *dec, uint64_t *offset);

/* ---- PSB search and parallel split ------------------------------------------------- */
/* Offset of the first PSB starting at or after FROM (a run of more than eight 02 82
 * pairs counts as a PSB at its end, as libipt does). 0 or -TK_E_NOSYNC. */
TK_API int tk_ipt_psb_next(const uint8_t *buf, size_t len, uint64_t from, uint64_t *psb);
/* Offset of the last PSB starting before BEFORE. 0 or -TK_E_NOSYNC. */
TK_API int tk_ipt_psb_prev(const uint8_t *buf, size_t len, uint64_t before, uint64_t *psb);
/* Number of PSBs in BUF. */
TK_API uint64_t tk_ipt_psb_count(const uint8_t *buf, size_t len);

/* Split BUF into chunks for parallel decoders. Chunk i is [offsets[i], offsets[i+1])
 * and the last one ends at LEN; each starts at a PSB: the first PSB at or after a
 * multiple of CHUNK_BYTES (0, CHUNK_BYTES, 2 * CHUNK_BYTES, ...; one chunk for multiples
 * with no PSB between them), so that parts of BUF can be split apart. Writes up to
 * MAX offsets and returns the total number of chunks (call with MAX = 0 to size the
 * array); 0 when BUF has no PSB. Bytes before offsets[0] cannot be decoded. */
TK_API int64_t tk_ipt_split(const uint8_t *buf, size_t len, size_t chunk_bytes, uint64_t *offsets,
		     size_t max);

/* ---- last-IP reconstruction ----------------------------------------------------------- */
struct tk_ipt_last_ip {
	uint64_t ip;
	uint8_t have_ip;      /* an IP has been seen since init */
	uint8_t suppressed;   /* the last IP packet had its IP suppressed */
};

static inline void tk_ipt_last_ip_init(struct tk_ipt_last_ip *l)
{
	l->ip = 0;
	l->have_ip = 0;
	l->suppressed = 0;
}
/* Apply an IP packet (TIP, TIP.PGE, TIP.PGD, FUP); other kinds are ignored. 0, or
 * -TK_E_BAD_FORMAT for a reserved compression. */
TK_API int tk_ipt_last_ip_update(struct tk_ipt_last_ip *l, const struct tk_ipt_packet *pkt);
/* The reconstructed IP: 0, -TK_E_NOT_FOUND (no IP yet) or -TK_E_NOSYNC (suppressed). */
TK_API int tk_ipt_last_ip_query(const struct tk_ipt_last_ip *l, uint64_t *ip);

/* ---- packet encoder ------------------------------------------------------------------ */
/* Append PKT to OUT in the SDM's encoding, the inverse of tk_ipt_pkt_next: PAD, PSB,
 * PSBEND, OVF, TNT-8 (1 to 6 bits), TNT-64 (1 to 47 bits), TIP, TIP.PGE, TIP.PGD and FUP
 * (ip.ip is the payload of compression ip.ipc, as the decoder reports it), MODE.Exec,
 * MODE.TSX, TSC, TMA, MTC, CYC, PIP, VMCS, CBR, STOP, MNT, PTW, EXSTOP, MWAIT, PWRE,
 * PWRX, CFE, EVD and TRIG (not the PEBS packets). PKT's size and offset are not used. Returns the packet's size, -TK_E_INVAL for
 * another kind or a field that does not fit, or OUT's error. */
TK_API int tk_ipt_encode(struct tk_buf *out, const struct tk_ipt_packet *pkt);
/* Fill PKT as an IP packet of KIND for IP, compressed against the last IP *L the way the
 * processor does it (the fewest bytes; sent whole when L holds no IP, as after a PSB),
 * and update *L as a decoder will. */
TK_API void tk_ipt_ip_packet(struct tk_ipt_last_ip *l, enum tk_ipt_pkt_kind kind, uint64_t ip,
		      struct tk_ipt_packet *pkt);

/* ---- whole-stream scan (tracekit info) and dump ------------------------------------- */
struct tk_ipt_stats {
	uint64_t bytes;
	uint64_t psbs;
	uint64_t packets;
	uint64_t count[TK_IPT_PKT__COUNT];
	uint64_t first_psb;          /* UINT64_MAX if none */
	int have_tsc;
	uint64_t tsc_min, tsc_max, tsc_first, tsc_last;
	struct tk_gap_stats gaps;    /* bytes before the first PSB and after errors */
};

/* Called for each decode error (offset of the bad packet, -TK_E_*, bytes skipped to
 * the next PSB or the end). Return < 0 to stop. */
typedef int (*tk_ipt_error_fn)(void *ctx, uint64_t offset, int err, uint64_t skipped);

/* Count every packet of BUF. The stream is cut at PSBs into chunks (tk_ipt_split) that
 * are decoded independently, each from its PSB, resyncing at the next PSB of the chunk
 * after an error; so the result does not depend on the number of threads. Bytes before
 * the first PSB are a gap. Errors are reported in stream order. */
struct tk_ipt_scan_opts {
	size_t sz;
	unsigned nthreads;       /* 0 or 1: the calling thread only */
	size_t chunk_bytes;      /* 0: 16 MiB */
	tk_ipt_error_fn on_error;
	void *ctx;
};
TK_API int tk_ipt_scan_parallel(const uint8_t *buf, size_t len, const struct tk_ipt_scan_opts *opts,
			 struct tk_ipt_stats *st);
/* The same on one thread. */
TK_API int tk_ipt_scan(const uint8_t *buf, size_t len, struct tk_ipt_stats *st,
		tk_ipt_error_fn on_error, void *ctx);

struct tk_ipt_dump_opts {
	size_t sz;
	int no_offset;    /* omit the offset column */
	int lastip;       /* append "ip <reconstructed IP>" to IP packets */
	int quiet;        /* decode and check only */
	tk_ipt_error_fn on_error;
	void *ctx;
	/* advanced by the bytes dumped as it goes, from where it is (streams dumped one
	 * after another add up; NULL: none) */
	struct tk_progress *progress;
	/* threads: a stream of two chunks or more (cut at PSBs) is dumped in chunks at once,
	 * the same text (not with lastip: its IP goes on across PSBs) */
	unsigned nthreads;
	size_t chunk_bytes;   /* 0: 256 KiB */
	/* BUF is part of a read-only file mapping: the pages dumped are given back as it
	 * goes, so resident memory does not grow with the file */
	int release_read;
	uint32_t errata;  /* the processor's (enum tk_ipt_erratum): packets as it writes them */
	int raw_bytes;    /* ptdump's --raw: each packet's bytes in hex after the offset */
	int exec_mode;    /* ptdump's --exec-mode: "em MODE" after a mode.exec packet */
	int no_sync;      /* ptdump's --no-sync: decode from the first byte, not the first PSB */
	/* ptdump's time columns, tracked over the whole stream as libipt does (one walk,
	 * whatever nthreads): TIME the estimated TSC after timing packets, TCAL instead the
	 * cycle calibration; TIME_DELTA either as the change since the last shown; NO_TCAL
	 * no calibration (CYCs then count nothing); NO_WALL_CLOCK the time without a TSC
	 * shown from 0; KEEP_TCAL_ON_OVF the calibration kept across an overflow */
	int time, tcal, time_delta, no_tcal, no_wall_clock, keep_tcal_on_ovf;
	int no_cyc;       /* CYC lines left out and not tracked */
	int no_pad, no_timing;   /* PAD lines, timing packets' lines left out */
	/* the timing parameters (ptdump's --mtc-freq, --nom-freq, --cpuid-0x15.eax/ebx) */
	uint32_t mtc_freq, nom_freq, cpuid_15_eax, cpuid_15_ebx;
	/* Non-NULL: the file BUF was mapped from, BUF at offset in_offset of it: the split at
	 * PSBs reads what its searches need with tk_input_pread rather than touching the
	 * mapping on the calling thread (as tk_ipt_flow_opts.in). */
	const struct tk_input *in;
	uint64_t in_offset;
};

/* Print BUF one packet per line in ptdump's layout to OUT. Decoding starts at the first
 * PSB; after an error the dump prints "[offset: error decoding packet: ...]" and
 * resumes at the next PSB. GAPS (may be NULL) receives what was skipped. Returns 0 or a
 * negative error from OUT or ON_ERROR. */
TK_API int tk_ipt_dump(const uint8_t *buf, size_t len, const struct tk_ipt_dump_opts *opts,
		struct tk_buf *out, struct tk_gap_stats *gaps);

/* Short text for a packet decode error ("unknown opcode", "bad packet", ...). */
TK_API const char *tk_ipt_error_text(int err);

/* Format one packet as ptdump does (no newline). LAST may be NULL (no --lastip). */
TK_API void tk_ipt_format_packet(struct tk_buf *out, const struct tk_ipt_packet *pkt, int show_offset,
			  struct tk_ipt_last_ip *last);

#ifdef __cplusplus
}
#endif
#endif
