/* tracekit branch-trace container (software branch recording). */
#ifndef TRACEKIT_BTRACE_H
#define TRACEKIT_BTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The container starts with these 8 bytes, then a little-endian u32 format version and a
 * u32 header size (docs/formats/tkbt.md). Version 2 streams have a TSC before every TIP,
 * TIP.PGE and TIP.PGD (time per call); version 1 only before TIP.PGE and in PSB+.
 * Version 3 is version 2 with records checked by tk_btrace_checksum64 instead of FNV-1a.
 * The reader reads all three. */
#define TK_BTRACE_MAGIC "TKBTRACE"
#define TK_BTRACE_VERSION 3
#define TK_BTRACE_VERSION_PER_CALL 2   /* the first version with time per call */
#define TK_BTRACE_VERSION_SUM64 3      /* the first version with tk_btrace_checksum64 */

/* ---- container layout (docs/formats/tkbt.md); all integers little-endian ----------- */
#define TK_BTRACE_HEADER_SIZE 72
#define TK_BTRACE_REC_MAGIC 0x52424b54u   /* "TKBR" */
#define TK_BTRACE_REC_HEADER 24

/* File header: magic[8], u32 version, u32 header size, u32 pid, u32 parent pid (the traced
 * process this one was forked from, else 0), u64 TSC ticks per second (0 unknown), u64 TSC
 * at start, u64 CLOCK_MONOTONIC_RAW ns read just before it (0 unknown), u64 the flight
 * recorder's ring size per thread in bytes (record --ring; 0: the whole trace), then
 * zeros up to the header size. */

/* Record header: u32 TK_BTRACE_REC_MAGIC, u16 type, u16 flags, u32 thread id, u32 payload
 * size, u32 checksum of the payload (version 3: tk_btrace_checksum64, before: FNV-1a),
 * u32 sequence number of the record within its
 * thread. The payload follows, padded with zeros to a multiple of 8 bytes. */
enum tk_btrace_rec_type {
	TK_BTRACE_REC_MODULE = 1,      /* u64 load bias, u64 code start, u64 code end,
					  u16 path size, u8 build-id size, u8 0, build id, path */
	TK_BTRACE_REC_STREAM = 2,      /* a piece of the thread's Intel PT packet stream */
	TK_BTRACE_REC_THREAD_END = 3,  /* u64 traps, u64 re-entries, u64 unresolved re-entries,
					  u64 traps at CTIs of >= 5 bytes, u64 CTIs recorded by
					  trampolines (no trap), u64 how it ended
					  (TK_BTRACE_THREAD_*), u64 traps that were their
					  CTI's first (warm-up) */
	TK_BTRACE_REC_PROCESS_END = 4, /* u64 traps, u64 patched CTIs, u64 threads, u64 reason
					  (TK_BTRACE_END_*), u64 TSC, u64 CLOCK_MONOTONIC_RAW ns
					  (read just before it), u64 the fatal signal, u64 times
					  the trace file was reopened */
	TK_BTRACE_REC_EXEC = 5,        /* the process is about to exec: its trace ends here;
					  u64 TSC, u64 CLOCK_MONOTONIC_RAW ns */
	TK_BTRACE_REC_REFUSED = 6,     /* the recorder refused to continue; payload: message */
	TK_BTRACE_REC_LIMIT = 7,       /* record --max-size: no stream after this; u64 the
					  limit in bytes */
};

/* How a thread's trace ended (THREAD_END; older files: exited). */
enum tk_btrace_thread_end {
	TK_BTRACE_THREAD_EXITED = 0,   /* the thread ended: returned, pthread_exit, exit */
	TK_BTRACE_THREAD_CUT = 1,      /* it was running when another thread ended the process
					  (exit, exec, a fatal signal): its trace stops there */
	TK_BTRACE_THREAD_SIGNAL = 2,   /* it received the fatal signal that ended the process */
};

/* Why the process's trace ended (PROCESS_END). */
enum tk_btrace_end {
	TK_BTRACE_END_EXIT = 0,
	TK_BTRACE_END_SIGNAL = 1,      /* a fatal signal (its number follows) */
	TK_BTRACE_END_SNAPSHOT = 2,    /* record --snapshot-signal: that signal (its number
					  follows) ended the recording; the program went on */
	TK_BTRACE_END_TRIGGER = 3,     /* record --trigger: the function's Nth call (N follows,
					  then its name) ended the recording; the program went on */
};

/* The FNV-1a checksum of a record payload (versions 1 and 2). */
static inline uint32_t tk_btrace_checksum(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Version 3's checksum of a record payload: little-endian 64-bit words (the last one
 * padded with zeros), each mixed in by an xor, a multiply and an xor-shift, all bijective,
 * so any one changed word changes the 64-bit state; its last multiply's high half is the
 * sum. FNV-1a's byte loop
 * (about 4 cycles a byte) took a third of a long recording's CPU time: once when the
 * recorder writes, once when `record` reads the trace back for its summary. */
