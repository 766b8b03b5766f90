/* tracekit dump: print every packet or record with its file offset. Each format's handler is one case below; the work is in the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit dump [OPTIONS] FILE...\n"
	"\n"
	"Print every packet, record or token of FILE with its offset.\n"
	"\n"
	"  --no-offset   do not print offsets\n"
	"  --lastip      (Intel PT) print reconstructed IPs\n"
	"  -q, --quiet   only check the input; print nothing but errors\n"
	"  -o FILE       write to FILE\n"
	"\n"
	"Intel PT streams print in ptdump's layout from the first PSB on; after a damaged\n"
	"packet the dump marks the offset and resumes at the next PSB. perf.data: each\n"
	"CPU's or thread's Intel PT in turn, under a line naming it.\n"
	"Branch traces (.tkbt): the header and every record with its file offset, then each\n"
	"thread's Intel PT stream as above (--tid N: one thread).\n"
	"XRay: every FDR metadata/function record or basic-mode record, in llvm-xray\n"
	"fdr-dump's notation, after one header line; damaged spots are marked <Error: ...>.\n"
	"Kanata: one line per command: line number, offset, the cycle it happens in, and the\n"
	"command as parsed (tabs, numbers normalised); bad lines are reported on stderr.\n"
	"\n"
	"Exit status: 0 clean; 1 input was skipped (decode errors); 3 unreadable input.\n";

struct ipt_err_ctx {
	const char *file;
};

static int ipt_on_error(void *ctx, uint64_t offset, int err, uint64_t skipped)
{
	struct ipt_err_ctx *c = ctx;
	if (err == -TK_E_NOSYNC)
		cli_warn(c->file, offset, "%llu bytes without a PSB skipped", (unsigned long long)skipped);
	else
		cli_error(c->file, offset, "%s, %llu bytes skipped",
			  tk_ipt_error_text(err), (unsigned long long)skipped);
	return 0;
}

/* Intel PT in ptdump's layout, formatted by the library: a raw stream, or each trace queue
 * of a perf.data file under a line naming it (offsets are then in the queue's joined
 * trace). */
static int dump_ipt(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	struct ipt_err_ctx ec = { file };
	struct cli_ipt x;
	int rc = 0;

	if ((rc = cli_ipt_open(o, file, in, fi, 0, &x)))
		return rc;
	if ((rc = cli_out_open(o, &out))) {
		cli_ipt_close(&x);
		return rc;
	}
	struct tk_ipt_dump_opts d = {
		.sz = sizeof d, .no_offset = o->no_offset, .lastip = o->lastip,
		.quiet = o->quiet, .on_error = ipt_on_error, .ctx = &ec,
	};
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		cli_ipt_stream_header(&out, &x, i);
		rc = tk_ipt_dump(x.s[i].data, x.s[i].len, &d, &out, &gaps);
	}
	int st = cli_out_close(&out);
	if (rc < 0 && !st) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		st = EXIT_INPUT;
	}
	int g = cli_report_gaps(file, &gaps, "decode error");
	if (x.skipped && g < EXIT_SKIPPED)
		g = EXIT_SKIPPED;
	cli_ipt_close(&x);
	return st > g ? st : g;
}

/* Branch trace (.tkbt): the header and every record with its file offset (formatted by
 * the library), then each thread's Intel PT stream in ptdump's layout (offsets in the
 * joined stream). */
struct btrace_dump {
	struct tk_buf *b;
	int no_offset;
};

static int btrace_dump_record(void *ctx, const struct tk_btrace_record *r)
{
	const struct btrace_dump *d = ctx;
	tk_btrace_record_text(d->b, r, d->no_offset);
	return 0;
}

static int dump_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	struct ipt_err_ctx ec = { file };
	int rc, err = 0;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	struct btrace_dump d = { &out, o->no_offset };
	if (!o->quiet)
		tk_btrace_header_text(&out, data, len, o->no_offset);
	/* -q: the records are checked, not printed */
	struct tk_btrace_opts bo = { .sz = sizeof bo, .ctx = &d,
				     .on_record = o->quiet ? NULL : btrace_dump_record };
	struct tk_btrace *bt = cli_btrace_read(file, data, len, &bo, &err);
	if (!bt) {
		cli_out_close(&out);
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	struct tk_ipt_dump_opts po = {
		.sz = sizeof po, .no_offset = o->no_offset, .lastip = o->lastip,
		.quiet = o->quiet, .on_error = ipt_on_error, .ctx = &ec,
	};
	for (size_t i = 0; i < tk_btrace_thread_count(bt) && rc >= 0; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		uint8_t *pt;
		size_t n;

		if (o->has_tid && t->tid != o->tid)
			continue;
		if ((rc = tk_btrace_thread_stream(bt, i, &pt, &n)) < 0)
			break;
		if (!o->quiet)
			tk_buf_printf(&out, "[thread %u: %zu bytes of trace]\n", t->tid, n);
		rc = tk_ipt_dump(pt, n, &po, &out, &gaps);
		free(pt);
	}
	int st = cli_out_close(&out);
	if (rc < 0 && !st) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		st = EXIT_INPUT;
	}
	int g = cli_btrace_status(file, bt, &gaps);
	tk_btrace_free(bt);
	return st > g ? st : g;
}

