/* perf.data: the records that carry Intel PT (PERF_RECORD_AUXTRACE with its data inline,
 * AUXTRACE_INFO, AUX) and the code mappings (MMAP, MMAP2). Layout as in the kernel's
 * tools/perf/util/header.h and include/uapi/linux/perf_event.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "tracekit/common.h"
#include "tracekit/ipt.h"
#include "tracekit/perf.h"

#define FILE_HEADER_SIZE 104     /* magic, size, attr_size, 3 sections, feature bits */

enum {
	REC_MMAP = 1,
	REC_LOST = 2,
	REC_COMM = 3,
	REC_EXIT = 4,
	REC_FORK = 7,
	REC_MMAP2 = 10,
	REC_AUX = 11,
	REC_ITRACE_START = 12,
	REC_SWITCH = 14,
	REC_SWITCH_CPU_WIDE = 15,
	REC_AUXTRACE_INFO = 70,
	REC_AUXTRACE = 71,
	REC_COMPRESSED = 81,     /* perf record -z: zstd frames of other records */
	REC_COMPRESSED2 = 83,
};

#define MISC_MMAP_DATA 0x2000    /* PERF_RECORD_MISC_MMAP_DATA: not code */
#define MISC_COMM_EXEC 0x2000    /* PERF_RECORD_MISC_COMM_EXEC: the COMM of an exec */
#define MISC_SWITCH_OUT 0x2000   /* PERF_RECORD_MISC_SWITCH_OUT */
/* sample_type bits of the fields sample_id_all appends to the kernel's records */
#define SAMPLE_TID (1u << 1)
#define SAMPLE_TIME (1u << 2)
#define SAMPLE_ID (1u << 6)
#define SAMPLE_CPU (1u << 7)
#define SAMPLE_STREAM_ID (1u << 9)
#define SAMPLE_IDENTIFIER (1u << 16)
#define ATTR_SAMPLE_ID_ALL (1u << 18)
#define MISC_MMAP_BUILD_ID 0x4000 /* MMAP2 carries a build-id instead of the device */
#define MISC_BUILD_ID_SIZE 0x8000 /* a build-id table entry gives its size */
#define FEAT_BUILD_ID 2          /* HEADER_BUILD_ID: the build-id table */
#define FEAT_CPUID 9             /* HEADER_CPUID: the processor, "GenuineIntel,6,142,10" */
#define KERNEL_MAP "[kernel.kallsyms]"   /* the kernel's map: this, then a symbol's name */
#define KERNEL_MAP_LEN (sizeof KERNEL_MAP - 1)
#define ATTR_EXCLUDE_KERNEL (1u << 5)     /* perf_event_attr's flags word */
#define AUX_FLAG_TRUNCATED 1
#define AUXTRACE_SIZE 48         /* header and size, offset, reference, idx, tid, cpu, pad */
#define PROT_EXEC_BIT 4

/* What the reader keeps of a queue while joining its buffers. */
struct queue_state {
	uint64_t next_offset;     /* the trace offset where the last buffer's data ended */
	size_t cap;               /* of the joined copy */
	const uint8_t *last;      /* the last buffer as in the file (snapshots are matched
				     against it) */
	uint64_t last_len;
	uint64_t last_added;      /* how many of its bytes went into the joined trace */
	int need_psb;             /* after a loss: nothing joins until the next PSB */
	size_t breaks_cap;        /* of the queue's breaks */
};

struct reader {
	struct tk_perf_aux *aux;
	int sizes_only;           /* tk_perf_aux_scan: count the trace, do not join it */
	tk_perf_diag_fn diag;
	void *ctx;
	int skipped;
	struct queue_state *qs;   /* per queue, as aux->queues */
	int too_many;             /* queue_for refused a queue (not out of memory) */
	/* perf record -z: the records inside PERF_RECORD_COMPRESSED, decompressed as one
	 * stream (a record may continue into the next compressed one); problems in them
	 * name the compressed record's offset */
	ZSTD_DStream *zd;
	uint8_t *pend;
	size_t pend_len, pend_cap;
	int in_compressed;
	uint64_t compressed_off;
	/* perf record --threads: the file being read (0: the main one, K: parts[K - 1]) */
	const struct tk_perf_part *part;
	uint32_t part_no;
	uint64_t sample_type;     /* of the first attr, when its records carry a sample_id */
	size_t tasks_cap, switches_cap;
};

/* The sample_id perf appends to a record (its last fields, by the attr's sample_type). */
struct sample_id {
	uint32_t pid, tid, cpu;
	uint64_t time;
};

static struct sample_id read_sample_id(const struct reader *r, const uint8_t *b, size_t blen)
{
	struct sample_id s = { UINT32_MAX, UINT32_MAX, UINT32_MAX, 0 };
	uint64_t t = r->sample_type;
	size_t n = 8 * (size_t)(!!(t & SAMPLE_TID) + !!(t & SAMPLE_TIME) + !!(t & SAMPLE_ID) +
				!!(t & SAMPLE_STREAM_ID) + !!(t & SAMPLE_CPU) +
				!!(t & SAMPLE_IDENTIFIER));

