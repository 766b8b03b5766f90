/* tracekit common layer: errors, logging, input, output buffers, worker pool, progress. */
#ifndef TRACEKIT_COMMON_H
#define TRACEKIT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stable API: libtracekit.so is built with -fvisibility=hidden and exports only what
 * the public headers mark TK_API. (What include/tracekit/internal/ declares is there for the
 * command, the recorders and tests, which link the static library.) */
#if defined(__GNUC__) || defined(__clang__)
#define TK_API __attribute__((visibility("default")))
#else
#define TK_API
#endif

#define TK_VERSION_MAJOR 0
#define TK_VERSION_MINOR 1
#define TK_VERSION_PATCH 0
#define TK_VERSION_STRING "0.1.0"

/* ---- errors ------------------------------------------------------------------------
 * Every function returns int: >= 0 on success, -TK_E_* on failure. */
enum tk_error {
	TK_OK = 0,
	TK_E_INTERNAL,     /* a bug in tracekit */
	TK_E_INVAL,        /* invalid argument */
	TK_E_NOMEM,        /* out of memory */
	TK_E_IO,           /* read or write failed (errno kept by the caller) */
	TK_E_EOF,          /* end of input */
	TK_E_TRUNCATED,    /* input ends inside a record or packet */
	TK_E_BAD_FORMAT,   /* input does not follow its format */
	TK_E_BAD_OPCODE,   /* unknown packet, record or token kind */
	TK_E_UNKNOWN_FORMAT, /* the input's format is not recognised */
	TK_E_UNSUPPORTED,  /* recognised, but this feature or version is not supported */
	TK_E_NOSYNC,       /* no synchronisation point found */
	TK_E_NOMAP,        /* code address not in the memory image */
	TK_E_OVERFLOW,     /* the trace reports lost data (hardware or buffer overflow) */
	TK_E_LIMIT,        /* a configured or hard limit was reached */
	TK_E_CANCELLED,    /* stopped on request of a callback */
	TK_E_DECOMPRESS,   /* compressed input is corrupt or truncated */
	TK_E_NOT_FOUND,    /* a looked-up item does not exist */
	TK_E_BAD_STATE,    /* call not valid in the object's current state */
	TK_E__COUNT
};

/* Human-readable name of an error; accepts err or -err. Never NULL. */
TK_API const char *tk_strerror(int err);

/* ---- logging: the library never prints; it reports through this callback -------- */
enum tk_log_level { TK_LOG_ERROR, TK_LOG_WARN, TK_LOG_INFO, TK_LOG_DEBUG };
typedef void (*tk_log_fn)(void *ctx, enum tk_log_level level, const char *msg);

/* Set the process-wide log callback (NULL silences the library). Not thread-safe against
 * concurrent logging: set it once at start-up. */
