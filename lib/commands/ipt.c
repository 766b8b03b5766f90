/* Intel PT, raw or in perf.data, in the commands: info, dump, decode, stats, convert. The
 * input is the library's session (lib/formats/perf/session.c: a raw packet file is one
 * stream, a perf.data file one per trace queue with the code its mappings name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tracekit/partial.h"

/* CODE 0: only the packets are wanted (dump): no image is built; 2: the code, and a
 * perf.data session's queues split by thread (decode). */
static int session_open(const struct tk_cmd *c, const char *file, struct tk_input *in,
			const struct tk_format_info *fi, int code, struct tk_perf_session *x)
{
	struct tk_cmd_opts *o = c->o;
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");
	struct tk_perf_session_opts so = {
		.sz = sizeof so, .code = code != 0, .threads = code == 2, .quiet = o->quiet,
		.elf = o->elf,
		.nelf = (size_t)o->n_elf, .raw = o->raw, .nraw = (size_t)o->n_raw,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
		.has_tsc_hz = o->has_tsc_hz, .tsc_hz = o->tsc_hz, .nthreads = o->jobs,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0, .msg = c->msg,
		.ctx = c->ctx, .filter = code == 2 ? &o->filter : NULL, .in = in,
		.cpu = o->cpu_model, .addr_filter = &o->addr_filter,
	};
	const uint8_t *data;
	size_t len;
	int rc;

	if ((rc = tk_cmd_map(c, file, in, &data, &len)))
		return rc;
	if ((rc = tk_perf_session_open(x, file, data, len, fi->id == TK_FMT_PERF, &so)) < 0)
		/* threads asked of an input without them: the command line's fault */
		return rc == -TK_E_UNSUPPORTED && tk_thread_filter_on(so.filter) ? TK_EXIT_USAGE
										 : TK_EXIT_INPUT;
	/* a kernel placed where the session ran it (or left out): the symbols follow the
	 * image (the options' lifetime: the process's) */
	static char placed[TK_CMD_MAX_LIST][4200];
	o->n_elf = (int)x->nelf;
	for (size_t i = 0; i < x->nelf; i++) {
		snprintf(placed[i], sizeof placed[i], "%s", x->elf[i]);
		o->elf[i] = placed[i];
	}
	return 0;
}

/* Decoding is over: what was left out or skipped, and the exit status. */
static int session_report(const char *file, const struct tk_perf_session *x,
			  const struct tk_ipt_flow_stats *st)
{
	return tk_perf_session_report(x, file, &st->gaps, st->insns) ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
}

static struct tk_ipt_flow_opts stream_opts(const struct tk_perf_session *x, size_t i)
{
	struct tk_ipt_flow_opts fo;

	tk_perf_session_flow_opts(x, i, &fo);
	return fo;
}

/* Progress of decoding the session's streams, one after another (on a part: none, its
 * chunks are not the whole). */
static void session_progress(const struct tk_cmd *c, const char *file,
			     const struct tk_perf_session *x, struct tk_progress *p)
{
	uint64_t total = 0;

	for (size_t i = 0; i < x->n; i++)
		total += x->s[i].len;
	tk_cmd_progress_init(c, p, file, total);
	if (c->part)
		p->print = NULL;
}

/* The packet decoder's damage, said as it is met. */
struct err_ctx {
	const struct tk_cmd *c;
	const char *file;
};

static int on_error(void *ctx, uint64_t offset, int err, uint64_t skipped)
{
	struct err_ctx *e = ctx;

	if (err == -TK_E_NOSYNC)
		CMD_WARN(e->c, e->file, offset, "%llu bytes without a PSB skipped",
			 (unsigned long long)skipped);
	else
		CMD_ERROR(e->c, e->file, offset, "%s, %llu bytes skipped", tk_ipt_error_text(err),
			  (unsigned long long)skipped);
	return 0;
}

int tk_cmd_ipt_dump_stream(const struct tk_cmd *c, const char *file, const uint8_t *pt,
			   size_t n, struct tk_progress *prog, struct tk_buf *out,
			   struct tk_gap_stats *gaps)
{
	return tk_cmd_ipt_dump_stream_in(c, file, pt, n, 0, 0, NULL, NULL, prog, out, gaps);
}

int tk_cmd_ipt_dump_stream_in(const struct tk_cmd *c, const char *file, const uint8_t *pt,
			      size_t n, int release_read, uint32_t errata,
			      const struct tk_perf_session_opts *timing,
			      const struct tk_ipt_flow_opts *fo, struct tk_progress *prog,
			      struct tk_buf *out, struct tk_gap_stats *gaps)
{
	const struct tk_cmd_opts *o = c->o;
	struct err_ctx ec = { c, file };
	struct tk_ipt_dump_opts d = {
		.release_read = release_read, .errata = errata,
		.sz = sizeof d, .no_offset = o->no_offset, .lastip = o->lastip,
		.raw_bytes = o->raw_bytes, .exec_mode = o->exec_mode, .no_sync = o->no_sync,
		.quiet = o->quiet, .on_error = on_error, .ctx = &ec, .progress = prog,
		.nthreads = tk_cmd_jobs(c), .chunk_bytes = tk_cmd_flow_opts(c, NULL).chunk_bytes,
		.time = o->time, .tcal = o->tcal, .time_delta = o->time_delta,
		.no_tcal = o->no_tcal, .no_wall_clock = o->no_wall_clock,
		.keep_tcal_on_ovf = o->keep_tcal_on_ovf, .no_cyc = o->no_cyc, .no_pad = o->no_pad,
		.no_timing = o->no_timing,
		.mtc_freq = timing ? timing->mtc_freq : (uint32_t)o->mtc_freq,
		.nom_freq = timing ? timing->nom_freq : (uint32_t)o->nom_freq,
		.cpuid_15_eax = timing ? timing->cpuid_15_eax : (uint32_t)o->cpuid_15_eax,
		.cpuid_15_ebx = timing ? timing->cpuid_15_ebx : (uint32_t)o->cpuid_15_ebx,
		.in = fo ? fo->in : NULL, .in_offset = fo ? fo->in_offset : 0,
	};