	if (!t || n > blen)
		return s;
	b += blen - n;
	if (t & SAMPLE_TID) {
		s.pid = tk_le32(b);
		s.tid = tk_le32(b + 4);
		b += 8;
	}
	if (t & SAMPLE_TIME) {
		s.time = tk_le64(b);
		b += 8;
	}
	b += 8 * (size_t)(!!(t & SAMPLE_ID) + !!(t & SAMPLE_STREAM_ID));
	if (t & SAMPLE_CPU)
		s.cpu = tk_le32(b);
	return s;
}

/* Grow *P (of *CAP elements of SIZE) to hold N + 1. */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 64;
	void *q = realloc(*p, c * size);
	if (!q)
		return -TK_E_NOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int add_task(struct reader *r, uint32_t kind, const uint8_t *b, size_t blen, size_t fixed)
{
	struct tk_perf_aux *a = r->aux;
	struct sample_id sid = read_sample_id(r, b, blen);

	if (grow((void **)&a->tasks, &r->tasks_cap, a->ntasks, sizeof *a->tasks) < 0)
		return -TK_E_NOMEM;
	struct tk_perf_task *t = &a->tasks[a->ntasks++];
	memset(t, 0, sizeof *t);
	t->kind = kind;
	t->pid = tk_le32(b);
	if (kind == TK_PERF_COMM || kind == TK_PERF_EXEC) {
		/* pid, tid, the name (NUL-terminated, padded) */
		t->tid = tk_le32(b + 4);
		size_t max = blen - fixed < sizeof t->comm - 1 ? blen - fixed : sizeof t->comm - 1;
		memcpy(t->comm, b + fixed, strnlen((const char *)b + fixed, max));
		t->time = sid.time;
	} else {
		/* pid, ppid, tid, ptid, time */
		t->ppid = tk_le32(b + 4);
		t->tid = tk_le32(b + 8);
		t->ptid = tk_le32(b + 12);
		t->time = tk_le64(b + 16);
	}
	return 0;
}

static int add_switch(struct reader *r, uint64_t time, uint32_t cpu, uint32_t pid, uint32_t tid)
{
	struct tk_perf_aux *a = r->aux;

	if (grow((void **)&a->switches, &r->switches_cap, a->nswitches, sizeof *a->switches) < 0)
		return -TK_E_NOMEM;
	a->switches[a->nswitches++] = (struct tk_perf_switch){ time, cpu, pid, tid };
	return 0;
}

