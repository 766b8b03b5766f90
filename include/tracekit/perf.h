/* perf.data container: the Intel PT data of a `perf record -e intel_pt//` session, split
 * into its queues (one per CPU, or per thread with --per-thread), and the code mappings
 * the session saw. */
#ifndef TRACEKIT_PERF_H
#define TRACEKIT_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 (0: not this format). */
TK_API int tk_perf_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* One trace buffer queue: perf's mmap index (one per CPU with per-CPU buffers, one per
 * thread with --per-thread), its buffers (PERF_RECORD_AUXTRACE) joined in file order. */
struct tk_perf_queue {
	uint32_t idx;
	uint32_t cpu, tid;        /* of the first buffer (UINT32_MAX: not given) */
	const uint8_t *data;      /* the joined trace */
	size_t len;
	uint64_t nbuffers;
	uint64_t file_offset;     /* of the first buffer's data in the file */
	uint32_t file_part;       /* ... which is the main file (0) or part K - 1 (K) */
	/* Buffers that do not start where the one before ended (trace lost between them, or
	 * snapshots that do not overlap): the bytes before the new buffer's first PSB are
	 * left out (nothing could decode them) */
	uint64_t holes, hole_bytes;
	/* snapshot mode: bytes of snapshots that repeat the one before, left out */
	uint64_t repeated_bytes;
	/* where in data a buffer after a hole begins (at its first PSB): the trace there
	 * does not continue what is before it */
	uint64_t *breaks;
	size_t nbreaks;
	uint8_t *owned;           /* data, when it had to be copied together */
};

/* A mapping of code (PERF_RECORD_MMAP and MMAP2 with execute permission): a file (path
 * from /), or the kernel's vDSO (path "[vdso]"). */
struct tk_perf_mmap {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	char *path;
	/* the file's build-id when the session recorded it (in the record, or in the build-id
	 * table perf writes at the end of the file); build_id_len 0: none recorded */
	uint8_t build_id[20];
	uint8_t build_id_len;
	uint64_t time;            /* perf's clock when it was mapped (sample_id; 0: not given) */
};

/* The life of the session's threads (PERF_RECORD_COMM, FORK, EXIT), times on perf's clock
 * (sample_id; 0: not given), in file order. */
enum tk_perf_task_kind { TK_PERF_COMM = 1, TK_PERF_EXEC, TK_PERF_FORK, TK_PERF_EXIT };
struct tk_perf_task {
	uint64_t time;
	uint32_t kind;            /* TK_PERF_* (EXEC: a COMM flagged comm_exec) */
	uint32_t pid, tid;
	uint32_t ppid, ptid;      /* FORK, EXIT: the parent */
	char comm[16];            /* COMM, EXEC */
};

/* A thread starting to run on a CPU at a time: a PERF_RECORD_SWITCH in, a
 * PERF_RECORD_SWITCH_CPU_WIDE out (it names the next thread) or PERF_RECORD_ITRACE_START,
 * as perf's Intel PT decoder takes them. */
struct tk_perf_switch {
	uint64_t time;
	uint32_t cpu, pid, tid;
};

/* The kernel's text as the session saw it (perf's MMAP record of "[kernel.kallsyms]" plus
 * a reference symbol, pid -1): where the symbol REF was at run time, which with the
 * kernel's ELF file (vmlinux) gives its KASLR offset. ref[0] 0: no such record. */
struct tk_perf_kernel {
	char ref[32];             /* the reference symbol: "_text" or "_stext" */
	uint64_t ref_addr;        /* its run-time address (the record's pgoff) */
	uint64_t start, len;      /* the kernel map */
	uint8_t build_id[20];     /* as recorded (build-id table or MMAP2); len 0: none */
	uint8_t build_id_len;
};

/* The Intel PT settings of the session (PERF_RECORD_AUXTRACE_INFO). */
struct tk_perf_pt_info {
	uint64_t pmu_type, time_shift, time_mult, time_zero, cap_user_time_zero;
	uint64_t tsc_bit, noretcomp_bit, have_sched_switch, snapshot_mode, per_cpu_mmaps;
	uint64_t mtc_bit, mtc_freq_bits, tsc_ctc_n, tsc_ctc_d, cyc_bit, max_nonturbo_ratio;
	unsigned nfields;         /* how many of the above the file gave (older perf: fewer) */
};

