/* tracekit convert: convert a trace to another format. Each format's handler is one case below; the work is in the library. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
	"  -o FILE         write to FILE\n"
	"  --slice K:N     (xtrace) an instruction file FILE.xinsndata.bin and snapshot file\n"
	"                  FILE.xsnapshot.bin that start at snapshot K and hold N instructions\n";

/* xtrace --slice K:N: instruction + snapshot file starting at snapshot K, N instructions. */
static int xtrace_slice(struct cli_opts *o, const char *file, struct tk_input *in,
			const struct tk_format_info *fi)
{
	uint64_t k, count;
	char insn_out[4096], snap_out[4096];
	if (!o->slice || cli_parse_range(o->slice, &k, &count) < 0 || !o->output) {
		cli_error(NULL, UINT64_MAX, "convert: xtrace input needs --slice K:N and -o FILE "
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
	int ifd = open(insn_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int sfd = ifd >= 0 ? open(snap_out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
	if (ifd < 0 || sfd < 0) {
		cli_error(ifd < 0 ? insn_out : snap_out, UINT64_MAX, "cannot write: %s", strerror(errno));
		if (ifd >= 0)
			close(ifd);
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
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
		close(ifd);
		close(sfd);
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
	close(ifd);
	close(sfd);
	if (rc < 0) {
		cli_error(insn_out, UINT64_MAX, "write failed: %s", tk_strerror(rc));
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
	if (!o->quiet)
		fprintf(stderr, "tracekit: wrote %s and %s: %llu instructions from snapshot %llu, "
			"%zu snapshots\n", insn_out, snap_out,
			(unsigned long long)(insns > count ? count : insns), (unsigned long long)k,
			written);
	cli_xtrace_close(&x);
	return cli_report_gaps(file, &gaps, "damaged region");
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_slice(o, file, in, fi);
	default:
		return cli_unsupported("convert", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "convert")))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = run_file(o, o->args[i], in, &fi);
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	return status;
}

const struct cli_command cli_cmd_convert = {
	.name = "convert",
	.summary = "convert a trace to another format",
	.usage = usage,
	.run = run,
};
