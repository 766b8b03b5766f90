/* An Intel PT session: the streams to decode and their memory image, from a raw packet
 * file (one stream; --elf/--raw) or from a perf.data file (one stream per trace queue; the
 * code its mappings name, then --elf/--raw over them). Messages go to the caller's
 * tk_msg_fn, naming the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/image.h"
#include "tracekit/ipt.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/perf.h"
#include "tracekit/symbolize.h"

#define WARN(x, file, ...) \
	tk_msg((x)->o.msg, (x)->o.ctx, TK_LOG_WARN, file, UINT64_MAX, __VA_ARGS__)
#define ERROR(x, file, off, ...) \
	tk_msg((x)->o.msg, (x)->o.ctx, TK_LOG_ERROR, file, off, __VA_ARGS__)

struct diag {
	struct tk_perf_session *x;
	const char *file;
};

/* tk_perf_aux_read's problems: the first 20 */
static void perf_diag(void *ctx, uint64_t offset, const char *msg)
{
	struct diag *d = ctx;

	if (d->x->shown++ < 20 && !d->x->o.quiet)
		ERROR(d->x, d->file, offset, "%s", msg);
}

static int by_addr(const void *a, const void *b)
{
	const struct tk_perf_mmap *x = *(const struct tk_perf_mmap *const *)a;
	const struct tk_perf_mmap *y = *(const struct tk_perf_mmap *const *)b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x < y ? -1 : x > y;   /* file order */
}

/* Mappings of other code at the same addresses (another process's executable, a file
 * mapped where an unmapped one was): the image holds only one of them, so trace of
 * the other there would follow the wrong code. Named (the first), not hidden. */
static void warn_overlaps(const struct tk_perf_mmap *const *all, size_t nall, const char *file,
			  tk_msg_fn msg, void *ctx)
{
	const struct tk_perf_mmap **m = malloc((nall ? nall : 1) * sizeof(*m));
	size_t n = 0, clashes = 0;
	const struct tk_perf_mmap *first[2] = { NULL, NULL };

	if (!m || !msg) {
		free(m);
		return;
	}
	for (size_t i = 0; i < nall; i++)
		if (all[i]->path[0] == '/' && all[i]->len)
			m[n++] = all[i];
	qsort(m, n, sizeof(*m), by_addr);
	/* each mapping against the one reaching furthest among those before it */
	const struct tk_perf_mmap *reach = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct tk_perf_mmap *p = reach, *q = m[i];

		if (p && q->addr < p->addr + p->len &&
		    (strcmp(p->path, q->path) || p->addr - p->pgoff != q->addr - q->pgoff)) {
			if (!clashes++) {
				first[0] = p;
				first[1] = q;
			}
		}
		if (!reach || q->addr + q->len > reach->addr + reach->len)
			reach = q;
	}
	if (clashes)
		tk_msg(msg, ctx, TK_LOG_WARN, file, UINT64_MAX, "%zu code mappings overlap others of different code, "
			 "first %s (pid %u) and %s (pid %u) at 0x%llx: all trace is decoded "
			 "against one image, which holds only one of them there: trace of the "
			 "other would follow the wrong instructions", clashes,
			 first[0]->path, first[0]->pid, first[1]->path, first[1]->pid,
			 (unsigned long long)first[1]->addr);
	free(m);
}

void tk_perf_warn_overlaps(const struct tk_perf_aux *a, const char *file, tk_msg_fn msg, void *ctx)
{
	const struct tk_perf_mmap **m = malloc((a->nmmaps ? a->nmmaps : 1) * sizeof(*m));

	for (size_t i = 0; m && i < a->nmmaps; i++)
		m[i] = &a->mmaps[i];
	if (m)
		warn_overlaps(m, a->nmmaps, file, msg, ctx);
	free(m);
}

/* No queue kept: all were empty, or --cpu LIST left every one out (said so, with the CPUs
 * that have trace, eight at most, not that the trace is empty). */
static void warn_nothing_kept(const struct tk_perf_session *x, const char *file)
{
	char cpus[96] = "";
	size_t with_data = 0, at = 0;

	for (size_t i = 0; i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];
		size_t j = 0;
		while (j < i && !(x->aux.queues[j].len && x->aux.queues[j].cpu == q->cpu))
			j++;   /* (a CPU named once) */
		if (q->len && j == i && with_data++ < 8 && at < sizeof cpus)
			at += (size_t)snprintf(cpus + at, sizeof cpus - at, "%s%u", at ? ", " : "", q->cpu);
	}
	if (with_data)
		WARN(x, file, "--cpu LIST: no trace of those CPUs (the trace is of CPU%s %s%s)",
		     with_data > 1 ? "s" : "", cpus, with_data > 8 ? ", ..." : "");
	else
		WARN(x, file, "no Intel PT data in this perf.data (%zu trace queues, all empty)",
		     x->aux.nqueues);
}

/* The code of the mappings M (N) into IMG; the files loaded join the session's modules
 * (for their symbols, once each); a file that cannot be read is named (five at most). */
static int add_mappings(const char *file, struct tk_perf_session *x, struct tk_image *img,
			const struct tk_perf_mmap *const *maps, size_t nmaps, int no_overlaps,
			struct tk_perf_proc *pr)
{
	const struct tk_perf_aux *a = &x->aux;
	unsigned missing = 0;
	int loaded = 0, vdso = 0;
	struct tk_perf_module *here = calloc(nmaps ? nmaps : 1, sizeof *here);

