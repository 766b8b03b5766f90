/* tracekit convert: convert a trace to another format. Each format's handler is one case below; the work is in the library. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tracekit/out.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
	"                  branch trace (btrace): ipt, one thread's raw Intel PT stream as\n"
	"                  hardware with return compression writes it (a return to its call is\n"
	"                  a TNT bit, not a TIP); same flow, profile and times as the trace\n"
	"  --no-retcomp    (btrace --to ipt) the stream as recorded: every return a TIP\n"
	"  --tid N         (btrace) the thread to convert; default the first\n"
	"  --module-path DIR  (btrace) a recorded module that moved: DIR/NAME with its\n"
	"                  build-id (so does an --elf FILE)\n"
	"  --tsc-hz N      (Intel PT, btrace) TSC ticks per second for timelines (0: ticks)\n"
	"  --no-demangle   names as the binary has them (default: C++ and Rust demangled)\n"
	"  --short-names   names without template arguments and parameters\n"
	"  -o FILE         write to FILE\n"
	"\n"
	"Kanata pipeline logs:\n"
	"  --to kanata     normalised Kanata (the four-column form Konata reads)\n"
	"  --cycles A:B    with --to kanata: only instructions alive in cycles [A, B), renumbered,\n"
	"                  as a valid smaller log; instructions alive at A start there\n"
	"  --to perfetto   Perfetto protobuf, --to chrome (or json) Chrome JSON: a slice per\n"
	"                  instruction with its stages nested, tracks per thread, row and lane;\n"
	"                  1 cycle = 1 us from the first cycle; --cycles A:B clips to that window\n"
	"gem5 O3PipeView text:\n"
	"  --to kanata     Kanata log (F Dc Rn Ds Is Cm Rt), sorted by seqNum; CPUs named in a\n"
	"                  debug prefix (\"system.cpu1:\") become Kanata threads (1)\n"
	"  --tid N         only the CPU mapped to thread N\n"
	"Traces with calls (a slice per call, per thread):\n"
	"  --to perfetto   Perfetto protobuf trace (ui.perfetto.dev, trace_processor)\n"
	"  --to chrome     Chrome trace-event JSON\n"
	"  --time A:B      only calls running in ticks [A, B) (clipped to the window)\n"
	"  --max-events N  at most N slices (default 10 million)\n"
	"  --elf FILE[:BASE]  slice names from FILE's symbols\n"
	"LLVM XRay logs:\n"
	"  --to xray-yaml  llvm-xray convert -f yaml, record for record (the default)\n"
	"  --to chrome     Chrome trace-event JSON, --to perfetto Perfetto protobuf: a slice per\n"
	"                  call on a track per thread (shared timeline writer)\n"
	"  --instr-map F   ELF binary or `llvm-xray extract` YAML: function names\n"
	"Intel PT raw stream (--elf FILE[:BASE], --raw FILE:ADDR give the code):\n"
	"  --to ipt        the same flow again, with return compression\n"
	"Intel PT in perf.data:\n"
	"  --to ipt -o F   each queue's raw stream (F, or F.cpuN / F.threadN), losses as OVF;\n"
	"                  the code's --elf arguments (tracekit decode, ptxed) on stderr\n"
	"Kunpeng xtrace (instruction or snapshot file; the other is found by name):\n"
	"  --slice K:N     write FILE.xinsndata.bin and FILE.xsnapshot.bin (-o FILE) that start\n"
	"                  at snapshot K and hold N instructions: a simulator checkpoint\n"
	"  --to perfetto   Perfetto timeline of calls (also: chrome); --elf FILE names them;\n"
	"                  time is the instruction number\n";

static void kanata_diag(void *ctx, const struct tk_kanata_diag *d)
{
	const char *file = ctx;
	if (d->level == TK_LOG_ERROR)
		fprintf(stderr, "tracekit: %s:%llu: error: %s\n", file, (unsigned long long)d->line, d->msg);
}

struct count_ctx {
	const char *file;
	uint64_t errors;
};

static void kanata_diag_count(void *ctx, const struct tk_kanata_diag *d)
{
	struct count_ctx *k = ctx;
	if (d->level != TK_LOG_ERROR)
		return;
	if (k->errors++ < 20)
		kanata_diag((void *)k->file, d);
}

static const char *kanata_stage_name(void *ctx, unsigned stage, const char **lane)
{
	return tk_kanata_decoder_stage(*(struct tk_kanata_decoder **)ctx, stage, lane);
}

/* Chrome / Perfetto: neutral pipeline events into the shared timeline writer, 1 cycle = 1 us.
 * --cycles A:B counts from the log's first cycle (its C=), as the timeline's time does. */
