/* Intel PT in the CLI: the streams to decode and their memory image, from a raw packet
 * file (one stream; --elf/--raw) or from a perf.data file (one stream per trace queue; the
 * code its mappings name, then --elf/--raw over them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

void cli_perf_diag(void *ctx, uint64_t offset, const char *msg)
{
	struct cli_perf_diag *d = ctx;

	if (d->shown++ < 20 && !d->quiet)
		cli_error(d->file, offset, "%s", msg);
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
void cli_perf_warn_overlaps(const struct cli_opts *o, const char *file, const struct tk_perf_aux *a)
{
	const struct tk_perf_mmap **m = malloc((a->nmmaps ? a->nmmaps : 1) * sizeof(*m));
	size_t n = 0, clashes = 0;
	const struct tk_perf_mmap *first[2] = { NULL, NULL };

	if (!m || o->quiet) {
		free(m);
		return;
	}
	for (size_t i = 0; i < a->nmmaps; i++)
		if (a->mmaps[i].path[0] == '/' && a->mmaps[i].len)
			m[n++] = &a->mmaps[i];
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
		cli_warn(file, UINT64_MAX, "%zu code mappings overlap others of different code, "
			 "first %s (pid %u) and %s (pid %u) at 0x%llx: all trace is decoded "
			 "against one image, which holds only one of them there: trace of the "
			 "other would follow the wrong instructions", clashes,
			 first[0]->path, first[0]->pid, first[1]->path, first[1]->pid,
			 (unsigned long long)first[1]->addr);
	free(m);
}

/* The code of the session's mappings; a file that cannot be read is named (five at most). */
static int add_mappings(const struct cli_opts *o, const char *file, struct cli_ipt *x)
{
	const struct tk_perf_aux *a = &x->aux;
	unsigned missing = 0;

	if (a->nmmaps && !(x->mods = calloc(a->nmmaps, sizeof(*x->mods))))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < a->nmmaps; i++) {
		const struct tk_perf_mmap *m = &a->mmaps[i];
		uint64_t bias, base;
		int seen = 0, rc;

		if (!strcmp(m->path, "[vdso]")) {
			/* the kernel's code: this machine's, if the session ran on this kernel
			 * (the same build-id), else missing (its calls show as gaps) */
			if (m->build_id_len &&
			    tk_image_add_vdso(x->img, m->addr, m->build_id, m->build_id_len) == 0)
				x->vdso = 1;
			else if (!o->quiet)
				cli_warn(file, UINT64_MAX, "the [vdso] at 0x%llx %s: its code is missing "
					 "(calls into it show as gaps)", (unsigned long long)m->addr,
					 m->build_id_len ? "is not this kernel's (its build-id differs)"
							 : "has no recorded build-id");
			continue;
		}
		if ((rc = tk_image_elf_mapped(m->path, m->addr, m->pgoff, &bias, &base)) == 0)
			for (size_t j = 0; j < x->nmods && !seen; j++)
				seen = x->mods[j].bias == bias && !strcmp(x->mods[j].path, m->path);
		if (seen)
			continue;   /* another mapping of a file already loaded there */
		if (rc == 0 && m->build_id_len) {
			/* the file here must be the one that ran: other code would decode into
			 * other instructions, which is worse than a gap */
			uint8_t id[20];
			int n = tk_image_elf_build_id(m->path, id, sizeof id);
			if (n != m->build_id_len || memcmp(id, m->build_id, (size_t)n) != 0) {
				if (missing++ < 5 && !o->quiet)
					cli_warn(file, UINT64_MAX, "%s is not the file the session mapped "
						 "(its build-id differs from the recorded one): its code is "
						 "left out of the image", m->path);
				continue;
			}
		}
		if (rc == 0 && (rc = tk_image_add_elf(x->img, m->path, base, 1)) == 0) {
			x->mods[x->nmods].path = m->path;
			x->mods[x->nmods].base = base;
			x->mods[x->nmods++].bias = bias;
			continue;
		}
		if (missing++ < 5 && !o->quiet)
			cli_warn(file, UINT64_MAX, "cannot load %s (mapped at 0x%llx): %s; its code is "
				 "missing from the image", m->path, (unsigned long long)m->addr,
				 tk_strerror(rc));
	}
	if (missing > 5 && !o->quiet)
		cli_warn(file, UINT64_MAX, "%u more mapped files cannot be loaded", missing - 5);
	cli_perf_warn_overlaps(o, file, a);
	return (int)x->nmods + x->vdso;
}