	return tk_ipt_dump(pt, n, &d, out, gaps);
}

/* In ptdump's layout, formatted by the library: a raw stream, or each trace queue of a
 * perf.data file under a line naming it (offsets are then in the queue's joined trace). */
static int dump(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	struct tk_perf_session x;
	int rc = 0;

	(void)unused;
	if (c->o->ncpus) {
		CMD_ERROR(c, NULL, UINT64_MAX, "dump: --cpu takes the processor here (FAMILY/MODEL); "
			  "every queue is dumped");
		return TK_EXIT_USAGE;
	}
	if ((rc = session_open(c, file, in, fi, 0, &x)))
		return rc;
	if ((rc = c->out_open(c, NULL, &out))) {
		tk_perf_session_close(&x);
		return rc;
	}
	struct tk_progress prog;   /* over the streams, one after another */
	session_progress(c, file, &x, &prog);
	/* streams in the file's mapping (a raw trace; perf.data's AUX buffers read in place):
	 * their pages are given back as they are dumped */
	const uint8_t *map;
	size_t maplen;
	int mapped = tk_input_map(in, &map, &maplen) == 0 &&
		     tk_input_is_file_mapping(in, file, maplen);
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		tk_perf_session_stream_header(&out, &x, i);
		int release = mapped && x.s[i].data >= map && x.s[i].data + x.s[i].len <= map + maplen;
		struct tk_ipt_flow_opts fo;   /* (where the stream lies in the file) */
		tk_perf_session_flow_opts(&x, i, &fo);
		rc = tk_cmd_ipt_dump_stream_in(c, file, x.s[i].data, x.s[i].len, release, x.errata,
					       &x.o, &fo, &prog, &out, &gaps);
	}
	tk_progress_finish(&prog);
	int st = c->out_close(&out);
	if (rc < 0 && !st) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		st = TK_EXIT_INPUT;
	}
	int g = tk_cmd_gaps(c, file, &gaps, "decode error");
	if (x.skipped && g < TK_EXIT_SKIPPED)
		g = TK_EXIT_SKIPPED;
	tk_perf_session_close(&x);
	return tk_cmd_max(st, g);
}