static int kanata_timeline(struct cli_opts *o, const char *file, struct tk_input *in,
			   enum tk_timeline_kind kind, struct tk_buf *out, uint64_t from, uint64_t to,
			   int *status)
{
	struct tk_kanata_decoder *d = NULL;
	struct tk_timeline_opts to_ = { .sz = sizeof to_, .kind = kind, .clock = { 1000000 },
					.time_begin = from, .time_end = to == UINT64_MAX ? 0 : to,
					.max_events = o->max_events, .process_name = "kanata",
					.stage_name = kanata_stage_name, .stage_ctx = &d };
	int err, rc;
	struct tk_timeline *t = tk_timeline_new(out, &to_, &err);
	if (!t)
		return err;
	if (!(d = tk_kanata_decoder_new(tk_timeline_sink(t), &err))) {
		tk_timeline_free(t);
		return err;
	}
	rc = tk_kanata_decode(d, in);
	int frc = tk_timeline_finish(t);
	const struct tk_gap_stats *g = tk_kanata_decoder_gaps(d);
	if (rc >= 0)
		*status = cli_report_gaps(file, g, "skipped line");
	uint64_t dropped;
	tk_timeline_slices(t, &dropped);
	if (dropped && !o->quiet)
		fprintf(stderr, "tracekit: %s: %llu instructions left out (--max-events)\n", file,
			(unsigned long long)dropped);
	tk_kanata_decoder_free(d);
	tk_timeline_free(t);
	return rc < 0 ? rc : frc;
}