/* xtrace snapshot file: header, then every snapshot's fields and registers. */
static void xtrace_dump_snaps(const struct cli_opts *o, struct cli_xtrace *x, struct tk_buf *b)
{
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(x->t);
	const struct tk_xtrace_header *h = tk_xtrace_snapfile_header(sf);
	const struct tk_xtrace_snap_layout *l = tk_xtrace_snapfile_layout(sf);
	if (h) {
		if (!o->no_offset)
			tk_buf_puts(b, "0000000000000000  ");
		tk_buf_printf(b, "HEADER magic 0x%08x global_snapshot %u version %llu split %u "
			      "stream %u mem_order %u\n", h->magic, h->global_snapshot,
			      (unsigned long long)h->version, h->split_type, h->stream_type,
			      h->mem_order);
	} else {
		tk_buf_puts(b, "# no header (old trace)\n");
	}
	for (size_t i = 0; i < tk_xtrace_snapfile_count(sf); i++) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(sf, i, &s);
		if (!o->no_offset) {
			tk_buf_hex(b, s.offset, 16);
			tk_buf_puts(b, "  ");
		}
		tk_buf_printf(b, "SNAPSHOT %zu file %llu index 0x%llx user %llu total %llu vl %llu\n",
			      i, (unsigned long long)s.file_no, (unsigned long long)s.index,
			      (unsigned long long)s.user_insns, (unsigned long long)s.total_insns,
			      (unsigned long long)s.vl_bits);
		if (o->quiet)
			continue;
		for (int r = 0; r < 32; r++) {
			char name[8];
			snprintf(name, sizeof name, r == 31 ? "sp" : "x%d", r);
			tk_buf_printf(b, "%s%-3s %016llx", r % 4 ? "  " : "    ", name,
				      (unsigned long long)s.x[r]);
			if (r % 4 == 3)
				tk_buf_putc(b, '\n');
		}
		for (int r = 0; r < 32; r++) {
			tk_buf_printf(b, "    z%-2d ", r);
			tk_buf_hex_bytes(b, s.z + (size_t)r * l->vl_bytes, l->vl_bytes, 0);
			tk_buf_putc(b, '\n');
		}
		for (int r = 0; r < 16; r++) {
			tk_buf_printf(b, "    p%-2d ", r);
			tk_buf_hex_bytes(b, s.p + (size_t)r * l->p_slot, l->p_bytes, 0);
			tk_buf_putc(b, '\n');
		}
		tk_buf_puts(b, "    ffr ");
		tk_buf_hex_bytes(b, s.ffr, l->p_bytes, 0);
		tk_buf_putc(b, '\n');
		size_t za = (size_t)l->vl_bytes * l->vl_bytes, nz = 0;
		for (size_t k = 0; k < za; k++)
			nz += s.za[k] != 0;
		if (!nz) {
			tk_buf_puts(b, "    za  all zero\n");
		} else {
			for (size_t row = 0; row < l->vl_bytes; row++) {
				tk_buf_printf(b, "    za[%zu] ", row);
				tk_buf_hex_bytes(b, s.za + row * l->vl_bytes, l->vl_bytes, 0);
				tk_buf_putc(b, '\n');
			}
		}
		for (int r = 0; r < TK_XTRACE_NSYSREG; r++)
			tk_buf_printf(b, "    %-11s %016llx\n", tk_xtrace_sysreg_name((unsigned)r),
				      (unsigned long long)s.sys[r]);
	}
}

/* xtrace: every token (instruction file) or every snapshot (snapshot file). */
static int xtrace_dump(struct cli_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	struct cli_xtrace x;
	struct tk_buf b;
	struct tk_gap_stats gaps = { 0 };
	int rc = cli_xtrace_open(o, file, in, fi, &x);
	if (rc)
		return rc;
	if ((rc = cli_out_open(o, &b))) {
		cli_xtrace_close(&x);
		return rc;
	}
	if (fi->id == TK_FMT_XTRACE_SNAP) {
		xtrace_dump_snaps(o, &x, &b);
		} else {
			for (size_t ci = 0; ci < tk_xtrace_nchunks(x.t); ci++) {
			size_t begin, end;
			struct tk_xtrace_cursor c;
			struct tk_xtrace_item it;
			tk_xtrace_chunk(x.t, ci, &begin, &end);
			tk_xtrace_cursor_init(&c, x.insn, begin, end);
			for (;;) {
				int r = tk_xtrace_next(&c, &it);
				if (r == 0)
					break;
				if (r < 0) {
					size_t to = end;
					if (tk_xtrace_nchunks(x.t) == 1)
						to = tk_xtrace_resync(x.insn, end, c.off);
					cli_error(file, c.off, "%s (token 0x%02x); skipped %zu bytes to the "
						  "next sync point at 0x%zx", r == -TK_E_BAD_OPCODE ?
						  "unknown token" : "item runs past the end of the data",
						  x.insn[c.off], to - c.off, to);
					tk_gap_stats_add(&gaps, c.off, to - c.off);
					if (!o->quiet)
						tk_buf_printf(&b, "%016zx  GAP %zu bytes\n", c.off, to - c.off);
					tk_xtrace_cursor_init(&c, x.insn, to, end);
					continue;
				}
				if (o->quiet)
					continue;
				if (!o->no_offset) {
					tk_buf_hex(&b, it.offset, 16);
					tk_buf_puts(&b, "  ");
				}
				cli_xtrace_item_text(&b, &it);
				tk_buf_putc(&b, '\n');
			}
		}
	}
	rc = cli_out_close(&b);
	int g = cli_xtrace_report(&x, file, &gaps);
	cli_xtrace_close(&x);
	return rc > g ? rc : g;
}

