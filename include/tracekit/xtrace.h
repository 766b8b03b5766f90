/* Kunpeng xtrace instruction and snapshot files (seed 002; choices in docs/formats/xtrace.md). */
#ifndef TRACEKIT_XTRACE_H
#define TRACEKIT_XTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/event.h"
#include "tracekit/isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Magic of the snapshot-file header as tracekit writes it (the seed leaves the 4-byte
 * identifier unspecified; see docs/formats/xtrace.md). Old traces have no header. */
#define TK_XTRACE_SNAP_MAGIC 0x50534e58u /* "XNSP" little-endian */
#define TK_XTRACE_SNAP_VERSION 1
#define TK_XTRACE_HEADER_SIZE 24         /* 19 bytes of fields, padded to 8 */
#define TK_XTRACE_PC_UNKNOWN UINT64_MAX
#define TK_XTRACE_NSYSREG 11

/* Content probe: confidence 0..100 (0: not this format). */
TK_API int tk_xtrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);
/* Length of the token item at P (token byte included), 0 if the token is unknown, or
 * SIZE_MAX if N is too short to tell. */
TK_API size_t tk_xtrace_item_len(const uint8_t *p, size_t n);

/* ---- tokens ------------------------------------------------------------------------ */
enum tk_xtrace_kind {
	TK_XT_INST, TK_XT_PCINST,
	TK_XT_LOAD, TK_XT_STORE,
	TK_XT_STXR, TK_XT_MRS, TK_XT_SVCARG, TK_XT_SVCRET, TK_XT_DC, TK_XT_TARGET_B,
	TK_XT_ALLGPR, TK_XT_FLAGS, TK_XT_SYSCALL_VEC,
	TK_XT_TIME,
	TK_XT__COUNT
};
TK_API const char *tk_xtrace_kind_name(unsigned kind);

/* Token byte of each kind (EL / size parameters ORed in by the caller). */
#define TK_XT_TOK_INST(el) (0x01u | (unsigned)(el) << 6)
#define TK_XT_TOK_PCINST(el) (0x09u | (unsigned)(el) << 6)
#define TK_XT_TOK_MEM(store, log2) (0x02u | (unsigned)(store) << 3 | (unsigned)(log2) << 4)
#define TK_XT_TOK_VAL(sub) (0x03u | (unsigned)(sub) << 3)     /* sub 0..5 */
#define TK_XT_TOK_MISC(sub) (0x04u | (unsigned)(sub) << 3)    /* sub 1, 3, 4 */
#define TK_XT_TOK_TIME 0x07u

struct tk_xtrace_item {
	uint64_t offset;       /* byte offset of the token in the file */
	uint64_t pc;           /* INST/PCINST: address (TK_XTRACE_PC_UNKNOWN if not yet known) */
	uint64_t value;        /* MEM: address; VAL, FLAGS, TIME: the 8-byte value;
				  SYSCALL_VEC: iovec count */
	const uint8_t *data;   /* MEM: value bytes; ALLGPR: X0..X31; SYSCALL_VEC: iovecs */
	uint32_t data_len;
	uint32_t len;          /* item length, token included */
	uint32_t opcode;       /* INST/PCINST */
	uint8_t token;
	uint8_t kind;          /* enum tk_xtrace_kind */
	uint8_t el;            /* INST/PCINST: exception level */
	uint8_t size_log2;     /* MEM: value is 2^size_log2 bytes */
};

/* A cursor over an instruction stream (a value type; no allocation). It tracks the PC:
 * PCINST sets it, INST is the previous instruction's PC + 4. */
struct tk_xtrace_cursor {
	const uint8_t *p;      /* whole file */
	size_t end;            /* stop here */
	size_t off;            /* next item */
	uint64_t pc;           /* PC of the last instruction; TK_XTRACE_PC_UNKNOWN at start */
};
TK_API void tk_xtrace_cursor_init(struct tk_xtrace_cursor *c, const uint8_t *p, size_t begin,
			   size_t end);
/* 1: *it filled; 0: end; -TK_E_BAD_OPCODE: unknown token at c->off; -TK_E_TRUNCATED: the
 * item at c->off runs past the end. On error the cursor does not move. */
TK_API int tk_xtrace_next(struct tk_xtrace_cursor *c, struct tk_xtrace_item *it);
/* Next offset > OFF (and < N) where decoding can plausibly restart without snapshots: a
 * PCINST followed by valid items. N if none. */
