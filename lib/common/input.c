/* Input: regular files are mmap'd; pipes are read; .gz and .zst are decompressed either
 * fully (tk_input_map) or as a stream in bounded memory (tk_input_read). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <isa-l/igzip_lib.h>
#include <zstd.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

struct tk_input {
	char *name;
	int fd;
	int own_fd;
	int is_pipe;             /* not a regular file: no mmap, no size */
	struct tk_input_opts opts;
	enum tk_compression comp;
	int comp_known;
	uint64_t file_size;

	/* raw bytes: either a whole mmap'd file, or a pipe with a push-back buffer */
	const uint8_t *raw;
	size_t raw_len;
	size_t raw_pos;          /* sequential raw position (both modes) */
	uintptr_t raw_dropped;   /* sequential reading: pages below this were given back */
	uint8_t *pushback;       /* pipe mode: first bytes read for peeking */
	size_t pushback_len;
	int raw_eof;
	struct tk_progress *progress;   /* tk_input_progress */

	/* decompressed or copied content for tk_input_map */
	uint8_t *owned;
	size_t owned_len;
	int mapped;

	/* peek */
	uint8_t *peek;
	size_t peek_len;
	int peeked;

	/* streaming decompression */
	int stream_started;
	struct inflate_state *gz; /* ISA-L's inflate (gzip members, their CRC and size checked) */
	ZSTD_DStream *zd;
	uint8_t *inbuf;
	size_t in_pos, in_len;
	int stream_done;
	int comp_eof;            /* the compressed bytes are read to their end */
	size_t last_zstd_hint;
	uint8_t *zstage;         /* output when the reader's room is under a step (ZSTD_STEP,
				    GZIP_STEP) */
	size_t zstage_pos, zstage_len;
	int guard;               /* slot in the SIGBUS guard, or -1 */
	uint64_t out_total;      /* decompressed bytes handed out */
	uint64_t gz_total;       /* ... and staged: decompressed by gzip_read */
	int cut;                 /* the compressed data ended early or was corrupt there */
	uint64_t cut_off;        /* ... at this decompressed offset */
	/* a cut found by the decompression, told (logged, set in cut) once the reader gets
	 * to it: on the read-ahead thread it is found before the bytes ahead of it are read */
	int cut_found;
	uint64_t cut_found_off;
	int hold_cut;            /* tk_input_hold_cut */
	char cut_msg[320];

	int ahead_wanted;        /* tk_input_read_ahead */
	struct read_ahead *ahead;   /* its thread, once reading began */
};

/* ---- files that shrink while mapped ----------------------------------------------------
 * Reading a page of a mapped file beyond its end raises SIGBUS: someone truncated it while
 * it was read. With tk_input_catch_sigbus, the handler puts zero pages in place of the lost
 * part of the mapping and notes the offset, so the read goes on and the caller can say what
 * was lost (tk_input_cut). The slots are read by the handler without locks. */
#define GUARD_SLOTS 64
static struct {
	_Atomic uintptr_t base;  /* 0: free */
	size_t len;
	int fd;                  /* the file's descriptor (its size now), or -1 */
	_Atomic uint64_t cut;    /* offset of the first lost byte + 1; 0: none */
} guards[GUARD_SLOTS];
static struct sigaction guard_old;
static uintptr_t guard_page;
static atomic_int guard_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	(void)sig, (void)uc;
	for (int i = 0; i < GUARD_SLOTS; i++) {
		uintptr_t base = atomic_load(&guards[i].base);
		if (base <= 1 || a < base || a - base >= guards[i].len)
			continue;
		uintptr_t page = a & ~(guard_page - 1);
		if (mmap((void *)page, base + guards[i].len - page, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			break;
		/* the kernel zero-fills the page holding the new end: the loss starts there */
		struct stat st;
		uint64_t off = page - base, cur = atomic_load(&guards[i].cut);
		if (guards[i].fd >= 0 && fstat(guards[i].fd, &st) == 0 && (uint64_t)st.st_size < off)
			off = (uint64_t)st.st_size;
		off++;
		while ((!cur || off < cur) && !atomic_compare_exchange_weak(&guards[i].cut, &cur, off))
			;
		return;
	}
	/* not a mapped input: what would have happened without us */
	sigaction(SIGBUS, &guard_old, NULL);
}

int tk_input_catch_sigbus(void)
{
	struct sigaction sa;
	if (atomic_exchange(&guard_installed, 1))
		return 0;
	guard_page = (uintptr_t)sysconf(_SC_PAGESIZE);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, &guard_old) < 0 ? -TK_E_IO : 0;
}