/* The gaps on stderr: TOTAL for a raw stream, each queue's own for perf.data (its offsets
 * are in that queue's trace, so the queue is named). */
static int report_gaps(const char *file, const struct cli_ipt *x, const struct tk_gap_stats *total)
{
	int status = 0;

	if (!x->perf)
		return cli_report_gaps(file, total, "gap");
	for (size_t i = 0; i < x->n; i++) {
		int rc = cli_report_gaps(x->s[i].label, &x->s[i].gaps, "gap");

		status = rc > status ? rc : status;
	}
	return status;
}

/* Decoding is over: the summary of what was skipped, and the exit status. */
int cli_ipt_report(const struct cli_opts *o, const char *file, const struct cli_ipt *x,
		   const struct tk_ipt_flow_stats *st)
{
	int status = x->skipped ? EXIT_SKIPPED : EXIT_CLEAN;
	uint64_t left_out = 0, apart = 0;

	for (size_t i = 0; x->perf && i < x->aux.nqueues; i++) {
		left_out += x->aux.queues[i].hole_bytes;
		apart += x->aux.queues[i].holes;
	}
	if (left_out && !o->quiet && x->aux.pt.snapshot_mode)
		fprintf(stderr, "tracekit: %s: snapshot mode: %llu snapshots do not overlap the one "
			"before (the trace between them was not kept); %llu bytes before their "
			"first PSBs left out\n", file, (unsigned long long)apart,
			(unsigned long long)left_out);
	else if (left_out && !o->quiet)
		fprintf(stderr, "tracekit: %s: %llu bytes of trace after losses left out (up to the "
			"next PSB)\n", file, (unsigned long long)left_out);
	if (st->gaps.count) {
		if (!o->quiet)
			fprintf(stderr, "tracekit: %s: %llu instructions decoded, %llu bytes skipped\n",
				file, (unsigned long long)st->insns,
				(unsigned long long)st->gaps.bytes_skipped);
		int rc = report_gaps(file, x, &st->gaps);
		if (rc > status)
			status = rc;
	}
	return status;
}

int cli_ipt_add_symbols(const struct cli_ipt *x, struct tk_sym *sym)
{
	int rc;

	for (size_t i = 0; i < x->nmods; i++)
		if ((rc = tk_sym_add_elf(sym, x->mods[i].path, x->mods[i].bias)) < 0) {
			cli_error(x->mods[i].path, UINT64_MAX, "cannot load symbols: %s", tk_strerror(rc));
			return rc;
		}
	if (x->kallsyms && (rc = tk_sym_add_kallsyms(sym, x->kallsyms, "[kernel.kallsyms]")) < 0)
		cli_warn(x->kallsyms, UINT64_MAX, "no kernel symbols from it (%s): kernel functions "
			 "are named by address", tk_strerror(rc));
	return 0;
}