static inline uint64_t tk_btrace_sum64_mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 32);
}

static inline uint32_t tk_btrace_checksum64(const uint8_t *p, size_t n)
{
	uint64_t h = 0x243f6a8885a308d3ull ^ n, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {   /* compilers make this one load */
		w = (uint64_t)p[i] | (uint64_t)p[i + 1] << 8 | (uint64_t)p[i + 2] << 16 |
		    (uint64_t)p[i + 3] << 24 | (uint64_t)p[i + 4] << 32 | (uint64_t)p[i + 5] << 40 |
		    (uint64_t)p[i + 6] << 48 | (uint64_t)p[i + 7] << 56;
		h = tk_btrace_sum64_mix(h, w);
	}
	if (i < n) {
		w = 0;
		for (size_t k = 0; i + k < n; k++)
			w |= (uint64_t)p[i + k] << (8 * k);
		h = tk_btrace_sum64_mix(h, w);
	}
	h *= 0xff51afd7ed558ccdull;   /* the high half depends on every bit */
	return (uint32_t)(h >> 32);
}

/* The checksum of a record payload in a container of format VERSION. */
static inline uint32_t tk_btrace_record_sum(unsigned version, const uint8_t *p, size_t n)
{
	return version >= TK_BTRACE_VERSION_SUM64 ? tk_btrace_checksum64(p, n) : tk_btrace_checksum(p, n);
}

/* Content probe: confidence 0..100 (0: not this format). */
TK_API int tk_btrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* ---- reader ---------------------------------------------------------------------------- */
struct tk_btrace;

/* One record as it stands in the file (its checksum verified), for dumps. */
struct tk_btrace_record {
	uint64_t offset;          /* of the record header */
	unsigned type;            /* enum tk_btrace_rec_type */
	uint32_t tid, seq;
	const uint8_t *payload;
	uint32_t size;            /* payload bytes */
};

struct tk_btrace_opts {
	size_t sz;                /* sizeof(struct tk_btrace_opts) */
	/* called for each sound record in file order while the container is indexed; a
	 * negative return stops the indexing and tk_btrace_open fails with it (NULL: none) */
	int (*on_record)(void *ctx, const struct tk_btrace_record *r);
	void *ctx;
	/* workers that check the records' checksums ahead of the index (0 or 1: none) */
	unsigned nthreads;
};

struct tk_btrace_info {
	unsigned version;
	uint32_t pid, ppid;
	/* TSC ticks per second: the header's, else measured over the run (TSC against
	 * CLOCK_MONOTONIC_RAW at start and at the end record, when at least 100 us apart); 0:
	 * unknown (times stay in ticks) */
	uint64_t tsc_hz, start_tsc;
	int tsc_hz_measured;
	int complete;             /* ends with a process-end or exec record */
	int exec;                 /* the process exec'd another program (trace ends there) */
	int refused;              /* the recorder refused the program */
	char refused_msg[160];
	uint64_t traps;           /* from the process-end record (0 if missing) */
	uint64_t patched;         /* CTIs patched with int3 */
	int signal;               /* the fatal signal that ended the process (0: none) */
	int snapshot_signal;      /* the signal that ended the recording (--snapshot-signal) */
	uint64_t fd_reopened;     /* the program closed or replaced the trace's file
				     descriptor and the recorder reopened the file, times */
	uint64_t ring;            /* a flight recorder's snapshot (record --ring): the ring's
				     bytes per thread; 0: the whole trace was written */
	uint64_t size_limit;      /* recording stopped at record --max-size (bytes); 0: not */
	uint64_t trigger_call;    /* record --trigger: the call that ended the recording; 0: none */
	char trigger_fn[64];      /* ... of this function */
};

struct tk_btrace_module {
	uint64_t bias;            /* load bias: run-time address - ELF virtual address */
	uint64_t start, end;      /* executable range (run-time addresses) */
	const char *path;
	uint8_t build_id[64];
	unsigned build_id_len;
};

struct tk_btrace_thread {
	uint32_t tid;
	uint64_t pieces;          /* stream records */
	uint64_t stream_bytes;
	uint64_t first_offset;    /* file offset of the first stream record */
	int ended;                /* has a thread-end record */
	uint64_t traps, reentries, unresolved;   /* from the thread-end record */
	uint64_t traps_long;      /* traps at CTIs of 5 bytes or more (could be trampolines) */
	uint64_t tramp_hits;      /* CTIs recorded by a trampoline, without a trap */
	uint64_t lost_pieces;     /* stream records missing or damaged */
	unsigned end_reason;      /* enum tk_btrace_thread_end (with ended) */
	uint64_t not_kept;        /* a ring snapshot's pieces before its first (dropped) */
	int size_cut;             /* its trace stopped at record --max-size before it ended */
	uint64_t traps_first;     /* traps that were their CTI's first; the others come after
				     warm-up (older files: 0) */
	int has_traps_first;      /* the thread-end record says so (older files do not) */
};

