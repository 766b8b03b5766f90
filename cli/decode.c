/* tracekit decode: reconstruct the executed instructions. Each format's handler is one case below; the work is in the library. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit decode [OPTIONS] FILE...\n"
	"\n"
	"Reconstruct every executed instruction from a trace and the program's code.\n"
	"\n"
	"  --elf FILE[:BASE]   load an ELF file into the memory image\n"
	"  --raw FILE[:FROM[-TO]]:ADDR  load a raw code file (or bytes FROM..TO of it) at ADDR\n"
	"  --no-disasm         print only addresses\n"
	"  --stat              print counts only\n"
	"  --time              print the time of each event\n"
	"  --mtc-freq N, --nom-freq N, --cpuid-0x15.eax N, --cpuid-0x15.ebx N\n"
	"                      timing parameters (as ptxed)\n"
	"  --tid N             (branch traces) only thread N\n"
	"  --module-path DIR   (branch traces) where to find a recorded module that moved:\n"
	"                      DIR/NAME with its build-id (so does an --elf FILE)\n"
	"  -j N                decode with N threads (default: all cores)\n"
	"  -o FILE             write to FILE\n"
	"\n"
	"Intel PT: one line per instruction (address, disassembly), events in brackets\n"
	"([enabled], [disabled], [overflow ...], [error: ...]). Decode errors resync at the\n"
	"next PSB; the exit status is then 1. A perf.data file (perf record -e intel_pt//)\n"
	"is read directly (or the directory of perf record --kcore or --threads): each CPU's\n"
	"or thread's trace in turn, the code from the files the session mapped; --elf\n"
	"vmlinux (no base) goes where the session's kernel ran.\n"
	"See docs/tracekit-decode.md.\n";

struct tk_ipt_flow_opts cli_ipt_flow_opts(const struct cli_opts *o, const struct tk_image *img)
{
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");

	return (struct tk_ipt_flow_opts){
		.sz = sizeof(struct tk_ipt_flow_opts), .image = img, .nthreads = o->jobs,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
	};
}

int cli_image_add_files(const struct cli_opts *o, struct tk_image *img)
{
	for (int i = 0; i < o->n_elf; i++)
		if (tk_image_add_elf_arg(img, o->elf[i]) < 0) {
			cli_error(o->elf[i], UINT64_MAX, "cannot load ELF file into the image");
			return -1;
		}
	for (int i = 0; i < o->n_raw; i++)
		if (tk_image_add_raw_arg(img, o->raw[i]) < 0) {
			cli_error(o->raw[i], UINT64_MAX, "cannot load raw file (want FILE[:FROM[-TO]]:ADDR)");
			return -1;
		}
	return 0;
}

/* The memory image from --elf/--raw (ptxed's spelling). NULL after printing an error. */
struct tk_image *cli_image_load(const struct cli_opts *o)
{
	int err;
	struct tk_image *img = tk_image_new(&err);

	if (img && cli_image_add_files(o, img) < 0) {
		tk_image_free(img);
		return NULL;
	}
	return img;
}

static int decode_ipt(struct cli_opts *o, const char *file, struct tk_input *in,
		      const struct tk_format_info *fi)
{
	struct tk_buf out;
	struct tk_ipt_flow_stats st = { 0 };
	struct cli_ipt x;
	unsigned flags = 0;
	int rc = 0, status;

	/* 2: the code, and perf.data's queues split by thread */
	if ((status = cli_ipt_open(o, file, in, fi, 2, &x)))
		return status;
	if (o->no_disasm)
		flags |= TK_IPT_TEXT_NO_DISASM;
	if (o->time)
		flags |= TK_IPT_TEXT_TIME;
	if (o->stat)
		flags |= TK_IPT_TEXT_STAT;
	if ((status = cli_out_open(o, &out))) {
		cli_ipt_close(&x);
		return status;
	}
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		struct tk_ipt_flow_opts fo = cli_ipt_stream_opts(&x, &x.s[i]);
		struct tk_ipt_flow_stats one = { 0 };

		/* perf.data: each queue's instructions under a line naming it */
		if (!o->stat)
			cli_ipt_stream_header(&out, &x, i);
		rc = tk_ipt_flow_text(x.s[i].data, x.s[i].len, &fo, flags, &out, &one);
		tk_ipt_flow_stats_add(&st, &one);
		x.s[i].gaps = one.gaps;
	}
	if (o->stat) {
		tk_buf_puts(&out, "insn: ");
		tk_buf_u64(&out, st.insns);
		tk_buf_puts(&out, "\nevents: ");
		tk_buf_u64(&out, st.events);
		tk_buf_puts(&out, "\nerrors: ");
		tk_buf_u64(&out, st.errors);
		tk_buf_puts(&out, "\noverflows: ");
		tk_buf_u64(&out, st.overflows);
		tk_buf_puts(&out, "\n");
	}
	status = cli_out_close(&out);
	if (rc < 0 && status != EXIT_OUTPUT) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		cli_ipt_close(&x);
		return EXIT_INPUT;
	}
	rc = cli_ipt_report(o, file, &x, &st);
	cli_ipt_close(&x);
	return rc > status ? rc : status;
}