/* PSBs, packet counts by kind, TSC range. */
static int info_raw(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    struct tk_buf *out)
{
	const uint8_t *data;
	size_t len;
	struct tk_ipt_stats st;
	struct err_ctx ec = { c, file };
	int rc;

	if ((rc = tk_cmd_map(c, file, in, &data, &len)))
		return rc;
	struct tk_ipt_scan_opts so = { .sz = sizeof so, .nthreads = tk_cmd_jobs(c),
				       .on_error = on_error, .ctx = &ec };
	if ((rc = tk_ipt_scan_parallel(data, len, &so, &st)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	tk_buf_printf(out, "  size:     %llu bytes\n", (unsigned long long)st.bytes);
	tk_buf_printf(out, "  psb:      %llu", (unsigned long long)st.psbs);
	if (st.first_psb != UINT64_MAX)
		tk_buf_printf(out, " (first at offset 0x%llx)", (unsigned long long)st.first_psb);
	tk_buf_putc(out, '\n');
	tk_buf_printf(out, "  packets:  %llu\n", (unsigned long long)st.packets);
	for (int k = 1; k < TK_IPT_PKT__COUNT; k++)
		if (st.count[k])
			tk_buf_printf(out, "    %-10s %llu\n", tk_ipt_pkt_name(k),
				      (unsigned long long)st.count[k]);
	if (st.have_tsc)
		tk_buf_printf(out, "  tsc:      0x%llx .. 0x%llx (first 0x%llx, last 0x%llx)\n",
			      (unsigned long long)st.tsc_min, (unsigned long long)st.tsc_max,
			      (unsigned long long)st.tsc_first, (unsigned long long)st.tsc_last);
	else
		tk_buf_puts(out, "  tsc:      none\n");
	if (st.gaps.count)
		tk_buf_printf(out, "  skipped:  %llu bytes in %llu places\n",
			      (unsigned long long)st.gaps.bytes_skipped,
			      (unsigned long long)st.gaps.count);
	return st.gaps.count ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
}

/* perf.data: the Intel PT settings, the trace queues and the code mappings. */
struct perf_diag {
	const struct tk_cmd *c;
	const char *file;
	unsigned shown;
};

/* tk_perf_aux_read's problems: the first 20 */
static void perf_diag(void *ctx, uint64_t offset, const char *msg)
{
	struct perf_diag *d = ctx;

	if (d->shown++ < 20 && !d->c->o->quiet)
		CMD_ERROR(d->c, d->file, offset, "%s", msg);
}

static void hex_bytes(struct tk_buf *out, const char *before, const uint8_t *p, unsigned n)
{
	if (n)
		tk_buf_puts(out, before);
	for (unsigned k = 0; k < n; k++)
		tk_buf_printf(out, "%02x", p[k]);
	tk_buf_putc(out, '\n');
}

/* Whether process PID has a thread that filter F keeps (the sideband's threads). */
static int pid_kept(const struct tk_perf_aux *a, const struct tk_thread_filter *f, uint32_t pid)
{
	if (!tk_thread_filter_threads(f))
		return 1;
	for (size_t i = 0; i < a->ntasks; i++)
		if (a->tasks[i].pid == pid &&
		    tk_perf_thread_kept(a, f, pid, a->tasks[i].tid, UINT64_MAX))
			return 1;
	return 0;
}

/* The processes the sideband names (COMM, FORK), the first 64 of those F keeps: name,
 * parent, execs, threads (those F keeps). */
static void info_processes(const struct tk_perf_aux *a, const struct tk_thread_filter *f,
			   struct tk_buf *out)
{
	uint32_t pids[64];
	size_t n = 0, more = 0;

	for (size_t i = 0; i < a->ntasks; i++) {
		uint32_t pid = a->tasks[i].pid;
		size_t k = 0;
		if (!tk_perf_thread_kept(a, f, pid, a->tasks[i].tid, UINT64_MAX))
			continue;
		while (k < n && pids[k] != pid)
			k++;
		if (k == n && n < 64)
			pids[n++] = pid;
		else if (k == n)
			more++;   /* (a pid counted again for each of its records: "at least") */
	}
	for (size_t k = 0; k < n; k++) {
		const char *comm = "";
		uint32_t parent = UINT32_MAX, execs = 0;

		for (size_t i = 0; i < a->ntasks; i++) {
			const struct tk_perf_task *t = &a->tasks[i];
			if (t->pid != pids[k])
				continue;
			if (t->kind == TK_PERF_COMM || t->kind == TK_PERF_EXEC)
				comm = t->comm;
			execs += t->kind == TK_PERF_EXEC && t->tid == t->pid;
			if (t->kind == TK_PERF_FORK && t->tid == t->pid && t->ppid != t->pid)
				parent = t->ppid;
		}
		tk_buf_printf(out, "  process:  pid %u %s", pids[k], comm[0] ? TK_TEXT(comm) : "(no name)");
		if (parent != UINT32_MAX)
			tk_buf_printf(out, ", forked from %u", parent);
		if (execs)
			tk_buf_printf(out, ", %u exec%s", execs, execs > 1 ? "s" : "");
		/* its threads, the first 32 */
		uint32_t tids[32];
		size_t nt = 0, others = 0;
		for (size_t i = 0; i < a->ntasks; i++) {
			const struct tk_perf_task *t = &a->tasks[i];
			size_t j = 0;
			if (t->pid != pids[k] || t->kind == TK_PERF_EXIT ||
			    !tk_perf_thread_kept(a, f, t->pid, t->tid, UINT64_MAX))
				continue;
			while (j < nt && tids[j] != t->tid)
				j++;
			if (j == nt && nt < 32)
				tids[nt++] = t->tid;
			else if (j == nt)
				others = 1;
		}
		tk_buf_puts(out, ", threads");
		for (size_t j = 0; j < nt; j++)
			tk_buf_printf(out, " %u", tids[j]);
		tk_buf_puts(out, others ? " and more\n" : "\n");
	}
	if (more)
		tk_buf_printf(out, "  process:  and more (records of %zu others)\n", more);
	if (a->nswitches)
		tk_buf_printf(out, "  switches: %zu (which thread ran on each CPU when)\n",
			      a->nswitches);
}

static int info_perf(const struct tk_cmd *c, const char *file, struct tk_input *in,
		     struct tk_buf *out)
{
	const struct tk_cmd_opts *o = c->o;
	struct perf_diag d = { c, file, 0 };
	struct tk_perf_session_opts timing = { .sz = sizeof timing, .msg = c->msg, .ctx = c->ctx };
	/* only its perf record --threads parts */
	struct tk_perf_session parts = { .o = timing };
	struct tk_perf_aux a;
	const uint8_t *data;
	size_t len;
	int rc;

	if (tk_perf_parts_open(&parts, file) < 0)
		return TK_EXIT_INPUT;
	if ((rc = tk_input_map(in, &data, &len)) < 0 ||
	    (rc = tk_perf_aux_read_parts(data, len, parts.parts, parts.nparts, &a, perf_diag, &d,
					 1)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		tk_perf_parts_close(&parts);
		return TK_EXIT_INPUT;
	}
	timing.mtc_freq = (uint32_t)o->mtc_freq;
	timing.nom_freq = (uint32_t)o->nom_freq;
	timing.cpuid_15_eax = (uint32_t)o->cpuid_15_eax;
	timing.cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx;
	const struct tk_perf_pt_info *pt = &a.pt;
	tk_buf_printf(out, "  records:  %llu\n", (unsigned long long)a.records);
	if (a.aux_type != TK_PERF_AUX_INTEL_PT) {
		tk_buf_printf(out, "  auxtrace: %s\n", a.aux_type ? "not Intel PT" : "none");
	} else {
		tk_perf_timing(&a, &timing);
		tk_buf_printf(out, "  intel_pt: pmu type %llu, config 0x%llx, %s, %s%s\n",
			      (unsigned long long)pt->pmu_type, (unsigned long long)a.pt_config,
			      pt->per_cpu_mmaps ? "per-CPU buffers" : "per-thread buffers",
			      a.pt_config & pt->noretcomp_bit ? "no return compression" :
			      "return compression", pt->snapshot_mode ? ", snapshot mode" : "");
		tk_buf_printf(out, "  timing:   mtc-freq %llu, nom-freq %llu, cpuid-0x15 eax %llu "
			      "ebx %llu, tsc %s\n", (unsigned long long)timing.mtc_freq,
			      (unsigned long long)timing.nom_freq,
			      (unsigned long long)timing.cpuid_15_eax,
			      (unsigned long long)timing.cpuid_15_ebx,
			      a.pt_config & pt->tsc_bit ? "on" : "off");
		/* the processor, whose errata decoding reads (--cpu FAMILY/MODEL instead) */
		uint32_t errata = 0;
		char names[64];
		if (a.cpuid[0] && tk_ipt_cpuid_errata(a.cpuid, &errata) < 0)
			errata = 0;
		tk_buf_printf(out, "  cpu:      %s (errata read: %s)\n",
			      a.cpuid[0] ? a.cpuid : a.cpuid_damaged ? "damaged header, not read" :
			      "not recorded",
			      tk_ipt_errata_names(errata, names, sizeof names));
	}
	for (size_t i = 0; i < a.nqueues; i++) {
		const struct tk_perf_queue *q = &a.queues[i];
		tk_buf_printf(out, "  queue %u:  ", q->idx);
		if (q->cpu != UINT32_MAX)
			tk_buf_printf(out, "cpu %u, ", q->cpu);
		tk_buf_printf(out, "tid %u, %zu bytes in %llu buffers (first at offset 0x%llx%s%s)",
			      q->tid, q->len, (unsigned long long)q->nbuffers,
			      (unsigned long long)q->file_offset, q->file_part ? " of " : "",
			      q->file_part ? parts.parts[q->file_part - 1].name : "");
		if (q->holes)
			tk_buf_printf(out, a.pt.snapshot_mode ? ", %llu snapshots not overlapping the "
				      "one before (%llu bytes before their PSBs left out)" :
				      ", %llu losses (%llu bytes left out)",
				      (unsigned long long)q->holes, (unsigned long long)q->hole_bytes);
		if (q->repeated_bytes)
			tk_buf_printf(out, ", %llu bytes repeating earlier snapshots left out",
				      (unsigned long long)q->repeated_bytes);
		tk_buf_putc(out, '\n');
	}
	for (size_t i = 0; i < a.nmmaps; i++) {
		const struct tk_perf_mmap *m = &a.mmaps[i];
		if (!pid_kept(&a, &o->filter, m->pid))
			continue;
		tk_buf_printf(out, "  mmap:     pid %u 0x%llx-0x%llx offset 0x%llx %s", m->pid,
			      (unsigned long long)m->addr, (unsigned long long)(m->addr + m->len),
			      (unsigned long long)m->pgoff, TK_TEXT(m->path));
		hex_bytes(out, " build-id ", m->build_id, m->build_id_len);
	}
	if (a.kernel.ref[0]) {
		const struct tk_perf_kernel *k = &a.kernel;
		tk_buf_printf(out, "  kernel:   0x%llx-0x%llx, %s at 0x%llx%s", (unsigned long long)k->start,
			      (unsigned long long)(k->start + k->len), TK_TEXT(k->ref),
			      (unsigned long long)k->ref_addr, a.pt_kernel ? ", traced" : "");
		hex_bytes(out, ", build-id ", k->build_id, k->build_id_len);
	}
	if (a.kernel_modules)
		tk_buf_printf(out, "  modules:  %llu kernel modules mapped (their code is not loaded)\n",
			      (unsigned long long)a.kernel_modules);
	if (a.aux_truncated || a.lost_records)
		tk_buf_printf(out, "  lost:     %llu trace losses in the kernel, %llu samples\n",
			      (unsigned long long)a.aux_truncated,
			      (unsigned long long)a.lost_records);
	info_processes(&a, &o->filter, out);
	if (parts.nparts)
		tk_buf_printf(out, "  parts:    %zu files of perf record --threads (data.0 to "
			      "data.%zu), read after data\n", parts.nparts, parts.nparts - 1);
	/* (decoded by thread, each process has its own image: decode names overlaps in one) */
	if (!o->quiet && !tk_perf_by_thread(&a))
		tk_perf_warn_overlaps(&a, file, c->msg, c->ctx);
	tk_perf_aux_free(&a);
	tk_perf_parts_close(&parts);
	return rc > 0 ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
}

static int info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *out)
{
	if (fi->id != TK_FMT_PERF && tk_thread_filter_on(&c->o->filter)) {
		CMD_ERROR(c, file, UINT64_MAX, "--pid, --tid, --comm: a raw trace has no threads");
		return TK_EXIT_USAGE;
	}
	return fi->id == TK_FMT_PERF ? info_perf(c, file, in, out) : info_raw(c, file, in, out);
}

unsigned tk_cmd_text_flags(const struct tk_cmd *c)
{
	return (c->o->no_disasm ? TK_IPT_TEXT_NO_DISASM : 0) | (c->o->time ? TK_IPT_TEXT_TIME : 0) |
	       (c->o->stat ? TK_IPT_TEXT_STAT : 0) | (c->o->iflags ? TK_IPT_TEXT_IFLAGS : 0) |
	       (c->o->event_ip ? TK_IPT_TEXT_EVENT_IP : 0);
}

/* decode --stat's counts. */
static void put_counts(struct tk_buf *out, const struct tk_ipt_flow_stats *st)
{
	tk_buf_printf(out, "insn: %llu\nevents: %llu\nerrors: %llu\noverflows: %llu\n",
		      (unsigned long long)st->insns, (unsigned long long)st->events,
		      (unsigned long long)st->errors, (unsigned long long)st->overflows);
}

static int exec_run(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi, int counts_only);

static int decode(const struct tk_cmd *c, const char *file, struct tk_input *in,
		  const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_buf out;
	struct tk_ipt_flow_stats st = { 0 };
	struct tk_perf_session x;
	int rc = 0, status;

	(void)unused;
	/* a shard of decode --stat, or their merge: the counts of the statistics' partial */
	if (c->part)
		return c->o->stat ? exec_run(c, file, in, fi, 1) : TK_EXIT_USAGE;
	if ((status = session_open(c, file, in, fi, 2, &x)))
		return status;
	if ((status = c->out_open(c, NULL, &out))) {
		tk_perf_session_close(&x);
		return status;
	}
	struct tk_progress prog;
	session_progress(c, file, &x, &prog);
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		struct tk_ipt_flow_opts fo = stream_opts(&x, i);
		struct tk_ipt_flow_stats one = { 0 };

		/* perf.data: each queue's instructions under a line naming it */
		if (!c->o->stat)
			tk_perf_session_stream_header(&out, &x, i);
		fo.progress = &prog;
		rc = tk_ipt_flow_text(x.s[i].data, x.s[i].len, &fo, tk_cmd_text_flags(c), &out, &one);
		tk_ipt_flow_stats_add(&st, &one);
		x.s[i].gaps = one.gaps;
	}
	tk_progress_finish(&prog);
	if (c->o->stat)
		put_counts(&out, &st);
	status = c->out_close(&out);
	if (rc < 0 && status != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		tk_perf_session_close(&x);
		return TK_EXIT_INPUT;
	}
	rc = session_report(file, &x, &st);
	tk_perf_session_close(&x);
	return tk_cmd_max(rc, status);
}

/* A shard's chunks (c->part) of the streams, numbered across them as tk_ipt_exec_range
 * numbers them, balanced by size. */
static int shard_plan(const struct tk_perf_session *x, struct tk_cmd_part *part)
{
	uint64_t *sizes = NULL;
	size_t n = 0;

	for (size_t i = 0; i < x->n; i++) {
		struct tk_ipt_flow_opts fo = stream_opts(x, i);
		int64_t m = tk_ipt_flow_chunks(x->s[i].data, x->s[i].len, &fo, NULL, 0);
		uint64_t *more = m < 0 ? NULL : realloc(sizes, (n + (size_t)m + 1) * sizeof *sizes);

		if (!more || tk_ipt_flow_chunks(x->s[i].data, x->s[i].len, &fo, more + n,
						(size_t)m) != m) {
			free(more ? more : sizes);
			return m < 0 ? (int)m : -TK_E_NOMEM;
		}
		sizes = more;
		for (int64_t j = 0; j < m; j++)   /* starts -> sizes */
			sizes[n + j] = (j + 1 < m ? sizes[n + j + 1] : x->s[i].len) - sizes[n + j];
		n += (size_t)m;
	}
	tk_partial_shard_range(sizes, n, part->shard, part->nshards, &part->first, &part->count);
	part->nchunks = (uint32_t)n;
	free(sizes);
	return 0;
}

/* How many threads a session split by thread ran (its pieces are many more where CPUs
 * switched between them). */
static size_t session_threads(const struct tk_perf_session *x)
{
	uint64_t *tids = x->n ? malloc(x->n * sizeof *tids) : NULL;
	size_t n = 0;

	for (size_t i = 0; tids && i < x->n; i++)
		tids[i] = x->s[i].tid;
	if (tids)
		qsort(tids, x->n, sizeof *tids, tk_cmp_u64);
	for (size_t i = 0; tids && i < x->n; i++)
		n += !i || tids[i] != tids[i - 1];
	free(tids);
	return n;
}

/* stats, or (COUNTS_ONLY) decode --stat's counts: from the blocks and counts of the
 * executed code, of a shard's chunks (c->part) or the shards' partials merged. */
static int exec_run(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi, int counts_only)
{
	struct tk_ipt_exec_stats s;
	struct tk_ipt_exec *ex;
	struct tk_ipt_flow_stats decoded = { 0 };
	struct tk_perf_session x;
	int rc = 0, err = 0, status;
	int merging = c->part && c->part->nload, sharding = c->part && !merging;

	if (!sharding && !counts_only && !tk_cmd_stats_format(c))
		return TK_EXIT_USAGE;
	/* by thread, as decode reads it: each process's trace over its own code, and the
	 * thread filters */
	if ((status = session_open(c, file, in, fi, 2, &x)))
		return status;
	/* the images numbered in the streams' order, alike in every shard and the merge */
	if ((ex = tk_ipt_exec_new(x.img, &err)))
		for (size_t i = 0; i < x.n && err >= 0; i++)
			err = tk_ipt_exec_image(ex, stream_opts(&x, i).image);
	if (!ex || err < 0 || (sharding && (err = shard_plan(&x, c->part)) < 0)) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(err));
		tk_ipt_exec_free(ex);
		tk_perf_session_close(&x);
		return TK_EXIT_INPUT;
	}
	if (sharding)
		tk_ipt_exec_range(ex, c->part->first, c->part->count);
	if (counts_only)
		tk_ipt_exec_flow_only(ex);
	struct tk_progress prog;
	session_progress(c, file, &x, &prog);
	for (size_t i = 0; i < x.n && rc >= 0 && !merging; i++) {
		struct tk_ipt_flow_opts fo = stream_opts(&x, i);
		struct tk_ipt_flow_stats one = { 0 };

		fo.progress = &prog;
		rc = tk_ipt_exec_add(ex, x.s[i].data, x.s[i].len, &fo, &one);
		x.s[i].gaps = one.gaps;
		tk_ipt_flow_stats_add(&decoded, &one);
	}
	tk_progress_finish(&prog);
	if (merging && (status = tk_cmd_exec_load(c, ex))) {
		tk_ipt_exec_free(ex);
		tk_perf_session_close(&x);
		return status;
	}
	if (rc >= 0 && sharding)
		status = tk_cmd_exec_save(c, file, ex);
	else if (rc >= 0 && counts_only)
		s.flow = tk_ipt_exec_counts(ex)->flow;   /* (the code's classes are not needed) */
	else if (rc >= 0)
		rc = tk_ipt_exec_finish(ex, &s);
	tk_ipt_exec_free(ex);
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		tk_perf_session_close(&x);
		return TK_EXIT_INPUT;
	}
	if (!sharding && counts_only) {
		struct tk_buf out;

		if (!(status = c->out_open(c, NULL, &out))) {
			put_counts(&out, &s.flow);
			status = c->out_close(&out);
		}
	} else if (!sharding) {
		status = tk_cmd_exec_stats_out(c, file, "Intel PT", "ipt", x.split ? "thread" : "stream",
					       x.split ? session_threads(&x) : x.n, &s);
	}
	const struct tk_ipt_flow_stats *own = sharding ? &decoded : &s.flow;
	struct tk_losses lost = tk_cmd_summary_begin(c, &(struct tk_losses){ own->gaps, own->insns });
	int g = tk_perf_session_report(&x, file, &lost.gaps, lost.insns) ? TK_EXIT_SKIPPED : 0;
	tk_cmd_summary_end(c);
	tk_perf_session_close(&x);
	return tk_cmd_max(status, g);
}