void cli_ipt_perf_timing(const struct tk_perf_aux *a, struct cli_opts *timing)
{
	const struct tk_perf_pt_info *pt = &a->pt;

	if (!timing->mtc_freq && pt->nfields > 11 && pt->mtc_freq_bits)
		timing->mtc_freq = (a->pt_config & pt->mtc_freq_bits) >>
				   __builtin_ctzll(pt->mtc_freq_bits);
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
static void number_tracks(struct cli_ipt *x)
{
	int cpus = x->aux.pt.per_cpu_mmaps != 0;
	uint32_t *ids = malloc((x->n ? x->n : 1) * sizeof(*ids));
	size_t k = 0;

	x->track_label = "queue";
	for (size_t i = 0; ids && i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];

		if (q->len)
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

		if (q->len)
			x->s[k++].track = cpus ? q->cpu : q->tid;
	}
	x->track_label = cpus ? "cpu" : "thread";
out:
	free(ids);
}

/* perf record --kcore keeps the kernel's code as it ran (after boot-time patching, which
 * makes vmlinux's differ) in DIR/kcore_dir: kcore, an ELF core file at the run-time
 * addresses, and kallsyms for the names. FILE is what the user named (DIR for these). */
int cli_perf_parts_open(const char *file, struct cli_perf_parts *pp)
{
	struct stat st;

	memset(pp, 0, sizeof *pp);
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
		void *ins = realloc(pp->in, (k + 1) * sizeof *pp->in);
		if (ins)
			pp->in = ins;
		void *parts = ins ? realloc(pp->p, (k + 1) * sizeof *pp->p) : NULL;
		if (parts)
			pp->p = parts;
		char *name = parts ? strdup(strrchr(path, '/') + 1) : NULL;
		if (!name) {
			cli_error(file, UINT64_MAX, "out of memory");
			cli_perf_parts_close(pp);
			return EXIT_INPUT;
		}
		if ((rc = tk_input_open(&in, path, NULL)) < 0 || (rc = tk_input_map(in, &data, &len)) < 0) {
			cli_error(path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
			if (in)
				tk_input_free(in);
			free(name);
			cli_perf_parts_close(pp);
			return EXIT_INPUT;
		}
		pp->in[k] = in;
		pp->p[k] = (struct tk_perf_part){ data, len, name };
		pp->n = k + 1;
	}
}

void cli_perf_parts_close(struct cli_perf_parts *pp)
{
	for (size_t k = 0; k < pp->n; k++) {
		tk_input_free(pp->in[k]);
		free((char *)pp->p[k].name);
	}
	free(pp->in);
	free(pp->p);
	memset(pp, 0, sizeof *pp);
}

static void find_kcore(const char *file, struct cli_ipt *x)
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
static void place_kernel(struct cli_opts *o, const char *file, struct cli_ipt *x)
{
	const struct tk_perf_kernel *k = &x->aux.kernel;
	int found = 0;

	for (int i = 0; k->ref[0] && i < o->n_elf; i++) {
		const char *colon = strrchr(o->elf[i], ':');
		uint64_t num, value, lowest;
		char path[4096];
		int has_base = colon && cli_parse_u64(colon + 1, &num) == 0;

		snprintf(path, sizeof path, "%.*s", has_base ? (int)(colon - o->elf[i]) : 4095, o->elf[i]);
		if (tk_image_elf_symbol(path, k->ref, &value, &lowest) < 0)
			continue;   /* not a kernel */
		found = 1;
		if (has_base)
			continue;   /* placed by hand */
		if (k->build_id_len) {
			uint8_t id[20];
			int n = tk_image_elf_build_id(path, id, sizeof id);
			if (n != k->build_id_len || memcmp(id, k->build_id, (size_t)n) != 0) {
				if (!o->quiet)
					cli_warn(file, UINT64_MAX, "%s is not the kernel the session ran "
						 "(its build-id differs from the recorded one): left out; "
						 "give --elf %s:BASE to use it anyway", path, path);
				memmove(&o->elf[i], &o->elf[i + 1], (size_t)(o->n_elf - i - 1) * sizeof *o->elf);
				o->n_elf--;
				i--;
				continue;
			}
		}
		/* the options' lifetime: the process's (and at most one rewrite per argument) */
		static char placed[CLI_MAX_LIST][sizeof path + 20];
		uint64_t base = lowest + (k->ref_addr - value);
		char *arg = placed[i];
		snprintf(arg, sizeof placed[i], "%s:0x%llx", path, (unsigned long long)base);
		if (!o->quiet)
			cli_error(file, UINT64_MAX, "%s placed at 0x%llx, where the session's "
				 "kernel ran (%s at 0x%llx: KASLR offset 0x%llx)", o->elf[i],
				 (unsigned long long)base, k->ref, (unsigned long long)k->ref_addr,
				 (unsigned long long)(k->ref_addr - value));
		o->elf[i] = x->kernel_elf = arg;
	}
	if (x->aux.pt_kernel && x->aux.kernel_modules && !x->kcore && !o->quiet)
		cli_warn(file, UINT64_MAX, "%llu kernel modules were mapped: their code is not "
			 "loaded (trace inside them shows as gaps)",
			 (unsigned long long)x->aux.kernel_modules);
	if (!found && !x->kcore && x->aux.pt_kernel && !o->quiet)
		cli_warn(file, UINT64_MAX, "the session traced the kernel too, and no kernel "
			 "image was given: its code is missing (gaps); give --elf vmlinux (the "
			 "running kernel's, with symbols) to follow it");
}

