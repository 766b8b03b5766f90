/* xtrace in the CLI: open an instruction file together with its snapshot file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char *log_insn, *log_snap;

/* Library messages name the file they are about ("snapshot file: ..." is the other one). */
static void xtrace_log(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	const char *f = log_insn;
	if (strncmp(msg, "snapshot file: ", 15) == 0 && log_snap) {
		f = log_snap;
		msg += 15;
	}
	fprintf(stderr, "tracekit: %s%s%s%s\n", f ? f : "", f ? ": " : "",
		level == TK_LOG_WARN ? "warning: " : "", msg);
}

static int map_other(const struct cli_opts *o, struct cli_xtrace *x, const char *path,
		     const uint8_t **p, size_t *n)
{
	struct tk_input_opts io = { .sz = sizeof io };
	int rc = tk_input_open(&x->in2, path, &io);
	if (rc < 0 || (rc = tk_input_map(x->in2, p, n)) < 0) {
		cli_error(path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		if (x->in2)
			tk_input_free(x->in2);
		x->in2 = NULL;
		return EXIT_INPUT;
	}
	(void)o;
	return 0;
}

/* tk_input maps an uncompressed regular file read-only and copies anything else (pipe,
 * .gz, .zst) into memory; only the mapping may be handed back with MADV_DONTNEED (the
 * pages refault from the file), a copy would read back as zeros. */
static int plain_file(const char *path, struct tk_input *in, size_t n)
{
	struct stat st;
	return strcmp(path, "-") != 0 && tk_input_compression(in) == TK_COMP_NONE &&
	       stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == n;
}

/* A chunk has been read: give its whole pages back now, on the worker, so that the final
 * munmap of a multi-GB mapping (16 ms for 545 MB, all on one thread) has little left to
 * tear down and the resident set stays small. */
static void release_chunk(const struct cli_xtrace *x, size_t i)
{
	if (!x->insn_mapped)
		return;
	size_t b, e;
	long pg = sysconf(_SC_PAGESIZE);
	tk_xtrace_chunk(x->t, i, &b, &e);
	uintptr_t base = (uintptr_t)x->insn;
	uintptr_t from = (base + b + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	uintptr_t to = (base + e) & ~((uintptr_t)pg - 1);
	if (to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}

int cli_xtrace_open(const struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi, struct cli_xtrace *x)
{
	const uint8_t *p;
	size_t n;
	int rc, err = 0;

	memset(x, 0, sizeof *x);
	if ((rc = tk_input_map(in, &p, &n)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	tk_xtrace_parse_name(file, &x->name);
	int have_other = tk_xtrace_companion(file, x->other, sizeof x->other) == 0 &&
			 access(x->other, R_OK) == 0;
	if (fi->id == TK_FMT_XTRACE_SNAP) {
		x->snap = p, x->sn = n, x->snap_path = file;
		if (have_other) {
			if ((rc = map_other(o, x, x->other, &x->insn, &x->n)))
				return rc;
			x->insn_path = x->other;
		}
	} else {
		x->insn = p, x->n = n, x->insn_path = file;
		if (have_other) {
			if ((rc = map_other(o, x, x->other, &x->snap, &x->sn)))
				return rc;
			x->snap_path = x->other;
		}
	}
	x->insn_mapped = x->insn && plain_file(x->insn_path, fi->id == TK_FMT_XTRACE_SNAP ?
								  x->in2 : in, x->n);
	log_insn = x->insn_path;
	log_snap = x->snap_path;
	tk_set_log(xtrace_log, NULL);
	x->t = tk_xtrace_new(x->insn, x->n, x->snap, x->sn, &err);
	if (!x->t) {
		cli_error(x->snap_path, 0, "not a snapshot file: no vector length from 128 to "
			  "2048 bits fits any snapshot (%s)", tk_strerror(err));
		cli_xtrace_close(x);
		return EXIT_INPUT;
	}
	return 0;
}

int cli_xtrace_open_insn(const struct cli_opts *o, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi, struct cli_xtrace *x)
{
	int rc = cli_xtrace_open(o, file, in, fi, x);
	if (rc)
		return rc;
	if (!x->insn) {
		cli_error(file, UINT64_MAX, "no instruction file beside this snapshot file");
		cli_xtrace_close(x);
		return EXIT_INPUT;
	}
	return 0;
}

void cli_xtrace_close(struct cli_xtrace *x)
{
	tk_xtrace_free(x->t);
	if (x->in2)
		tk_input_free(x->in2);
	x->t = NULL;
	x->in2 = NULL;
}

/* ---- statistics over all chunks with -j N (info, stats) -------------------------------- */
struct stats_job {
	const struct cli_xtrace *x;
	const struct tk_xtrace *t;
	struct tk_xtrace_stats *total, *part;
	struct tk_gap_stats *gaps, *part_gaps;
	unsigned flags;
	struct tk_progress *prog;
	uint64_t done;
	uint64_t insns;       /* instructions in the chunks merged so far */
	int counted;          /* insns is absolute (chunk 0 began at a known count) */
	const char *snap_path;
};

static int stats_work(void *ctx, size_t i)
{
	struct stats_job *j = ctx;
	tk_xtrace_stats_init(&j->part[i], j->flags);
	memset(&j->part_gaps[i], 0, sizeof j->part_gaps[i]);
	int rc = tk_xtrace_stats_chunk(j->t, i, &j->part[i], &j->part_gaps[i]);
	release_chunk(j->x, i);
	return rc;
}

static int stats_merge(void *ctx, size_t i)
{
	struct stats_job *j = ctx;
	size_t b, e, si = tk_xtrace_chunk_snapshot(j->t, i);
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(j->t);
	/* A snapshot's count of instructions before it must match the stream. */
	if (si != SIZE_MAX) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(sf, si, &s);
		if (i == 0 || !j->counted) {
			j->insns = s.total_insns;
			j->counted = 1;
		} else if (s.total_insns != j->insns) {
			cli_warn(j->snap_path, s.offset + 24, "snapshot %zu says %llu instructions "
				 "before it, the instruction stream has %llu", si,
				 (unsigned long long)s.total_insns, (unsigned long long)j->insns);
			j->insns = s.total_insns;
		}
	} else if (i == 0) {
		j->counted = 1;
	}
	const struct tk_xtrace_stats *ps = &j->part[i];
	j->insns += ps->insns[0] + ps->insns[1] + ps->insns[2] + ps->insns[3];
	if (j->part_gaps[i].count)
		j->counted = 0; /* instructions were lost: the next snapshot cannot be checked */
	tk_xtrace_stats_merge(j->total, &j->part[i]);
	tk_gap_stats_merge(j->gaps, &j->part_gaps[i]);
	tk_xtrace_stats_free(&j->part[i]);
	tk_xtrace_chunk(j->t, i, &b, &e);
	j->done += e - b;
	tk_progress_set(j->prog, j->done);
	return 0;
}

int cli_xtrace_stats(const struct cli_opts *o, struct cli_xtrace *x, struct tk_xtrace_stats *s,
		     struct tk_gap_stats *gaps, unsigned flags)
{
	size_t nc = tk_xtrace_nchunks(x->t);
	struct tk_progress prog;
	struct stats_job j = { .x = x, .t = x->t, .total = s, .gaps = gaps, .flags = flags,
			       .prog = &prog, .snap_path = x->snap_path };
	j.part = calloc(nc, sizeof *j.part);
	j.part_gaps = calloc(nc, sizeof *j.part_gaps);
	if (!j.part || !j.part_gaps) {
		free(j.part);
		free(j.part_gaps);
		return -TK_E_NOMEM;
	}
	cli_progress_init(o, &prog, "reading", x->n);
	/* Chunks end at snapshots, so their sizes vary (kernel code between two 1M-user-
	 * instruction snapshots, a cut stream): a deeper look-ahead lets the other workers go
	 * on past a long chunk. A finished part holds under 1 MB (the footprint sets). */
	unsigned nt = o->jobs ? o->jobs : tk_cpu_count();
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = 16 * (size_t)nt };
	int rc = tk_pool_run(&po, nc, stats_work, stats_merge, &j);
	tk_progress_finish(&prog);
	free(j.part);
	free(j.part_gaps);
	return rc;
}

int cli_xtrace_report(struct cli_xtrace *x, const char *file, const struct tk_gap_stats *gaps)
{
	int a = cli_report_gaps(x->snap_path ? x->snap_path : file, tk_xtrace_open_gaps(x->t),
				"bad snapshot");
	int b = cli_report_gaps(x->insn_path ? x->insn_path : file, gaps, "damaged region");
	return a > b ? a : b;
}

/* ---- symbols from --elf FILE[:BIAS] ---------------------------------------------------- */
int cli_xtrace_symbols(const struct cli_opts *o, struct tk_sym **out)
{
	int err = 0;
	*out = NULL;
	if (!o->n_elf)
		return 0;
	struct tk_sym_opts so = cli_sym_opts(o);
	struct tk_sym *s = tk_sym_new(&so, &err);
	if (!s) {
		cli_error(NULL, UINT64_MAX, "symbols: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	for (int i = 0; i < o->n_elf; i++) {
		char path[4096];
		uint64_t bias = 0;
		snprintf(path, sizeof path, "%s", o->elf[i]);
		char *colon = strrchr(path, ':');
		if (colon && cli_parse_u64(colon + 1, &bias) == 0)
			*colon = 0;
		int rc = tk_sym_add_elf(s, path, bias);
		if (rc < 0) {
			cli_error(path, UINT64_MAX, "cannot load: %s", tk_strerror(rc));
			tk_sym_free(s);
			return EXIT_INPUT;
		}
	}
	*out = s;
	return 0;
}