enum { TK_PERF_AUX_NONE = 0, TK_PERF_AUX_INTEL_PT = 1 };

struct tk_perf_aux {
	uint32_t aux_type;        /* TK_PERF_AUX_* (another number: another kind of trace) */
	struct tk_perf_pt_info pt;
	uint64_t pt_config;       /* the intel_pt event's config (its attr) */
	int pt_kernel;            /* its attr traced the kernel (exclude_kernel clear) */
	struct tk_perf_kernel kernel;
	char cpuid[64];           /* the processor (HEADER_CPUID, "GenuineIntel,6,142,10"); ""
				     when not recorded or damaged */
	int cpuid_damaged;        /* the CPUID header is there but holds no sound string */
	uint64_t kernel_modules;  /* the kernel's modules' maps (pid -1): not in mmaps (a .ko
				     file is not linked to an address) */
	struct tk_perf_queue *queues;
	size_t nqueues;
	struct tk_perf_mmap *mmaps;
	size_t nmmaps;
	uint64_t records;         /* records read */
	uint64_t lost_records;    /* PERF_RECORD_LOST: samples perf dropped */
	uint64_t aux_truncated;   /* PERF_RECORD_AUX flagged truncated: the kernel's buffer
				     was full and trace was lost */
	uint64_t compressed_records;  /* perf record -z: PERF_RECORD_COMPRESSED, read */
	struct tk_perf_task *tasks;
	size_t ntasks;
	struct tk_perf_switch *switches;
	size_t nswitches;
};

/* Called for each problem found while reading, with the file offset of the record. */
typedef void (*tk_perf_diag_fn)(void *ctx, uint64_t offset, const char *msg);

/* Read the perf.data file in P (N bytes, as mapped: queue data may point into it, so it
 * must stay mapped until tk_perf_aux_free). Malformed records are reported through DIAG
 * and skipped (reading resumes at the next record when its size is sound, else at the
 * next plausible record header, the bytes skipped reported). Returns 0, 1 when something was skipped, or -TK_E_* (not a perf.data file, a
 * pipe-mode or big-endian file: -TK_E_UNSUPPORTED). */
TK_API int tk_perf_aux_read(const uint8_t *p, size_t n, struct tk_perf_aux *aux, tk_perf_diag_fn diag,
		     void *ctx);
/* As tk_perf_aux_read, without joining the trace: each queue's data is NULL and its len
 * what the joined trace would hold (a summary of a large file costs no copy of it). */
TK_API int tk_perf_aux_scan(const uint8_t *p, size_t n, struct tk_perf_aux *aux, tk_perf_diag_fn diag,
		     void *ctx);
/* perf record --threads writes a directory: DIR/data (the header and the records of the
 * main thread) and DIR/data.K (the records its writer threads took from their CPUs' ring
 * buffers: code mappings, trace buffers; no header). Reads P (DIR/data) and then each
 * part in turn, as one session; a part's problems name it (NAME) and their offsets are
 * in it. The parts must stay mapped as P does. SIZES_ONLY: as tk_perf_aux_scan. */
struct tk_perf_part {
	const uint8_t *data;
	size_t len;
	const char *name;         /* for messages, e.g. "data.3" */
};
TK_API int tk_perf_aux_read_parts(const uint8_t *p, size_t n, const struct tk_perf_part *parts,
			   size_t nparts, struct tk_perf_aux *aux, tk_perf_diag_fn diag, void *ctx,
			   int sizes_only);
TK_API void tk_perf_aux_free(struct tk_perf_aux *aux);

/* ---- an Intel PT session: the streams to decode and their memory image ----------------- */
/* From a raw packet file (one stream; the code from --elf/--raw) or from a perf.data file
 * (or the directory of perf record --kcore / --threads): one stream per trace queue, each
 * on its own track, the code its mappings name (checked by build-id), the kernel placed
 * where the session ran it, then the --elf/--raw files over them. */