/* Index a container held in memory (DATA must outlive the handle). Damaged records are
 * skipped (resuming at the next record header), reported through tk_log and counted in the
 * gap statistics. Returns NULL with *err set if DATA is not a readable container. */
TK_API struct tk_btrace *tk_btrace_open(const uint8_t *data, size_t len, const struct tk_btrace_opts *opts,
				 int *err);
TK_API void tk_btrace_free(struct tk_btrace *bt);
TK_API const struct tk_btrace_info *tk_btrace_info(const struct tk_btrace *bt);
TK_API size_t tk_btrace_module_count(const struct tk_btrace *bt);
TK_API const struct tk_btrace_module *tk_btrace_module(const struct tk_btrace *bt, size_t i);
TK_API size_t tk_btrace_thread_count(const struct tk_btrace *bt);
TK_API const struct tk_btrace_thread *tk_btrace_thread(const struct tk_btrace *bt, size_t i);
TK_API const struct tk_gap_stats *tk_btrace_gaps(const struct tk_btrace *bt);

/* Thread I's Intel PT stream as one raw buffer (malloc'd; the caller frees it). Where pieces
 * are missing the stream gets an OVF packet and continues with the next piece, which starts
 * with a PSB+ (a sync point), so PT decoders see the loss instead of a wrong flow. */
TK_API int tk_btrace_thread_stream(const struct tk_btrace *bt, size_t i, uint8_t **out, size_t *len);

/* The other files of a recording that followed its processes (record --btrace without
 * --no-follow), found beside BASE, the first process's file: BASE.<pid> (another process) and
 * BASE.<pid>.<n> (the n-th program process <pid> exec'd into), sorted by pid, then n.
 * *PATHS: malloc'd, freed with tk_btrace_related_free; none: *N 0. */
TK_API int tk_btrace_related(const char *base, char ***paths, size_t *n);
TK_API void tk_btrace_related_free(char **paths, size_t n);

/* dump's text, one line each with the file offset first (NO_OFFSET: without): the
 * header of the container in DATA (LEN bytes; nothing if it is too short), and a record
 * (the callback of tk_btrace_opts). */
struct tk_buf;
TK_API void tk_btrace_header_text(struct tk_buf *b, const uint8_t *data, size_t len, int no_offset);
TK_API void tk_btrace_record_text(struct tk_buf *b, const struct tk_btrace_record *r, int no_offset);
/* What `tracekit info` shows of a container: process, completeness, TSC rate, modules,
 * threads (indented lines). */
TK_API void tk_btrace_info_text(struct tk_buf *b, const struct tk_btrace *bt);

/* Add the container's modules (from their paths, at their recorded load addresses) to a
 * memory image for the PT flow decoder. */
struct tk_image;
TK_API int tk_btrace_add_modules(const struct tk_btrace *bt, struct tk_image *img);
/* The recorded modules into IMG and/or SYM (either may be NULL), each from its recorded
 * path if that file has the recorded build-id, else from an ELF file of the list or a
 * module directory that has it (checked by build-id; by name when none was recorded); a
 * module with no such file is named through MSG (with IMG) and left out: the trace in it
 * decodes as gaps. Returns how many were left out. */
struct tk_btrace_modules_opts {
	size_t sz;                 /* sizeof(struct tk_btrace_modules_opts) */
	const char *const *elf;    /* FILE[:BASE]: FILE:BASE is placed by its giver, not here */
	size_t nelf;
	const char *const *module_path;   /* directories */
	size_t nmodule_path;
	int quiet;
	tk_msg_fn msg;             /* messages about FILE, the trace */
	void *ctx;
	const char *file;
};
struct tk_sym;
TK_API int tk_btrace_load_modules(const struct tk_btrace *bt, const struct tk_btrace_modules_opts *o,
			   struct tk_image *img, struct tk_sym *sym);

/* Every thread's stream through the Intel PT flow decoder (its public API: the container
 * holds PT packets) into SINK, thread after thread, each event's track set to the thread
 * id. Lost or damaged pieces arrive as TK_EV_GAP events and are added to *GAPS (with the
 * container's own damage); so do the start of a ring snapshot (TK_GAP_WRAP: what came
 * before was not kept) and the end of a trace stopped at --max-size (TK_GAP_TRUNCATED). */
struct tk_btrace_events_opts {
	size_t sz;                 /* sizeof(struct tk_btrace_events_opts) */
	struct tk_image *image;    /* code of the recorded modules (tk_btrace_add_modules) */
	unsigned nthreads;         /* decoder threads per stream; 0 = all cores */
	int only_tid;              /* decode only thread TID */
	uint32_t tid;
	size_t part_bytes;         /* each thread's stream in parts of about this many bytes
				      (whole pieces), joined and decoded one after another;
				      0: 8 MiB */
};
struct tk_sink;
TK_API int tk_btrace_events(const struct tk_btrace *bt, const struct tk_btrace_events_opts *opts,
		     struct tk_sink sink, struct tk_gap_stats *gaps);

#ifdef __cplusplus
}
#endif
#endif