static void guard_add(struct tk_input *in)
{
	in->guard = -1;
	for (int i = 0; i < GUARD_SLOTS; i++) {
		uintptr_t free_slot = 0;
		/* reserve (1), fill, then publish the base */
		if (atomic_compare_exchange_strong(&guards[i].base, &free_slot, 1)) {
			guards[i].len = in->raw_len;
			guards[i].fd = in->fd;
			atomic_store(&guards[i].cut, 0);
			atomic_store(&guards[i].base, (uintptr_t)in->raw);
			in->guard = i;
			return;
		}
	}
}

static int read_full(int fd, uint8_t *buf, size_t len, size_t *got)
{
	size_t n = 0;
	while (n < len) {
		ssize_t r = read(fd, buf + n, len - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -TK_E_IO;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*got = n;
	return 0;
}

int tk_input_open(struct tk_input **out, const char *path, const struct tk_input_opts *opts)
{
	struct tk_input *in;
	struct stat st;

	*out = NULL;
	if (!path)
		return -TK_E_INVAL;
	in = calloc(1, sizeof *in);
	if (!in)
		return -TK_E_NOMEM;
	in->guard = -1;
	if (opts)
		memcpy(&in->opts, opts, opts->sz < sizeof in->opts ? opts->sz : sizeof in->opts);
	in->opts.sz = sizeof in->opts;
	in->name = strdup(path);
	if (!in->name) {
		free(in);
		return -TK_E_NOMEM;
	}
	if (strcmp(path, "-") == 0) {
		in->fd = STDIN_FILENO;
	} else {
		in->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (in->fd < 0) {
			int e = errno;
			tk_input_free(in);
			errno = e;
			return -TK_E_IO;
		}
		in->own_fd = 1;
	}
	if (fstat(in->fd, &st) < 0) {
		tk_input_free(in);
		return -TK_E_IO;
	}
	if (S_ISDIR(st.st_mode)) {
		tk_input_free(in);
		errno = EISDIR;
		return -TK_E_IO;
	}
	if (S_ISREG(st.st_mode)) {
		in->file_size = (uint64_t)st.st_size;
		if (st.st_size > 0) {
			void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, in->fd, 0);
			if (p == MAP_FAILED) {
				tk_input_free(in);
				return -TK_E_IO;
			}
			in->raw = p;
			in->raw_len = (size_t)st.st_size;
			guard_add(in);
			madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
		}
		in->raw_eof = 1;
	} else {
		in->is_pipe = 1;
	}
	*out = in;
	return 0;
}

static void ahead_stop(struct tk_input *in);

void tk_input_free(struct tk_input *in)
{
	if (!in)
		return;
	if (in->ahead)
		ahead_stop(in);   /* before what its thread reads goes */
	if (in->raw) {
		if (in->guard >= 0)
			atomic_store(&guards[in->guard].base, 0);
		munmap((void *)in->raw, in->raw_len);
	}
	if (in->own_fd && in->fd >= 0)
		close(in->fd);
	free(in->gz);
	if (in->zd)
		ZSTD_freeDStream(in->zd);
	free(in->inbuf);
	free(in->zstage);
	free(in->owned);
	free(in->pushback);
	free(in->peek);
	free(in->name);
	free(in);
}

const char *tk_input_name(const struct tk_input *in)
{
	return in->name;
}

uint64_t tk_input_file_size(const struct tk_input *in)
{
	/* A pipe's size is what has been read of it so far. */
	return in->is_pipe ? (in->raw_pos > in->pushback_len ? in->raw_pos : in->file_size)
			   : in->file_size;
}

/* Pipe mode: make sure the first N raw bytes are in the push-back buffer. */
static int pipe_fill_pushback(struct tk_input *in, size_t want)
{
	size_t got;
	int rc;

	if (in->raw || in->pushback_len >= want || in->raw_eof)
		return 0;
	uint8_t *p = realloc(in->pushback, want);
	if (!p)
		return -TK_E_NOMEM;
	in->pushback = p;
	rc = read_full(in->fd, p + in->pushback_len, want - in->pushback_len, &got);
	if (rc < 0)
		return rc;
	in->pushback_len += got;
	if (in->pushback_len < want)
		in->raw_eof = 1;
	return 0;
}

/* The first raw bytes, without consuming them. */
static int raw_head(struct tk_input *in, const uint8_t **p, size_t *n, size_t want)
{
	if (!in->is_pipe) {
		*p = in->raw;
		*n = in->raw_len < want ? in->raw_len : want;
		return 0;
	}
	int rc = pipe_fill_pushback(in, want);
	if (rc < 0)
		return rc;
	*p = in->pushback;
	*n = in->pushback_len < want ? in->pushback_len : want;
	return 0;
}

static void detect_compression(struct tk_input *in)
{
	const uint8_t *p = NULL;
	size_t n = 0;

	if (in->comp_known)
		return;
	in->comp_known = 1;
	if (in->opts.no_decompress)
		return;
	if (raw_head(in, &p, &n, 4) < 0)
		return;
	if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
		in->comp = TK_COMP_GZIP;
	else if (n >= 4 && tk_le32(p) == 0xfd2fb528u)
		in->comp = TK_COMP_ZSTD;
}

enum tk_compression tk_input_compression(const struct tk_input *in)
{
	detect_compression((struct tk_input *)in);
	return in->comp;
}

/* Sequential raw read: mmap'd bytes, or push-back then the descriptor. */
/* Sequential reading of a mapped file: hand the pages already copied back to the kernel,
 * so a streaming reader's resident memory does not grow with the file. */
static void drop_read_pages(struct tk_input *in)
{
	const size_t step = (size_t)8 << 20;
	uintptr_t base = (uintptr_t)in->raw, upto = (base + in->raw_pos) & ~(uintptr_t)(step - 1);
	if (in->mapped || upto <= base + step)
		return;
	uintptr_t from = in->raw_dropped ? in->raw_dropped : base & ~(uintptr_t)4095;
	if (upto - step <= from)
		return;
	madvise((void *)from, upto - step - from, MADV_DONTNEED);
	in->raw_dropped = upto - step;
}

static long raw_read(struct tk_input *in, uint8_t *buf, size_t len)
{
	if (!in->is_pipe) {
		size_t left = in->raw_len - in->raw_pos;
		size_t n = len < left ? len : left;
		if (n)
			memcpy(buf, in->raw + in->raw_pos, n);
		in->raw_pos += n;
		drop_read_pages(in);
		return (long)n;
	}
	if (in->raw_pos < in->pushback_len) {
		size_t left = in->pushback_len - in->raw_pos;
		size_t n = len < left ? len : left;
		memcpy(buf, in->pushback + in->raw_pos, n);
		in->raw_pos += n;
		return (long)n;
	}
	for (;;) {
		ssize_t r = read(in->fd, buf, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -TK_E_IO;
		in->raw_pos += (size_t)r;
		return (long)r;
	}
}

#define STREAM_IN 65536
/* zstd's output per call. A call that meets damage returns an error without saying what
 * it had already written, so those bytes are lost; in calls of a fixed size they are the
 * same few bytes whatever sizes the reader asks for (decompressed ahead or not). */
#define ZSTD_STEP ((size_t)4 << 10)

/* gzip's output per call: calls end where the decompressed offset is a multiple of it (a
 * call's room at least ISA-L's window, GZIP_MIN_OUT), into the reader's buffer where it
 * has room to that point, else staged. ISA-L first decodes into its window and copies out
 * of it, and meeting damage it loses what did not fit the room, and counts a match whose
 * distance reaches before the data (up to GZIP_BAD_TAIL bytes, some never written): with
 * rooms that size and the damaged call's last bytes dropped, what is kept before damage
 * is the same whatever sizes the reader asks for. */
#define GZIP_STEP ((size_t)1 << 20)
#define GZIP_MIN_OUT sizeof(((struct inflate_state *)0)->tmp_out_buffer)
#define GZIP_BAD_TAIL 258

/* GZ set to read a gzip member from its header. */
static void gzip_begin(struct inflate_state *gz)
{
	isal_inflate_init(gz);
	gz->crc_flag = ISAL_GZIP;
}

/* Staged output (zstd's, gzip's) to BUF, at most LEN bytes: how many. */
static size_t stage_out(struct tk_input *in, uint8_t *buf, size_t len)
{
	size_t k = in->zstage_len - in->zstage_pos;

	k = k < len ? k : len;
	memcpy(buf, in->zstage + in->zstage_pos, k);
	in->zstage_pos += k;
	return k;
}

static int stream_start(struct tk_input *in)
{
	if (in->stream_started)
		return 0;
	in->stream_started = 1;
	detect_compression(in);
	if (in->comp == TK_COMP_NONE)
		return 0;
	in->inbuf = malloc(STREAM_IN);
	if (!in->inbuf)
		return -TK_E_NOMEM;
	if (in->comp == TK_COMP_GZIP) {
		if (!(in->gz = calloc(1, sizeof *in->gz)) || !(in->zstage = malloc(2 * GZIP_STEP)))
			return -TK_E_NOMEM;
		gzip_begin(in->gz);
	} else {
		in->zd = ZSTD_createDStream();
		if (!in->zd || !(in->zstage = malloc(ZSTD_STEP)))
			return -TK_E_NOMEM;
		ZSTD_initDStream(in->zd);
	}
	return 0;
}

static int refill(struct tk_input *in)
{
	size_t n = 0;
	long r;

	/* whole blocks from a pipe too: where gzip's calls end follows from the file alone */
	do {
		if ((r = raw_read(in, in->inbuf + n, STREAM_IN - n)) < 0)
			return (int)r;
		n += (size_t)r;
	} while (r > 0 && n < STREAM_IN && in->is_pipe);
	in->in_pos = 0;
	in->in_len = n;
	return 0;
}

/* Damaged compressed data: what decompressed before it is kept and read; the reading stops
 * there, and the caller learns of it from tk_input_cut. */
static void stream_cut(struct tk_input *in, size_t produced, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void stream_cut(struct tk_input *in, size_t produced, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	in->stream_done = 1;
	in->cut_found = 1;
	in->cut_found_off = in->out_total + produced;
	snprintf(in->cut_msg, sizeof in->cut_msg, "%s: offset 0x%llx: %s; the %llu bytes before it "
		 "are read", in->name, (unsigned long long)in->cut_found_off, msg,
		 (unsigned long long)in->cut_found_off);
}

/* The reader has got to the cut the decompression found: say so, once. */
static void cut_tell(struct tk_input *in)
{
	if (!in->cut_found || in->cut || in->hold_cut)
		return;
	in->cut = 1;
	in->cut_off = in->cut_found_off;
	tk_log(TK_LOG_ERROR, "%s", in->cut_msg);
}

void tk_input_hold_cut(struct tk_input *in, int hold)
{
	in->hold_cut = hold;
}

int tk_input_is_pipe(const struct tk_input *in)
{
	return in->is_pipe;
}

void tk_input_tell_cut(struct tk_input *in)
{
	in->hold_cut = 0;
	cut_tell(in);
}

int tk_input_cut_found(const struct tk_input *in)
{
	return in->cut_found;
}

int tk_input_rewind(struct tk_input *in)
{
	if (!in->raw || in->is_pipe || in->mapped || in->ahead || in->comp == TK_COMP_NONE)
		return -TK_E_BAD_STATE;
	if (in->gz)
		gzip_begin(in->gz);
	if (in->zd)
		ZSTD_initDStream(in->zd);
	in->raw_pos = 0;
	in->raw_dropped = 0;   /* (the pages given back fault in again from the file) */
	in->in_pos = in->in_len = 0;
	in->stream_done = in->comp_eof = 0;
	in->last_zstd_hint = 0;
	in->zstage_pos = in->zstage_len = 0;
	in->gz_total = in->out_total = 0;
	in->cut = in->cut_found = 0;
	in->cut_off = in->cut_found_off = 0;
	return 0;
}

int tk_input_cut(const struct tk_input *in, uint64_t *offset)
{
	uint64_t shrank = in->raw && in->guard >= 0 ? atomic_load(&guards[in->guard].cut) : 0;
	if (in->cut) {
		if (offset)
			*offset = in->cut_off;
		return TK_INPUT_CUT;
	}
	if (shrank) {
		if (offset)
			*offset = shrank - 1;
		return TK_INPUT_SHRANK;
	}
	return 0;
}

/* What ISA-L's error code R means, in words. */
static const char *gzip_error(int r)
{
	switch (r) {
	case ISAL_INVALID_BLOCK: return "invalid deflate block header";
	case ISAL_INVALID_SYMBOL: return "invalid deflate code";
	case ISAL_INVALID_LOOKBACK: return "match distance before the start of the data";
	case ISAL_INVALID_WRAPPER: return "not a gzip member header";
	case ISAL_UNSUPPORTED_METHOD: return "compression method is not deflate";
	case ISAL_INCORRECT_CHECKSUM: return "CRC-32 or length check failed";
	default: return "inflate failed";
	}
}

/* gzip by ISA-L's inflate: three times zlib's speed (151 MB of Kanata text: 0.33 ->
 * 0.10 s) and as strict (reserved codes, header CRCs); tk_input_map reads with it too. */
static long gzip_read(struct tk_input *in, uint8_t *buf, size_t len)
{
	struct inflate_state *gz = in->gz;
	size_t produced = 0;

	while (produced < len) {
		if (in->zstage_pos < in->zstage_len) {
			produced += stage_out(in, buf + produced, len - produced);
			continue;
		}
		if (in->stream_done)
			break;
		if (in->in_pos == in->in_len && !in->comp_eof) {
			int rc = refill(in);
			if (rc < 0)
				return rc;
			in->comp_eof = in->in_len == 0;
		}
		size_t room = GZIP_STEP - in->gz_total % GZIP_STEP;
		if (room < GZIP_MIN_OUT)
			room += GZIP_STEP;
		int staged = len - produced < room;
		/* at the file's end inflate still runs: a match or stored block it stopped in
		 * when the room filled has bytes to give without more input */
		gz->next_in = in->inbuf + in->in_pos;
		gz->avail_in = (uint32_t)(in->in_len - in->in_pos);
		gz->next_out = staged ? in->zstage : buf + produced;
		gz->avail_out = (uint32_t)room;
		int r = isal_inflate(gz);
		size_t got = room - gz->avail_out;
		in->in_pos = in->in_len - gz->avail_in;
		if (r == ISAL_INVALID_LOOKBACK || r == ISAL_INVALID_SYMBOL || r == ISAL_INVALID_BLOCK)
			got -= got < GZIP_BAD_TAIL ? got : GZIP_BAD_TAIL;   /* (not a check's failure) */
		in->gz_total += got;
		if (staged) {
			in->zstage_pos = 0;
			in->zstage_len = got;
		} else {
			produced += got;
		}
		/* (a cut's offset counts the staged bytes before it: they are read first) */
		size_t upto = produced + (staged ? got : 0);
		if (r < 0) {
			stream_cut(in, upto, "corrupt gzip data near compressed offset %zu: %s",
				   in->raw_pos - (in->in_len - in->in_pos), gzip_error(r));
		} else if (gz->block_state == ISAL_BLOCK_FINISH) {
			/* A gzip file may hold several members: continue if more bytes follow. */
			if (in->in_pos == in->in_len) {
				int rc = refill(in);
				if (rc < 0)
					return rc;
			}
			if (in->in_len == 0) {
				in->stream_done = 1;
			} else {
				gzip_begin(gz);
			}
		} else if (in->comp_eof && !got) {
			stream_cut(in, upto, "gzip data ends early (after %zu compressed bytes)",
				   in->raw_pos);
		}
	}
	return (long)produced;
}

static long zstd_read(struct tk_input *in, uint8_t *buf, size_t len)
{
	size_t produced = 0;
	while (produced < len) {
		if (in->zstage_pos < in->zstage_len) {
			produced += stage_out(in, buf + produced, len - produced);
			continue;
		}
		if (in->stream_done)
			break;
		if (in->in_pos == in->in_len && !in->comp_eof) {
			int rc = refill(in);
			if (rc < 0)
				return rc;
			in->comp_eof = in->in_len == 0;
		}
		if (in->comp_eof && in->last_zstd_hint == 0) {   /* ends with a whole frame */
			in->stream_done = 1;
			break;
		}
		/* into the reader's buffer where a whole step fits, else staged */
		int staged = len - produced < ZSTD_STEP;
		ZSTD_inBuffer ib = { in->inbuf, in->in_len, in->in_pos };
		ZSTD_outBuffer ob = { staged ? in->zstage : buf + produced, ZSTD_STEP, 0 };
		size_t r = ZSTD_decompressStream(in->zd, &ob, &ib);
		if (ZSTD_isError(r)) {
			stream_cut(in, produced, "corrupt zstd data near compressed offset %zu: %s",
				   in->raw_pos - (in->in_len - ib.pos), ZSTD_getErrorName(r));
			break;
		}
		in->last_zstd_hint = r;
		in->in_pos = ib.pos;
		/* at the file's end the frame may still flush what it holds: cut once it has
		 * nothing more to give */
		if (in->comp_eof && ob.pos == 0 && r != 0) {
			stream_cut(in, produced, "zstd data ends early (after %zu compressed bytes)",
				   in->raw_pos);
			break;
		}
		if (staged) {
			in->zstage_pos = 0;
			in->zstage_len = ob.pos;
		} else {
			produced += ob.pos;
		}
	}
	return (long)produced;
}

/* The next decompressed bytes, on whichever thread decompresses. */
static long decompress(struct tk_input *in, uint8_t *buf, size_t len)
{
	long r = in->comp == TK_COMP_GZIP ? gzip_read(in, buf, len) : zstd_read(in, buf, len);
	if (r > 0)
		in->out_total += (uint64_t)r;
	return r;
}

/* ---- decompressing ahead ---------------------------------------------------------------
 * With tk_input_read_ahead, a compressed file is decompressed on a thread of its own into a
 * ring of blocks while the reader parses the blocks before: reading a .gz or .zst log takes
 * about the longer of the two instead of their sum. Regular files only: the thread never
 * waits on a pipe's writer, so freeing the input waits at most for one block. */
#define AHEAD_BLOCKS 4
#define AHEAD_BLOCK ((size_t)1 << 20)

struct ahead_block {
	uint8_t *data;
	size_t len;          /* bytes decompressed into it */
	long rc;             /* < 0: the decompression failed here */
	uint64_t raw_pos;    /* compressed bytes consumed once it was filled (for progress) */
	int last;            /* the end (len 0) or the failure: no block follows */
	int cut;             /* the decompression had found a cut when it was filled */
};

struct read_ahead {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t filled, emptied;
	struct ahead_block b[AHEAD_BLOCKS];
	size_t head, count;  /* the filled blocks, b[head] first */
	int stop;
	int reader_waits, filler_waits;
	/* the reader's alone */
	size_t pos;          /* its place in b[head] */
	uint64_t raw_pos;    /* compressed bytes consumed for what it has read */
};

static void *ahead_main(void *arg)
{
	struct tk_input *in = arg;
	struct read_ahead *a = in->ahead;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (a->count == AHEAD_BLOCKS && !a->stop) {
			a->filler_waits = 1;
			pthread_cond_wait(&a->emptied, &a->lock);
		}
		if (a->stop)
			break;
		struct ahead_block *b = &a->b[(a->head + a->count) % AHEAD_BLOCKS];
		pthread_mutex_unlock(&a->lock);
		long r = decompress(in, b->data, AHEAD_BLOCK);
		b->len = r > 0 ? (size_t)r : 0;
		b->rc = r < 0 ? r : 0;
		b->last = r <= 0;
		b->cut = in->cut_found;
		b->raw_pos = in->raw_pos;
		pthread_mutex_lock(&a->lock);
		a->count++;
		if (a->reader_waits) {
			a->reader_waits = 0;
			pthread_cond_signal(&a->filled);
		}
		if (b->last)
			break;
	}
	pthread_mutex_unlock(&a->lock);
	if (tk_pool_timed())   /* one thread's work, in order (TK_PHASES) */
		tk_pool_add_ordered(tk_thread_cpu());
	return NULL;
}

static void ahead_free(struct read_ahead *a)
{
	for (size_t i = 0; i < AHEAD_BLOCKS; i++)
		free(a->b[i].data);
	free(a);
}

/* Started at the first read; when it cannot be, the reader decompresses as before. */
static void ahead_start(struct tk_input *in)
{
	struct read_ahead *a = calloc(1, sizeof *a);

	in->ahead_wanted = 0;
	if (!a)
		return;
	for (size_t i = 0; i < AHEAD_BLOCKS; i++)
		if (!(a->b[i].data = malloc(AHEAD_BLOCK))) {
			ahead_free(a);
			return;
		}
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->filled, NULL);
	pthread_cond_init(&a->emptied, NULL);
	in->ahead = a;
	if (pthread_create(&a->thread, NULL, ahead_main, in) != 0) {
		in->ahead = NULL;
		ahead_free(a);
	}
}

static void ahead_stop(struct tk_input *in)
{
	struct read_ahead *a = in->ahead;

	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_signal(&a->emptied);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->filled);
	pthread_cond_destroy(&a->emptied);
	ahead_free(a);
	in->ahead = NULL;
}