static int open_perf(struct cli_opts *o, const char *file, const uint8_t *data, size_t len,
		     int code, struct cli_ipt *x)
{
	struct cli_perf_diag d = { file, o->quiet, 0 };
	int rc = cli_perf_parts_open(file, &x->parts);

	if (rc)
		return rc;
	rc = tk_perf_aux_read_parts(data, len, x->parts.p, x->parts.n, &x->aux, cli_perf_diag, &d, 0);

	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", rc == -TK_E_UNSUPPORTED ?
			  "a perf.data file written to a pipe or on a big-endian machine: not "
			  "supported (record to a file)" : tk_strerror(rc));
		return EXIT_INPUT;
	}
	x->perf = 1;
	x->skipped = rc > 0;
	if (d.shown > 20 && !o->quiet)
		cli_warn(file, UINT64_MAX, "%u more problems in the file", d.shown - 20);
	if (x->aux.aux_type != TK_PERF_AUX_INTEL_PT) {
		cli_error(file, UINT64_MAX, x->aux.aux_type ? "its trace is not Intel PT (perf "
			  "auxtrace type %u)" : "no Intel PT in this perf.data (record with perf "
			  "record -e intel_pt//)", x->aux.aux_type);
		return EXIT_INPUT;
	}
	if (x->aux.aux_truncated && !o->quiet)
		cli_warn(file, UINT64_MAX, "the kernel lost trace %llu times (its buffer was full: "
			 "PERF_RECORD_AUX truncated); decoding resyncs after each loss",
			 (unsigned long long)x->aux.aux_truncated);
	if (!(x->s = calloc(x->aux.nqueues ? x->aux.nqueues : 1, sizeof(*x->s))))
		return EXIT_INPUT;
	for (size_t i = 0; i < x->aux.nqueues; i++) {
		const struct tk_perf_queue *q = &x->aux.queues[i];
		struct cli_ipt_stream *s = &x->s[x->n];

		if (!q->len)
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
	if (!x->n && !o->quiet)
		cli_warn(file, UINT64_MAX, "no Intel PT data in this perf.data (%zu trace "
			 "queues, all empty)", x->aux.nqueues);
	cli_ipt_perf_timing(&x->aux, &x->timing);
	if (!code)
		return 0;
	int loaded = add_mappings(o, file, x);
	if (loaded < 0)
		return EXIT_INPUT;
	find_kcore(file, x);
	place_kernel(o, file, x);
	if (!loaded && !x->kcore && !o->n_elf && !o->n_raw && !o->quiet)
		cli_warn(file, UINT64_MAX, "no mapped file could be loaded and no --elf or --raw "
			 "given: no code to follow");
	return 0;
}