/* ---- xtrace: chunks decoded in parallel into memory, written in order -------------- */
struct xt_part {
	struct tk_buf out, err;     /* text, and error messages to print at merge time */
	struct tk_gap_stats gaps;
	uint64_t insns;
};

struct xt_decode {
	struct cli_opts *o;
	struct cli_xtrace *x;
	const char *file;
	struct xt_part *parts;
	struct tk_buf *out;
	struct tk_gap_stats gaps;
	uint64_t insns;
	struct tk_progress prog;
	uint64_t done;
	/* Disassemblers are not thread-safe: each job borrows one from this stack. */
	pthread_mutex_t lock;
	struct tk_a64_disasm *free_dis[1100];
	size_t n_free;
};

static struct tk_a64_disasm *dis_get(struct xt_decode *d, int *err)
{
	struct tk_a64_disasm *dis = NULL;
	pthread_mutex_lock(&d->lock);
	if (d->n_free)
		dis = d->free_dis[--d->n_free];
	pthread_mutex_unlock(&d->lock);
	return dis ? dis : tk_a64_disasm_new(err);
}

static void dis_put(struct xt_decode *d, struct tk_a64_disasm *dis)
{
	if (!dis)
		return;
	pthread_mutex_lock(&d->lock);
	if (d->n_free < sizeof d->free_dis / sizeof d->free_dis[0])
		d->free_dis[d->n_free++] = dis, dis = NULL;
	pthread_mutex_unlock(&d->lock);
	tk_a64_disasm_free(dis);
}

static int xt_decode_work(void *ctx, size_t ci)
{
	struct xt_decode *d = ctx;
	struct xt_part *pt = &d->parts[ci];
	const uint8_t *p = d->x->insn;
	size_t begin, end;
	struct tk_xtrace_cursor c;
	struct tk_xtrace_item it;
	int no_dis = d->o->no_disasm, stat = d->o->stat, rc;
	char text[256];

	memset(pt, 0, sizeof *pt);
	if ((rc = tk_buf_init(&pt->out, -1, 1 << 16)) < 0 || (rc = tk_buf_init(&pt->err, -1, 256)) < 0)
		return rc;
	struct tk_a64_disasm *xt_dis = NULL;
	if (!no_dis && !stat && !(xt_dis = dis_get(d, &rc)))
		return rc;
	tk_xtrace_chunk(d->x->t, ci, &begin, &end);
	tk_xtrace_cursor_init(&c, p, begin, end);
	struct tk_buf *b = &pt->out;
	for (;;) {
		int r = tk_xtrace_next(&c, &it);
		if (r == 0)
			break;
		if (r < 0) {
			size_t to = end;
			if (tk_xtrace_nchunks(d->x->t) == 1)
				to = tk_xtrace_resync(p, end, c.off);
			tk_buf_printf(&pt->err, "tracekit: %s: offset 0x%zx: %s (token 0x%02x); "
				      "skipped %zu bytes to the next sync point at 0x%zx\n", d->file,
				      c.off, r == -TK_E_BAD_OPCODE ? "unknown token" :
				      "item runs past the end of the data", p[c.off], to - c.off, to);
			tk_gap_stats_add(&pt->gaps, c.off, to - c.off);
			if (!stat)
				tk_buf_printf(b, "[gap at offset 0x%zx: %zu bytes skipped]\n", c.off,
					      to - c.off);
			tk_xtrace_cursor_init(&c, p, to, end);
			continue;
		}
		if (it.kind <= TK_XT_PCINST) {
			pt->insns++;
			if (stat)
				continue;
			if (it.pc == TK_XTRACE_PC_UNKNOWN)
				tk_buf_puts(b, "????????????????");
			else
				tk_buf_hex(b, it.pc, 16);
			if (!no_dis) {
				tk_buf_puts(b, "  ");
				tk_buf_hex(b, it.opcode, 8);
				tk_buf_puts(b, "  ");
				size_t l = tk_a64_disasm(xt_dis, it.pc == TK_XTRACE_PC_UNKNOWN ? 0 : it.pc,
							 it.opcode, text, sizeof text);
				tk_buf_put(b, text, l);
				if (it.el) {
					tk_buf_puts(b, "  ; el");
					tk_buf_u64(b, it.el);
				}
			}
			tk_buf_putc(b, '\n');
		} else if (!no_dis && !stat) {
			tk_buf_puts(b, "    ");
			tk_xtrace_item_text(b, &it);
			tk_buf_putc(b, '\n');
		}
	}
	dis_put(d, xt_dis);
	return pt->out.err ? pt->out.err : 0;
}