static int convert_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct count_ctx cc = { file, 0 };
	struct tk_kanata_conv_opts co = { .sz = sizeof co, .cycle_from = INT64_MIN,
					  .cycle_to = INT64_MAX, .diag = kanata_diag_count,
					  .ctx = &cc };
	const char *to = o->to ? o->to : "kanata";
	struct tk_buf out;
	int rc;

	if (o->cycles) {
		uint64_t a = 0, b = UINT64_MAX;
		if (cli_parse_range(o->cycles, &a, &b) < 0 || a >= b) {
			cli_error(NULL, UINT64_MAX, "--cycles %s: expected A:B with A < B", o->cycles);
			return EXIT_USAGE;
		}
		co.cycle_from = (int64_t)a;
		co.cycle_to = b > INT64_MAX ? INT64_MAX : (int64_t)b;
	}
	enum tk_timeline_kind tl = !strcmp(to, "json") ? TK_TIMELINE_CHROME : tk_timeline_kind_by_name(to);
	if (!tl && strcmp(to, "kanata")) {
		cli_error(NULL, UINT64_MAX, "convert: Kanata input: --to %s: expected kanata, chrome or perfetto",
			  to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	int tl_status = 0;
	if (tl)
		rc = kanata_timeline(o, file, in, tl, &out, o->cycles ? (uint64_t)co.cycle_from : 0,
				     o->cycles ? (uint64_t)co.cycle_to : UINT64_MAX, &tl_status);
	else if (o->cycles)
		rc = tk_kanata_cut(in, &out, &co);
	else
		rc = tk_kanata_rewrite(in, &out, &co);
	int status = cli_out_close(&out);
	if (rc < 0 && status != EXIT_OUTPUT) {   /* a failed write: cli_out_close said so */
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (cc.errors > 20)
		fprintf(stderr, "tracekit: %s: %llu more errors (tracekit check lists all)\n", file,
			(unsigned long long)(cc.errors - 20));
	if ((cc.errors || tl_status) && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	return status;
}

static void gem5_diag(void *ctx, uint64_t line, int is_error, const char *msg)
{
	fprintf(stderr, "tracekit: %s:%llu: %s: %s\n", (const char *)ctx, (unsigned long long)line,
		is_error ? "error" : "warning", msg);
}

static int convert_gem5(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_gem5_opts go = { .sz = sizeof go, .diag = gem5_diag, .ctx = (void *)file,
				   .select_cpu = o->has_tid, .cpu = (int64_t)o->tid };
	struct tk_gem5_result res;
	const char *to = o->to ? o->to : "kanata";
	struct tk_buf out;
	int rc;

	if (strcmp(to, "kanata")) {
		cli_error(NULL, UINT64_MAX, "convert: gem5 input: --to %s: expected kanata", to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	rc = tk_gem5_to_kanata(in, &out, &go, &res);
	int status = cli_out_close(&out);
	if (rc < 0 && status != EXIT_OUTPUT) {   /* a failed write: cli_out_close said so */
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (!o->quiet)
		fprintf(stderr, "tracekit: %s: %llu instructions (%llu retired, %llu squashed), "
			"%llu ticks per cycle, %llu CPU%s\n", file, (unsigned long long)res.insns,
			(unsigned long long)res.retired, (unsigned long long)res.squashed,
			(unsigned long long)res.ticks_per_cycle, (unsigned long long)res.cpus,
			res.cpus == 1 ? "" : "s");
	if (o->has_tid && !res.cpus) {
		cli_error(file, UINT64_MAX, "no records of CPU %llu (--tid)", (unsigned long long)o->tid);
		if (status < EXIT_SKIPPED)
			status = EXIT_SKIPPED;
	}
	if (res.duplicates && !o->quiet)
		fprintf(stderr, "tracekit: %s: %llu seqNums seen twice: several CPUs without a cpu name "
			"prefix cannot be separated\n", file, (unsigned long long)res.duplicates);
	if ((res.skipped_lines || res.out_of_order || res.duplicates) && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	return status;
}

/* xtrace --to perfetto|chrome: calls as slices on the thread's track (time = instruction
 * number), chunk after chunk into the streaming timeline writer. */
static int xtrace_timeline(struct cli_opts *o, const char *file, struct tk_input *in,
			   const struct tk_format_info *fi, enum tk_timeline_kind kind)
{
	struct cli_xtrace x;
	struct tk_gap_stats gaps = { 0 };
	struct tk_sym *sym = NULL;
	struct tk_buf out;
	int rc, err = 0;
	if ((rc = cli_xtrace_open_insn(o, file, in, fi, &x)))
		return rc;
	if ((rc = cli_xtrace_symbols(o, &sym)) || (rc = cli_out_open(o, &out))) {
		tk_sym_free(sym);
		cli_xtrace_close(&x);
		return rc;
	}
	struct tk_timeline_opts to = { .sz = sizeof to, .kind = kind, .sym = sym,
				       .max_events = o->max_events, .process_name = x.insn_path };
	struct tk_timeline *tl = tk_timeline_new(&out, &to, &err);
	rc = tl ? 0 : err;
	uint32_t track = (uint32_t)x.name.id;
	if (tl) {
		char name[64];
		snprintf(name, sizeof name, "%s %u", x.name.hint == 13 ? "core" : "thread", track);
		tk_timeline_track_name(tl, track, name);
	}
	for (size_t ci = 0; tl && rc >= 0 && ci < tk_xtrace_nchunks(x.t); ci++)
		rc = tk_xtrace_decode_chunk(x.t, ci, track, 0, tk_timeline_sink(tl), &gaps);
	if (tl && rc >= 0)
		rc = tk_timeline_finish(tl);
	if (tl) {
		uint64_t dropped = 0;
		tk_timeline_slices(tl, &dropped);
		if (dropped)
			cli_warn(file, UINT64_MAX, "%llu slices left out (--max-events)",
				 (unsigned long long)dropped);
	}
	tk_timeline_free(tl);
	int st = cli_out_close(&out);
	if (rc < 0 && st != EXIT_OUTPUT) {
		cli_error(file, UINT64_MAX, "timeline: %s", tk_strerror(rc));
		st = EXIT_INPUT;
	}
	int g = cli_xtrace_report(&x, file, &gaps);
	tk_sym_free(sym);
	cli_xtrace_close(&x);
	return st > g ? st : g;
}

/* xtrace --slice K:N: instruction + snapshot file starting at snapshot K, N instructions. */
static int xtrace_slice(struct cli_opts *o, const char *file, struct tk_input *in,
			const struct tk_format_info *fi)
{
	uint64_t k, count;
	char insn_out[4096], snap_out[4096];
	enum tk_timeline_kind tk = o->to ? tk_timeline_kind_by_name(o->to) : 0;
	if (!o->slice && tk)
		return xtrace_timeline(o, file, in, fi, tk);
	if (!o->slice || cli_parse_range(o->slice, &k, &count) < 0 || !o->output) {
		cli_error(NULL, UINT64_MAX, "convert: xtrace input needs --slice K:N and -o FILE, or --to perfetto|chrome "
			  "(see: tracekit help convert)");
		return EXIT_USAGE;
	}
	size_t ol = strlen(o->output);
	snprintf(insn_out, sizeof insn_out, "%s%s", o->output,
		 ol >= 14 && strcmp(o->output + ol - 14, ".xinsndata.bin") == 0 ? "" : ".xinsndata.bin");
	if (tk_xtrace_companion(insn_out, snap_out, sizeof snap_out) < 0) {
		cli_error(insn_out, UINT64_MAX, "output name too long");
		return EXIT_USAGE;
	}
	struct cli_xtrace x;
	int rc = cli_xtrace_open(o, file, in, fi, &x);
	if (rc)
		return rc;
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(x.t);
	struct tk_xtrace_snapshot s;
	if (!x.insn || !sf || k >= tk_xtrace_snapfile_count(sf)) {
		cli_error(file, UINT64_MAX, "convert --slice: no snapshot %llu (the trace has %zu)",
			  (unsigned long long)k, sf ? tk_xtrace_snapfile_count(sf) : 0);
		cli_xtrace_close(&x);
		return EXIT_USAGE;
	}
	tk_xtrace_snapfile_get(sf, (size_t)k, &s);
	if (s.file_no != 0 || s.index >= x.n || (x.insn[s.index] & 0x3f) != 0x09) {
		cli_error(x.snap_path, s.offset + 8, "snapshot %llu does not point at a PCINST in "
			  "the instruction file; cannot start a slice there", (unsigned long long)k);
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
	/* the input's companion is an input too */
	struct cli_opts io = *o;
	const char *ins[CLI_MAX_LIST + 2];
	io.nargs = 0;
	for (int i = 0; i < o->nargs && i < CLI_MAX_LIST; i++)
		ins[io.nargs++] = o->args[i];
	ins[io.nargs++] = x.insn_path;
	ins[io.nargs++] = x.snap_path;
	io.args = (char **)ins;
	struct tk_outfile *ifile = cli_outfile_open(&io, insn_out, &rc);
	struct tk_outfile *sfile = ifile ? cli_outfile_open(&io, snap_out, &rc) : NULL;
	if (!sfile) {
		if (ifile)
			tk_outfile_close(ifile, 0);
		cli_xtrace_close(&x);
		return rc;
	}
	int ifd = tk_outfile_fd(ifile), sfd = tk_outfile_fd(sfile);
	const struct tk_xtrace_header *h = tk_xtrace_snapfile_header(sf);
	struct tk_xtrace_writer_opts wo = { .sz = sizeof wo,
					    .vl_bits = tk_xtrace_snapfile_layout(sf)->vl_bits };
	if (h)
		wo.header = *h;
	else
		wo.no_header = 1;
	int err = 0;
	struct tk_xtrace_writer *w = tk_xtrace_writer_new(ifd, sfd, &wo, &err);
	if (!w) {
		cli_error(insn_out, UINT64_MAX, "%s", tk_strerror(err));
		tk_outfile_close(ifile, 0);
		tk_outfile_close(sfile, 0);
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
	struct tk_xtrace_cursor c;
	struct tk_xtrace_item it;
	struct tk_gap_stats gaps = { 0 };
	size_t next_snap = (size_t)k, nsnaps = tk_xtrace_snapfile_count(sf), written = 0;
	uint64_t insns = 0;
	tk_xtrace_cursor_init(&c, x.insn, (size_t)s.index, x.n);
	for (;;) {
		int r = tk_xtrace_next(&c, &it);
		if (r == 0)
			break;
		if (r < 0) {
			cli_error(x.insn_path, c.off, "%s (token 0x%02x); the slice ends here",
				  r == -TK_E_BAD_OPCODE ? "unknown token" : "item runs past the end",
				  x.insn[c.off]);
			tk_gap_stats_add(&gaps, c.off, x.n - c.off);
			break;
		}
		if (it.kind <= TK_XT_PCINST && insns++ == count)
			break;
		/* Every snapshot at this position goes into the slice, re-pointed. */
		while (next_snap < nsnaps) {
			struct tk_xtrace_snapshot t;
			tk_xtrace_snapfile_get(sf, next_snap, &t);
			if (t.file_no != 0 || t.index > it.offset)
				break;
			if (t.index == it.offset && it.kind == TK_XT_PCINST) {
				tk_xtrace_write_snapshot(w, &t);
				written++;
			}
			next_snap++;
		}
		tk_xtrace_write_raw(w, x.insn + it.offset, it.len);
	}
	rc = tk_xtrace_writer_close(w);
	int errnum = errno;
	if (rc >= 0 && (tk_outfile_close(ifile, 1) < 0 || tk_outfile_close(sfile, 1) < 0)) {
		rc = -TK_E_IO;
		errnum = errno;
	} else if (rc < 0) {
		tk_outfile_close(ifile, 0);
		tk_outfile_close(sfile, 0);
	}
	if (rc < 0) {
		cli_error(insn_out, UINT64_MAX, "write failed: %s",
			  rc == -TK_E_IO ? strerror(errnum) : tk_strerror(rc));
		cli_xtrace_close(&x);
		return EXIT_OUTPUT;
	}
	if (!o->quiet)
		fprintf(stderr, "tracekit: wrote %s and %s: %llu instructions from snapshot %llu, "
			"%zu snapshots\n", insn_out, snap_out,
			(unsigned long long)(insns > count ? count : insns), (unsigned long long)k,
			written);
	cli_xtrace_close(&x);
	return cli_report_gaps(file, &gaps, "damaged region");
}

/* Branch trace --to perfetto|chrome (a timeline) or any profile output. */
static int convert_btrace_events(struct cli_opts *o, const char *file, struct tk_input *in)
{
	int timeline = tk_timeline_kind_by_name(o->to) != 0, status;
	struct cli_btrace cb;

	if (!timeline && !tk_out_kind_by_name(o->to)) {
		cli_error(NULL, UINT64_MAX, "convert: a branch trace converts to ipt, perfetto, chrome, "
			  "folded, pprof or a profile output, not '%s'", o->to);
		return EXIT_USAGE;
	}
	if (!timeline)
		return cli_profile_file(o, file, in, &(struct tk_format_info){ .id = TK_FMT_TKBT });
	if ((status = cli_btrace_open(o, file, in, &cb)))
		return status;
	struct cli_timeline ct;
	if ((status = cli_timeline_open(o, cb.sym, cli_btrace_clock(o, &cb), &ct)) == 0) {
		status = cli_btrace_events(o, file, &cb, tk_timeline_sink(ct.tl));
		int crc = cli_timeline_close(&ct);
		if (crc > status)
			status = crc;
	}
	cli_btrace_close(&cb);
	return status;
}

/* A PT stream written again as hardware with return compression writes it, into OUT;
 * what the decoder lost goes into GAPS. Returns an exit status. */
static int reencode(struct cli_opts *o, const char *file, const struct tk_image *img,
		    const uint8_t *pt, size_t n, struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_ipt_reencode_stats st;
	struct tk_ipt_flow_opts fo = cli_ipt_flow_opts(o, img);
	int rc = tk_ipt_reencode(pt, n, &fo, NULL, out, &st);

	if (rc < 0) {
		cli_error(file, UINT64_MAX, "re-encoding failed: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	tk_gap_stats_merge(gaps, &st.flow.gaps);
	if (!o->quiet)
		fprintf(stderr, "tracekit: %s: %llu instructions, %llu of %llu returns compressed; "
			"%llu TIPs, %llu bytes (was %zu)\n", file, (unsigned long long)st.flow.insns,
			(unsigned long long)st.compressed, (unsigned long long)st.returns,
			(unsigned long long)st.tips, (unsigned long long)st.bytes, n);
	if (st.dropped)
		cli_warn(file, UINT64_MAX, "%llu events (PTWRITE, power, TSX, paging) are not in the "
			 "re-encoded stream", (unsigned long long)st.dropped);
	return EXIT_CLEAN;
}

/* One thread's stream re-encoded, against the recorded modules (plus --elf/--raw). */
static int btrace_retcomp(struct cli_opts *o, const char *file, const struct tk_btrace *bt,
			  const uint8_t *pt, size_t n, struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_image *img;
	int status;

	if (!(img = cli_image_load(o)))
		return EXIT_INPUT;
	int missing = cli_btrace_modules(o, file, bt, img, NULL);
	status = reencode(o, file, img, pt, n, out, gaps);
	if (missing && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;   /* code missing: its trace is left out as gaps */
	tk_image_free(img);
	return status;
}

/* Branch trace -> one thread's raw Intel PT stream (--tid N, default the first thread):
 * with return compression (decoded and written again), or with --no-retcomp as recorded. */
static int convert_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len, n;
	uint8_t *pt;
	int err = 0, status = EXIT_CLEAN;

	if (o->to && strcmp(o->to, "ipt") != 0)
		return convert_btrace_events(o, file, in);
	if (!o->to) {
		cli_error(file, UINT64_MAX, "convert: a branch trace converts --to ipt, perfetto, "
			  "chrome, folded, pprof or a profile output");
		return EXIT_USAGE;
	}
	if ((err = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = cli_btrace_read(file, data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	size_t k = 0, nt = tk_btrace_thread_count(bt);
	if (o->has_tid) {
		while (k < nt && tk_btrace_thread(bt, k)->tid != o->tid)
			k++;
		if (k == nt) {
			cli_error(file, UINT64_MAX, "convert: no thread %llu in this trace",
				  (unsigned long long)o->tid);
			tk_btrace_free(bt);
			return EXIT_USAGE;
		}
	} else if (!nt) {
		cli_error(file, UINT64_MAX, "convert: the trace has no thread stream");
		tk_btrace_free(bt);
		return EXIT_INPUT;
	} else if (nt > 1 && !o->quiet) {
		cli_warn(file, UINT64_MAX, "%zu threads; writing thread %u (choose with --tid)", nt,
			 tk_btrace_thread(bt, 0)->tid);
	}
	if ((err = tk_btrace_thread_stream(bt, k, &pt, &n)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		tk_btrace_free(bt);
		return EXIT_INPUT;
	}
	struct tk_gap_stats gaps = *tk_btrace_gaps(bt);
	struct tk_buf out;
	if ((status = cli_out_open(o, &out)) == 0) {
		if (o->no_retcomp)
			tk_buf_put(&out, pt, n);
		else
			status = btrace_retcomp(o, file, bt, pt, n, &out, &gaps);
		int crc = cli_out_close(&out);
		if (crc > status)
			status = crc;
	}
	free(pt);
	if (!tk_btrace_info(bt)->complete && status == EXIT_CLEAN)
		status = EXIT_SKIPPED;
	int g = cli_report_gaps(file, &gaps, o->no_retcomp ? "damaged record" : "gap");
	tk_btrace_free(bt);
	return g > status ? g : status;
}



/* Chrome / Perfetto through the shared timeline writer, fed by the parallel decoder;
 * --time A:B (TSC ticks) and --max-events N as for the other formats. *DROPPED: slices
 * left out by them. */
static int xray_timeline(struct tk_xray *x, const struct tk_xray_map *map,
			 enum tk_timeline_kind kind, const struct cli_opts *o, struct tk_buf *out,
			 uint64_t *dropped)
{
	struct tk_sym_opts so = cli_sym_opts(o);
	int err, rc;
	so.no_dwarf = 1;
	struct tk_sym *sym = tk_sym_new(&so, &err);
	if (!sym)
		return err;
	if ((rc = tk_xray_map_to_sym(map, sym)) < 0) {
		tk_sym_free(sym);
		return rc;
	}
	struct tk_timeline_opts to = { .sz = sizeof to, .kind = kind, .sym = sym,
				       .clock = { tk_xray_header(x)->cycle_frequency },
				       .max_events = o->max_events, .process_name = "xray" };
	if (o->time_window) {
		/* checked by the caller */
		cli_parse_range(o->time_window, &to.time_begin, &to.time_end);
		if (to.time_end == UINT64_MAX)
			to.time_end = 0;
	}
	struct tk_timeline *t = tk_timeline_new(out, &to, &err);
	if (!t) {
		tk_sym_free(sym);
		return err;
	}
	for (size_t i = 0; i < tk_xray_thread_count(x); i++) {
		char name[64];
		const struct tk_xray_thread_info *ti = tk_xray_thread(x, i);
		snprintf(name, sizeof name, "thread %u (process %u)", ti->tid, ti->pid);
		tk_timeline_track_name(t, (uint32_t)i, name);
	}
	rc = tk_xray_decode(x, tk_timeline_sink(t));
	int frc = tk_timeline_finish(t);
	tk_timeline_slices(t, dropped);
	tk_timeline_free(t);
	tk_sym_free(sym);
	return rc < 0 ? rc : frc;
}

static int xray_convert(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_xray_map *map;
	struct tk_buf out;
	int status = 0, rc;
	const char *to = o->to ? o->to : "xray-yaml";

	enum tk_timeline_kind tl = tk_timeline_kind_by_name(to);
	if (strcmp(to, "xray-yaml") && strcmp(to, "yaml") && !tl) {
		cli_error(NULL, UINT64_MAX,
			  "convert: XRay logs convert to xray-yaml, chrome or perfetto, not '%s'", to);
		return EXIT_USAGE;
	}
	uint64_t tb, te, dropped = 0;
	if (tl && o->time_window && cli_parse_range(o->time_window, &tb, &te) < 0) {
		cli_error(NULL, UINT64_MAX, "--time: expected A:B, got '%s'", o->time_window);
		return EXIT_USAGE;
	}
	struct tk_xray *x = cli_xray_open(o, file, in, &map, &status);
	if (!x)
		return status;
	if ((rc = cli_out_open(o, &out))) {
		tk_xray_free(x);
		tk_xray_map_free(map);
		return rc;
	}
	if (tl) {
		rc = xray_timeline(x, map, tl, o, &out, &dropped);
	} else {
		rc = tk_xray_yaml(x, map, &out);
	}
	if (rc < 0 && rc != out.err) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	int wrc = cli_out_close(&out);
	if (wrc > status)
		status = wrc;
	if (dropped)
		cli_warn(file, UINT64_MAX, "%llu calls left out of the timeline (--max-events / --time)",
			 (unsigned long long)dropped);
	rc = cli_xray_finish(file, x);
	tk_xray_free(x);
	tk_xray_map_free(map);
	return rc > status ? rc : status;
}

/* Intel PT --to ipt: the stream with return compression (against --elf/--raw). */
static int ipt_reencode(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_gap_stats gaps = { 0 };
	const uint8_t *data;
	struct tk_image *img;
	struct tk_buf out;
	size_t len;
	int rc, status;

	if (o->no_retcomp) {
		cli_error(NULL, UINT64_MAX, "convert: --no-retcomp is for branch traces; a raw "
			  "stream --to ipt is re-encoded with return compression");
		return EXIT_USAGE;
	}
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (!(img = cli_image_load(o)))
		return EXIT_INPUT;
	if ((status = cli_out_open(o, &out)) == 0) {
		status = reencode(o, file, img, data, len, &out, &gaps);
		int crc = cli_out_close(&out);
		if (crc > status)
			status = crc;
	}
	tk_image_free(img);
	rc = cli_report_gaps(file, &gaps, "gap");
	return rc > status ? rc : status;
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
static int perf_to_ipt(struct cli_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	static const uint8_t ovf[] = { 0x02, 0xf3 };
	struct cli_ipt x;
	int status = 0, lost = 0;

	if (!o->output || !strcmp(o->output, "-")) {
		cli_error(NULL, UINT64_MAX, "convert --to ipt of perf.data writes a file per "
			  "trace queue: give -o FILE");
		return EXIT_USAGE;
	}
	if ((status = cli_ipt_open(o, file, in, fi, 1, &x)))
		return status;
	for (size_t i = 0; i < x.n && !status; i++) {
		const struct cli_ipt_stream *s = &x.s[i];
		struct cli_opts oq = *o;
		char name[4096];
		struct tk_buf out;
		uint64_t at = 0, cut_bytes = 0;

		if (x.n > 1)
			snprintf(name, sizeof name, "%s.%s%u", o->output, x.track_label, s->track);
		else
			snprintf(name, sizeof name, "%s", o->output);
		oq.output = name;
		if ((status = cli_out_open(&oq, &out)))
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
		status = cli_out_close(&out);
		if (!o->quiet)
			fprintf(stderr, "tracekit: %s: %s: %zu bytes of trace, %zu %s marked "
				"with OVF%s\n", name, s->name[0] ? s->name : "stream",
				s->len - (size_t)cut_bytes + s->nbreaks * sizeof ovf, s->nbreaks,
				s->break_reason == TK_GAP_WRAP ? "snapshot gaps" : "losses",
				cut_bytes ? " (packets cut off there left out)" : "");
	}
	if (!status && !o->quiet && (x.nmods || x.kernel_elf)) {
		/* the code, spelled for tracekit decode and ptxed alike */
		fprintf(stderr, "tracekit: the code:");
		for (size_t i = 0; i < x.nmods; i++)
			fprintf(stderr, " --elf %s:0x%llx", x.mods[i].path,
				(unsigned long long)x.mods[i].base);
		if (x.kernel_elf)
			fprintf(stderr, " --elf %s", x.kernel_elf);
		fprintf(stderr, "\n");
	}
	if (!status && (x.skipped || lost))
		status = EXIT_SKIPPED;   /* as decoding it would say */
	cli_ipt_close(&x);
	return status;
}

/* Intel PT: --to folded|pprof (and the other profile outputs) through the shared profile;
 * --to perfetto|chrome through the timeline writer, events in order; --to ipt again with
 * return compression. */
static int ipt_convert(struct cli_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	const char *to = o->to ? o->to : "perfetto";
	enum tk_timeline_kind tl = tk_timeline_kind_by_name(to);
	struct tk_ipt_flow_stats st = { 0 };
	struct tk_sym *sym;
	struct cli_ipt x;
	int status, rc = 0;

	if (!strcmp(to, "ipt")) {
		return fi->id == TK_FMT_PERF ? perf_to_ipt(o, file, in, fi)
					     : ipt_reencode(o, file, in);
	}
	if (!tl && !tk_out_kind_by_name(to)) {
		cli_error(NULL, UINT64_MAX, "convert: Intel PT converts to ipt, perfetto, chrome, "
			  "folded, pprof or a profile output, not '%s'", to);
		return EXIT_USAGE;
	}
	if (!tl)
		return cli_profile_file(o, file, in, fi);
	if ((status = cli_ipt_open(o, file, in, fi, 1, &x)))
		return status;
	if (!(sym = cli_sym_open(o, &status))) {
		cli_ipt_close(&x);
		return status;
	}
	struct cli_timeline ct;

	if (cli_ipt_add_symbols(&x, sym) < 0 ||
	    (status = cli_timeline_open(o, sym, cli_ipt_clock(&x), &ct))) {
		tk_sym_free(sym);
		cli_ipt_close(&x);
		return status ? status : EXIT_INPUT;
	}
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		struct tk_ipt_flow_opts fo = cli_ipt_stream_opts(&x, &x.s[i]);
		struct tk_ipt_flow_stats one = { 0 };

		if (x.perf && (rc = tk_timeline_track_name(ct.tl, fo.track, x.s[i].name)) < 0)
			break;
		rc = tk_ipt_flow_events(x.s[i].data, x.s[i].len, &fo, tk_timeline_sink(ct.tl), &one);
		tk_ipt_flow_stats_add(&st, &one);
		x.s[i].gaps = one.gaps;
	}
	status = cli_timeline_close(&ct);
	tk_sym_free(sym);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		cli_ipt_close(&x);
		return EXIT_INPUT;
	}
	rc = cli_ipt_report(o, file, &x, &st);
	cli_ipt_close(&x);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_slice(o, file, in, fi);
	case TK_FMT_IPT:
	case TK_FMT_PERF:
		return ipt_convert(o, file, in, fi);
	case TK_FMT_TKBT:
		return convert_btrace(o, file, in);
	case TK_FMT_XRAY:
		return xray_convert(o, file, in);
	case TK_FMT_KANATA:
		return convert_kanata(o, file, in);
	case TK_FMT_GEM5_O3:
		return convert_gem5(o, file, in);
	default:
		return cli_unsupported("convert", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	/* profiles of a time window are not built: refused rather than ignored */
	if (o->time_window && o->to && (!strcmp(o->to, "folded") || !strcmp(o->to, "pprof"))) {
		cli_error(NULL, UINT64_MAX, "convert: --time A:B is for timelines (--to perfetto|chrome), "
			  "not --to %s", o->to);
		return EXIT_USAGE;
	}
	return cli_run_files(o, "convert", run_file);
}

const struct cli_command cli_cmd_convert = {
	.name = "convert",
	.summary = "convert a trace to another format",
	.usage = usage,
	.run = run,
};