static void problem(struct reader *r, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void problem(struct reader *r, uint64_t off, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (r->in_compressed)
		off = r->compressed_off;
	r->skipped = 1;
	if (r->diag && r->part) {
		char where[260];
		snprintf(where, sizeof where, "in %s: %s", r->part->name ? r->part->name : "a part",
			 msg);
		r->diag(r->ctx, off, where);
	} else if (r->diag) {
		r->diag(r->ctx, off, msg);
	}
}

static struct tk_perf_queue *queue_for(struct reader *r, uint32_t idx)
{
	struct tk_perf_aux *a = r->aux;

	for (size_t i = 0; i < a->nqueues; i++)
		if (a->queues[i].idx == idx)
			return &a->queues[i];
	if (a->nqueues >= 65536) {
		r->too_many = 1;   /* perf makes one per CPU or thread: more is a hostile file */
		return NULL;
	}
	void *q = realloc(a->queues, (a->nqueues + 1) * sizeof(*a->queues));
	void *st = realloc(r->qs, (a->nqueues + 1) * sizeof(*r->qs));
	if (q)
		a->queues = q;
	if (st)
		r->qs = st;
	if (!q || !st)
		return NULL;
	struct tk_perf_queue *n = &a->queues[a->nqueues];
	memset(n, 0, sizeof(*n));
	n->idx = idx;
	memset(&r->qs[a->nqueues], 0, sizeof(*r->qs));
	a->nqueues++;
	return n;
}

/* Whether a buffer at trace OFFSET continues the queue's last one. perf pads each buffer's
 * data to 8 bytes in the file but steps the offset by the data alone, so the next buffer
 * may begin up to 7 bytes before the last one's padded end: *PAD gets those bytes (zeros,
 * not trace). */
static int continues(const struct queue_state *st, uint64_t offset, uint64_t *pad)
{
	*pad = st->next_offset - offset;
	if (offset > st->next_offset || *pad > 7 || *pad > st->last_len)
		return 0;
	for (uint64_t i = st->last_len - *pad; i < st->last_len; i++)
		if (st->last[i])
			return 0;
	return 1;
}

/* How many of the first N bytes of A and B are the same. */
static uint64_t same_prefix(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	uint64_t i = 0;

	while (i + 64 <= n && !memcmp(a + i, b + i, 64))
		i += 64;
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

/* Snapshot mode: how many bytes at the start of B (at trace OFFSET) repeat the end of the
 * last buffer, as their offsets say, if those bytes are the same; 0 otherwise. perf's offset
 * is the ring's position: when the ring has not come round past the last snapshot's end
 * since, the overlap it gives is the true one; when it has, the bytes differ (their TSCs)
 * or the overlap is longer than a buffer. *A_PAD: zeros ending the last buffer that are
 * perf's padding, not trace. */
static uint64_t offset_overlap(const struct queue_state *st, uint64_t offset, const uint8_t *b,
			       uint64_t blen, uint64_t *a_pad)
{
	for (uint64_t p = 0; p < 8 && p < st->last_len; p++) {
		if (p && st->last[st->last_len - p])
			break;
		uint64_t alen = st->last_len - p, end = st->next_offset - p;
		if (offset >= end || end - offset > alen || end - offset > blen)
			continue;
		uint64_t n = end - offset;
		if (same_prefix(st->last + alen - n, b, n) == n) {
			*a_pad = p;
			return n;
		}
	}
	*a_pad = 0;
	return 0;
}

/* Snapshot mode: a buffer is what the ring held when the snapshot was taken, so it may
 * repeat the end of the snapshot before. As perf does, the new one is read from its first
 * PSB, and where the last one's data from one of its PSBs to its end (padding aside) is
 * how the new one begins, only what follows is new. Where no PSB of the last one falls in
 * the overlap, perf sees none; the offsets may still say it (offset_overlap). Returns
 * where the new data starts in B (at trace OFFSET); *REPEATED: whether it continues the
 * last one (*A_PAD: zeros at the end of that one which are not trace). In real trace a
 * wrong candidate differs within its PSB+ (the TSC) and the right one is compared once; a
 * hostile file of PSBs that differ only far on would make the search quadratic, so it
 * gives up (no overlap: the new snapshot is decoded from its first PSB) once the bytes
 * found equal pass four times both buffers' sizes. */
static uint64_t snapshot_start(const struct queue_state *st, uint64_t offset, const uint8_t *b,
			       uint64_t blen, int *repeated, uint64_t *a_pad)
{
	uint64_t bpsb = blen, alen = st->last_len, pa = 0;
	uint64_t budget = 4 * (st->last_len + blen) + 4096;

	*repeated = 0;
	*a_pad = 0;
	if (tk_ipt_psb_next(b, (size_t)blen, 0, &bpsb) < 0)
		goto by_offsets;
	while (*a_pad < 7 && *a_pad < alen && !st->last[alen - *a_pad - 1])
		++*a_pad;
	alen -= *a_pad;
	while (tk_ipt_psb_next(st->last, (size_t)alen, pa, &pa) == 0) {
		uint64_t n = alen - pa;
		if (n <= blen - bpsb) {
			uint64_t same = same_prefix(st->last + pa, b + bpsb, n);
			if (same == n) {
				*repeated = 1;
				return bpsb + n;
			}
			if (same + 16 > budget)
				break;
			budget -= same + 16;
		}
		pa++;
	}
by_offsets:;
	uint64_t n = offset_overlap(st, offset, b, blen, a_pad);
	*repeated = n > 0;
	return n ? n : bpsb;
}

/* Add a buffer of trace (DATA, LEN; OFFSET in the queue's trace) to its queue. The first
 * buffer is used where it lies in the file; a second one makes a copy of both. */
static int add_buffer(struct reader *r, uint64_t rec_off, uint32_t idx, uint32_t cpu, uint32_t tid,
		      uint64_t offset, const uint8_t *data, uint64_t len, uint64_t file_off)
{
	struct tk_perf_queue *q = queue_for(r, idx);
	if (!q && r->too_many) {
		problem(r, rec_off, "buffer of a 65537th queue (%u): skipped", idx);
		return 0;
	}
	if (!q)
		return -TK_E_NOMEM;
	struct queue_state *st = &r->qs[q - r->aux->queues];
	const uint8_t *raw = data;
	uint64_t raw_len = len, pad, skip = 0, psb;
	int repeated, lost = 0;

	if (!q->nbuffers) {
		q->cpu = cpu;
		q->tid = tid;
		q->file_offset = file_off;
		q->file_part = r->part_no;
		/* a snapshot starts wherever the ring's oldest byte was, inside a packet */
		st->need_psb = r->aux->pt.snapshot_mode != 0;
	} else if (continues(st, offset, &pad)) {
		q->len -= (size_t)(pad < st->last_added ? pad : st->last_added);
	} else if (r->aux->pt.snapshot_mode) {
		skip = snapshot_start(st, offset, data, len, &repeated, &pad);
		if (repeated) {
			q->len -= (size_t)(pad < st->last_added ? pad : st->last_added);
			q->repeated_bytes += skip;
		} else {
			lost = 1;   /* the trace between two snapshots was never kept */
		}
	} else {
		lost = 1;
	}
	if (lost) {
		q->holes++;
		st->need_psb = 1;
	}
	if (st->need_psb) {
		/* what precedes the first PSB after a loss continues packets that are gone:
		 * nothing can decode it */
		if (r->aux->aux_type == TK_PERF_AUX_INTEL_PT &&
		    tk_ipt_psb_next(data, (size_t)len, 0, &psb) == 0) {
			skip = psb;
			st->need_psb = 0;
		} else {
			skip = len;
		}
		q->hole_bytes += skip;
		if (!st->need_psb && q->len && skip < len) {
			/* the decoder must not join what is on either side */
			if (q->nbreaks == st->breaks_cap) {
				size_t cap = st->breaks_cap ? 2 * st->breaks_cap : 16;
				uint64_t *nb = realloc(q->breaks, cap * sizeof(*nb));
				if (!nb)
					return -TK_E_NOMEM;
				q->breaks = nb;
				st->breaks_cap = cap;
			}
			q->breaks[q->nbreaks++] = q->len;
		}
	}
	if (lost && !r->aux->pt.snapshot_mode) {
		if (offset > st->next_offset)
			problem(r, rec_off, "queue %u: %llu bytes of trace lost before this buffer; "
				"its %llu bytes before the first PSB left out", idx,
				(unsigned long long)(offset - st->next_offset),
				(unsigned long long)skip);
		else
			problem(r, rec_off, "queue %u: this buffer starts at trace offset 0x%llx, "
				"not 0x%llx where the last ended; its %llu bytes before the first "
				"PSB left out", idx, (unsigned long long)offset,
				(unsigned long long)st->next_offset, (unsigned long long)skip);
	}
	data += skip;
	len -= skip;
	st->next_offset = offset + raw_len;
	st->last = raw;
	st->last_len = raw_len;
	st->last_added = len;
	q->nbuffers++;
	if (!len)
		return 0;
	if (r->sizes_only) {
		q->len += (size_t)len;
		return 0;
	}
	if (!q->data) {
		q->data = data;
		q->len = (size_t)len;
		return 0;
	}
	if (q->len + len > st->cap) {
		size_t cap = st->cap ? st->cap : 1 << 20;
		while (cap < q->len + len)
			cap *= 2;
		uint8_t *nb = realloc(q->owned, cap);
		if (!nb)
			return -TK_E_NOMEM;
		if (!q->owned)
			memcpy(nb, q->data, q->len);
		q->owned = nb;
		q->data = nb;
		st->cap = cap;
	}
	memcpy(q->owned + q->len, data, (size_t)len);
	q->len += (size_t)len;
	return 0;
}

static int add_mmap(struct reader *r, uint32_t pid, uint32_t tid, uint64_t addr, uint64_t len,
		    uint64_t pgoff, const uint8_t *name, size_t max, const uint8_t *bid,
		    unsigned bid_len, uint64_t time)
{
	struct tk_perf_aux *a = r->aux;
	size_t n = strnlen((const char *)name, max);

	if (n > KERNEL_MAP_LEN && pid == UINT32_MAX && !memcmp(name, KERNEL_MAP, KERNEL_MAP_LEN)) {
		/* the host kernel ("[kernel.kallsyms]_text"): no file, but where it ran */
		struct tk_perf_kernel *k = &a->kernel;
		size_t rl = n - KERNEL_MAP_LEN < sizeof k->ref - 1 ? n - KERNEL_MAP_LEN : sizeof k->ref - 1;
		memcpy(k->ref, name + KERNEL_MAP_LEN, rl);
		k->ref[rl] = 0;
		k->ref_addr = pgoff;
		k->start = addr;
		k->len = len;
		if (bid && bid_len && bid_len <= sizeof k->build_id) {
			memcpy(k->build_id, bid, bid_len);
			k->build_id_len = (uint8_t)bid_len;
		}
		return 0;
	}
	if (n && pid == UINT32_MAX) {
		a->kernel_modules += name[0] == '/' || name[0] == '[';
		return 0;   /* the kernel's modules, its trampolines */
	}
	if (!n || (name[0] != '/' && !(n == 6 && !memcmp(name, "[vdso]", 6))))
		return 0;   /* //anon, [vsyscall]: no code to read */
	void *m = realloc(a->mmaps, (a->nmmaps + 1) * sizeof(*a->mmaps));
	if (!m)
		return -TK_E_NOMEM;
	a->mmaps = m;
	struct tk_perf_mmap *mm = &a->mmaps[a->nmmaps];
	if (!(mm->path = malloc(n + 1)))
		return -TK_E_NOMEM;
	memcpy(mm->path, name, n);
	mm->path[n] = 0;
	mm->pid = pid;
	mm->tid = tid;
	mm->addr = addr;
	mm->len = len;
	mm->pgoff = pgoff;
	mm->time = time;
	mm->build_id_len = (uint8_t)(bid && bid_len <= sizeof mm->build_id ? bid_len : 0);
	if (mm->build_id_len)
		memcpy(mm->build_id, bid, bid_len);
	a->nmmaps++;
	return 0;
}

static void read_pt_info(struct tk_perf_aux *a, const uint8_t *p, size_t n)
{
	uint64_t *f[] = { &a->pt.pmu_type, &a->pt.time_shift, &a->pt.time_mult, &a->pt.time_zero,
			  &a->pt.cap_user_time_zero, &a->pt.tsc_bit, &a->pt.noretcomp_bit,
			  &a->pt.have_sched_switch, &a->pt.snapshot_mode, &a->pt.per_cpu_mmaps,
			  &a->pt.mtc_bit, &a->pt.mtc_freq_bits, &a->pt.tsc_ctc_n,
			  &a->pt.tsc_ctc_d, &a->pt.cyc_bit, &a->pt.max_nonturbo_ratio };
	unsigned k = 0;

	for (; k < sizeof(f) / sizeof(f[0]) && 8 * (k + 1) <= n; k++)
		*f[k] = tk_le64(p + 8 * k);
	a->pt.nfields = k;
}

/* perf's record types: the kernel's (PERF_RECORD_MMAP 1 .. AUX_OUTPUT_HW_ID 21) and
 * perf's own (HEADER_ATTR 64 .. COMPRESSED2 83). */
static int known_type(uint32_t type)
{
	return (type >= 1 && type <= 21) || (type >= 64 && type <= 83);
}

/* Whether a record header could be at OFF of P (records end at END): a known type and a
 * size that holds the header and stays inside. STRICT, for finding records again after
 * damage, where trace bytes could look like a header by chance: the size is a multiple
 * of 8 as perf writes them (all but PERF_RECORD_COMPRESSED), a trace buffer's data is a
 * multiple of 8 inside the data and its queue number sane, and the record after it is
 * plausible too (or the data ends there). */
static int plausible(const uint8_t *p, uint64_t off, uint64_t end, int strict)
{
	if (off == end)
		return strict;   /* the end: what came before it fits */
	if (end - off < 8)
		return 0;
	uint32_t type = tk_le32(p + off);
	uint16_t size = tk_le16(p + off + 6);

	if (!known_type(type) || size < 8 || size > end - off)
		return 0;
	if (!strict)
		return 1;
	uint64_t next = off + size;
	if (size % 8 && type != REC_COMPRESSED)
		return 0;
	if (type == REC_AUXTRACE) {
		if (size < AUXTRACE_SIZE)
			return 0;
		uint64_t len = tk_le64(p + off + 8);
		uint32_t idx = tk_le32(p + off + 32);
		if (len % 8 || len > end - next || idx >= 65536)
			return 0;
		next += len;
	}
	return plausible(p, next, end, 0) || next == end;
}

/* After damage at OFF: where the next plausible record starts (END if none). */
static uint64_t resync(const uint8_t *p, uint64_t off, uint64_t end)
{
	while (off < end && !plausible(p, off, end, 1))
		off++;
	return off;
}

static int decompress(struct reader *r, uint64_t off, const uint8_t *src, size_t len);

/* One record at OFF (SIZE bytes, at least the header) of the data that ends at N; *EXTRA:
 * bytes of trace after it. */
static int record(struct reader *r, const uint8_t *p, size_t n, uint64_t off, uint32_t type,
		  uint16_t misc, size_t size, uint64_t *extra)
{
	const uint8_t *b = p + off + 8;
	size_t blen = size - 8;
	struct tk_perf_aux *a = r->aux;

	*extra = 0;
	switch (type) {
	case REC_MMAP:
		if (blen < 32)
			break;
		if (misc & MISC_MMAP_DATA)
			return 0;
		return add_mmap(r, tk_le32(b), tk_le32(b + 4), tk_le64(b + 8), tk_le64(b + 16),
				tk_le64(b + 24), b + 32, blen - 32, NULL, 0,
				read_sample_id(r, b, blen).time);
	case REC_MMAP2:
		/* pid, tid, addr, len, pgoff, device or build id (24 bytes), prot, flags */
		if (blen < 64)
			break;
		if (!(tk_le32(b + 56) & PROT_EXEC_BIT))
			return 0;
		/* with MISC_MMAP_BUILD_ID: size, 3 reserved bytes, the id (20 bytes) */
		return add_mmap(r, tk_le32(b), tk_le32(b + 4), tk_le64(b + 8), tk_le64(b + 16),
				tk_le64(b + 24), b + 64, blen - 64,
				misc & MISC_MMAP_BUILD_ID ? b + 36 : NULL,
				misc & MISC_MMAP_BUILD_ID ? b[32] : 0, read_sample_id(r, b, blen).time);
	case REC_COMM:
		if (blen < 8)
			break;
		return add_task(r, misc & MISC_COMM_EXEC ? TK_PERF_EXEC : TK_PERF_COMM, b, blen, 8);
	case REC_FORK:
	case REC_EXIT:
		if (blen < 24)
			break;
		return add_task(r, type == REC_FORK ? TK_PERF_FORK : TK_PERF_EXIT, b, blen, 24);
	case REC_SWITCH:
	case REC_SWITCH_CPU_WIDE:
	case REC_ITRACE_START: {
		/* which thread runs next on the sample's CPU, as perf takes it: the one a
		 * SWITCH_CPU_WIDE out names, a SWITCH in's own, ITRACE_START's (pid, tid) */
		struct sample_id sid = read_sample_id(r, b, blen);
		int out = (misc & MISC_SWITCH_OUT) != 0;
		if (type != REC_SWITCH && blen < 8)
			break;
		if (type == REC_SWITCH && !out)
			return add_switch(r, sid.time, sid.cpu, sid.pid, sid.tid);
		if (type == REC_SWITCH_CPU_WIDE && out)
			return add_switch(r, sid.time, sid.cpu, tk_le32(b), tk_le32(b + 4));
		if (type == REC_ITRACE_START)
			return add_switch(r, sid.time, sid.cpu, tk_le32(b), tk_le32(b + 4));
		return 0;
	}
	case REC_COMPRESSED:
	case REC_COMPRESSED2:
		if (r->in_compressed)
			break;   /* one inside another: perf never writes that */
		a->compressed_records++;
		if (type == REC_COMPRESSED2) {
			/* the size of the compressed data, then the data (padded to 8 bytes) */
			if (blen < 8 || tk_le64(b) > blen - 8)
				break;
			return decompress(r, off, b + 8, (size_t)tk_le64(b));
		}
		return decompress(r, off, b, blen);
	case REC_LOST:
		if (blen >= 16)
			a->lost_records += tk_le64(b + 8);
		return 0;
	case REC_AUX:
		if (blen < 24)
			break;
		if (tk_le64(b + 16) & AUX_FLAG_TRUNCATED)
			a->aux_truncated++;
		return 0;
	case REC_AUXTRACE_INFO:
		if (blen < 8)
			break;
		a->aux_type = tk_le32(b);
		if (a->aux_type == TK_PERF_AUX_INTEL_PT)
			read_pt_info(a, b + 8, blen - 8);
		return 0;
	case REC_AUXTRACE: {
		if (size < AUXTRACE_SIZE || r->in_compressed)
			break;   /* (perf writes trace buffers outside compressed records) */
		uint64_t len = tk_le64(b), offset = tk_le64(b + 8);
		uint32_t idx = tk_le32(b + 24), tid = tk_le32(b + 28), cpu = tk_le32(b + 32);
		uint64_t data_off = off + size;
		if (len > n - data_off) {
			/* a file cut inside the buffer, or its size damaged: then the records
			 * after it are still there */
			uint64_t next = resync(p, data_off, n);
			problem(r, off, "trace buffer of %llu bytes runs past the end of the data "
				"(%llu bytes left): cut %s", (unsigned long long)len,
				(unsigned long long)(n - data_off), next < n ? "at the next record" :
				"there");
			len = next - data_off;
		}
		*extra = len;
		return add_buffer(r, off, idx, cpu, tid, offset, p + data_off, len, data_off);
	}
	default:
		return 0;
	}
	problem(r, off, "record of type %u too short (%zu bytes): skipped", type, size);
	return 0;
}

/* The complete records at the start of r->pend; the rest waits for the next compressed
 * record. */
static int pending_records(struct reader *r)
{
	size_t pos = 0;
	int rc = 0;

	while (rc >= 0 && r->pend_len - pos >= 8) {
		uint32_t type = tk_le32(r->pend + pos);
		uint16_t misc = tk_le16(r->pend + pos + 4), size = tk_le16(r->pend + pos + 6);
		uint64_t extra;

		if (size < 8) {
			problem(r, 0, "compressed records: a record of size %u; the rest of them "
				"is unreadable", size);
			pos = r->pend_len;
			break;
		}
		if (size > r->pend_len - pos)
			break;
		r->aux->records++;
		rc = record(r, r->pend, r->pend_len, pos, type, misc, size, &extra);
		pos += size;
	}
	memmove(r->pend, r->pend + pos, r->pend_len - pos);
	r->pend_len -= pos;
	return rc;
}

static int decompress(struct reader *r, uint64_t off, const uint8_t *src, size_t len)
{
	ZSTD_inBuffer in = { src, len, 0 };
	int rc = 0;

	if (!r->zd) {
		if (!(r->zd = ZSTD_createDStream()))
			return -TK_E_NOMEM;
		/* perf compresses at level 1 (small windows): a larger one is refused, not
		 * given memory */
		ZSTD_DCtx_setParameter(r->zd, ZSTD_d_windowLogMax, 24);
	}
	r->in_compressed = 1;
	r->compressed_off = off;
	/* a step's output is parsed before the next: memory stays at a record (64 KiB) plus
	 * a step, however much the data expands */
	for (;;) {
		size_t in_before = in.pos;

		if (r->pend_cap - r->pend_len < (1 << 17)) {
			size_t cap = r->pend_len + (1 << 18);
			uint8_t *b = realloc(r->pend, cap);
			if (!b) {
				rc = -TK_E_NOMEM;
				break;
			}
			r->pend = b;
			r->pend_cap = cap;
		}
		ZSTD_outBuffer out = { r->pend + r->pend_len, r->pend_cap - r->pend_len, 0 };
		size_t z = ZSTD_decompressStream(r->zd, &out, &in);
		r->pend_len += out.pos;
		if (ZSTD_isError(z)) {
			problem(r, off, "compressed records: %s; the rest of this one skipped",
				ZSTD_getErrorName(z));
			ZSTD_DCtx_reset(r->zd, ZSTD_reset_session_only);
			break;
		}
		if ((rc = pending_records(r)) < 0)
			break;
		/* done when the input is used up and the decoder had no more to give */
		if ((in.pos == in.size && out.pos < out.size) || (!out.pos && in.pos == in_before))
			break;
	}
	r->in_compressed = 0;
	return rc;
}

/* Feature section BIT (after the data; WHAT names it in messages) into *OFF and *LEN: 1,
 * or 0 when the file has none or its descriptor is damaged (said). */
static int feature(struct reader *r, const uint8_t *p, size_t n, uint64_t data_end, unsigned bit,
		   const char *what, uint64_t *off, uint64_t *len)
{
	uint64_t features = tk_le64(p + 72);
	unsigned k = 0;

	if (!(features & (1ull << bit)))
		return 0;
	/* one section descriptor per feature bit set, in bit order */
	for (unsigned b = 0; b < bit; b++)
		k += (features >> b) & 1;
	uint64_t desc = data_end + 16 * (uint64_t)k;
	if (desc > n || n - desc < 16) {
		problem(r, desc, "%s descriptor outside the file", what);
		return 0;
	}
	*off = tk_le64(p + desc);
	*len = tk_le64(p + desc + 8);
	if (*off > n || *len > n - *off) {
		problem(r, desc, "%s outside the file", what);
		return 0;
	}
	return 1;
}

/* The processor (feature HEADER_CPUID: a u32 length and the string, NUL-padded). */
static void read_cpuid(struct reader *r, const uint8_t *p, size_t n, uint64_t data_end)
{
	uint64_t off, len;

	if (!feature(r, p, n, data_end, FEAT_CPUID, "CPUID header", &off, &len)) {
		/* set but out of the file: said by feature() */
		r->aux->cpuid_damaged = (int)(tk_le64(p + 72) >> FEAT_CPUID & 1);
		return;
	}
	uint32_t slen = len >= 4 ? tk_le32(p + off) : 0;
	if (len < 4 || slen > len - 4) {
		problem(r, off, "CPUID header of %llu bytes holds no string",
			(unsigned long long)len);
		r->aux->cpuid_damaged = 1;
		return;
	}
	size_t k = strnlen((const char *)p + off + 4, slen);
	if (k >= sizeof r->aux->cpuid)
		k = sizeof r->aux->cpuid - 1;
	memcpy(r->aux->cpuid, p + off + 4, k);
	r->aux->cpuid[k] = 0;
}

/* The build-id table (feature HEADER_BUILD_ID, after the data): entries of a record header,
 * pid, the id (20 bytes; with MISC_BUILD_ID_SIZE its size in the 21st), and the file name.
 * Mappings without a build-id of their own take the one recorded for their file. */
static void read_build_ids(struct reader *r, const uint8_t *p, size_t n, uint64_t data_end)
{
	uint64_t off = 0, len = 0;

	if (!feature(r, p, n, data_end, FEAT_BUILD_ID, "build-id table", &off, &len))
		return;
	for (uint64_t e = off; e + 36 <= off + len;) {
		uint16_t misc = tk_le16(p + e + 4), size = tk_le16(p + e + 6);
		if (size < 36 || size > off + len - e) {
			problem(r, e, "build-id table entry of size %u: the rest of the table skipped",
				size);
			return;
		}
		const uint8_t *id = p + e + 12;
		unsigned idlen = misc & MISC_BUILD_ID_SIZE ? p[e + 32] : 20;
		size_t namemax = size - 36;
		const char *name = (const char *)p + e + 36;
		struct tk_perf_kernel *k = &r->aux->kernel;
		if (idlen <= 20 && k->ref[0] && !k->build_id_len &&
		    strnlen(name, namemax) == KERNEL_MAP_LEN && !memcmp(name, KERNEL_MAP, KERNEL_MAP_LEN)) {
			memcpy(k->build_id, id, idlen);
			k->build_id_len = (uint8_t)idlen;
		}
		for (size_t i = 0; idlen <= 20 && i < r->aux->nmmaps; i++) {
			struct tk_perf_mmap *m = &r->aux->mmaps[i];
			if (!m->build_id_len && strnlen(name, namemax) == strlen(m->path) &&
			    !strncmp(name, m->path, namemax)) {
				memcpy(m->build_id, id, idlen);
				m->build_id_len = (uint8_t)idlen;
			}
		}
		e += size;
	}
}

/* The records of P from OFF to END (a file's data section, or a whole part). A header
 * that cannot be one (its size does not hold it or runs past the end, or a type perf
 * does not know without a record after it) is damage: reading goes on at the next
 * plausible record, each skip reported with its bytes. */
static int records(struct reader *r, const uint8_t *p, uint64_t off, uint64_t end)
{
	int rc = 0;

	while (off < end) {
		if (end - off < 8) {
			problem(r, off, "file ends inside a record header");
			break;
		}
		uint32_t type = tk_le32(p + off);
		uint16_t misc = tk_le16(p + off + 4), size = tk_le16(p + off + 6);
		uint64_t extra;
		const char *bad = size < 8 ? "below its header" : size > end - off ?
				  "past the end of the data" : NULL;

		/* a type of a later perf is skipped by its size when a record follows it */
		if (!bad && !known_type(type) && !plausible(p, off + size, end, 0) &&
		    off + size != end)
			bad = "(a type perf does not write) and no record after it";
		if (bad) {
			uint64_t next = resync(p, off + 1, end);

			if (next < end)
				problem(r, off, "record of type %u with size %u %s: %llu bytes "
					"skipped to the next record, at offset 0x%llx", type, size, bad,
					(unsigned long long)(next - off), (unsigned long long)next);
			else
				problem(r, off, "record of type %u with size %u %s: no record after "
					"it, the rest of the data (%llu bytes) is unreadable", type,
					size, bad, (unsigned long long)(end - off));
			off = next;
			continue;
		}
		r->aux->records++;
		if ((rc = record(r, p, end, off, type, misc, size, &extra)) < 0)
			break;
		off += size + extra;
	}
	return rc;
}

static int read_file(const uint8_t *p, size_t n, const struct tk_perf_part *parts, size_t nparts,
		     struct tk_perf_aux *aux, tk_perf_diag_fn diag, void *ctx, int sizes_only)
{
	struct reader r = { .aux = aux, .diag = diag, .ctx = ctx, .sizes_only = sizes_only };
	int rc = 0;

	if (!aux)
		return -TK_E_INVAL;
	memset(aux, 0, sizeof(*aux));
	if (!p || n < 16 || memcmp(p, "PERFILE2", 8) != 0) {
		if (p && n >= 8 && memcmp(p, "2ELIFREP", 8) == 0)
			return -TK_E_UNSUPPORTED;   /* written on a big-endian machine */
		return -TK_E_BAD_FORMAT;
	}
	if (tk_le64(p + 8) != FILE_HEADER_SIZE)
		return -TK_E_UNSUPPORTED;   /* pipe mode (perf record -o -): header size 16 */
	if (n < FILE_HEADER_SIZE)
		return -TK_E_TRUNCATED;
	uint64_t attr_size = tk_le64(p + 16), attrs = tk_le64(p + 24), attrs_len = tk_le64(p + 32);
	uint64_t data = tk_le64(p + 40), data_len = tk_le64(p + 48);

	/* the intel_pt event's config (its attr has the PMU type AUXTRACE_INFO names; the
	 * attrs come first, so the type is matched after reading the records) */
	if (data > n || data < FILE_HEADER_SIZE) {
		problem(&r, 40, "data section at %llu lies outside the file (%zu bytes)",
			(unsigned long long)data, n);
		return -TK_E_BAD_FORMAT;
	}
	if (data_len > n - data) {
		problem(&r, 48, "data section of %llu bytes runs past the end of the file: read "
			"up to the end", (unsigned long long)data_len);
		data_len = n - data;
	}
	uint64_t end = data + data_len;
	/* the first attr's sample_id layout (perf gives all of a session's the same) */
	if (attr_size >= 48 && attrs_len >= attr_size && attrs <= n && attr_size <= n - attrs &&
	    (tk_le64(p + attrs + 40) & ATTR_SAMPLE_ID_ALL))
		r.sample_type = tk_le64(p + attrs + 24);
	rc = records(&r, p, data, end);
	if (r.pend_len && rc >= 0)
		problem(&r, data, "compressed records end inside a record (%zu bytes left)",
			r.pend_len);
	/* perf record --threads: its writer threads' records, after the main file's (each
	 * queue's buffers are all in one of them, in order) */
	for (size_t k = 0; rc >= 0 && k < nparts; k++) {
		r.part = &parts[k];
		r.part_no = (uint32_t)k + 1;
		r.pend_len = 0;   /* each writer thread compresses (-z) on its own */
		if (r.zd)
			ZSTD_DCtx_reset(r.zd, ZSTD_reset_session_only);
		rc = records(&r, parts[k].data, 0, parts[k].len);
		if (r.pend_len && rc >= 0)
			problem(&r, 0, "compressed records end inside a record (%zu bytes left)",
				r.pend_len);
	}
	r.part = NULL;
	r.part_no = 0;
	if (rc >= 0) {
		read_build_ids(&r, p, n, end);
		read_cpuid(&r, p, n, end);
	}
	for (size_t i = 0; rc >= 0 && attr_size >= 24 && i < attrs_len / attr_size; i++) {
		uint64_t a = attrs + i * attr_size;
		if (a > n || attr_size > n - a)
			break;
		if (aux->aux_type == TK_PERF_AUX_INTEL_PT && aux->pt.nfields &&
		    tk_le32(p + a) == aux->pt.pmu_type) {
			aux->pt_config = tk_le64(p + a + 8);
			/* type, size, config, period, sample type, read format, flags */
			aux->pt_kernel = attr_size >= 48 && !(tk_le64(p + a + 40) & ATTR_EXCLUDE_KERNEL);
		}
	}
	free(r.qs);
	free(r.pend);
	ZSTD_freeDStream(r.zd);
	if (rc < 0) {
		tk_perf_aux_free(aux);
		return rc;
	}
	return r.skipped;
}

int tk_perf_aux_read(const uint8_t *p, size_t n, struct tk_perf_aux *aux, tk_perf_diag_fn diag,
		     void *ctx)
{
	return read_file(p, n, NULL, 0, aux, diag, ctx, 0);
}

int tk_perf_aux_scan(const uint8_t *p, size_t n, struct tk_perf_aux *aux, tk_perf_diag_fn diag,
		     void *ctx)
{
	return read_file(p, n, NULL, 0, aux, diag, ctx, 1);
}

int tk_perf_aux_read_parts(const uint8_t *p, size_t n, const struct tk_perf_part *parts,
			   size_t nparts, struct tk_perf_aux *aux, tk_perf_diag_fn diag, void *ctx,
			   int sizes_only)
{
	return read_file(p, n, parts, nparts, aux, diag, ctx, sizes_only != 0);
}

void tk_perf_aux_free(struct tk_perf_aux *aux)
{
	if (!aux)
		return;
	for (size_t i = 0; i < aux->nqueues; i++) {
		free(aux->queues[i].owned);
		free(aux->queues[i].breaks);
	}
	for (size_t i = 0; i < aux->nmmaps; i++)
		free(aux->mmaps[i].path);
	free(aux->queues);
	free(aux->mmaps);
	free(aux->tasks);
	free(aux->switches);
	memset(aux, 0, sizeof(*aux));
}