static int xt_decode_merge(void *ctx, size_t ci)
{
	struct xt_decode *d = ctx;
	struct xt_part *pt = &d->parts[ci];
	size_t b, e;
	fwrite(pt->err.data, 1, pt->err.len, stderr);
	tk_buf_put(d->out, pt->out.data, pt->out.len);
	tk_gap_stats_merge(&d->gaps, &pt->gaps);
	d->insns += pt->insns;
	tk_buf_free(&pt->out);
	tk_buf_free(&pt->err);
	tk_xtrace_chunk(d->x->t, ci, &b, &e);
	d->done += e - b;
	tk_progress_set(&d->prog, d->done);
	return d->out->err;
}

static int xtrace_decode(struct cli_opts *o, const char *file, struct tk_input *in,
			 const struct tk_format_info *fi)
{
	struct cli_xtrace x;
	struct tk_buf out;
	int rc = cli_xtrace_open_insn(o, file, in, fi, &x);
	if (rc)
		return rc;
	if ((rc = cli_out_open(o, &out))) {
		cli_xtrace_close(&x);
		return rc;
	}
	struct xt_decode d = { .o = o, .x = &x, .file = x.insn_path, .out = &out,
			       .lock = PTHREAD_MUTEX_INITIALIZER };
	size_t nc = tk_xtrace_nchunks(x.t);
	d.parts = calloc(nc, sizeof *d.parts);
	cli_progress_init(o, &d.prog, "decoding", x.n);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = o->jobs ? o->jobs : tk_cpu_count() };
	rc = d.parts ? tk_pool_run(&po, nc, xt_decode_work, xt_decode_merge, &d) : -TK_E_NOMEM;
	tk_progress_finish(&d.prog);
	if (d.parts)
		for (size_t i = 0; i < nc; i++) {
			tk_buf_free(&d.parts[i].out);
			tk_buf_free(&d.parts[i].err);
		}
	free(d.parts);
	while (d.n_free)
		tk_a64_disasm_free(d.free_dis[--d.n_free]);
	if (o->stat)
		tk_buf_printf(&out, "instructions: %llu\n", (unsigned long long)d.insns);
	int st = cli_out_close(&out);
	int g = cli_xtrace_report(&x, file, &d.gaps);
	cli_xtrace_close(&x);
	if (rc < 0 && st != EXIT_OUTPUT) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return st > g ? st : g;
}

/* Branch trace: each thread's PT stream through the PT flow decoder, against the recorded
 * modules (plus --elf/--raw). */
static int decode_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_image *img;
	unsigned flags = 0;
	int rc, err = 0, status = EXIT_CLEAN;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = cli_btrace_read(file, data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	if (!(img = cli_image_load(o))) {
		tk_btrace_free(bt);
		return EXIT_INPUT;
	}
	if (cli_btrace_modules(o, file, bt, img, NULL))
		status = EXIT_SKIPPED;   /* code missing: its trace decodes as gaps */
	if (o->no_disasm)
		flags |= TK_IPT_TEXT_NO_DISASM;
	if (o->time)
		flags |= TK_IPT_TEXT_TIME;
	if (o->stat)
		flags |= TK_IPT_TEXT_STAT;
	if ((rc = cli_out_open(o, &out))) {
		tk_image_free(img);
		tk_btrace_free(bt);
		return rc;
	}
	struct tk_gap_stats gaps = { 0 };
	for (size_t i = 0; i < tk_btrace_thread_count(bt) && status < EXIT_INPUT; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		struct tk_ipt_flow_stats st;
		uint8_t *pt;
		size_t n;
		if (o->has_tid && t->tid != o->tid)
			continue;
		if (tk_btrace_thread_stream(bt, i, &pt, &n) < 0) {
			status = EXIT_INPUT;
			break;
		}
		struct tk_ipt_flow_opts fo = cli_ipt_flow_opts(o, img);
		tk_buf_printf(&out, "[thread %u]\n", t->tid);
		rc = tk_ipt_flow_text(pt, n, &fo, flags, &out, &st);
		free(pt);
		if (o->stat)
			tk_buf_printf(&out, "insn: %llu\nerrors: %llu\n", (unsigned long long)st.insns,
				      (unsigned long long)st.errors);
		if (rc < 0 && rc == out.err) {
			break;   /* the output failed: cli_out_close says so */
		} else if (rc < 0) {
			cli_error(file, UINT64_MAX, "thread %u: decode failed: %s", t->tid, tk_strerror(rc));
			status = EXIT_INPUT;
		}
		tk_gap_stats_merge(&gaps, &st.gaps);
	}
	int ost = cli_out_close(&out);
	if (ost > status)
		status = ost;
	rc = cli_btrace_status(file, bt, &gaps);
	tk_image_free(img);
	tk_btrace_free(bt);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_decode(o, file, in, fi);
	case TK_FMT_TKBT:
		return decode_btrace(o, file, in);
	case TK_FMT_IPT:
	case TK_FMT_PERF:
		return decode_ipt(o, file, in, fi);
	default:
		return cli_unsupported("decode", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	return cli_run_files(o, "decode", run_file);
}

const struct cli_command cli_cmd_decode = {
	.name = "decode",
	.summary = "reconstruct the executed instructions",
	.usage = usage,
	.run = run,
};