	if (!here || (a->nmmaps && !x->mods && !(x->mods = calloc(a->nmmaps, sizeof(*x->mods))))) {
		free(here);
		return -TK_E_NOMEM;
	}
	for (size_t i = 0; i < nmaps; i++) {
		const struct tk_perf_mmap *m = maps[i];
		uint64_t bias, base;
		int seen = 0, known = 0, rc;

		if (!strcmp(m->path, "[vdso]")) {
			/* the kernel's code: this machine's, if the session ran on this kernel
			 * (the same build-id), else missing (its calls show as gaps) */
			if (m->build_id_len &&
			    tk_image_add_vdso(img, m->addr, m->build_id, m->build_id_len) == 0)
				x->vdso = vdso = 1;
			else if (!x->o.quiet)
				WARN(x, file, "the [vdso] at 0x%llx %s: its code is missing "
					 "(calls into it show as gaps)", (unsigned long long)m->addr,
					 m->build_id_len ? "is not this kernel's (its build-id differs)"
							 : "has no recorded build-id");
			continue;
		}
		/* another mapping of a file already loaded there (in this image: seen, in
		 * another process's: known) */
		if ((rc = tk_image_elf_mapped(m->path, m->addr, m->pgoff, &bias, &base)) == 0)
			for (size_t j = 0; j < x->nmods && !known; j++)
				known = x->mods[j].bias == bias && !strcmp(x->mods[j].path, m->path);
		for (int j = 0; rc == 0 && known && j < loaded && !seen; j++)
			seen = here[j].bias == bias && !strcmp(here[j].path, m->path);
		if (seen)
			continue;
		if (rc == 0 && m->build_id_len) {
			/* the file here must be the one that ran: other code would decode into
			 * other instructions, which is worse than a gap */
			uint8_t id[20];
			int n = tk_image_elf_build_id(m->path, id, sizeof id);
			if (n != m->build_id_len || memcmp(id, m->build_id, (size_t)n) != 0) {
				if (missing++ < 5 && !x->o.quiet)
					WARN(x, file, "%s is not the file the session mapped "
						 "(its build-id differs from the recorded one): its code is "
						 "left out of the image", m->path);
				continue;
			}
		}
		if (rc == 0 && (rc = tk_image_add_elf(img, m->path, base, 1)) == 0) {
			here[loaded].path = m->path;
			here[loaded++].bias = bias;
			if (known)
				continue;
			x->mods[x->nmods].path = m->path;
			x->mods[x->nmods].base = base;
			x->mods[x->nmods++].bias = bias;
			continue;
		}
		if (missing++ < 5 && !x->o.quiet)
			WARN(x, file, "cannot load %s (mapped at 0x%llx): %s; its code is "
				 "missing from the image", m->path, (unsigned long long)m->addr,
				 tk_strerror(rc));
	}
	if (missing > 5 && !x->o.quiet)
		WARN(x, file, "%u more mapped files cannot be loaded", missing - 5);
	if (!x->o.quiet && !no_overlaps)
		warn_overlaps(maps, nmaps, file, x->o.msg, x->o.ctx);
	if (pr) {   /* a process's files: its functions' names */
		pr->mods = here;
		pr->nmods = (size_t)loaded;
	} else {
		free(here);
	}
	return loaded + vdso;
}

/* The gaps: TOTAL for a raw stream, each queue's own for perf.data (its offsets are in
 * that queue's trace, so the queue is named). */
static int report_gaps(const char *file, const struct tk_perf_session *x,
		       const struct tk_gap_stats *total)
{
	int status = 0;

	if (!x->perf)
		return tk_gap_report(total, "gap", file, x->o.msg, x->o.ctx);
	for (size_t i = 0; i < x->n; i++)
		status |= tk_gap_report(&x->s[i].gaps, "gap", x->s[i].label, x->o.msg, x->o.ctx);
	return status;
}

/* Whether queue Q is decoded: it has trace, of a CPU the filter keeps (--cpu LIST). */
static int queue_kept(const struct tk_perf_session *x, const struct tk_perf_queue *q)
{
	return q->len && tk_thread_filter_cpu(x->o.filter, q->cpu);
}

int tk_perf_session_report(const struct tk_perf_session *x, const char *file,
			   const struct tk_gap_stats *total, uint64_t insns)
{
	int status = x->skipped;
	uint64_t left_out = 0, apart = 0;

	for (size_t i = 0; x->perf && i < x->aux.nqueues; i++) {
		left_out += x->aux.queues[i].hole_bytes;
		apart += x->aux.queues[i].holes;
	}
	if (left_out && !x->o.quiet && x->aux.pt.snapshot_mode && !apart)
		/* (a ring that had wrapped: its oldest byte is inside a packet) */
		ERROR(x, file, UINT64_MAX, "snapshot mode: %llu bytes before the first snapshot's "
		      "first PSB left out", (unsigned long long)left_out);
	else if (left_out && !x->o.quiet && x->aux.pt.snapshot_mode)
		ERROR(x, file, UINT64_MAX, "snapshot mode: %llu snapshots do not overlap the one "
		      "before (the trace between them was not kept); %llu bytes before their "
		      "first PSBs left out", (unsigned long long)apart, (unsigned long long)left_out);
	else if (left_out && !x->o.quiet)
		ERROR(x, file, UINT64_MAX, "%llu bytes of trace after losses left out (up to the "
		      "next PSB)", (unsigned long long)left_out);
	if (total->count) {
		if (!x->o.quiet)
			ERROR(x, file, UINT64_MAX, "%llu instructions decoded, %llu bytes skipped",
			      (unsigned long long)insns, (unsigned long long)total->bytes_skipped);
		status |= report_gaps(file, x, total);
	}
	return status;
}

int tk_perf_session_symbols(const struct tk_perf_session *x, struct tk_sym *sym)
{
	int rc;

	for (size_t i = 0; i < x->nmods; i++)
		if ((rc = tk_sym_add_elf(sym, x->mods[i].path, x->mods[i].bias)) < 0) {
			ERROR(x, x->mods[i].path, UINT64_MAX, "cannot load symbols: %s", tk_strerror(rc));
			return rc;
		}
	if (x->kallsyms && (rc = tk_sym_add_kallsyms(sym, x->kallsyms, "[kernel.kallsyms]")) < 0)
		WARN(x, x->kallsyms, "no kernel symbols from it (%s): kernel functions "
			 "are named by address", tk_strerror(rc));
	return 0;
}