TK_API size_t tk_xtrace_resync(const uint8_t *p, size_t n, size_t off);

/* ---- snapshots ----------------------------------------------------------------------- */
struct tk_xtrace_header {
	uint32_t magic;
	uint32_t global_snapshot;  /* for synchronising threads */
	uint64_t version;
	uint8_t split_type;        /* 0: every 1M user instructions; 1: every 1M instructions */
	uint8_t stream_type;       /* 0: thread stream; 1: core stream */
	uint8_t mem_order;         /* 1: TIME items record memory order */
};

/* Byte layout of one snapshot for a vector length (bits); all offsets from its start. */
struct tk_xtrace_snap_layout {
	uint32_t vl_bits, vl_bytes, p_bytes, p_slot;
	uint32_t off_x, off_z, off_p, off_ffr, off_za, off_sys, off_vl, size;
};
TK_API int tk_xtrace_snap_layout(uint32_t vl_bits, struct tk_xtrace_snap_layout *l);

/* System registers in the order the seed lists them. */
enum tk_xtrace_sysreg {
	TK_XT_FPCR, TK_XT_FPSR, TK_XT_NZCV, TK_XT_TPIDR_EL0, TK_XT_TPIDRRO_EL0, TK_XT_TTBR0_EL1,
	TK_XT_ELR_EL1, TK_XT_SPSR_EL1, TK_XT_ESR_EL1, TK_XT_TPIDR_EL1, TK_XT_DAIF
};
TK_API const char *tk_xtrace_sysreg_name(unsigned i);

struct tk_xtrace_snapshot {
	uint64_t file_no;          /* instruction file number */
	uint64_t index;            /* byte offset of its first instruction in that file */
	uint64_t user_insns;       /* EL0 instructions before this point */
	uint64_t total_insns;      /* all instructions before this point */
	uint64_t x[32];            /* X0..X30, X31 = SP */
	const uint8_t *z;          /* 32 registers of vl_bytes each */
	const uint8_t *p;          /* 16 registers, p_slot bytes apart (p_bytes used) */
	const uint8_t *ffr;        /* p_bytes */
	const uint8_t *za;         /* vl_bytes * vl_bytes */
	uint64_t sys[TK_XTRACE_NSYSREG];
	uint64_t vl_bits;
	uint64_t offset;           /* of the snapshot in the snapshot file */
};

/* A parsed snapshot file (points into the caller's bytes, which must outlive it). The
 * vector length is the legal length (128..2048 bits) that the length field at the end of
 * the most snapshots agrees with; see docs/formats/xtrace.md. */
struct tk_xtrace_snapfile;
TK_API struct tk_xtrace_snapfile *tk_xtrace_snapfile_new(const uint8_t *p, size_t n, int *err);
TK_API void tk_xtrace_snapfile_free(struct tk_xtrace_snapfile *sf);
TK_API int tk_xtrace_snapfile_has_header(const struct tk_xtrace_snapfile *sf);
TK_API const struct tk_xtrace_header *tk_xtrace_snapfile_header(const struct tk_xtrace_snapfile *sf);
TK_API const struct tk_xtrace_snap_layout *tk_xtrace_snapfile_layout(const struct tk_xtrace_snapfile *sf);
TK_API size_t tk_xtrace_snapfile_count(const struct tk_xtrace_snapfile *sf);
/* 1 if snapshot I's length field agrees with the file's vector length; 0: damaged (the
 * reader drops it as a sync point and reports a gap). */
TK_API int tk_xtrace_snapfile_intact(const struct tk_xtrace_snapfile *sf, size_t i);
/* Instructions between snapshots (user or total, as the header's split type says), measured
 * on the first two intact snapshots: the header cannot say (the recorder's interval may be
 * set); 0 with fewer than two. */
TK_API uint64_t tk_xtrace_snapfile_interval(const struct tk_xtrace_snapfile *sf);
/* Trailing bytes that do not make a whole snapshot (reported as a gap by the reader). */
TK_API size_t tk_xtrace_snapfile_trailing(const struct tk_xtrace_snapfile *sf);
TK_API int tk_xtrace_snapfile_get(const struct tk_xtrace_snapfile *sf, size_t i,
			   struct tk_xtrace_snapshot *s);

/* ---- a whole trace: instruction stream + optional snapshots, split into chunks -------- */
struct tk_xtrace;
/* INSN may be NULL (snapshots only); SNAP may be NULL (no snapshot file). Contradictions
 * (snapshot pointing past the end or not at an instruction, counts going backwards) are
 * logged with offsets and counted in the gap statistics given to tk_xtrace_gaps(). */
