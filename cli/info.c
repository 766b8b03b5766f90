/* tracekit info FILE...: what each file is, by content. */
#include <inttypes.h>

#include <string.h>

#include "cli.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit info [--format NAME] FILE...\n"
	"\n"
	"Recognise each FILE by its content (not its name) and print its format, version and\n"
	"size, then what the format's reader knows about it. '-' reads standard input;\n"
	".gz and .zst files are decompressed on the fly.\n"
	"\n"
	"  --format NAME   skip detection: ipt, perf, xray, kanata, gem5, xtrace,\n"
	"                  xtrace-snapshot, btrace\n"
	"  -j N            threads for readers that split their input (Intel PT: at PSBs);\n"
	"                  the output does not depend on N\n"
	"\n"
	"Exit status: 0 all files recognised; 1 a reader skipped damaged data; 3 a file could\n"
	"not be read or its format is unknown (the others are still reported).\n";

/* Branch-trace container: modules, threads and how complete the recording is. */
static int details_btrace(const char *file, struct tk_input *in, struct tk_buf *out)
{
	const uint8_t *data;
	size_t len;
	int err = 0, status = EXIT_CLEAN;

	if ((err = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = cli_btrace_read(file, data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	const struct tk_btrace_info *bi = tk_btrace_info(bt);
	tk_buf_printf(out, "  process %u", bi->pid);
	if (bi->ppid)
		tk_buf_printf(out, " (forked from %u)", bi->ppid);
	if (bi->signal)
		tk_buf_printf(out, ", complete: ends at signal %d (%s), its trace kept\n", bi->signal,
			      strsignal(bi->signal));
	else
		tk_buf_printf(out, ", %s\n", bi->refused ? "recording refused" : bi->exec ? "ends at exec" :
			      bi->complete ? "complete" : "INCOMPLETE (no end record)");
	if (bi->fd_reopened)
		tk_buf_printf(out, "  the program closed or replaced the trace's file descriptor; the "
			      "recorder reopened the trace file (%llu times)\n",
			      (unsigned long long)bi->fd_reopened);
	if (bi->refused)
		tk_buf_printf(out, "  refused: %s\n", bi->refused_msg);
	if (bi->complete && !bi->exec)
		tk_buf_printf(out, "  %llu CTIs patched, %llu traps\n", (unsigned long long)bi->patched,
			      (unsigned long long)bi->traps);
	if (bi->tsc_hz)
		tk_buf_printf(out, "  TSC %llu ticks/s%s\n", (unsigned long long)bi->tsc_hz,
			      bi->tsc_hz_measured ? " (measured over the run)" : "");
	else
		tk_buf_puts(out, "  TSC rate unknown: times are in ticks\n");
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		tk_buf_printf(out, "  module %s code 0x%llx-0x%llx bias 0x%llx build-id ", m->path,
			      (unsigned long long)m->start, (unsigned long long)m->end,
			      (unsigned long long)m->bias);
		if (m->build_id_len)
			tk_buf_hex_bytes(out, m->build_id, m->build_id_len, 0);
		else
			tk_buf_puts(out, "none");
		tk_buf_putc(out, '\n');
	}
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		tk_buf_printf(out, "  thread %u: %llu bytes of PT in %llu pieces, %llu traps, "
			      "%llu re-entries (%llu unresolved)%s", t->tid,
			      (unsigned long long)t->stream_bytes, (unsigned long long)t->pieces,
			      (unsigned long long)t->traps, (unsigned long long)t->reentries,
			      (unsigned long long)t->unresolved, !t->ended ? ", no end record" :
			      t->end_reason == TK_BTRACE_THREAD_CUT ? ", cut: running when the process ended" :
			      t->end_reason == TK_BTRACE_THREAD_SIGNAL ? ", ends at the fatal signal" : "");
		if (t->traps)
			tk_buf_printf(out, ", %.1f%% at CTIs >= 5 bytes",
				      100.0 * (double)t->traps_long / (double)t->traps);
		if (t->tramp_hits)
			tk_buf_printf(out, ", %llu by trampolines (%.1f%% of recorded CTIs still trapped)",
				      (unsigned long long)t->tramp_hits,
				      100.0 * (double)t->traps / (double)(t->traps + t->tramp_hits));
		if (t->lost_pieces)
			tk_buf_printf(out, ", %llu pieces LOST", (unsigned long long)t->lost_pieces);
		tk_buf_putc(out, '\n');
	}
	if (!bi->complete && !bi->refused)
		status = EXIT_SKIPPED;
	int g = cli_report_gaps(file, tk_btrace_gaps(bt), "damaged record");
	tk_btrace_free(bt);
	return g > status ? g : status;
}

static int ipt_info_error(void *ctx, uint64_t offset, int err, uint64_t skipped)
{
	const char *file = ctx;
	if (err == -TK_E_NOSYNC)
		cli_warn(file, offset, "%llu bytes without a PSB skipped", (unsigned long long)skipped);
	else
		cli_error(file, offset, "%s, %llu bytes skipped",
			  tk_ipt_error_text(err), (unsigned long long)skipped);
	return 0;
}

/* Intel PT: PSBs, packet counts by kind, TSC range. */
/* perf.data: the Intel PT settings, the trace queues and the code mappings. */
struct perf_diag {
	const char *file;
	int quiet;
	unsigned shown;
};

/* tk_perf_aux_read's problems: the first 20 */
static void perf_diag(void *ctx, uint64_t offset, const char *msg)
{
	struct perf_diag *d = ctx;

	if (d->shown++ < 20 && !d->quiet)
		cli_error(d->file, offset, "%s", msg);
}

static int info_perf(const struct cli_opts *o, const char *file, struct tk_input *in,
		     struct tk_buf *out)
{
	struct perf_diag d = { file, o->quiet, 0 };
	struct tk_perf_session_opts timing = { .sz = sizeof timing, .msg = cli_msg };
	/* only its perf record --threads parts */
	struct tk_perf_session parts = { .o = timing };
	struct tk_perf_aux a;
	const uint8_t *data;
	size_t len;
	int rc;

	if (tk_perf_parts_open(&parts, file) < 0)
		return EXIT_INPUT;
	if ((rc = tk_input_map(in, &data, &len)) < 0 ||
	    (rc = tk_perf_aux_read_parts(data, len, parts.parts, parts.nparts, &a, perf_diag, &d,
					 1)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		tk_perf_parts_close(&parts);
		return EXIT_INPUT;
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
		tk_buf_printf(out, "  mmap:     pid %u 0x%llx-0x%llx offset 0x%llx %s", m->pid,
			      (unsigned long long)m->addr, (unsigned long long)(m->addr + m->len),
			      (unsigned long long)m->pgoff, m->path);
		if (m->build_id_len)
			tk_buf_puts(out, " build-id ");
		for (unsigned k = 0; k < m->build_id_len; k++)
			tk_buf_printf(out, "%02x", m->build_id[k]);
		tk_buf_putc(out, '\n');
	}
	if (a.kernel.ref[0]) {
		const struct tk_perf_kernel *k = &a.kernel;
		tk_buf_printf(out, "  kernel:   0x%llx-0x%llx, %s at 0x%llx%s", (unsigned long long)k->start,
			      (unsigned long long)(k->start + k->len), k->ref,
			      (unsigned long long)k->ref_addr, a.pt_kernel ? ", traced" : "");
		if (k->build_id_len)
			tk_buf_puts(out, ", build-id ");
		for (unsigned j = 0; j < k->build_id_len; j++)
			tk_buf_printf(out, "%02x", k->build_id[j]);
		tk_buf_putc(out, '\n');
	}
	if (a.kernel_modules)
		tk_buf_printf(out, "  modules:  %llu kernel modules mapped (their code is not loaded)\n",
			      (unsigned long long)a.kernel_modules);
	if (a.aux_truncated || a.lost_records)
		tk_buf_printf(out, "  lost:     %llu trace losses in the kernel, %llu samples\n",
			      (unsigned long long)a.aux_truncated,
			      (unsigned long long)a.lost_records);
	if (parts.nparts)
		tk_buf_printf(out, "  parts:    %zu files of perf record --threads (data.0 to "
			      "data.%zu), read after data\n", parts.nparts, parts.nparts - 1);
	if (!o->quiet)
		tk_perf_warn_overlaps(&a, file, cli_msg, NULL);
	tk_perf_aux_free(&a);
	tk_perf_parts_close(&parts);
	return rc > 0 ? EXIT_SKIPPED : EXIT_CLEAN;
}

static int info_ipt(const struct cli_opts *o, const char *file, struct tk_input *in,
		    struct tk_buf *out)
{
	const uint8_t *data;
	size_t len;
	struct tk_ipt_stats st;
	int rc;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	struct tk_ipt_scan_opts so = {
		.sz = sizeof so, .nthreads = o->jobs ? o->jobs : tk_cpu_count(),
		.on_error = ipt_info_error, .ctx = (void *)file,
	};
	rc = tk_ipt_scan_parallel(data, len, &so, &st);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
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
	return st.gaps.count ? EXIT_SKIPPED : EXIT_CLEAN;
}

/* xtrace: who was traced, instruction counts per EL, snapshots, vector length, time span. */
static int xtrace_details(const struct cli_opts *o, const char *file, struct tk_input *in,
			  const struct tk_format_info *fi, struct tk_buf *out)
{
	struct cli_xtrace x;
	struct tk_xtrace_stats s;
	struct tk_gap_stats gaps = { 0 };
	int rc = cli_xtrace_open(o, file, in, fi, &x);
	if (rc)
		return rc;
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(x.t);
	const struct tk_xtrace_header *h = sf ? tk_xtrace_snapfile_header(sf) : NULL;
	int core = h ? h->stream_type == 1 : x.name.hint == 13;
	if (x.name.hint) {
		tk_buf_printf(out, "  %s: %llu (hint #%u", core ? "core" : "thread",
			      (unsigned long long)x.name.id, x.name.hint);
		if (x.name.hint == 13)
			tk_buf_puts(out, ", secondary core");
		tk_buf_printf(out, "), collection started at %llu\n",
			      (unsigned long long)x.name.timestamp);
	} else {
		tk_buf_puts(out, "  thread/core: unknown (name is not xtrace.TIME.ID.hintN.*.bin)\n");
	}
	if (x.insn_path != file && x.insn_path)
		tk_buf_printf(out, "  instruction file: %s (%zu bytes)\n", x.insn_path, x.n);
	if (x.snap_path && x.snap_path != file)
		tk_buf_printf(out, "  snapshot file: %s (%zu bytes)\n", x.snap_path, x.sn);
	if (x.insn) {
		tk_xtrace_stats_init(&s, TK_XT_STATS_COUNTS);
		rc = cli_xtrace_stats(o, &x, &s, &gaps, TK_XT_STATS_COUNTS);
		uint64_t items = 0;
		for (int k = 0; k < TK_XT__COUNT; k++)
			items += s.items[k];
		tk_buf_printf(out, "  instructions: %llu (EL0 %llu, EL1 %llu",
			      (unsigned long long)(s.insns[0] + s.insns[1] + s.insns[2] + s.insns[3]),
			      (unsigned long long)s.insns[0], (unsigned long long)s.insns[1]);
		if (s.insns[2] || s.insns[3])
			tk_buf_printf(out, ", EL2 %llu, EL3 %llu", (unsigned long long)s.insns[2],
				      (unsigned long long)s.insns[3]);
		tk_buf_printf(out, "), %llu items, %llu memory accesses\n", (unsigned long long)items,
			      (unsigned long long)(s.loads + s.stores));
		if (s.time_first != TK_TIME_NONE)
			tk_buf_printf(out, "  time span: %llu .. %llu (%llu ticks, %llu TIME items)\n",
				      (unsigned long long)s.time_first, (unsigned long long)s.time_last,
				      (unsigned long long)(s.time_last - s.time_first),
				      (unsigned long long)s.items[TK_XT_TIME]);
		else
			tk_buf_puts(out, "  time span: no TIME items (memory order not recorded)\n");
		tk_xtrace_stats_free(&s);
	} else {
		tk_buf_puts(out, "  instruction file: not found beside it\n");
	}
	if (sf) {
		const struct tk_xtrace_snap_layout *l = tk_xtrace_snapfile_layout(sf);
		size_t ns = tk_xtrace_snapfile_count(sf);
		tk_buf_printf(out, "  snapshots: %zu, %u bytes each, vector length %u bits\n", ns,
			      l->size, ns ? l->vl_bits : 0);
		/* the header says which count; the interval is what the snapshots show */
		uint64_t every = tk_xtrace_snapfile_interval(sf);
		char iv[32] = "1M";
		if (every && every != 1000000)
			snprintf(iv, sizeof iv, "%llu", (unsigned long long)every);
		if (h)
			tk_buf_printf(out, "  snapshot header: version %llu, global snapshot %u, "
				      "every %s %s instructions, %s stream, memory order %s\n",
				      (unsigned long long)h->version, h->global_snapshot, iv,
				      h->split_type ? "total" : "user",
				      h->stream_type ? "core" : "thread",
				      h->mem_order ? "recorded" : "not recorded");
		else
			tk_buf_puts(out, "  snapshot header: none (old trace)\n");
		if (ns) {
			struct tk_xtrace_snapshot a, b;
			tk_xtrace_snapfile_get(sf, 0, &a);
			tk_xtrace_snapfile_get(sf, ns - 1, &b);
			tk_buf_printf(out, "  snapshot range: user instructions %llu .. %llu, "
				      "total %llu .. %llu\n", (unsigned long long)a.user_insns,
				      (unsigned long long)b.user_insns, (unsigned long long)a.total_insns,
				      (unsigned long long)b.total_insns);
		}
	} else {
		tk_buf_puts(out, "  snapshots: no snapshot file beside it\n");
	}
	int g = cli_xtrace_report(&x, file, &gaps);
	cli_xtrace_close(&x);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return g;
}

/* Set when a pipe was read to its end for its size: readers cannot look at it again. */
static int input_drained;

/* Kanata: what the reader finds, in one line (tracekit stats has the rest). */
static int info_kanata(const char *file, struct tk_input *in, struct tk_buf *out)
{
	struct tk_kanata_stats_opts so = { .sz = sizeof so };
	struct tk_kanata_stats st;
	size_t lanes = 0;
	int rc = tk_kanata_stats_compute(in, &so, &st);

	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		tk_kanata_stats_free(&st);
		return EXIT_INPUT;
	}
	for (size_t i = 0; i < st.nstages; i++) {
		size_t j = 0;
		while (j < i && strcmp(st.stages[j].lane, st.stages[i].lane))
			j++;
		lanes += j == i;
	}
	const struct tk_kanata_counts *c = &st.counts;
	tk_buf_printf(out, "  %llu instructions (%llu retired, %llu flushed, %llu in flight at end), "
		      "cycles %lld to %lld, %zu stages in %zu lane(s), %zu thread(s), %llu lines\n",
		      (unsigned long long)c->insns, (unsigned long long)c->retired,
		      (unsigned long long)c->flushed, (unsigned long long)c->in_flight,
		      (long long)c->first_cycle, (long long)c->last_cycle, st.nstages, lanes,
		      st.nthreads, (unsigned long long)c->lines);
	if (c->errors)
		tk_buf_printf(out, "  %llu lines skipped (tracekit check %s lists them)\n",
			      (unsigned long long)c->errors, file);
	rc = c->errors ? EXIT_SKIPPED : EXIT_CLEAN;
	tk_kanata_stats_free(&st);
	return rc;
}

/* Format-specific details after the first line; returns an exit status. */


static int xray_info(const struct cli_opts *o, const char *file, struct tk_input *in,
		     struct tk_buf *out)
{
	struct tk_xray_map *map;
	int status = 0, rc;
	struct tk_xray *x = cli_xray_open(o, file, in, &map, &status);
	if (!x)
		return status;
	const struct tk_xray_header *h = tk_xray_header(x);
	if ((rc = tk_xray_walk(x, NULL, NULL)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	const struct tk_xray_stats *st = tk_xray_stats(x);
	double secs = h->cycle_frequency ? (double)(st->last_tsc - st->first_tsc) /
					   (double)h->cycle_frequency : 0;
	tk_buf_printf(out, "  mode:            %s, version %u%s\n",
		      h->type ? "FDR (flight data recorder)" : "basic", h->version,
		      h->big_endian ? ", big-endian" : "");
	tk_buf_printf(out, "  frequency:       %llu Hz (constant TSC: %s, non-stop TSC: %s)\n",
		      (unsigned long long)h->cycle_frequency, h->constant_tsc ? "yes" : "no",
		      h->nonstop_tsc ? "yes" : "no");
	if (h->type && h->version == 1)
		tk_buf_printf(out, "  buffer size:     %llu bytes\n",
			      (unsigned long long)h->v1_buffer_size);
	tk_buf_printf(out, "  %s %llu\n", h->type ? "buffers:        " : "record runs:    ",
		      (unsigned long long)st->buffers);
	tk_buf_printf(out, "  records:         %llu (%llu function, %llu custom events, %llu typed events, %llu call arguments)\n",
		      (unsigned long long)st->records, (unsigned long long)st->function_records,
		      (unsigned long long)st->custom_events, (unsigned long long)st->typed_events,
		      (unsigned long long)st->call_args);
	tk_buf_printf(out, "  threads:         %zu\n  cpus:            %llu\n",
		      tk_xray_thread_count(x), (unsigned long long)st->cpus);
	tk_buf_printf(out, "  time span:       tsc %llu .. %llu (%.6f s)\n",
		      (unsigned long long)st->first_tsc, (unsigned long long)st->last_tsc, secs);
	if (st->orphan_exits)
		tk_buf_printf(out, "  orphan exits:    %llu\n", (unsigned long long)st->orphan_exits);
	for (size_t i = 0; i < tk_xray_thread_count(x); i++) {
		const struct tk_xray_thread_info *t = tk_xray_thread(x, i);
		tk_buf_printf(out, "  thread %u (process %u): %llu %s, %llu records",
			      t->tid, t->pid, (unsigned long long)t->buffers,
			      h->type ? "buffers" : "runs", (unsigned long long)t->records);
		if (t->orphan_exits)
			tk_buf_printf(out, ", %llu orphan exits", (unsigned long long)t->orphan_exits);
		tk_buf_putc(out, '\n');
	}
	rc = cli_xray_finish(file, x);
	tk_xray_free(x);
	tk_xray_map_free(map);
	return rc > status ? rc : status;
}

static int details(const struct cli_opts *o, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *out)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_details(o, file, in, fi, out);
	case TK_FMT_TKBT:
		return details_btrace(file, in, out);
	case TK_FMT_XRAY:
		return xray_info(o, file, in, out);
	case TK_FMT_IPT:
		return info_ipt(o, file, in, out);
	case TK_FMT_PERF:
		return info_perf(o, file, in, out);
	case TK_FMT_KANATA:
		return input_drained ? EXIT_CLEAN : info_kanata(file, in, out);
	default:
		return EXIT_CLEAN;
	}
}

static int run(struct cli_opts *o)
{
	struct tk_buf out;
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "info")))
		return rc;
	if ((rc = cli_out_open(o, &out)))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		const char *file = o->args[i];
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, file, &in, &fi))) {
			status = rc > status ? rc : status;
			continue;
		}
		tk_buf_puts(&out, file);
		tk_buf_puts(&out, ": ");
		tk_buf_puts(&out, tk_format_name(fi.id));
		tk_buf_puts(&out, " (");
		tk_buf_puts(&out, tk_format_description(fi.id));
		tk_buf_puts(&out, ")");
		if (fi.version) {
			tk_buf_puts(&out, ", version ");
			tk_buf_u64(&out, fi.version);
		}
		input_drained = 0;
		if (tk_input_file_size(in) == 0 && (fi.id == TK_FMT_KANATA || fi.id == TK_FMT_GEM5_O3)) {
			/* a pipe of text: read it to the end to know its size (its lines
			 * are not kept: a log can be larger than memory) */
			input_drained = 1;
			static char sink[1 << 16];
			long r;
			while ((r = tk_input_read(in, sink, sizeof sink)) > 0)
				;
			if (r < 0)
				status = EXIT_SKIPPED;
		} else if (tk_input_file_size(in) == 0) {
			/* a pipe of a binary format: its summary reads it whole, so it is
			 * read into memory now (which gives its size too), as decode does */
			const uint8_t *data;
			size_t len;
			if ((rc = tk_input_map(in, &data, &len)) < 0) {
				tk_buf_putc(&out, '\n');
				cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
				status = EXIT_INPUT;
				tk_input_free(in);
				continue;
			}
		}
		tk_buf_puts(&out, ", ");
		tk_buf_u64(&out, tk_input_file_size(in));
		tk_buf_puts(&out, " bytes");
		switch (tk_input_compression(in)) {
		case TK_COMP_GZIP: tk_buf_puts(&out, " (gzip)"); break;
		case TK_COMP_ZSTD: tk_buf_puts(&out, " (zstd)"); break;
		default: break;
		}
		if (fi.detail[0] && !o->format) {
			tk_buf_puts(&out, ", ");
			tk_buf_puts(&out, fi.detail);
		}
		tk_buf_putc(&out, '\n');
		rc = cli_input_status(in, details(o, file, in, &fi, &out));
		if (rc > status)
			status = rc;
		tk_input_free(in);
	}
	rc = cli_out_close(&out);
	return rc > status ? rc : status;
}

const struct cli_command cli_cmd_info = {
	.name = "info",
	.summary = "recognise trace files and summarise them",
	.usage = usage,
	.run = run,
};