int cli_ipt_open(struct cli_opts *o, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, int code, struct cli_ipt *x)
{
	const uint8_t *data;
	size_t len;
	int rc;

	memset(x, 0, sizeof(*x));
	x->timing = *o;
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (!(x->img = tk_image_new(&rc)))
		return EXIT_INPUT;
	if (fi->id == TK_FMT_PERF) {
		if ((rc = open_perf(o, file, data, len, code, x))) {
			cli_ipt_close(x);
			return rc;
		}
	} else {
		if (code && !o->n_elf && !o->n_raw && !o->quiet)
			cli_warn(file, UINT64_MAX, "no --elf or --raw given: no code to follow");
		if (!(x->s = calloc(1, sizeof(*x->s)))) {
			cli_ipt_close(x);
			return EXIT_INPUT;
		}
		x->s[0].data = data;
		x->s[0].len = len;
		snprintf(x->s[0].label, sizeof x->s[0].label, "%s", file);
		x->n = 1;
		x->track_label = "thread";
	}
	/* the user's files go over the mapped ones (later additions win), and the kernel's code
	 * as it ran over a vmlinux (whose symbols and lines still serve) */
	if (code && cli_image_add_files(o, x->img) < 0) {
		cli_ipt_close(x);
		return EXIT_INPUT;
	}
	if (code && x->kcore && (rc = tk_image_add_elf(x->img, x->kcore, 0, 0)) < 0) {
		cli_error(x->kcore, UINT64_MAX, "cannot load the kernel's code: %s", tk_strerror(rc));
		cli_ipt_close(x);
		return EXIT_INPUT;
	}
	return 0;
}

void cli_ipt_stream_header(struct tk_buf *out, const struct cli_ipt *x, size_t i)
{
	if (x->perf)
		tk_buf_printf(out, "[%s: %zu bytes of trace]\n", x->s[i].label, x->s[i].len);
}

void cli_ipt_close(struct cli_ipt *x)
{
	tk_image_free(x->img);
	if (x->perf)
		tk_perf_aux_free(&x->aux);   /* its queues may point into the parts */
	cli_perf_parts_close(&x->parts);
	free(x->s);
	free(x->mods);
	free(x->kallsyms);
	free(x->kcore);
	memset(x, 0, sizeof(*x));
}

struct tk_ipt_flow_opts cli_ipt_stream_opts(const struct cli_ipt *x, const struct cli_ipt_stream *s)
{
	struct tk_ipt_flow_opts fo = cli_ipt_flow_opts(&x->timing, x->img);

	fo.track = s->track;
	fo.breaks = s->breaks;
	fo.nbreaks = s->nbreaks;
	fo.break_reason = s->break_reason;
	/* a timed session (perf decodes it by time: cap_user_time_zero): times on perf's
	 * clock, as perf script gives them */
	const struct tk_perf_pt_info *pt = &x->aux.pt;
	if (x->perf && pt->nfields >= 5 && pt->cap_user_time_zero && pt->time_mult)
		fo.time_conv = (struct tk_tsc_conv){ pt->time_zero, (uint32_t)pt->time_mult,
						     (uint16_t)pt->time_shift };
	return fo;
}

struct tk_trace_clock cli_ipt_clock(const struct cli_ipt *x)
{
	const struct tk_perf_pt_info *pt = &x->aux.pt;
	struct tk_trace_clock c = { 0 };

	if (x->timing.has_tsc_hz) {   /* the user's word wins */
		c.ticks_per_second = x->timing.tsc_hz;
		return c;
	}
	/* perf's conversion of TSC ticks to its clock: ns = ticks * time_mult >> time_shift */
	if (x->perf && pt->nfields >= 3 && pt->time_mult && pt->time_shift < 64)
		c.ticks_per_second = (uint64_t)(((unsigned __int128)1000000000u << pt->time_shift) /
						pt->time_mult);
	return c;
}