static int stats(const struct tk_cmd *c, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, struct tk_buf *unused)
{
	(void)unused;
	return exec_run(c, file, in, fi, 0);
}

int tk_cmd_reencode(const struct tk_cmd *c, const char *file, const struct tk_image *img,
		    const uint8_t *pt, size_t n, struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_ipt_reencode_stats st;
	struct tk_ipt_flow_opts fo = tk_cmd_flow_opts(c, img);
	int rc = tk_ipt_reencode(pt, n, &fo, NULL, out, &st);

	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "re-encoding failed: %s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	tk_gap_stats_merge(gaps, &st.flow.gaps);
	if (!c->o->quiet)
		CMD_NOTE(c, file, "%llu instructions, %llu of %llu returns compressed; "
			 "%llu TIPs, %llu bytes (was %zu)", (unsigned long long)st.flow.insns,
			 (unsigned long long)st.compressed, (unsigned long long)st.returns,
			 (unsigned long long)st.tips, (unsigned long long)st.bytes, n);
	if (st.dropped)
		CMD_WARN(c, file, UINT64_MAX, "%llu events (PTWRITE, power, TSX, paging) are not in "
			 "the re-encoded stream", (unsigned long long)st.dropped);
	return TK_EXIT_CLEAN;
}

/* --to ipt: the stream with return compression (against --elf/--raw). */
static int reencode_raw(const struct tk_cmd *c, const char *file, struct tk_input *in)
{
	struct tk_gap_stats gaps = { 0 };
	const uint8_t *data;
	struct tk_image *img;
	struct tk_buf out;
	size_t len;
	int rc, status;

	/* (--no-retcomp, a branch trace's option, is refused before: cli_format_opts_refused) */
	if ((rc = tk_cmd_map(c, file, in, &data, &len)))
		return rc;
	if (!(img = tk_cmd_image_load(c)))
		return TK_EXIT_INPUT;
	if ((status = c->out_open(c, NULL, &out)) == 0) {
		status = tk_cmd_reencode(c, file, img, data, len, &out, &gaps);
		status = tk_cmd_max(c->out_close(&out), status);
	}
	tk_image_free(img);
	return tk_cmd_max(tk_cmd_gaps(c, file, &gaps, "gap"), status);
}