struct tk_perf_stream {
	const uint8_t *data;
	size_t len;
	uint32_t track;             /* see tk_perf_session.track_label */
	char label[512];            /* the file, and for perf.data the queue's CPU or thread */
	char name[32];              /* perf.data: "cpu N" or "thread N" (timeline tracks) */
	/* perf.data: where the joined buffers do not continue each other (lost trace,
	 * snapshots apart): tk_ipt_flow_opts.breaks */
	const uint64_t *breaks;
	size_t nbreaks;
	uint32_t break_reason;
	struct tk_gap_stats gaps;   /* its gaps, once decoded (offsets are in data) */
	/* split by thread (tk_perf_session_opts.threads): the thread that runs it, UINT32_MAX
	   if not known, and its process's code (NULL: the session's image) */
	uint32_t pid, tid;
	struct tk_image *img;
};
/* A process's code over one part of its life (from an exec to the next): its mappings,
   those it inherited at its fork, the kernel's and the user's files. */
struct tk_perf_proc {
	uint32_t pid;
	uint32_t epoch;             /* execs before this part */
	char comm[16];
	struct tk_image *img;
	struct tk_perf_module *mods;  /* the files of its image (path and bias: its names) */
	size_t nmods;
};
struct tk_perf_module {
	char *path;
	uint64_t bias;
	uint64_t base;              /* where it was placed (ptxed's FILE:BASE) */
};
struct tk_perf_session_opts {
	size_t sz;                  /* sizeof(struct tk_perf_session_opts) */
	int code;                   /* build the memory image (0: only the packets, dump) */
	int quiet;                  /* no warnings */
	const char *const *elf;     /* FILE[:BASE] code and symbols, later ones win */
	size_t nelf;
	const char *const *raw;     /* FILE:ADDR raw code */
	size_t nraw;
	/* timing (ptxed's options; 0: perf.data's settings, else unknown) and the TSC's rate */
	uint32_t mtc_freq, nom_freq, cpuid_15_eax, cpuid_15_ebx;
	int has_tsc_hz;
	uint64_t tsc_hz;
	unsigned nthreads;          /* decoder threads (0: all cores) */
	size_t chunk_bytes;         /* the PSB split's chunk size (0: the default) */
	tk_msg_fn msg;              /* errors and warnings, naming the file */
	void *ctx;
	/* a timed perf.data session with its threads' sideband (switches, COMM, FORK): each
	   per-CPU queue split into streams at the PSBs where its thread changes (each on
	   the thread's track), and each stream decoded against its process's code */
	int threads;
	/* ... only the streams of these threads (NULL: all); a session that is not split by
	   thread refuses one that keeps anything out (-TK_E_UNSUPPORTED, said) */
	const struct tk_thread_filter *filter;
	/* the input DATA was mapped from (NULL: none): the streams read in place in DATA
	   are split at their PSBs with pread (tk_ipt_flow_opts.in) */
	const struct tk_input *in;
	/* the processor, as ptxed's --cpu FAMILY/MODEL[/STEPPING]: its errata are read
	   (tk_ipt_cpu_errata; NULL: perf.data's CPUID header says, a raw trace has none) */
	const char *cpu;
	/* the address filter tracing ran with (tk_ipt_flow_opts.addr_filter; NULL: none) */
	const struct tk_ipt_addr_filter *addr_filter;
};
struct tk_perf_session {
	struct tk_image *img;
	struct tk_perf_stream *s;
	size_t n;
	struct tk_perf_module *mods;   /* perf.data: the mapped files that were loaded */
	size_t nmods;
	int perf;                   /* the input is perf.data */
	int vdso;                   /* its vDSO is this machine's and in the image */
	const char *kernel_elf;     /* the --elf argument placed where the kernel ran (FILE:BASE) */
	char *kallsyms;             /* perf.data DIR/kcore_dir/kallsyms: the kernel's symbols */
	char *kcore;                /* perf.data DIR/kcore_dir/kcore: the kernel's code as it ran */
	int skipped;                /* perf.data records were skipped (data lost) */
	/* what a stream's track number is: "cpu" (perf.data per-CPU queues: the CPU),
	   "thread" (per-thread queues: the thread id; a raw trace: 0), "queue" (perf.data
	   whose CPUs or threads repeat or are not given: the queue's place) */
	const char *track_label;
	struct tk_perf_aux aux;
	/* perf record --threads: DIR/data.K, mapped */
	struct tk_input **part_in;
	struct tk_perf_part *parts;
	size_t nparts;
	/* the options, perf's timing settings filled in, and the --elf list with a kernel
	   given without a base placed (FILE:BASE) or left out when of another build */
	struct tk_perf_session_opts o;
	char **elf;
	size_t nelf;
	unsigned shown;             /* problems reported while reading */
	int split;                  /* the queues are split by thread (opts.threads) */
	uint32_t errata;            /* the processor's (enum tk_ipt_erratum), from opts.cpu
				       or the CPUID header */
	unsigned procs_capped;      /* ... more processes than images: said once */
	struct tk_perf_proc *procs; /* ... the processes' images */
	size_t nprocs;
	uint64_t *seg_breaks;       /* ... and the streams' breaks */
	const uint8_t *data;        /* DATA as opened, and its length */
	size_t len;
};
/* PATH names the input (a perf.data directory: DIR); DATA its bytes (DIR/data), which must
 * stay mapped until the session is closed. PERF: DATA is perf.data, else a raw PT stream.
 * Returns 0 or -TK_E_* after a message (the session is then closed). */