TK_API struct tk_xtrace *tk_xtrace_new(const uint8_t *insn, size_t n, const uint8_t *snap,
				size_t sn, int *err);
TK_API void tk_xtrace_free(struct tk_xtrace *t);
TK_API const struct tk_xtrace_snapfile *tk_xtrace_snapfile(const struct tk_xtrace *t);
/* Problems found while opening (snapshot file), to merge into the caller's totals. */
TK_API const struct tk_gap_stats *tk_xtrace_open_gaps(const struct tk_xtrace *t);
/* Chunks: [begin, end) byte ranges that decode independently. Chunk 0 starts at 0; every
 * other starts at a snapshot position holding a PCINST. */
TK_API size_t tk_xtrace_nchunks(const struct tk_xtrace *t);
TK_API void tk_xtrace_chunk(const struct tk_xtrace *t, size_t i, size_t *begin, size_t *end);
/* Snapshot index (into the snapshot file) a chunk starts at, or SIZE_MAX for none. */
TK_API size_t tk_xtrace_chunk_snapshot(const struct tk_xtrace *t, size_t i);

/* ---- statistics and events ----------------------------------------------------------- */
#define TK_XT_MAX_SYSCALL 512
struct tk_xtrace_stats {
	uint64_t items[TK_XT__COUNT];
	uint64_t bytes;
	uint64_t insns[4];                 /* per exception level */
	uint64_t cls[TK_A64__COUNT];
	uint64_t cond_taken, cond_not_taken;
	uint64_t el_switches;
	uint64_t loads, stores, load_bytes, store_bytes;
	uint64_t mem_size[16];             /* accesses by log2 size */
	uint64_t syscalls[TK_XT_MAX_SYSCALL + 1]; /* by number (last: out of range) */
	uint64_t time_first, time_last;    /* TK_TIME_NONE if no TIME items */
	uint64_t pc_unknown;               /* instructions before any PCINST */
	void *fp_code, *fp_data;           /* footprint sets (64-byte lines); internal */
	void *seam;                        /* chunk-boundary state for merging; internal */
	unsigned flags;
};
enum tk_xtrace_stats_flags {
	TK_XT_STATS_FOOTPRINT = 1,         /* code and data footprint (hash sets) */
	TK_XT_STATS_COUNTS = 2,            /* token counts only (no instruction mix, branches,
					      syscalls): the fast walk of `info` */
};
TK_API void tk_xtrace_stats_init(struct tk_xtrace_stats *s, unsigned flags);
TK_API void tk_xtrace_stats_free(struct tk_xtrace_stats *s);
/* Add chunk I of T. Damaged data goes to GAPS and stops the chunk. */
TK_API int tk_xtrace_stats_chunk(const struct tk_xtrace *t, size_t i, struct tk_xtrace_stats *s,
			  struct tk_gap_stats *gaps);
/* INTO += FROM (FROM must be a later part of the trace). */
TK_API void tk_xtrace_stats_merge(struct tk_xtrace_stats *into, const struct tk_xtrace_stats *from);
TK_API uint64_t tk_xtrace_stats_code_lines(const struct tk_xtrace_stats *s);
TK_API uint64_t tk_xtrace_stats_data_lines(const struct tk_xtrace_stats *s);
/* For partial results (tk_partial_xtrace_stats_*, tracekit/partial.h): the footprint's
 * lines (DATA 0: code, 1: data), ascending, into *LINES (malloc'd, *N of them); a line
 * added; the exception levels the statistics' part of the trace starts and ends at (-1:
 * no instruction), read and set. */
TK_API int tk_xtrace_stats_lines(const struct tk_xtrace_stats *s, int data, uint64_t **lines,
				 size_t *n);
TK_API int tk_xtrace_stats_add_line(struct tk_xtrace_stats *s, int data, uint64_t line);
TK_API void tk_xtrace_stats_els(const struct tk_xtrace_stats *s, int *first, int *last);
TK_API void tk_xtrace_stats_set_els(struct tk_xtrace_stats *s, int first, int last);

/* Neutral events of chunk I: TK_EV_BLOCK (ends at a branch or a PCINST), CALL (BL/BLR),
 * RETURN (RET), SYSCALL, MODE (EL change), MEM_READ/WRITE when MEM is set, GAP. Track is
 * TRACK; time is the instruction number when known (TK_TIME_NONE otherwise). */