/* The packets of BUF[FROM, TO) up to the last one that ends before TO (TO itself when no
 * PSB gives a place to parse from: nothing could decode those bytes anyway). */
static uint64_t whole_packets_end(const uint8_t *buf, uint64_t from, uint64_t to)
{
	struct tk_ipt_packet pkt;
	uint64_t psb, at = to;
	struct tk_ipt_pkt_decoder *d;

	if (tk_ipt_psb_prev(buf, to, to, &psb) < 0 || psb < from ||
	    !(d = tk_ipt_pkt_decoder_new(buf, to, NULL, NULL)))
		return to;
	if (tk_ipt_pkt_sync_set(d, psb) == 0) {
		while (tk_ipt_pkt_next(d, &pkt) > 0)
			;
		tk_ipt_pkt_get_offset(d, &at);
	}
	tk_ipt_pkt_decoder_free(d);
	return at;
}

/* perf.data --to ipt: each queue's trace as a raw stream (-o FILE; FILE.cpuN or
 * FILE.threadN for several queues), as the buffers hold it, for libipt's tools and
 * `tracekit decode`. Where trace was lost, the packet cut off there is left out and an
 * OVF marks the loss (the trace resumes at a PSB), as the hardware marks its own. */
static int perf_to_ipt(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	static const uint8_t ovf[] = { 0x02, 0xf3 };
	const struct tk_cmd_opts *o = c->o;
	struct tk_perf_session x;
	int status = 0, lost = 0;

	if (!o->output || !strcmp(o->output, "-")) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert --to ipt of perf.data writes a file per "
			  "trace queue: give -o FILE");
		return TK_EXIT_USAGE;
	}
	if ((status = session_open(c, file, in, fi, 1, &x)))
		return status;
	for (size_t i = 0; i < x.n && !status; i++) {
		const struct tk_perf_stream *s = &x.s[i];
		char name[4096];
		struct tk_buf out;
		uint64_t at = 0, cut_bytes = 0;

		if (x.n > 1)
			snprintf(name, sizeof name, "%s.%s%u", o->output, x.track_label, s->track);
		else
			snprintf(name, sizeof name, "%s", o->output);
		if ((status = c->out_open(c, name, &out)))
			break;
		for (size_t k = 0; k <= s->nbreaks; k++) {
			uint64_t to = k < s->nbreaks ? s->breaks[k] : s->len;
			uint64_t end = k < s->nbreaks ? whole_packets_end(s->data, at, to) : to;

			for (uint64_t p = at; p < end; p += 1 << 20)
				tk_buf_put(&out, s->data + p, end - p < (1 << 20) ? end - p : 1 << 20);
			if (k < s->nbreaks) {
				tk_buf_put(&out, ovf, sizeof ovf);
				cut_bytes += to - end;
				lost |= s->break_reason == TK_GAP_OVERFLOW;
			}
			at = to;
		}
		status = c->out_close(&out);
		if (!o->quiet)
			CMD_NOTE(c, name, "%s: %zu bytes of trace, %zu %s marked with OVF%s",
				 s->name[0] ? s->name : "stream",
				 s->len - (size_t)cut_bytes + s->nbreaks * sizeof ovf, s->nbreaks,
				 s->break_reason == TK_GAP_WRAP ? "snapshot gaps" : "losses",
				 cut_bytes ? " (packets cut off there left out)" : "");
	}
	if (!status && !o->quiet && (x.nmods || x.kernel_elf)) {
		/* the code, spelled for tracekit decode and ptxed alike */
		struct tk_buf code;

		if (tk_buf_init(&code, -1, 256) == 0) {
			for (size_t i = 0; i < x.nmods; i++)
				tk_buf_printf(&code, " --elf %s:0x%llx", x.mods[i].path,
					      (unsigned long long)x.mods[i].base);
			if (x.kernel_elf)
				tk_buf_printf(&code, " --elf %s", x.kernel_elf);
			CMD_NOTE(c, NULL, "the code:%.*s", (int)code.len, (const char *)code.data);
			tk_buf_free(&code);
		}
	}
	if (!status && (x.skipped || lost))
		status = TK_EXIT_SKIPPED;   /* as decoding it would say */
	tk_perf_session_close(&x);
	return status;
}