TK_API int tk_perf_session_open(struct tk_perf_session *x, const char *path, const uint8_t *data,
			 size_t len, int perf, const struct tk_perf_session_opts *o);
TK_API void tk_perf_session_close(struct tk_perf_session *x);
/* The flow decoder's options for stream I: the session's timing, image, track, breaks. */
struct tk_ipt_flow_opts;
TK_API void tk_perf_session_flow_opts(const struct tk_perf_session *x, size_t i,
			       struct tk_ipt_flow_opts *fo);
/* The TSC's ticks per second: the user's, else perf's conversion (0: unknown). */
TK_API struct tk_trace_clock tk_perf_session_clock(const struct tk_perf_session *x);
/* The loaded modules' symbols (and kallsyms) into SYM, after the --elf list's. */
struct tk_sym;
TK_API int tk_perf_session_symbols(const struct tk_perf_session *x, struct tk_sym *sym);
/* A session split by thread: the process that thread TRACK ran in (its last stream's:
 * *PROC indexes procs) and the thread's name (its COMM, else its process's) into COMM (N
 * bytes, terminated). -TK_E_NOT_FOUND when the session is not split or TRACK is not known. */
TK_API int tk_perf_session_track(const struct tk_perf_session *x, uint32_t track, size_t *proc,
			  char *comm, size_t n);
/* The symbols of process PROC's files (and kallsyms) into SYM. */
TK_API int tk_perf_session_proc_symbols(const struct tk_perf_session *x, size_t proc,
				 struct tk_sym *sym);
/* perf.data: the line that names stream I (its queue) ahead of its output. */
struct tk_buf;
TK_API void tk_perf_session_stream_header(struct tk_buf *out, const struct tk_perf_session *x, size_t i);
/* Decoding is over (streams carry their gaps, TOTAL their sum, INSNS the instructions):
 * what was left out or skipped, as messages; 1 if data was lost, else 0. */
TK_API int tk_perf_session_report(const struct tk_perf_session *x, const char *path,
			   const struct tk_gap_stats *total, uint64_t insns);
/* perf's timing settings (MTC period, nominal ratio, TSC:crystal) into O where it has none. */
TK_API void tk_perf_timing(const struct tk_perf_aux *a, struct tk_perf_session_opts *o);
/* Whether a session's streams are its threads' (tk_perf_session_opts.threads): a timed
 * session whose sideband says which threads ran or which process a thread is. */
TK_API int tk_perf_by_thread(const struct tk_perf_aux *a);
/* Whether thread TID of process PID passes filter F (may be NULL), its name the last it
 * had at TIME (UINT64_MAX: its last). */
TK_API int tk_perf_thread_kept(const struct tk_perf_aux *a, const struct tk_thread_filter *f,
			       uint32_t pid, uint32_t tid, uint64_t time);
/* A warning (through MSG) when code mappings overlap others of different code (one image
 * cannot hold them all). */
TK_API void tk_perf_warn_overlaps(const struct tk_perf_aux *a, const char *path, tk_msg_fn msg,
			   void *ctx);
/* perf record --threads: DIR's data.K files, mapped (none for a file). Returns 0, or
 * -TK_E_* after a message. */
TK_API int tk_perf_parts_open(struct tk_perf_session *x, const char *path);
TK_API void tk_perf_parts_close(struct tk_perf_session *x);

#ifdef __cplusplus
}
#endif
#endif