int tk_perf_session_proc_symbols(const struct tk_perf_session *x, size_t proc, struct tk_sym *sym)
{
	const struct tk_perf_proc *pr = &x->procs[proc];
	int rc;

	for (size_t i = 0; i < pr->nmods; i++)
		if ((rc = tk_sym_add_elf(sym, pr->mods[i].path, pr->mods[i].bias)) < 0)
			return rc;
	if (x->kallsyms)
		tk_sym_add_kallsyms(sym, x->kallsyms, "[kernel.kallsyms]");  /* said for the session's */
	return 0;
}

int tk_perf_session_track(const struct tk_perf_session *x, uint32_t track, size_t *proc,
			  char *comm, size_t n)
{
	const struct tk_perf_aux *a = &x->aux;
	const struct tk_perf_stream *last = NULL;

	if (!x->split)
		return -TK_E_NOT_FOUND;
	for (size_t i = 0; i < x->n; i++)
		if (x->s[i].track == track && x->s[i].tid == track && x->s[i].pid != UINT32_MAX)
			last = &x->s[i];
	for (size_t i = 0; last && i < x->nprocs; i++)
		if (x->procs[i].img == last->img) {
			*proc = i;
			/* the thread's own name (a COMM of its own), else its process's */
			const char *c = x->procs[i].comm;
			for (size_t k = 0; k < a->ntasks; k++)
				if ((a->tasks[k].kind == TK_PERF_COMM || a->tasks[k].kind == TK_PERF_EXEC) &&
				    a->tasks[k].tid == track && a->tasks[k].pid == last->pid)
					c = a->tasks[k].comm;
			snprintf(comm, n, "%.16s", c);
			return 0;
		}
	return -TK_E_NOT_FOUND;
}

void tk_perf_timing(const struct tk_perf_aux *a, struct tk_perf_session_opts *timing)
{
	const struct tk_perf_pt_info *pt = &a->pt;

	if (!timing->mtc_freq && pt->nfields > 11 && pt->mtc_freq_bits)
		timing->mtc_freq = (uint32_t)((a->pt_config & pt->mtc_freq_bits) >>
				   __builtin_ctzll(pt->mtc_freq_bits));
	if (!timing->nom_freq && pt->nfields > 15)
		timing->nom_freq = pt->max_nonturbo_ratio;
	if (!timing->cpuid_15_eax && !timing->cpuid_15_ebx && pt->nfields > 13) {
		timing->cpuid_15_eax = pt->tsc_ctc_d;
		timing->cpuid_15_ebx = pt->tsc_ctc_n;
	}
}

static int by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Each queue's track is its CPU (per-CPU buffers) or thread, as the user knows them
 * (`profile --threads` rows, folded stacks), unless two queues would share one: then
 * their places in the file. */
static void number_tracks(struct tk_perf_session *x)
{
	int cpus = x->aux.pt.per_cpu_mmaps != 0;
	uint32_t *ids = malloc((x->n ? x->n : 1) * sizeof(*ids));
	size_t k = 0;

	x->track_label = "queue";
	for (size_t i = 0; ids && i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];

		if (queue_kept(x, q))
			ids[k++] = cpus ? q->cpu : q->tid;
	}
	if (!ids || k != x->n)
		goto out;
	qsort(ids, k, sizeof(*ids), by_u32);
	for (size_t i = 0; i < k; i++)
		if (ids[i] == UINT32_MAX || (i && ids[i] == ids[i - 1]))
			goto out;
	k = 0;
	for (size_t i = 0; i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];

		if (queue_kept(x, q))
			x->s[k++].track = cpus ? q->cpu : q->tid;
	}
	x->track_label = cpus ? "cpu" : "thread";
out:
	free(ids);
}

/* perf record --kcore keeps the kernel's code as it ran (after boot-time patching, which
 * makes vmlinux's differ) in DIR/kcore_dir: kcore, an ELF core file at the run-time
 * addresses, and kallsyms for the names. FILE is what the user named (DIR for these). */