/* --to folded|pprof (and the other profile outputs) through the shared profile; --to
 * perfetto|chrome through the timeline writer, events in order; --to ipt again with
 * return compression. */
static int convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *unused)
{
	const char *to = c->o->to ? c->o->to : "perfetto";
	enum tk_timeline_kind tl = tk_timeline_kind_by_name(to);
	struct tk_ipt_flow_stats st = { 0 };
	struct tk_cmd_timeline ct;
	struct tk_sym *sym;
	struct tk_perf_session x;
	int status, rc = 0;

	(void)unused;
	if (!strcmp(to, "ipt") && (status = tk_cmd_convert_plain(c, "--to ipt")))
		return status;
	if (!strcmp(to, "ipt"))
		return fi->id == TK_FMT_PERF ? perf_to_ipt(c, file, in, fi) : reencode_raw(c, file, in);
	if (!tl && !tk_out_kind_by_name(to)) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert: Intel PT converts to ipt, perfetto, chrome, "
			  "folded, pprof or a profile output, not '%s'", to);
		return TK_EXIT_USAGE;
	}
	if (!tl)
		return TK_EXIT_AS_PROFILE;
	/* (by thread where the session says which ran: a track per thread, under its process) */
	if ((status = session_open(c, file, in, fi, 2, &x)))
		return status;
	if (!(sym = tk_cmd_sym_open(c, 0, &status))) {
		tk_perf_session_close(&x);
		return status;
	}
	if (tk_perf_session_symbols(&x, sym) < 0 ||
	    (status = tk_cmd_timeline_open(c, sym, tk_perf_session_clock(&x), &ct))) {
		tk_sym_free(sym);
		tk_perf_session_close(&x);
		return status ? status : TK_EXIT_INPUT;
	}
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		struct tk_ipt_flow_opts fo = stream_opts(&x, i);
		struct tk_ipt_flow_stats one = { 0 };

		size_t pr;
		char comm[32], pname[32];
		if (x.split && x.s[i].pid != UINT32_MAX &&
		    tk_perf_session_track(&x, x.s[i].tid, &pr, comm, sizeof comm) == 0 &&
		    snprintf(pname, sizeof pname, "%.16s", x.procs[pr].comm) >= 0 &&
		    ((rc = tk_timeline_track_process(ct.tl, fo.track, x.s[i].pid, pname)) < 0 ||
		     (rc = tk_timeline_track_name(ct.tl, fo.track, comm)) < 0))
			break;
		if (x.perf && !x.split && (rc = tk_timeline_track_name(ct.tl, fo.track, x.s[i].name)) < 0)
			break;
		rc = tk_ipt_flow_events(x.s[i].data, x.s[i].len, &fo, tk_timeline_sink(ct.tl), &one);
		tk_ipt_flow_stats_add(&st, &one);
		x.s[i].gaps = one.gaps;
	}
	status = tk_cmd_timeline_close(&ct);
	tk_sym_free(sym);
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		tk_perf_session_close(&x);
		return TK_EXIT_INPUT;
	}
	rc = session_report(file, &x, &st);
	tk_perf_session_close(&x);
	return tk_cmd_max(rc, status);
}