TK_API int tk_xtrace_decode_chunk(const struct tk_xtrace *t, size_t i, uint32_t track, int mem,
			   struct tk_sink sink, struct tk_gap_stats *gaps);

/* ---- file names --------------------------------------------------------------------- */
/* xtrace.{timestamp}.{tid|cpuid}.hint{9|13}.xinsndata.bin -> its parts (0 if no match). */
struct tk_xtrace_name {
	uint64_t timestamp, id;
	unsigned hint;
	int is_snapshot;
};
TK_API int tk_xtrace_parse_name(const char *path, struct tk_xtrace_name *nm);
/* The other file of the pair (xinsndata <-> xsnapshot) into BUF; -TK_E_NOT_FOUND if the
 * name does not end the usual way. Does not check that it exists. */
TK_API int tk_xtrace_companion(const char *path, char *buf, size_t len);

/* ---- writer ---------------------------------------------------------------------------- */
struct tk_xtrace_writer_opts {
	size_t sz;
	uint32_t vl_bits;          /* snapshot vector length (default 128) */
	int no_header;             /* write an old-style snapshot file without header */
	struct tk_xtrace_header header; /* magic/version filled in when 0 */
};
struct tk_xtrace_writer;
/* Writes the instruction stream to INSN_FD and, when SNAP_FD >= 0, snapshots to SNAP_FD. */
TK_API struct tk_xtrace_writer *tk_xtrace_writer_new(int insn_fd, int snap_fd,
					      const struct tk_xtrace_writer_opts *opts, int *err);
/* Flushes and frees; returns the first write error (-TK_E_IO with errno set to the
 * failed write's). Does not close the descriptors. */
TK_API int tk_xtrace_writer_close(struct tk_xtrace_writer *w);
/* An instruction: PCINST when BLOCK_START, after a snapshot, or when PC != previous + 4;
 * else INST. */
TK_API int tk_xtrace_write_insn(struct tk_xtrace_writer *w, unsigned el, uint64_t pc,
			 uint32_t opcode, int block_start);
TK_API int tk_xtrace_write_mem(struct tk_xtrace_writer *w, int store, uint64_t addr,
			const void *value, unsigned size_log2);
/* VAL items (kind TK_XT_STXR..TK_XT_TARGET_B), MISC_FLAGS and TIME. */
TK_API int tk_xtrace_write_value(struct tk_xtrace_writer *w, enum tk_xtrace_kind kind, uint64_t v);
TK_API int tk_xtrace_write_allgpr(struct tk_xtrace_writer *w, const uint64_t x[32]);
TK_API int tk_xtrace_write_syscall_vec(struct tk_xtrace_writer *w, const uint64_t *base_len,
				uint64_t n);
/* Raw item bytes (already encoded), e.g. when slicing. */
TK_API int tk_xtrace_write_raw(struct tk_xtrace_writer *w, const void *p, size_t n);
/* A snapshot whose index is the current stream offset (file_no and index are taken from
 * the writer; the z/p/ffr/za pointers may be NULL for zeros). The next instruction is
 * written as a PCINST. */
TK_API int tk_xtrace_write_snapshot(struct tk_xtrace_writer *w, const struct tk_xtrace_snapshot *s);
TK_API uint64_t tk_xtrace_writer_offset(const struct tk_xtrace_writer *w);

/* Encoders for writing snapshot files directly (tracekit record fills in registers after
 * the instruction stream is written). OUT holds TK_XTRACE_HEADER_SIZE / layout->size bytes;
 * header magic/version default as in the writer. */
TK_API void tk_xtrace_header_encode(const struct tk_xtrace_header *h, uint8_t *out);
TK_API void tk_xtrace_snap_encode(const struct tk_xtrace_snap_layout *l,
			   const struct tk_xtrace_snapshot *s, uint8_t *out);

/* ---- text (dump, decode) ------------------------------------------------------------- */
/* One item as text, no newline. */
TK_API void tk_xtrace_item_text(struct tk_buf *b, const struct tk_xtrace_item *it);
/* A snapshot file: its header, then each snapshot's fields (NO_OFFSET: without file
 * offsets) and registers (NO_REGISTERS: only the fields). */
TK_API void tk_xtrace_snapfile_text(struct tk_buf *b, const struct tk_xtrace_snapfile *sf, int no_offset,
			     int no_registers);

#ifdef __cplusplus
}
#endif
#endif