static int xray_dump(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps;
	int rc;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	/* -q: check only; the records go nowhere */
	struct cli_opts quiet_o = *o;
	if (o->quiet)
		quiet_o.output = "/dev/null";
	if ((rc = cli_out_open(&quiet_o, &out)))
		return rc;
	memset(&gaps, 0, sizeof gaps);
	cli_log_file(file);
	long bad = tk_xray_dump(data, len, o->no_offset, cli_xray_release_ok(file, in), &out,
				&gaps);
	cli_log_file(NULL);
	rc = cli_out_close(&out);
	if (bad < 0) {
		cli_error(file, 0, "not a readable XRay log: %s", tk_strerror((int)bad));
		return EXIT_INPUT;
	}
	int g = cli_report_gaps(file, &gaps, "damaged region");
	return rc > g ? rc : g;
}

/* Kanata: every command with its line, offset and cycle. */
struct kanata_dump {
	struct tk_buf *out;
	const char *file;
	int no_offset, quiet;
};

static int kanata_dump_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct kanata_dump *k = ctx;
	struct tk_buf *b = k->out;
	static const char *const names[] = { "", "Kanata", "C=", "C", "I", "L", "S", "E", "R", "W" };

	if (k->quiet)
		return 0;
	tk_buf_u64(b, c->line);
	tk_buf_putc(b, '\t');
	if (!k->no_offset) {
		tk_buf_puts(b, "0x");
		tk_buf_hex(b, c->offset, 8);
		tk_buf_putc(b, '\t');
	}
	tk_buf_i64(b, c->cycle);
	tk_buf_putc(b, '\t');
	tk_buf_puts(b, c->kind <= TK_KANATA_DEP ? names[c->kind] : "?");
	switch (c->kind) {
	case TK_KANATA_HEADER:
	case TK_KANATA_CYCLE_SET:
	case TK_KANATA_CYCLE:
		tk_buf_putc(b, '\t');
		tk_buf_i64(b, c->a);
		break;
	case TK_KANATA_LABEL:
		tk_buf_printf(b, "\t%lld\t%lld\t", (long long)c->id, (long long)c->a);
		tk_buf_put(b, c->text, c->text_len);
		break;
	case TK_KANATA_STAGE_BEGIN:
	case TK_KANATA_STAGE_END:
		tk_buf_printf(b, "\t%lld\t", (long long)c->id);
		tk_buf_put(b, c->lane, c->lane_len);
		tk_buf_putc(b, '\t');
		tk_buf_put(b, c->text, c->text_len);
		break;
	default:
		tk_buf_printf(b, "\t%lld\t%lld\t%lld", (long long)c->id, (long long)c->a, (long long)c->b);
		break;
	}
	tk_buf_putc(b, '\n');
	return b->err;
}

static void kanata_dump_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct kanata_dump *k = ctx;
	if (d->level == TK_LOG_ERROR)
		fprintf(stderr, "tracekit: %s:%llu: error: %s\n", k->file, (unsigned long long)d->line, d->msg);
}

static int dump_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_buf out;
	struct kanata_dump k = { &out, file, o->no_offset, o->quiet };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .cmd = kanata_dump_cmd,
					    .diag = kanata_dump_diag, .ctx = &k };
	struct tk_kanata_reader *r;
	int rc, err;

	if ((rc = cli_out_open(o, &out)))
		return rc;
	if (!(r = tk_kanata_reader_new(&ro, &err))) {
		cli_out_close(&out);
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	rc = tk_kanata_reader_run(r, in);
	int status = rc < 0 ? EXIT_INPUT : tk_kanata_reader_counts(r)->errors ? EXIT_SKIPPED : EXIT_CLEAN;
	if (rc < 0)
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
	tk_kanata_reader_free(r);
	rc = cli_out_close(&out);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_dump(o, file, in, fi);
	case TK_FMT_XRAY:
		return xray_dump(o, file, in);
	case TK_FMT_IPT:
	case TK_FMT_PERF:
		return dump_ipt(o, file, in, fi);
	case TK_FMT_TKBT:
		return dump_btrace(o, file, in);
	case TK_FMT_KANATA:
		return dump_kanata(o, file, in);
	default:
		return cli_unsupported("dump", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	return cli_run_files(o, "dump", run_file);
}

const struct cli_command cli_cmd_dump = {
	.name = "dump",
	.summary = "print every packet or record with its file offset",
	.usage = usage,
	.run = run,
};