const tk_cmd_fn tk_cmd_ipt[TK_CMD__COUNT] = {
	[TK_CMD_INFO] = info, [TK_CMD_DUMP] = dump, [TK_CMD_DECODE] = decode,
	[TK_CMD_STATS] = stats, [TK_CMD_CONVERT] = convert,
};

/* Intel PT's options (raw streams and perf.data). */
#define PT_CODE (TK_CMD_BIT(TK_CMD_DECODE) | TK_CMD_BIT(TK_CMD_STATS) | TK_CMD_BIT(TK_CMD_CONVERT) | \
		 TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT))
#define DUMP TK_CMD_BIT(TK_CMD_DUMP)
const struct tk_cmd_option tk_cmd_ipt_options[] = {
	{ "raw", "FILE[:FROM[-TO]]:ADDR", "load a raw code file (or bytes FROM..TO of it) at ADDR",
	  PT_CODE, TK_OPT_LIST, CMD_FIELD(raw), CMD_FIELD(n_raw) },
	{ "tid", "N", "perf.data: only thread N (as --pid, --comm)", PT_CODE | TK_CMD_BIT(TK_CMD_INFO),
	  TK_OPT_U64, CMD_FIELD(tid), CMD_FIELD(has_tid) },
	{ "lastip", NULL, "print reconstructed IPs", TK_CMD_BIT(TK_CMD_DUMP), TK_OPT_FLAG,
	  CMD_FIELD(lastip), 0 },
	{ "raw-bytes", NULL, "print each packet's bytes (ptdump's --raw)", TK_CMD_BIT(TK_CMD_DUMP),
	  TK_OPT_FLAG, CMD_FIELD(raw_bytes), 0 },
	{ "exec-mode", NULL, "print the mode each mode.exec packet sets", TK_CMD_BIT(TK_CMD_DUMP),
	  TK_OPT_FLAG, CMD_FIELD(exec_mode), 0 },
	{ "no-sync", NULL, "decode from the first byte, not the first PSB", TK_CMD_BIT(TK_CMD_DUMP),
	  TK_OPT_FLAG, CMD_FIELD(no_sync), 0 },
	{ "tcal", NULL, "print the cycle calibration after timing packets (not with --time)",
	  DUMP, TK_OPT_FLAG, CMD_FIELD(tcal), 0 },
	{ "time-delta", NULL, "--time, --tcal: the change since the last one printed",
	  DUMP, TK_OPT_FLAG, CMD_FIELD(time_delta), 0 },
	{ "no-tcal", NULL, "no calibration (the time from TSC, TMA and MTC alone)", DUMP,
	  TK_OPT_FLAG, CMD_FIELD(no_tcal), 0 },
	{ "no-wall-clock", NULL, "before the first TSC: the time from 0, not <unavailable>",
	  DUMP, TK_OPT_FLAG, CMD_FIELD(no_wall_clock), 0 },
	{ "keep-tcal-on-ovf", NULL, "keep the calibration across an overflow", DUMP,
	  TK_OPT_FLAG, CMD_FIELD(keep_tcal_on_ovf), 0 },
	{ "no-cyc", NULL, "leave out CYC packets (the time too)", DUMP, TK_OPT_FLAG,
	  CMD_FIELD(no_cyc), 0 },
	{ "no-timing", NULL, "leave out timing packets (TSC, TMA, MTC, CYC, CBR)", DUMP,
	  TK_OPT_FLAG, CMD_FIELD(no_timing), 0 },
	{ "no-pad", NULL, "leave out PAD packets", DUMP, TK_OPT_FLAG, CMD_FIELD(no_pad), 0 },
	{ "mtc-freq", "N", "timing (ptxed's; perf.data's by default): the MTC frequency,",
	  PT_CODE | DUMP, TK_OPT_U64, CMD_FIELD(mtc_freq), 0 },
	{ "nom-freq", "N", "the nominal frequency,", PT_CODE | DUMP, TK_OPT_U64,
	  CMD_FIELD(nom_freq), 0 },
	{ "cpuid-0x15.eax", "N", "CPUID leaf 0x15's EAX", PT_CODE | DUMP, TK_OPT_U64,
	  CMD_FIELD(cpuid_15_eax), 0 },
	{ "cpuid-0x15.ebx", "N", "and EBX (the TSC to core crystal clock ratio)",
	  PT_CODE | DUMP, TK_OPT_U64, CMD_FIELD(cpuid_15_ebx), 0 },
	{ "event:ip", NULL, "print the IP of each event that has one (ptxed's)",
	  TK_CMD_BIT(TK_CMD_DECODE), TK_OPT_FLAG, CMD_FIELD(event_ip), 0 },
	{ "event:iflags", NULL, "print [interrupts enabled/disabled] where a MODE.Exec changes IF "
	  "(ptxed's; Event Trace)", TK_CMD_BIT(TK_CMD_DECODE), TK_OPT_FLAG, CMD_FIELD(iflags), 0 },
	/* ptxed's address filter options: IA32_RTIT_ADDRn_CFG, _A, _B */
#define ADDR_FILTER(n, help_cfg, help_a, help_b) \
	{ "filter:addr" #n "_cfg", "N", help_cfg, PT_CODE, TK_OPT_U64, \
	  CMD_FIELD(addr_filter.cfg[n]), 0 }, \
	{ "filter:addr" #n "_a", "ADDR", help_a, PT_CODE, TK_OPT_U64, CMD_FIELD(addr_filter.a[n]), 0 }, \
	{ "filter:addr" #n "_b", "ADDR", help_b, PT_CODE, TK_OPT_U64, CMD_FIELD(addr_filter.b[n]), 0 }
	ADDR_FILTER(0, "the address filter tracing ran with (ptxed's; also addr1..addr3): "
		    "1 traces only in [A, B], 2 stops there", "its first address",
		    "its last (read for erratum SKL014)"),
	ADDR_FILTER(1, NULL, NULL, NULL), ADDR_FILTER(2, NULL, NULL, NULL),
	ADDR_FILTER(3, NULL, NULL, NULL),
#undef ADDR_FILTER
	{ "cpu", "LIST|FAMILY/MODEL[/STEPPING]|auto|none", "perf.data: only the trace of CPUs LIST "
	  "(0,2-3); else the processor, whose errata are read (ptxed's; auto: this machine's)",
	  PT_CODE, TK_OPT_STRING, CMD_FIELD(cpu), 0 },
	/* the same option, told as dump takes it: every queue is dumped, no CPU list */
	{ "cpu", "FAMILY/MODEL[/STEPPING]|auto|none", "the processor, whose errata are read "
	  "(ptdump's; auto: this machine's)", TK_CMD_BIT(TK_CMD_DUMP), TK_OPT_STRING,
	  CMD_FIELD(cpu), 0 },
	{ "tsc-hz", "N", "TSC ticks per second for times (0: ticks)",
	  TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT) | TK_CMD_BIT(TK_CMD_CONVERT), TK_OPT_U64, CMD_FIELD(tsc_hz),
	  CMD_FIELD(has_tsc_hz) },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};