static long ahead_read(struct tk_input *in, uint8_t *buf, size_t len)
{
	struct read_ahead *a = in->ahead;

	pthread_mutex_lock(&a->lock);
	while (!a->count) {
		a->reader_waits = 1;
		pthread_cond_wait(&a->filled, &a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	/* b[head] is the reader's until it gives it back: the filler wrote it before
	 * publishing it, and writes in->cut_found no more once it has found a cut */
	struct ahead_block *b = &a->b[a->head];
	if (b->cut && !a->pos)
		cut_tell(in);
	a->raw_pos = b->raw_pos;
	if (b->rc < 0)
		return b->rc;
	size_t n = len < b->len - a->pos ? len : b->len - a->pos;
	memcpy(buf, b->data + a->pos, n);
	a->pos += n;
	if (a->pos == b->len && !b->last) {
		pthread_mutex_lock(&a->lock);
		a->head = (a->head + 1) % AHEAD_BLOCKS;
		a->count--;
		a->pos = 0;
		if (a->filler_waits) {
			a->filler_waits = 0;
			pthread_cond_signal(&a->emptied);
		}
		pthread_mutex_unlock(&a->lock);
	}
	return (long)n;
}

void tk_input_read_ahead(struct tk_input *in, int on)
{
	if (!in->stream_started)
		in->ahead_wanted = on;
}

static long input_read(struct tk_input *in, void *buf, size_t len);

long tk_input_read(struct tk_input *in, void *buf, size_t len)
{
	long r = input_read(in, buf, len);

	if (r > 0 && in->progress)
		tk_progress_set(in->progress, in->ahead ? in->ahead->raw_pos : in->raw_pos);
	return r;
}

long tk_input_read_in_place(struct tk_input *in, const void **p, size_t len)
{
	int rc = stream_start(in);
	const uint8_t *d;
	size_t total;

	*p = NULL;
	if (rc < 0)
		return rc;
	if (in->mapped) {
		d = in->owned ? in->owned : in->raw;
		total = in->owned ? in->owned_len : in->raw_len;
	} else if (in->comp == TK_COMP_NONE && !in->is_pipe) {
		d = in->raw;
		total = in->raw_len;
	} else {
		return 0;
	}
	size_t left = total - in->raw_pos, n = len < left ? len : left;
	*p = d + in->raw_pos;
	in->raw_pos += n;
	if (!in->mapped)
		drop_read_pages(in);   /* (the last 8 MiB and more are kept: P stays readable) */
	if (n && in->progress)
		tk_progress_set(in->progress, in->raw_pos);
	return (long)n;
}

void tk_input_progress(struct tk_input *in, struct tk_progress *p)
{
	in->progress = p;
}

static long input_read(struct tk_input *in, void *buf, size_t len)
{
	int rc = stream_start(in);
	if (rc < 0)
		return rc;
	if (in->mapped) {
		/* Already mapped: serve from the mapping. */
		const uint8_t *d = in->owned ? in->owned : in->raw;
		size_t total = in->owned ? in->owned_len : in->raw_len;
		size_t left = total - in->raw_pos, n = len < left ? len : left;
		if (n)
			memcpy(buf, d + in->raw_pos, n);
		in->raw_pos += n;
		return (long)n;
	}
	if (in->comp == TK_COMP_NONE)
		return raw_read(in, buf, len);
	if (in->ahead_wanted && in->raw && !in->is_pipe)
		ahead_start(in);
	if (in->ahead)
		return ahead_read(in, buf, len);
	long r = decompress(in, buf, len);
	cut_tell(in);
	return r;
}

/* The buffer tk_input_map begins with: what a compressed file says it holds when that is
 * plausible (zstd's first frame's size; gzip's ISIZE, its last member's size mod 2^32),
 * so that it is made once instead of grown by copies, else a guess. 151 MB of Kanata text
 * gzipped 4.1x: 0.72 -> 0.32-0.57 s, zstd 0.62 -> 0.22-0.43 s. A wrong size only costs copies: a
 * hostile one is taken up to 64 times the file's size, and the pages not written are
 * never touched. *STATED: 1 when the size is the file's, 0 for a guess. */
static size_t map_capacity(const struct tk_input *in, int *stated)
{
	size_t guess = in->raw_len ? in->raw_len * (in->comp ? 4 : 1) + 65536 : 1 << 20;
	uint64_t said = 0;

	*stated = 0;
	if (!in->raw || in->comp == TK_COMP_NONE)
		return guess;
	if (in->comp == TK_COMP_ZSTD) {
		unsigned long long z = ZSTD_getFrameContentSize(in->raw, in->raw_len);
		if (z != ZSTD_CONTENTSIZE_UNKNOWN && z != ZSTD_CONTENTSIZE_ERROR)
			said = z;
	} else if (in->raw_len >= 18) {
		said = tk_le32(in->raw + in->raw_len - 4);
	}
	*stated = said >= in->raw_len / 2 && said / 64 <= in->raw_len;
	return *stated ? (size_t)said + 65536 : guess;
}

int tk_input_map(struct tk_input *in, const uint8_t **data, size_t *len)
{
	detect_compression(in);
	if (in->mapped) {
		*data = in->owned ? in->owned : in->raw;
		*len = in->owned ? in->owned_len : in->raw_len;
		return 0;
	}
	if (in->comp == TK_COMP_NONE && in->raw) {
		in->mapped = 1;
		*data = in->raw;
		*len = in->raw_len;
		return 0;
	}
	if (in->stream_started || in->raw_pos)
		return -TK_E_BAD_STATE;
	in->ahead_wanted = 0;   /* the copy out of its blocks would cost more than it gives */

	/* Read or decompress everything into one growing buffer. */
	int stated;
	size_t cap = map_capacity(in, &stated), n = 0;
	/* a guessed size grows by realloc, which remaps malloc's large blocks but copies
	 * aligned ones (18 % of the samples of decoding a 174 MB branch trace from a zstd
	 * frame written from a pipe, which states no size): huge pages for a stated size only */
	uint8_t *buf = stated ? tk_malloc_huge(cap) : malloc(cap);
	if (!buf)
		return -TK_E_NOMEM;
	for (;;) {
		if (cap - n < 65536) {
			size_t ncap = cap * 2;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb) {
				free(buf);
				return -TK_E_NOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		long r = tk_input_read(in, buf + n, cap - n);
		if (r < 0) {
			free(buf);
			return (int)r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (in->opts.max_size && n > in->opts.max_size) {
			free(buf);
			return -TK_E_LIMIT;
		}
	}
	if (in->is_pipe)
		in->file_size = in->raw_pos;
	in->owned = buf;
	in->owned_len = n;
	in->mapped = 1;
	in->raw_pos = 0;
	*data = buf;
	*len = n;
	return 0;
}

/* Decompress the head of the raw data into in->peek with a private context; errors are
 * ignored here (the real read reports them with an offset). */
static size_t peek_decompress(struct tk_input *in, const uint8_t *head, size_t head_len)
{
	size_t out = 0;
	if (in->comp == TK_COMP_GZIP) {
		struct inflate_state *gz = calloc(1, sizeof *gz);
		if (gz) {
			gzip_begin(gz);
			gz->next_in = (uint8_t *)head;
			gz->avail_in = (uint32_t)head_len;
			gz->next_out = in->peek;
			gz->avail_out = TK_INPUT_PEEK;
			isal_inflate(gz);
			out = TK_INPUT_PEEK - gz->avail_out;
			free(gz);
		}
	} else {
		ZSTD_DStream *zd = ZSTD_createDStream();
		if (zd) {
			ZSTD_initDStream(zd);
			ZSTD_inBuffer ib = { head, head_len, 0 };
			ZSTD_outBuffer ob = { in->peek, TK_INPUT_PEEK, 0 };
			while (ob.pos < ob.size && ib.pos < ib.size) {
				size_t r = ZSTD_decompressStream(zd, &ob, &ib);
				if (ZSTD_isError(r) || r == 0)
					break;
			}
			out = ob.pos;
			ZSTD_freeDStream(zd);
		}
	}
	return out;
}

/* A zstd block (up to 128 KiB) decompresses only whole: look further than the usual head
 * when it gives too little, up to this many raw bytes. */
#define PEEK_RAW_MAX ((size_t)4 << 20)

int tk_input_peek(struct tk_input *in, const uint8_t **data, size_t *len)
{
	const uint8_t *head;
	size_t head_len;
	int rc;

	if (in->peeked && in->comp != TK_COMP_NONE) {
		*data = in->peek;
		*len = in->peek_len;
		return 0;
	}
	detect_compression(in);
	size_t want = in->comp ? 4 * TK_INPUT_PEEK : TK_INPUT_PEEK;
	rc = raw_head(in, &head, &head_len, want);
	if (rc < 0)
		return rc;
	if (in->comp == TK_COMP_NONE) {
		in->peeked = 1;
		*data = head;
		*len = head_len;
		return 0;
	}

	in->peek = malloc(TK_INPUT_PEEK);
	if (!in->peek)
		return -TK_E_NOMEM;
	size_t out = peek_decompress(in, head, head_len);
	while (out < TK_INPUT_PEEK && head_len == want && want < PEEK_RAW_MAX) {
		want *= 4;
		if ((rc = raw_head(in, &head, &head_len, want)) < 0)
			return rc;
		out = peek_decompress(in, head, head_len);
	}
	in->peek_len = out;
	in->peeked = 1;
	*data = in->peek;
	*len = out;
	return 0;
}

int tk_input_is_file_mapping(const struct tk_input *in, const char *path, size_t len)
{
	struct stat st;

	return strcmp(path, "-") != 0 && tk_input_compression(in) == TK_COMP_NONE &&
	       stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == len;
}

long tk_input_pread(const struct tk_input *in, void *buf, size_t len, uint64_t offset)
{
	size_t got = 0;

	if (in->is_pipe || !in->raw || tk_input_compression(in) != TK_COMP_NONE)
		return -TK_E_UNSUPPORTED;
	while (got < len) {
		ssize_t r = pread(in->fd, (uint8_t *)buf + got, len - got, (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -TK_E_IO;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got < len && in->guard >= 0 && offset + len <= in->raw_len) {
		/* the file shrank since it was mapped: as a read of the mapping would, the lost
		 * part reads as zeros and its offset is noted (tk_input_cut) */
		uint64_t off = offset + got + 1, cur = atomic_load(&guards[in->guard].cut);
		while ((!cur || off < cur) && !atomic_compare_exchange_weak(&guards[in->guard].cut, &cur, off))
			;
		memset((uint8_t *)buf + got, 0, len - got);
		got = len;
	}
	return (long)got;
}

void tk_release_pages(const void *base, size_t begin, size_t end)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), b = (uintptr_t)base;
	uintptr_t from = (b + begin + pg - 1) & ~(pg - 1), to = (b + end) & ~(pg - 1);

	if (to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}