TK_API void tk_set_log(tk_log_fn fn, void *ctx);
/* The callback and context set now (to set them back later). */
TK_API void tk_get_log(tk_log_fn *fn, void **ctx);
TK_API void tk_set_log_level(enum tk_log_level max_level);
TK_API void tk_log(enum tk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Messages about one input, for readers that name files and offsets (the source
 * interface, the perf.data session): FILE the file they are about (NULL: none), OFFSET its
 * byte offset (UINT64_MAX: none). The caller prints them as it likes. */
typedef void (*tk_msg_fn)(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
			  const char *msg);
/* Format a message and hand it to FN (nothing when FN is NULL). */
TK_API void tk_msg(tk_msg_fn fn, void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* ---- input: mmap'd files or stdin, transparent .gz/.zst ---------------------------- */
enum tk_compression { TK_COMP_NONE, TK_COMP_GZIP, TK_COMP_ZSTD };

struct tk_input_opts {
	size_t sz;                 /* sizeof(struct tk_input_opts) */
	int no_decompress;         /* treat compressed input as raw bytes */
	uint64_t max_size;         /* refuse to map more than this many decompressed bytes; 0 = no limit */
};

struct tk_input;
struct tk_progress;

/* Open PATH ("-" is standard input). Does not read the content yet. */
TK_API int tk_input_open(struct tk_input **in, const char *path, const struct tk_input_opts *opts);
TK_API void tk_input_free(struct tk_input *in);
TK_API const char *tk_input_name(const struct tk_input *in);
TK_API enum tk_compression tk_input_compression(const struct tk_input *in);
/* Size on disk (compressed size for compressed input). For a pipe: the bytes read from it
 * so far (all of them once it has been read to the end). */
TK_API uint64_t tk_input_file_size(const struct tk_input *in);
/* 1 when IN's data is a read-only mapping of the regular file PATH (uncompressed, not
 * standard input): its pages may be given back (tk_release_pages) and refault from the
 * file; a copy in memory would read back as zeros. */
TK_API int tk_input_is_file_mapping(const struct tk_input *in, const char *path, size_t len);
/* Read LEN bytes at OFFSET of IN's file with pread, without touching its mapping: for
 * reading a few bytes here and there, where faulting in a page costs more than the copy.
 * Returns the bytes read (fewer at the end of the file), or -TK_E_UNSUPPORTED when IN is
 * not a plain regular file (a pipe, compressed data), -TK_E_IO. Bytes the file lost since
 * it was opened (truncated by someone else) read as zeros and are noted, as in the
 * mapping (tk_input_cut). Safe from any thread once tk_input_compression(IN) has been
 * called. */
TK_API long tk_input_pread(const struct tk_input *in, void *buf, size_t len, uint64_t offset);
/* Give back the whole pages of BASE[BEGIN, END) (a file mapping that was read). */
TK_API void tk_release_pages(const void *base, size_t begin, size_t end);

/* How many bytes tk_input_peek gives at most (what format detection looks at). */
#define TK_INPUT_PEEK 65536

/* Up to the first TK_INPUT_PEEK decompressed bytes, for format detection; does not disturb
 * reading. */
TK_API int tk_input_peek(struct tk_input *in, const uint8_t **data, size_t *len);

/* The whole decompressed content, contiguous. Plain files are mmap'd (no copy); compressed
 * input and pipes are decompressed/read into memory. The pointer lives as long as IN. */
TK_API int tk_input_map(struct tk_input *in, const uint8_t **data, size_t *len);

/* Sequential reading in bounded memory (decompresses as it goes). Returns bytes read
 * (0 at end of input) or -TK_E_*. Do not mix with tk_input_map on the same input. */
TK_API long tk_input_read(struct tk_input *in, void *buf, size_t len);
/* As tk_input_read, without the copy where IN's bytes are in memory already (a plain
 * file's mapping): *P is set to the next bytes read (up to LEN), valid until the next
 * read. Returns 0 with *P NULL where they are not (a pipe, compressed data): read them with
 * tk_input_read instead. */
TK_API long tk_input_read_in_place(struct tk_input *in, const void **p, size_t len);
/* P (initialised by the caller, total: the file's size) set to the bytes of the file
 * tk_input_read has consumed, as it reads (NULL: none). A command that reads its input in
 * sequence thus shows progress wherever it decodes it. */
TK_API void tk_input_progress(struct tk_input *in, struct tk_progress *p);
/* Decompress IN (a compressed regular file) on a thread of its own, ahead of
 * tk_input_read, when ON: the reading then takes about the longer of the decompression
 * and the caller's parsing instead of their sum. Call before the first read; a pipe or an
 * uncompressed file is read as before. The bytes, cuts and errors are the same. */
TK_API void tk_input_read_ahead(struct tk_input *in, int on);

/* Whether the input lost data while it was read, and from which offset (*OFFSET, may be
 * NULL): TK_INPUT_CUT, the compressed data was cut short or corrupt there (reading ended
 * there after handing out everything before it; the library logged it); TK_INPUT_SHRANK,
 * the mapped file was truncated while read (needs tk_input_catch_sigbus; the lost part
 * read as zeros; not logged, as it is noticed in a signal handler); 0 otherwise. */
enum { TK_INPUT_CUT = 1, TK_INPUT_SHRANK = 2 };
TK_API int tk_input_cut(const struct tk_input *in, uint64_t *offset);

/* Install a SIGBUS handler (once per process; a program calls it, the library never does
 * on its own) that turns reading a mapped input beyond its end, after someone truncated
 * the file, into zeros and a TK_INPUT_SHRANK mark instead of death. A SIGBUS elsewhere
 * gets the handler that was there before. */
TK_API int tk_input_catch_sigbus(void);

/* ---- output buffer with fast number formatting ----------------------------------- */
struct tk_buf {
	char *data;
	size_t len, cap;
	int fd;        /* >= 0: flushed to this descriptor when full; < 0: grows in memory */
	int err;       /* first error (-TK_E_IO / -TK_E_NOMEM); later writes are dropped */
	int errnum;    /* with -TK_E_IO: errno of the failed write (ENOSPC, EPIPE, ...) */
};

TK_API int tk_buf_init(struct tk_buf *b, int fd, size_t cap);
TK_API void tk_buf_free(struct tk_buf *b);
TK_API int tk_buf_flush(struct tk_buf *b);           /* write out (fd mode); no-op in memory mode */
TK_API int tk_buf_reserve_slow(struct tk_buf *b, size_t n);
TK_API int tk_buf_printf(struct tk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TK_API void tk_buf_u64(struct tk_buf *b, uint64_t v);           /* decimal */
TK_API void tk_buf_i64(struct tk_buf *b, int64_t v);
TK_API void tk_buf_hex(struct tk_buf *b, uint64_t v, int width); /* lower-case, zero-padded to width (0 = minimal) */
TK_API void tk_buf_hex_bytes(struct tk_buf *b, const uint8_t *p, size_t n, char sep); /* "0a 0b ..." */
/* Fixed-point: v / 10^decimals with exactly `decimals` digits after the point. */
TK_API void tk_buf_fixed(struct tk_buf *b, int64_t v, int decimals);
/* JSON string literal with escapes, including the quotes. */
TK_API void tk_buf_json_str(struct tk_buf *b, const char *s, size_t n);
/* Text from a trace or a file for a terminal: control characters (C0 with newline and tab,
 * DEL, the C1 controls such as CSI, and bytes that begin no UTF-8 character) written as
 * \n, \r, \t or \xNN, so that no escape sequence or carriage return reaches the screen. */
TK_API void tk_buf_text(struct tk_buf *b, const char *s, size_t n);
/* The same into OUT (CAP bytes, always terminated, cut at a whole character); returns its length. */
TK_API size_t tk_text_escape(char *out, size_t cap, const char *s);
/* S escaped for a printf argument, in a buffer that lives until the end of the statement's
 * block: tk_buf_printf(b, "module %s\n", TK_TEXT(path)). */
static inline const char *tk_text_str(char *out, size_t cap, const char *s)
{
	tk_text_escape(out, cap, s ? s : "(null)");
	return out;
}
#define TK_TEXT(s) tk_text_str((char[4096]){ 0 }, 4096, (s))

static inline int tk_buf_reserve(struct tk_buf *b, size_t n)
{
	return b->cap - b->len >= n ? 0 : tk_buf_reserve_slow(b, n);
}
static inline void tk_buf_put(struct tk_buf *b, const void *p, size_t n)
{
	if (tk_buf_reserve(b, n) < 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}
static inline void tk_buf_putc(struct tk_buf *b, char c)
{
	if (tk_buf_reserve(b, 1) < 0)
		return;
	b->data[b->len++] = c;
}
static inline void tk_buf_puts(struct tk_buf *b, const char *s)
{
	tk_buf_put(b, s, strlen(s));
}

/* ---- worker pool: chunk jobs on N threads, results handed back in chunk order ---- */
/* work(ctx, i) runs on a worker thread (or, with caller_works, the calling thread) for i
 * in [0, njobs). merge(ctx, i) runs on the calling thread, strictly in order 0, 1, 2, ...,
 * each as soon as job i is done. At most
 * `window` jobs (default 2 * nthreads) are started ahead of the merge point, so per-job
 * results stay bounded. The first negative return from work or merge stops new jobs and
 * is returned. nthreads <= 1 runs everything on the calling thread. */
struct tk_pool_opts {
	size_t sz;
	unsigned nthreads;
	size_t window;
	/* nthreads - 1 worker threads, and the calling thread runs jobs too while the one it
	 * merges next is not done: only where no job waits for a merge */
	int caller_works;
};
typedef int (*tk_pool_work_fn)(void *ctx, size_t index);
typedef int (*tk_pool_merge_fn)(void *ctx, size_t index);
TK_API int tk_pool_run(const struct tk_pool_opts *opts, size_t njobs, tk_pool_work_fn work,
		tk_pool_merge_fn merge, void *ctx);
/* Number of online CPUs (at least 1). */
TK_API unsigned tk_cpu_count(void);
/* The longest instruction of any traced ISA (x86's; AArch64's are 4 bytes). */
#define TK_MAX_INSN_BYTES 15
/* ---- progress: rate-limited status lines for long runs ----------------------------- */
typedef void (*tk_progress_fn)(void *ctx, const char *line);
struct tk_progress {
	tk_progress_fn print;   /* NULL: disabled */
	void *ctx;
	const char *label;
	uint64_t total, done;
	uint64_t start_ns, last_ns;
};
TK_API void tk_progress_init(struct tk_progress *p, const char *label, uint64_t total,
		      tk_progress_fn print, void *ctx);
TK_API void tk_progress_update_slow(struct tk_progress *p);
static inline void tk_progress_set(struct tk_progress *p, uint64_t done)
{
	p->done = done;
	if (p->print)
		tk_progress_update_slow(p);
}
TK_API void tk_progress_finish(struct tk_progress *p);

/* ---- gap bookkeeping shared by every decoder -------------------------------------- */
#define TK_GAP_FIRST_OFFSETS 4
struct tk_gap_stats {
	uint64_t count;          /* number of gaps */
	uint64_t bytes_skipped;  /* input bytes not decoded */
	uint64_t first_offsets[TK_GAP_FIRST_OFFSETS];   /* the lowest of the gaps added or
							   merged, in order */
};
TK_API void tk_gap_stats_add(struct tk_gap_stats *s, uint64_t offset, uint64_t bytes_skipped);
TK_API void tk_gap_stats_merge(struct tk_gap_stats *into, const struct tk_gap_stats *from);
/* The gap summary as one message ("N WHATs, B bytes skipped (first at offset ...)"):
 * 1 when anything was lost, else 0. */
TK_API int tk_gap_report(const struct tk_gap_stats *g, const char *what, const char *file, tk_msg_fn msg,
		  void *ctx);
/* What a decoding lost, the numbers its closing summary is made of. A shard keeps its own
 * in its partial result and the merge adds them up, so that the summary is the one a
 * single process decoding the whole input prints. */
struct tk_losses {
	struct tk_gap_stats gaps;  /* the decoding's gaps */
	uint64_t insns;            /* instructions decoded (Intel PT's summary line) */
	uint64_t unmatched;        /* exits without their enters (XRay) */
};
/* INTO += FROM (FROM's gaps after INTO's: add in input order). */
TK_API void tk_losses_add(struct tk_losses *into, const struct tk_losses *from);

/* ---- little helpers used by readers ----------------------------------------------- */
static inline uint16_t tk_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tk_le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static inline uint64_t tk_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
static inline uint16_t tk_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t tk_be32(const uint8_t *p) { return __builtin_bswap32(tk_le32(p)); }
static inline uint64_t tk_be64(const uint8_t *p) { return __builtin_bswap64(tk_le64(p)); }

/* The threads to keep of a trace of several processes (perf.data sessions: --pid, --tid,
 * --comm). Each given part must match: the thread's process is one of PIDS, the thread one
 * of TIDS, its name COMM; an empty list (or NULL) matches any. */
struct tk_thread_filter {
	const uint32_t *pids;
	size_t npids;
	const uint32_t *tids;
	size_t ntids;
	const char *comm;
	/* the CPUs to keep (perf.data's per-CPU queues): NCPUS ranges, CPUS[2k] to
	 * CPUS[2k + 1] inclusive */
	const uint32_t *cpus;
	size_t ncpus;
};
/* Whether F (may be NULL) keeps anything out. */
static inline int tk_thread_filter_on(const struct tk_thread_filter *f)
{
	return f && (f->npids || f->ntids || f->comm || f->ncpus);
}
/* Whether F (may be NULL) keeps anything out by thread (not only by CPU). */
static inline int tk_thread_filter_threads(const struct tk_thread_filter *f)
{
	return f && (f->npids || f->ntids || f->comm);
}
/* Whether F (may be NULL) keeps CPU's trace. */
static inline int tk_thread_filter_cpu(const struct tk_thread_filter *f, uint32_t cpu)
{
	if (!f || !f->ncpus)
		return 1;
	for (size_t i = 0; i < f->ncpus; i++)
		if (cpu >= f->cpus[2 * i] && cpu <= f->cpus[2 * i + 1])
			return 1;
	return 0;
}

/* 64-bit hash for tables (not cryptographic). */
static inline uint64_t tk_hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#ifdef __cplusplus
}
#endif
#endif