int tk_perf_parts_open(struct tk_perf_session *x, const char *file)
{
	struct stat st;

	if (stat(file, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	for (size_t k = 0;; k++) {
		char path[4096];
		struct tk_input *in = NULL;
		const uint8_t *data;
		size_t len;
		int rc;

		snprintf(path, sizeof path, "%s/data.%zu", file, k);
		if (access(path, F_OK) != 0)
			return 0;
		void *ins = realloc(x->part_in, (k + 1) * sizeof *x->part_in);
		if (ins)
			x->part_in = ins;
		void *parts = ins ? realloc(x->parts, (k + 1) * sizeof *x->parts) : NULL;
		if (parts)
			x->parts = parts;
		char *name = parts ? strdup(strrchr(path, '/') + 1) : NULL;
		if (!name) {
			ERROR(x, file, UINT64_MAX, "out of memory");
			tk_perf_parts_close(x);
			return -TK_E_NOMEM;
		}
		if ((rc = tk_input_open(&in, path, NULL)) < 0 || (rc = tk_input_map(in, &data, &len)) < 0) {
			ERROR(x, path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
			if (in)
				tk_input_free(in);
			free(name);
			tk_perf_parts_close(x);
			return rc;
		}
		x->part_in[k] = in;
		x->parts[k] = (struct tk_perf_part){ data, len, name };
		x->nparts = k + 1;
	}
}

void tk_perf_parts_close(struct tk_perf_session *x)
{
	for (size_t k = 0; k < x->nparts; k++) {
		tk_input_free(x->part_in[k]);
		free((char *)x->parts[k].name);
	}
	free(x->part_in);
	free(x->parts);
	x->part_in = NULL;
	x->parts = NULL;
	x->nparts = 0;
}

static void find_kcore(const char *file, struct tk_perf_session *x)
{
	char path[4096];
	struct stat st;

	if (stat(file, &st) != 0 || !S_ISDIR(st.st_mode))
		return;
	snprintf(path, sizeof path, "%s/kcore_dir/kcore", file);
	if (stat(path, &st) != 0 || !(x->kcore = strdup(path)))
		return;
	snprintf(path, sizeof path, "%s/kcore_dir/kallsyms", file);
	if (stat(path, &st) == 0)
		x->kallsyms = strdup(path);
}

/* The kernel's ELF file (vmlinux) given without a base goes where the session's kernel ran:
 * KASLR moves it by an offset chosen at boot, which perf's record of the kernel map gives
 * (where its reference symbol, _text, was). The argument becomes FILE:BASE, for the image
 * and the symbols alike. A vmlinux of another build is left out (its code would decode into
 * instructions that never ran); FILE:BASE given by hand is taken as it is. */
/* A number: decimal or 0x hex, nothing after it. */
static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-')
		return -1;
	*v = strtoull(s, &end, 0);
	return *end ? -1 : 0;
}

static void place_kernel(const char *file, struct tk_perf_session *x)
{
	const struct tk_perf_kernel *k = &x->aux.kernel;
	int found = 0;

	for (size_t i = 0; k->ref[0] && i < x->nelf; i++) {
		const char *colon = strrchr(x->elf[i], ':');
		uint64_t num, value, lowest;
		char path[4096];
		int has_base = colon && parse_u64(colon + 1, &num) == 0;

		snprintf(path, sizeof path, "%.*s", has_base ? (int)(colon - x->elf[i]) : 4095, x->elf[i]);
		if (tk_image_elf_symbol(path, k->ref, &value, &lowest) < 0)
			continue;   /* not a kernel */
		found = 1;
		if (has_base)
			continue;   /* placed by hand */
		if (k->build_id_len) {
			uint8_t id[20];
			int n = tk_image_elf_build_id(path, id, sizeof id);
			if (n != k->build_id_len || memcmp(id, k->build_id, (size_t)n) != 0) {
				if (!x->o.quiet)
					WARN(x, file, "%s is not the kernel the session ran (its build-id "
					     "differs from the recorded one): left out; give --elf %s:BASE "
					     "to use it anyway", path, path);
				free(x->elf[i]);
				memmove(&x->elf[i], &x->elf[i + 1], (x->nelf - i - 1) * sizeof *x->elf);
				x->nelf--;
				i--;
				continue;
			}
		}
		uint64_t base = lowest + (k->ref_addr - value);
		char *arg = malloc(strlen(path) + 24);
		if (!arg)
			continue;
		sprintf(arg, "%s:0x%llx", path, (unsigned long long)base);
		if (!x->o.quiet)
			ERROR(x, file, UINT64_MAX, "%s placed at 0x%llx, where the session's kernel ran "
			      "(%s at 0x%llx: KASLR offset 0x%llx)", x->elf[i], (unsigned long long)base,
			      k->ref, (unsigned long long)k->ref_addr,
			      (unsigned long long)(k->ref_addr - value));
		free(x->elf[i]);
		x->elf[i] = arg;
		x->kernel_elf = arg;
	}
	if (x->aux.pt_kernel && x->aux.kernel_modules && !x->kcore && !x->o.quiet)
		WARN(x, file, "%llu kernel modules were mapped: their code is not loaded (trace "
		     "inside them shows as gaps)", (unsigned long long)x->aux.kernel_modules);
	if (!found && !x->kcore && x->aux.pt_kernel && !x->o.quiet)
		WARN(x, file, "the session traced the kernel too, and no kernel image was given: "
		     "its code is missing (gaps); give --elf vmlinux (the running kernel's, with "
		     "symbols) to follow it");
}

static int add_files(struct tk_perf_session *x, struct tk_image *img);

/* ---- threads and processes (a timed session's sideband) ------------------------------- */

static struct tk_tsc_conv perf_conv(const struct tk_perf_session *x)
{
	const struct tk_perf_pt_info *pt = &x->aux.pt;

	if (x->perf && pt->nfields >= 5 && pt->cap_user_time_zero && pt->time_mult)
		return (struct tk_tsc_conv){ pt->time_zero, (uint32_t)pt->time_mult,
					     (uint16_t)pt->time_shift };
	return (struct tk_tsc_conv){ 0, 0, 0 };
}

/* A timed session (perf decodes it by time) that says which threads ran (switches) or
 * which process a thread is (COMM, FORK). */
int tk_perf_by_thread(const struct tk_perf_aux *a)
{
	const struct tk_perf_pt_info *pt = &a->pt;

	return pt->nfields >= 5 && pt->cap_user_time_zero && pt->time_mult &&
	       (a->nswitches || a->ntasks);
}

static int split_wanted(const struct tk_perf_session *x)
{
	return x->o.threads && x->perf && tk_perf_by_thread(&x->aux);
}

/* The process of thread TID (its last COMM or FORK record), UINT32_MAX if none. */
static uint32_t pid_of(const struct tk_perf_aux *a, uint32_t tid)
{
	for (size_t i = a->ntasks; i-- > 0;)
		if (a->tasks[i].tid == tid && a->tasks[i].kind != TK_PERF_EXIT)
			return a->tasks[i].pid;
	return UINT32_MAX;
}

/* How many times process PID exec'd up to TIME; *FROM: when the last of those (0: none),
 * *UNTIL (if not NULL): when the next one (UINT64_MAX: none). */
static uint32_t epoch_of(const struct tk_perf_aux *a, uint32_t pid, uint64_t time, uint64_t *from,
			 uint64_t *until)
{
	uint32_t e = 0;

	*from = 0;
	if (until)
		*until = UINT64_MAX;
	for (size_t i = 0; i < a->ntasks; i++) {
		const struct tk_perf_task *t = &a->tasks[i];
		if (t->kind != TK_PERF_EXEC || t->pid != pid || t->tid != pid)
			continue;
		if (t->time <= time) {
			e++;
			*from = t->time;
		} else if (until && t->time < *until) {
			*until = t->time;
		}
	}
	return e;
}

/* The mappings process PID had from FROM (its exec; 0: since it began) up to TO: those it
 * inherited at its fork if it had not exec'd since (a parent's at the fork, DEPTH bounds
 * a chain of them in a hostile file), then its own. Appended to OUT (N so far). */
static size_t proc_maps(const struct tk_perf_aux *a, uint32_t pid, uint64_t from, uint64_t to,
			const struct tk_perf_mmap **out, size_t n, int depth)
{
	for (size_t i = 0; !from && depth < 16 && i < a->ntasks; i++) {
		const struct tk_perf_task *t = &a->tasks[i];
		uint64_t pfrom;

		if (t->kind == TK_PERF_FORK && t->pid == pid && t->tid == pid && t->ppid != pid) {
			epoch_of(a, t->ppid, t->time, &pfrom, NULL);
			n = proc_maps(a, t->ppid, pfrom, t->time, out, n, depth + 1);
			break;
		}
	}
	for (size_t i = 0; i < a->nmmaps && n < 4 * a->nmmaps; i++) {
		const struct tk_perf_mmap *m = &a->mmaps[i];
		if (m->pid == pid && m->time >= from && m->time <= to)
			out[n++] = m;
	}
	return n;
}

/* The image of process PID after EPOCH execs (made once), NULL if out of memory. */
static struct tk_image *proc_image(const char *file, struct tk_perf_session *x, uint32_t pid,
				   uint64_t time)
{
	const struct tk_perf_aux *a = &x->aux;
	uint64_t from, to = UINT64_MAX;
	uint32_t epoch = epoch_of(a, pid, time, &from, NULL);
	int rc;

	for (size_t i = 0; i < x->nprocs; i++)
		if (x->procs[i].pid == pid && x->procs[i].epoch == epoch)
			return x->procs[i].img;
	/* a bound on the images (each maps its files): beyond it, the session's */
	if (x->nprocs == 1024) {
		if (!x->o.quiet && !x->procs_capped++)
			WARN(x, file, "more than 1024 processes (or execs): the others' trace is "
			     "decoded against one image of all mappings");
		return x->img;
	}
	/* up to its next exec */
	for (size_t i = 0; i < a->ntasks; i++)
		if (a->tasks[i].kind == TK_PERF_EXEC && a->tasks[i].pid == pid &&
		    a->tasks[i].tid == pid && a->tasks[i].time > from && a->tasks[i].time - 1 < to)
			to = a->tasks[i].time - 1;
	void *p = realloc(x->procs, (x->nprocs + 1) * sizeof *x->procs);
	const struct tk_perf_mmap **maps = malloc((4 * a->nmmaps + 1) * sizeof *maps);
	if (p)
		x->procs = p;
	if (!p || !maps) {
		free(maps);
		return NULL;
	}
	struct tk_perf_proc *pr = &x->procs[x->nprocs];
	memset(pr, 0, sizeof *pr);
	pr->pid = pid;
	pr->epoch = epoch;
	for (size_t i = 0; i < a->ntasks; i++)
		if ((a->tasks[i].kind == TK_PERF_COMM || a->tasks[i].kind == TK_PERF_EXEC) &&
		    a->tasks[i].pid == pid && a->tasks[i].time <= time)
			memcpy(pr->comm, a->tasks[i].comm, sizeof pr->comm);
	size_t n = proc_maps(a, pid, from, to, maps, 0, 0);
	/* the files' problems were named for the session's image: not again */
	struct tk_perf_session_opts o = x->o;
	x->o.quiet = 1;
	if (!(pr->img = tk_image_new(&rc)) || add_mappings(file, x, pr->img, maps, n, 1, pr) < 0) {
		x->o = o;
		tk_image_free(pr->img);
		free(pr->mods);
		free(maps);
		return NULL;
	}
	x->o = o;
	if (!o.quiet) {
		/* other code mapped over code in one process: that one image cannot hold both */
		warn_overlaps(maps, n, file, o.msg, o.ctx);
	}
	free(maps);
	if (add_files(x, pr->img) < 0) {
		tk_image_free(pr->img);
		free(pr->mods);
		return NULL;
	}
	x->nprocs++;
	return pr->img;
}

/* The TSC of the PSB+ at PSB in the trace (perf's clock), else TIME unchanged. */
static uint64_t psb_time(struct tk_ipt_pkt_decoder *dec, uint64_t psb, const struct tk_tsc_conv *c,
			 uint64_t time)
{
	struct tk_ipt_packet pkt;

	if (tk_ipt_pkt_sync_set(dec, psb) < 0)
		return time;
	for (int k = 0; k < 32 && tk_ipt_pkt_next(dec, &pkt) > 0; k++) {
		if (pkt.kind == TK_IPT_PKT_TSC)
			return tk_tsc_conv_ns(c, pkt.tsc.tsc);
		if (pkt.kind == TK_IPT_PKT_PSBEND)
			break;
	}
	return time;
}

struct seg {
	size_t queue;
	uint64_t lo, hi;
	uint32_t pid, tid;
	uint64_t time;            /* at its first PSB */
};

static int by_time(const void *a, const void *b)
{
	const struct tk_perf_switch *x = *(const struct tk_perf_switch *const *)a;
	const struct tk_perf_switch *y = *(const struct tk_perf_switch *const *)b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Queue Q cut at the PSBs where the thread that runs it changes (per CPU: the switches on
 * its CPU up to the PSB's time; per thread: its process's execs), appended to *SEGS. */
static int queue_segments(const struct tk_perf_session *x, size_t qi, struct seg **segs,
			  size_t *n, size_t *cap)
{
	const struct tk_perf_aux *a = &x->aux;
	const struct tk_perf_queue *q = &a->queues[qi];
	struct tk_tsc_conv c = perf_conv(x);
	int per_cpu = a->pt.per_cpu_mmaps && q->cpu != UINT32_MAX;
	const struct tk_perf_switch **sw = malloc((a->nswitches + 1) * sizeof *sw);
	size_t nsw = 0, k = 0;
	int rc = 0;
	struct tk_ipt_pkt_decoder *dec = tk_ipt_pkt_decoder_new(q->data, q->len, NULL, &rc);

	if (!sw || !dec) {
		free(sw);
		tk_ipt_pkt_decoder_free(dec);
		return -TK_E_NOMEM;
	}
	for (size_t i = 0; per_cpu && i < a->nswitches; i++)
		if (a->switches[i].cpu == q->cpu)
			sw[nsw++] = &a->switches[i];
	qsort(sw, nsw, sizeof *sw, by_time);
	uint32_t pid = q->tid == UINT32_MAX ? UINT32_MAX : pid_of(a, q->tid), tid = q->tid;
	uint64_t time = 0, psb, e = UINT64_MAX, epoch = 0, d, until = 0;
	uint32_t epoch_pid = UINT32_MAX;
	size_t first = *n;
	for (uint64_t off = 0; tk_ipt_psb_next(q->data, q->len, off, &psb) == 0; off = psb + 1) {
		time = psb_time(dec, psb, &c, time);
		for (; k < nsw && sw[k]->time <= time; k++) {
			pid = sw[k]->pid;
			tid = sw[k]->tid;
		}
		/* (the same until the process changes or execs: not searched at each PSB) */
		if (pid != epoch_pid || time >= until) {
			epoch = pid == UINT32_MAX ? 0 : epoch_of(a, pid, time, &d, &until);
			epoch_pid = pid;
		}
		if (*n > first && (*segs)[*n - 1].pid == pid && (*segs)[*n - 1].tid == tid &&
		    epoch == e)
			continue;
		if (*n == *cap) {
			size_t nc = *cap ? 2 * *cap : 16;
			void *p = realloc(*segs, nc * sizeof **segs);
			if (!p) {
				rc = -TK_E_NOMEM;
				break;
			}
			*segs = p;
			*cap = nc;
		}
		/* the first piece from the queue's start (the decoder syncs at its PSB) */
		uint64_t lo = *n > first ? psb : 0;
		if (*n > first)
			(*segs)[*n - 1].hi = psb;
		(*segs)[*n] = (struct seg){ qi, lo, q->len, pid, tid, time };
		++*n;
		e = epoch;
	}
	if (*n == first && q->len) {   /* no PSB: one piece, as the queue */
		if (*n == *cap) {
			void *p = realloc(*segs, (*cap + 1) * sizeof **segs);
			if (!p)
				rc = -TK_E_NOMEM;
			else
				*segs = p, ++*cap;
		}
		if (rc == 0)
			(*segs)[(*n)++] = (struct seg){ qi, 0, q->len, pid, tid, 0 };
	}
	free(sw);
	tk_ipt_pkt_decoder_free(dec);
	return rc;
}

static int u32_in(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

int tk_perf_thread_kept(const struct tk_perf_aux *a, const struct tk_thread_filter *f,
			uint32_t pid, uint32_t tid, uint64_t time)
{
	if (!tk_thread_filter_threads(f))
		return 1;
	if ((f->npids && !u32_in(f->pids, f->npids, pid)) ||
	    (f->ntids && !u32_in(f->tids, f->ntids, tid)))
		return 0;
	if (!f->comm)
		return 1;
	/* (a thread without a COMM of its own has its process's name) */
	const char *comm = NULL, *pcomm = "";
	for (size_t i = 0; i < a->ntasks; i++)
		if ((a->tasks[i].kind == TK_PERF_COMM || a->tasks[i].kind == TK_PERF_EXEC) &&
		    a->tasks[i].pid == pid && a->tasks[i].time <= time) {
			if (a->tasks[i].tid == tid)
				comm = a->tasks[i].comm;
			else if (a->tasks[i].tid == pid)
				pcomm = a->tasks[i].comm;
		}
	if (!comm)
		comm = pcomm;
	return strncmp(comm, f->comm, sizeof a->tasks[0].comm) == 0;
}

/* Each queue's streams by thread, each with its process's image. */
static int split_threads(const char *file, struct tk_perf_session *x)
{
	const struct tk_perf_aux *a = &x->aux;
	struct seg *segs = NULL;
	size_t n = 0, cap = 0, nb = 0;
	int rc = 0;

	for (size_t i = 0; i < a->nqueues && rc == 0; i++)
		if (queue_kept(x, &a->queues[i]))
			rc = queue_segments(x, i, &segs, &n, &cap);
	/* the threads asked for: the others' pieces are not decoded at all */
	size_t kept = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (tk_perf_thread_kept(a, x->o.filter, segs[i].pid, segs[i].tid, segs[i].time))
			segs[kept++] = segs[i];
	n = kept;
	for (size_t i = 0; i < a->nqueues; i++)
		nb += a->queues[i].nbreaks;
	struct tk_perf_stream *s = rc ? NULL : calloc(n ? n : 1, sizeof *s);
	if (!s || !(x->seg_breaks = malloc((nb ? nb : 1) * sizeof *x->seg_breaks))) {
		free(s);
		free(segs);
		return -TK_E_NOMEM;
	}
	nb = 0;
	for (size_t i = 0; i < n; i++) {
		const struct seg *g = &segs[i];
		const struct tk_perf_queue *q = &a->queues[g->queue];
		struct tk_perf_stream *t = &s[i];

		t->data = q->data + g->lo;
		t->len = (size_t)(g->hi - g->lo);
		t->pid = g->pid;
		t->tid = g->tid;
		t->track = g->tid == UINT32_MAX ? 0 : g->tid;
		t->break_reason = a->pt.snapshot_mode ? TK_GAP_WRAP : TK_GAP_OVERFLOW;
		t->breaks = x->seg_breaks + nb;
		for (size_t k = 0; k < q->nbreaks; k++)
			if (q->breaks[k] > g->lo && q->breaks[k] < g->hi)
				x->seg_breaks[nb + t->nbreaks++] = q->breaks[k] - g->lo;
		nb += t->nbreaks;
		if (a->pt.per_cpu_mmaps && q->cpu != UINT32_MAX)
			snprintf(t->name, sizeof t->name, "cpu %u", q->cpu);
		else
			snprintf(t->name, sizeof t->name, "thread %u", q->tid);
		if (g->pid != UINT32_MAX && a->pt.per_cpu_mmaps && q->cpu != UINT32_MAX)
			snprintf(t->label, sizeof t->label, "%s [cpu %u, pid %u, tid %u]", file,
				 q->cpu, g->pid, g->tid);
		else
			snprintf(t->label, sizeof t->label, "%s [%s]", file, t->name);
		if (g->pid != UINT32_MAX && !(t->img = proc_image(file, x, g->pid, g->time))) {
			rc = -TK_E_NOMEM;
			break;
		}
	}
	free(segs);
	if (rc < 0) {
		free(s);
		return rc;
	}
	free(x->s);
	x->s = s;
	x->n = n;
	x->track_label = "thread";
	return 0;
}

static int open_perf(const char *file, const uint8_t *data, size_t len, struct tk_perf_session *x)
{
	struct diag d = { x, file };
	int rc = tk_perf_parts_open(x, file);

	if (rc < 0)
		return rc;
	rc = tk_perf_aux_read_parts(data, len, x->parts, x->nparts, &x->aux, perf_diag, &d, 0);
	if (rc < 0) {
		ERROR(x, file, UINT64_MAX, "%s", rc == -TK_E_UNSUPPORTED ?
		      "a perf.data file written to a pipe or on a big-endian machine: not "
		      "supported (record to a file)" : tk_strerror(rc));
		return rc;
	}
	x->perf = 1;
	x->skipped = rc > 0;
	if (x->shown > 20 && !x->o.quiet)
		WARN(x, file, "%u more problems in the file", x->shown - 20);
	if (x->aux.aux_type != TK_PERF_AUX_INTEL_PT) {
		if (x->aux.aux_type)
			ERROR(x, file, UINT64_MAX, "its trace is not Intel PT (perf auxtrace type %u)",
			      x->aux.aux_type);
		else
			ERROR(x, file, UINT64_MAX, "no Intel PT in this perf.data (record with perf "
			      "record -e intel_pt//)");
		return -TK_E_UNSUPPORTED;
	}
	if (x->aux.aux_truncated && !x->o.quiet)
		WARN(x, file, "the kernel lost trace %llu times (its buffer was full: "
		     "PERF_RECORD_AUX truncated); decoding resyncs after each loss",
		     (unsigned long long)x->aux.aux_truncated);
	if (x->o.filter && x->o.filter->ncpus && !x->aux.pt.per_cpu_mmaps) {
		ERROR(x, file, UINT64_MAX, "--cpu LIST: this perf.data has a trace per thread "
		      "(perf record --per-thread), not per CPU");
		return -TK_E_UNSUPPORTED;
	}
	if (!(x->s = calloc(x->aux.nqueues ? x->aux.nqueues : 1, sizeof(*x->s))))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];
		struct tk_perf_stream *s = &x->s[x->n];

		if (!queue_kept(x, q))
			continue;
		s->data = q->data;
		s->len = q->len;
		s->track = (uint32_t)x->n;
		if (q->cpu != UINT32_MAX && x->aux.pt.per_cpu_mmaps)
			snprintf(s->name, sizeof s->name, "cpu %u", q->cpu);
		else
			snprintf(s->name, sizeof s->name, "thread %u", q->tid);
		snprintf(s->label, sizeof s->label, "%s [%s]", file, s->name);
		s->breaks = q->breaks;
		s->nbreaks = q->nbreaks;
		s->break_reason = x->aux.pt.snapshot_mode ? TK_GAP_WRAP : TK_GAP_OVERFLOW;
		x->n++;
	}
	number_tracks(x);
	if (!x->n && !x->o.quiet)
		warn_nothing_kept(x, file);
	tk_perf_timing(&x->aux, &x->o);
	if (!x->o.code)
		return 0;
	const struct tk_perf_mmap **all = malloc((x->aux.nmmaps ? x->aux.nmmaps : 1) * sizeof *all);
	if (!all)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < x->aux.nmmaps; i++)
		all[i] = &x->aux.mmaps[i];
	/* split by thread, each process's code is apart: no overlap warning for all */
	x->split = split_wanted(x);
	int loaded = add_mappings(file, x, x->img, all, x->aux.nmmaps, x->split, NULL);
	free(all);
	if (loaded < 0)
		return loaded;
	find_kcore(file, x);
	place_kernel(file, x);
	if (!loaded && !x->kcore && !x->nelf && !x->o.nraw && !x->o.quiet)
		WARN(x, file, "no mapped file could be loaded and no --elf or --raw given: no code "
		     "to follow");
	return 0;
}

/* The user's files go over the mapped ones (later additions win), and the kernel's code
 * as it ran over a vmlinux (whose symbols and lines still serve). */
static int add_files(struct tk_perf_session *x, struct tk_image *img)
{
	int rc;

	for (size_t i = 0; i < x->nelf; i++)
		if (tk_image_add_elf_arg(img, x->elf[i]) < 0) {
			ERROR(x, x->elf[i], UINT64_MAX, "cannot load ELF file into the image");
			return -TK_E_IO;
		}
	for (size_t i = 0; i < x->o.nraw; i++)
		if (tk_image_add_raw_arg(img, x->o.raw[i]) < 0) {
			ERROR(x, x->o.raw[i], UINT64_MAX, "cannot load raw file (want FILE:ADDR)");
			return -TK_E_IO;
		}
	if (x->kcore && (rc = tk_image_add_elf(img, x->kcore, 0, 0)) < 0) {
		ERROR(x, x->kcore, UINT64_MAX, "cannot load the kernel's code: %s", tk_strerror(rc));
		return rc;
	}
	return 0;
}

static int session_open(struct tk_perf_session *x, const char *file, const uint8_t *data,
			size_t len, int perf)
{
	int rc;

	if (!(x->img = tk_image_new(&rc)))
		return rc;
	if (x->o.nelf && !(x->elf = calloc(x->o.nelf, sizeof *x->elf)))
		return -TK_E_NOMEM;
	for (; x->nelf < x->o.nelf; x->nelf++)
		if (!(x->elf[x->nelf] = strdup(x->o.elf[x->nelf])))
			return -TK_E_NOMEM;
	x->o.elf = NULL;   /* the session's own list from now on */
	if (perf) {
		if ((rc = open_perf(file, data, len, x)) < 0)
			return rc;
	} else {
		if (x->o.code && !x->nelf && !x->o.nraw && !x->o.quiet)
			WARN(x, file, "no --elf or --raw given: no code to follow");
		if (!(x->s = calloc(1, sizeof(*x->s))))
			return -TK_E_NOMEM;
		x->s[0].data = data;
		x->s[0].len = len;
		snprintf(x->s[0].label, sizeof x->s[0].label, "%s", file);
		x->n = 1;
		x->track_label = "thread";
	}
	if (x->o.code && (rc = add_files(x, x->img)) < 0)
		return rc;
	if (x->split)
		return split_threads(file, x);
	if (!perf && x->o.filter && x->o.filter->ncpus) {
		ERROR(x, file, UINT64_MAX, "--cpu LIST: a raw trace has no CPUs (give FAMILY/MODEL "
		      "for its processor)");
		return -TK_E_UNSUPPORTED;
	}
	if (tk_thread_filter_threads(x->o.filter)) {
		ERROR(x, file, UINT64_MAX, "--pid, --tid, --comm: %s", perf ?
		      "this perf.data does not say which thread ran when (a timed session with "
		      "its switch, comm and fork records)" : "a raw trace has no threads");
		return -TK_E_UNSUPPORTED;
	}
	return 0;
}

int tk_perf_session_open(struct tk_perf_session *x, const char *path, const uint8_t *data,
			 size_t len, int perf, const struct tk_perf_session_opts *o)
{
	int rc;

	memset(x, 0, sizeof(*x));
	if (!o || o->sz < sizeof *o)
		return -TK_E_INVAL;
	x->o = *o;
	x->data = data;
	x->len = len;
	if (o->cpu && tk_ipt_cpu_parse(o->cpu, &x->errata) < 0) {
		ERROR(x, path, UINT64_MAX, "--cpu %s: not FAMILY/MODEL[/STEPPING], auto or none",
		      o->cpu);
		return -TK_E_INVAL;
	}
	if ((rc = session_open(x, path, data, len, perf)) < 0) {
		tk_perf_session_close(x);
		return rc;
	}
	/* the recorded processor's errata, unless --cpu named one (a CPUID string of another
	 * form: none) */
	if (!o->cpu && x->perf && x->aux.cpuid[0] && tk_ipt_cpuid_errata(x->aux.cpuid, &x->errata) < 0)
		x->errata = 0;
	return rc;
}

void tk_perf_session_stream_header(struct tk_buf *out, const struct tk_perf_session *x, size_t i)
{
	if (x->perf)
		tk_buf_printf(out, "[%s: %zu bytes of trace]\n", x->s[i].label, x->s[i].len);
}

void tk_perf_session_close(struct tk_perf_session *x)
{
	tk_image_free(x->img);
	for (size_t i = 0; i < x->nprocs; i++) {
		tk_image_free(x->procs[i].img);
		free(x->procs[i].mods);
	}
	free(x->procs);
	free(x->seg_breaks);
	if (x->perf)
		tk_perf_aux_free(&x->aux);   /* its queues may point into the parts */
	tk_perf_parts_close(x);
	free(x->s);
	free(x->mods);
	free(x->kallsyms);
	free(x->kcore);
	for (size_t i = 0; i < x->nelf; i++)
		free(x->elf[i]);
	free(x->elf);
	memset(x, 0, sizeof(*x));
}

void tk_perf_session_flow_opts(const struct tk_perf_session *x, size_t i,
			       struct tk_ipt_flow_opts *fo)
{
	const struct tk_perf_stream *s = &x->s[i];

	*fo = (struct tk_ipt_flow_opts){
		.sz = sizeof(struct tk_ipt_flow_opts), .image = s->img ? s->img : x->img, .nthreads = x->o.nthreads,
		.chunk_bytes = x->o.chunk_bytes, .mtc_freq = x->o.mtc_freq,
		.nom_freq = x->o.nom_freq, .cpuid_15_eax = x->o.cpuid_15_eax,
		.cpuid_15_ebx = x->o.cpuid_15_ebx, .track = s->track, .breaks = s->breaks,
		.nbreaks = s->nbreaks, .break_reason = s->break_reason, .errata = x->errata,
		.addr_filter = x->o.addr_filter,
	};
	/* a stream read in place (a raw trace; perf.data's AUX data in one record) */
	if (x->o.in && x->data && s->data >= x->data && s->len <= x->len &&
	    (size_t)(s->data - x->data) <= x->len - s->len) {
		fo->in = x->o.in;
		fo->in_offset = (uint64_t)(s->data - x->data);
	}
	/* a timed session (perf decodes it by time: cap_user_time_zero): times on perf's
	 * clock, as perf script gives them */
	const struct tk_perf_pt_info *pt = &x->aux.pt;
	if (x->perf && pt->nfields >= 5 && pt->cap_user_time_zero && pt->time_mult)
		fo->time_conv = (struct tk_tsc_conv){ pt->time_zero, (uint32_t)pt->time_mult,
						      (uint16_t)pt->time_shift };
}

struct tk_trace_clock tk_perf_session_clock(const struct tk_perf_session *x)
{
	const struct tk_perf_pt_info *pt = &x->aux.pt;
	struct tk_trace_clock c = { 0 };

	if (x->o.has_tsc_hz) {   /* the user's word wins */
		c.ticks_per_second = x->o.tsc_hz;
		return c;
	}
	/* perf's conversion of TSC ticks to its clock: ns = ticks * time_mult >> time_shift */
	if (x->perf && pt->nfields >= 3 && pt->time_mult && pt->time_shift < 64)
		c.ticks_per_second = (uint64_t)(((unsigned __int128)1000000000u << pt->time_shift) /
						pt->time_mult);
	return c;
}
