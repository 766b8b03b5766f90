/* ptt: build the inputs of one Intel PT flow test from a .ptt file (code bytes, packets,
 * expected listing in one file, after libipt's .ptt tests) and decode the stream with
 * libipt's instruction decoder for comparison.
 *
 *   ptt FILE.ptt DIR
 *
 * writes DIR/trace.pt (the packets, encoded with tracekit's own encoder, tk_ipt_encode),
 * DIR/code-ADDR.bin for each run of code bytes, DIR/args (decode's --raw options and the
 * file's `args`), DIR/expected, DIR/status, and DIR/libipt: libipt's listing in
 * tracekit's format with addresses only (when the file says `libipt yes`).
 *
 * File lines (`;` starts a comment, except in listing lines):
 *   @ADDR HEX...        code bytes at ADDR (hex), e.g. `@1000 31 c0 ; xor eax, eax`
 *   > TEXT              a line of the expected listing
 *   status N            decode's expected exit status (default 0)
 *   args ...            more options for decode
 *   libipt yes | no WHY compare with libipt 2.0.5 (its decoder is run), or say why not
 *   cpu FAMILY/MODEL    the processor: decode's --cpu, and libipt's errata for it
 *   PACKET ARGS...      a packet: psb psbend pad ovf stop
 *                       tnt t.n..  (up to 6: TNT-8, else TNT-64)
 *                       tip|tip.pge|tip.pgd|fup [IPC:]IP  (no IP: suppressed; IPC 1, 2,
 *                       3, 4, 6 as the SDM numbers them, else the processor's choice)
 *                       mode.exec 16|32|64 [if]   mode.tsx begin|commit|abort
 *                       pip CR3 [nr]  vmcs BASE  cbr N  tsc N  tma CTC FC  mtc N  cyc N
 *                       mnt N  ptw [ip] 4|8 V  exstop [ip]  mwait HINTS EXT
 *                       pwre STATE SUB [hw]  pwrx LAST DEEPEST [int] [st] [hw]
 *                       cfe TYPE VECTOR [ip]  evd TYPE PAYLOAD
 *                       trig TRBV [ip] [mult] [icnt N]
 *                       raw HEX...  (bytes as they are)
 * Numbers are C literals (0x... hex). */
#include <errno.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/common.h"
#include "tracekit/ipt.h"

#define MAX_CODE (1 << 16)

struct code {
	uint64_t addr[MAX_CODE];
	uint8_t byte[MAX_CODE];
	size_t n;
};

static struct code code;
static struct pt_cpu cpu;   /* the file's `cpu` (vendor unknown: none) */
static const char *path;
static unsigned lineno;

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "ptt: %s:%u: %s%s%s\n", path, lineno, msg, arg ? ": " : "", arg ? arg : "");
	exit(2);
}

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v;

	if (!s)
		die("missing number", NULL);
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		die("bad number", s);
	return v;
}

static int has_word(char **w, int n, const char *word)
{
	for (int i = 1; i < n; i++)
		if (!strcmp(w[i], word))
			return 1;
	return 0;
}

/* One packet line (words W[0..N)) into OUT. */
static void packet(struct tk_buf *out, struct tk_ipt_last_ip *last, char **w, int n)
{
	struct tk_ipt_packet p;
	const char *k = w[0];

	memset(&p, 0, sizeof(p));
	if (!strcmp(k, "raw")) {
		for (int i = 1; i < n; i++) {
			uint8_t b = (uint8_t)strtoul(w[i], NULL, 16);

			tk_buf_put(out, &b, 1);
		}
		return;
	}
	if (!strcmp(k, "psb")) {
		p.kind = TK_IPT_PKT_PSB;
		tk_ipt_last_ip_init(last);
	} else if (!strcmp(k, "psbend")) {
		p.kind = TK_IPT_PKT_PSBEND;
	} else if (!strcmp(k, "pad")) {
		p.kind = TK_IPT_PKT_PAD;
	} else if (!strcmp(k, "ovf")) {
		p.kind = TK_IPT_PKT_OVF;
		tk_ipt_last_ip_init(last);
	} else if (!strcmp(k, "stop")) {
		p.kind = TK_IPT_PKT_STOP;
	} else if (!strcmp(k, "tnt")) {
		const char *s = n > 1 ? w[1] : "";

		for (; *s; s++) {
			if (*s != 't' && *s != 'n' && *s != '.')
				die("bad tnt", w[1]);
			if (*s == '.')
				continue;
			p.tnt.bits = p.tnt.bits << 1 | (*s == 't');
			p.tnt.count++;
		}
		p.kind = p.tnt.count <= 6 ? TK_IPT_PKT_TNT8 : TK_IPT_PKT_TNT64;
	} else if (!strcmp(k, "tip") || !strcmp(k, "tip.pge") || !strcmp(k, "tip.pgd") ||
		   !strcmp(k, "fup")) {
		enum tk_ipt_pkt_kind kind = !strcmp(k, "tip") ? TK_IPT_PKT_TIP
					  : !strcmp(k, "tip.pge") ? TK_IPT_PKT_TIP_PGE
					  : !strcmp(k, "tip.pgd") ? TK_IPT_PKT_TIP_PGD : TK_IPT_PKT_FUP;
		char *colon = n > 1 ? strchr(w[1], ':') : NULL;

		if (n < 2) {
			p.kind = kind;   /* suppressed: the last IP stays */
		} else if (colon) {
			static const unsigned bytes[8] = { 0, 2, 4, 6, 6, 0, 8, 0 };
			uint64_t ip, ipc;

			*colon = 0;
			ipc = num(w[1]);
			ip = num(colon + 1);
			if (ipc > 7 || !bytes[ipc])
				die("bad IP compression", w[1]);
			p.kind = kind;
			p.ip.ipc = (uint8_t)ipc;
			p.ip.ip = bytes[ipc] == 8 ? ip : ip & ((1ull << 8 * bytes[ipc]) - 1);
			last->ip = ip;
			last->have_ip = 1;
		} else {
			tk_ipt_ip_packet(last, kind, num(w[1]), &p);
		}
	} else if (!strcmp(k, "mode.exec")) {
		uint64_t bits = num(n > 1 ? w[1] : NULL);

		p.kind = TK_IPT_PKT_MODE_EXEC;
		p.exec.csl = bits == 64;
		p.exec.csd = bits == 32;
		p.exec.iflag = (uint8_t)has_word(w, n, "if");
	} else if (!strcmp(k, "mode.tsx")) {
		p.kind = TK_IPT_PKT_MODE_TSX;
		if (n < 2)
			die("mode.tsx needs begin, commit or abort", NULL);
		p.tsx.intx = !strcmp(w[1], "begin");
		p.tsx.abrt = !strcmp(w[1], "abort");
	} else if (!strcmp(k, "pip")) {
		p.kind = TK_IPT_PKT_PIP;
		p.pip.cr3 = num(n > 1 ? w[1] : NULL);
		p.pip.nr = (uint8_t)has_word(w, n, "nr");
	} else if (!strcmp(k, "vmcs")) {
		p.kind = TK_IPT_PKT_VMCS;
		p.vmcs.base = num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "cbr")) {
		p.kind = TK_IPT_PKT_CBR;
		p.cbr.ratio = (uint8_t)num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "tsc")) {
		p.kind = TK_IPT_PKT_TSC;
		p.tsc.tsc = num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "tma")) {
		p.kind = TK_IPT_PKT_TMA;
		p.tma.ctc = (uint16_t)num(n > 1 ? w[1] : NULL);
		p.tma.fc = (uint16_t)num(n > 2 ? w[2] : NULL);
	} else if (!strcmp(k, "mtc")) {
		p.kind = TK_IPT_PKT_MTC;
		p.mtc.ctc = (uint8_t)num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "cyc")) {
		p.kind = TK_IPT_PKT_CYC;
		p.cyc.value = num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "mnt")) {
		p.kind = TK_IPT_PKT_MNT;
		p.mnt.payload = num(n > 1 ? w[1] : NULL);
	} else if (!strcmp(k, "ptw")) {
		int i = 1;

		p.kind = TK_IPT_PKT_PTW;
		if (n > i && !strcmp(w[i], "ip"))
			p.ptw.ip = 1, i++;
		p.ptw.plc = num(n > i ? w[i] : NULL) == 8;
		p.ptw.payload = num(n > i + 1 ? w[i + 1] : NULL);
	} else if (!strcmp(k, "exstop")) {
		p.kind = TK_IPT_PKT_EXSTOP;
		p.exstop.ip = (uint8_t)has_word(w, n, "ip");
	} else if (!strcmp(k, "mwait")) {
		p.kind = TK_IPT_PKT_MWAIT;
		p.mwait.hints = (uint32_t)num(n > 1 ? w[1] : NULL);
		p.mwait.ext = (uint32_t)num(n > 2 ? w[2] : NULL);
	} else if (!strcmp(k, "pwre")) {
		p.kind = TK_IPT_PKT_PWRE;
		p.pwre.state = (uint8_t)num(n > 1 ? w[1] : NULL);
		p.pwre.sub_state = (uint8_t)num(n > 2 ? w[2] : NULL);
		p.pwre.hw = (uint8_t)has_word(w, n, "hw");
	} else if (!strcmp(k, "pwrx")) {
		p.kind = TK_IPT_PKT_PWRX;
		p.pwrx.last = (uint8_t)num(n > 1 ? w[1] : NULL);
		p.pwrx.deepest = (uint8_t)num(n > 2 ? w[2] : NULL);
		p.pwrx.interrupt = (uint8_t)has_word(w, n, "int");
		p.pwrx.store = (uint8_t)has_word(w, n, "st");
		p.pwrx.autonomous = (uint8_t)has_word(w, n, "hw");
	} else if (!strcmp(k, "cfe")) {
		p.kind = TK_IPT_PKT_CFE;
		p.cfe.type = (uint8_t)num(n > 1 ? w[1] : NULL);
		p.cfe.vector = (uint8_t)num(n > 2 ? w[2] : NULL);
		p.cfe.ip = (uint8_t)has_word(w, n, "ip");
	} else if (!strcmp(k, "evd")) {
		p.kind = TK_IPT_PKT_EVD;
		p.evd.type = (uint8_t)num(n > 1 ? w[1] : NULL);
		p.evd.payload = num(n > 2 ? w[2] : NULL);
	} else if (!strcmp(k, "trig")) {
		p.kind = TK_IPT_PKT_TRIG;
		p.trig.trbv = (uint8_t)num(n > 1 ? w[1] : NULL);
		p.trig.ip = (uint8_t)has_word(w, n, "ip");
		p.trig.mult = (uint8_t)has_word(w, n, "mult");
		for (int i = 2; i + 1 < n; i++)
			if (!strcmp(w[i], "icnt")) {
				p.trig.icntv = 1;
				p.trig.icnt = (uint16_t)num(w[i + 1]);
			}
	} else {
		die("unknown packet", k);
	}
	if (tk_ipt_encode(out, &p) < 0)
		die("packet does not encode", k);
}

/* ---- libipt's view -------------------------------------------------------------------- */

static int read_code(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip,
		     void *ctx)
{
	size_t got = 0;

	(void)asid, (void)ctx;
	for (; got < size; got++) {
		size_t i;

		for (i = 0; i < code.n && code.addr[i] != ip + got; i++)
			;
		if (i == code.n)
			break;
		buf[got] = code.byte[i];
	}
	return got ? (int)got : -pte_nomap;
}

static const char *mode_name(enum pt_exec_mode m)
{
	return m == ptem_64bit ? "64-bit" : m == ptem_32bit ? "32-bit" : "16-bit";
}

/* An event in tracekit's words; exec mode only where the mode changes. */
static void print_event(FILE *f, const struct pt_event *ev, enum pt_exec_mode *mode)
{
	switch (ev->type) {
	case ptev_enabled:
		fprintf(f, ev->variant.enabled.resumed ? "[resumed]\n" : "[enabled]\n");
		break;
	case ptev_disabled: fprintf(f, "[disabled]\n"); break;
	case ptev_async_disabled: fprintf(f, "[async disabled]\n"); break;
	case ptev_async_branch:
		fprintf(f, "[interrupt: %016" PRIx64 " -> %016" PRIx64 "]\n",
			ev->variant.async_branch.from, ev->variant.async_branch.to);
		break;
	case ptev_paging: case ptev_async_paging: {
		int nr = ev->type == ptev_paging ? ev->variant.paging.non_root
						 : ev->variant.async_paging.non_root;
		uint64_t cr3 = ev->type == ptev_paging ? ev->variant.paging.cr3
						       : ev->variant.async_paging.cr3;

		fprintf(f, "[paging, cr3: %016" PRIx64 "%s]\n", cr3, nr ? ", nr" : "");
		break;
	}
	case ptev_overflow: fprintf(f, "[overflow]\n"); break;
	case ptev_exec_mode:
		if (*mode != ptem_unknown && *mode != ev->variant.exec_mode.mode)
			fprintf(f, "[exec mode: %s]\n", mode_name(ev->variant.exec_mode.mode));
		*mode = ev->variant.exec_mode.mode;
		break;
	case ptev_tsx:
		fprintf(f, ev->variant.tsx.aborted ? "[aborted]\n" : ev->variant.tsx.speculative
			? "[begin transaction]\n" : "[committed]\n");
		break;
	case ptev_stop: fprintf(f, "[stopped]\n"); break;
	case ptev_vmcs: fprintf(f, "[vmcs, base: %016" PRIx64 "]\n", ev->variant.vmcs.base); break;
	case ptev_async_vmcs:
		fprintf(f, "[vmcs, base: %016" PRIx64 "]\n", ev->variant.async_vmcs.base);
		break;
	case ptev_exstop: fprintf(f, "[exstop]\n"); break;
	case ptev_mwait:
		fprintf(f, "[mwait: %" PRIx32 ", %" PRIx32 "]\n", ev->variant.mwait.hints,
			ev->variant.mwait.ext);
		break;
	case ptev_pwre:
		fprintf(f, "[pwre: c%u.%u%s]\n", (ev->variant.pwre.state + 1) & 0xf,
			(ev->variant.pwre.sub_state + 1) & 0xf, ev->variant.pwre.hw ? ", hw" : "");
		break;
	case ptev_pwrx:
		fprintf(f, "[pwrx: %s%s%sc%u (deepest c%u)]\n",
			ev->variant.pwrx.interrupt ? "int: " : "",
			ev->variant.pwrx.store ? "st: " : "",
			ev->variant.pwrx.autonomous ? "hw: " : "",
			(ev->variant.pwrx.last + 1) & 0xf, (ev->variant.pwrx.deepest + 1) & 0xf);
		break;
	case ptev_ptwrite: fprintf(f, "[ptwrite: %" PRIx64 "]\n", ev->variant.ptwrite.payload); break;
	case ptev_cbr: fprintf(f, "[cbr: %x]\n", ev->variant.cbr.ratio); break;
	case ptev_mnt: fprintf(f, "[mnt: %" PRIx64 "]\n", ev->variant.mnt.payload); break;
	default: break;   /* tick: only with --time */
	}
}

/* ptxed's loop (libipt 2.0.5): sync, events, instructions; an error resyncs at the next
 * PSB. */
static void libipt_listing(const uint8_t *buf, size_t len, FILE *f)
{
	struct pt_config cfg;
	struct pt_insn_decoder *dec;
	enum pt_exec_mode mode = ptem_unknown;

	pt_config_init(&cfg);
	if (cpu.vendor == pcv_intel) {
		cfg.cpu = cpu;
		if (pt_cpu_errata(&cfg.errata, &cpu) < 0)
			die("libipt: no errata for the cpu", NULL);
	}
	/* the errata decode allows for on every CPU: what they change has no other reading */
	cfg.errata.bdm70 = cfg.errata.skd010 = cfg.errata.apl11 = cfg.errata.apl12 = 1;
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	if (!(dec = pt_insn_alloc_decoder(&cfg)))
		die("libipt: no decoder", NULL);
	pt_image_set_callback(pt_insn_get_image(dec), read_code, NULL);
	for (;;) {
		int status = pt_insn_sync_forward(dec);

		if (status < 0)
			break;
		for (;;) {
			while (status >= 0 && (status & pts_event_pending)) {
				struct pt_event ev;

				status = pt_insn_event(dec, &ev, sizeof(ev));
				if (status >= 0 && !ev.status_update)
					print_event(f, &ev, &mode);
				else if (status >= 0 && ev.type == ptev_exec_mode)
					mode = ev.variant.exec_mode.mode;   /* not printed */
			}
			if (status < 0)
				break;
			if (status & pts_eos) {
				if (!(status & pts_ip_suppressed))
					fprintf(f, "[end of trace]\n");
				status = -pte_eos;
				break;
			}
			struct pt_insn insn;

			memset(&insn, 0, sizeof(insn));
			status = pt_insn_next(dec, &insn, sizeof(insn));
			if (insn.iclass != ptic_error)
				fprintf(f, "%016" PRIx64 "\n", insn.ip);
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
		fprintf(f, "[error]\n");
	}
	pt_insn_free_decoder(dec);
}

/* ---- the file ------------------------------------------------------------------------- */

static FILE *out_file(const char *dir, const char *name)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!(f = fopen(p, "w")))
		die("cannot write", p);
	return f;
}

int main(int argc, char **argv)
{
	char line[4096], args[4096] = "", libipt[64] = "";
	unsigned status = 0;
	struct tk_buf pt;
	struct tk_ipt_last_ip last;
	FILE *in, *exp;

	if (argc != 3) {
		fprintf(stderr, "usage: ptt FILE.ptt DIR\n");
		return 2;
	}
	path = argv[1];
	if (!(in = fopen(path, "r")))
		die("cannot read", path);
	exp = out_file(argv[2], "expected");
	tk_buf_init(&pt, -1, 4096);
	tk_ipt_last_ip_init(&last);
	while (fgets(line, sizeof(line), in)) {
		char *w[64], *s = line, *c;
		int n = 0;

		lineno++;
		if (line[0] == '>') {
			fputs(line[1] == ' ' ? line + 2 : line + 1, exp);
			continue;
		}
		if ((c = strchr(line, ';')))
			*c = 0;
		while (n < 64 && (w[n] = strtok(n ? NULL : s, " \t\r\n")))
			n++;
		if (!n)
			continue;
		if (w[0][0] == '@') {
			uint64_t a = strtoull(w[0] + 1, NULL, 16);

			for (int i = 1; i < n; i++, a++) {
				if (code.n == MAX_CODE)
					die("too much code", NULL);
				code.addr[code.n] = a;
				code.byte[code.n++] = (uint8_t)strtoul(w[i], NULL, 16);
			}
		} else if (!strcmp(w[0], "status")) {
			status = (unsigned)num(n > 1 ? w[1] : NULL);
		} else if (!strcmp(w[0], "args")) {
			for (int i = 1; i < n; i++)
				strcat(strcat(args, " "), w[i]);
		} else if (!strcmp(w[0], "cpu")) {
			char *slash = n == 2 ? strchr(w[1], '/') : NULL;

			if (!slash)
				die("cpu FAMILY/MODEL", NULL);
			cpu.vendor = pcv_intel;
			cpu.model = (uint8_t)num(slash + 1);
			*slash = 0;
			cpu.family = (uint16_t)num(w[1]);
			*slash = '/';
			strcat(strcat(args, " --cpu "), w[1]);
		} else if (!strcmp(w[0], "libipt")) {
			if (n < 2 || (strcmp(w[1], "yes") && (strncmp(w[1], "no", 2) || n < 3)))
				die("libipt yes, or libipt no REASON", NULL);
			snprintf(libipt, sizeof(libipt), "%s", w[1]);
		} else {
			packet(&pt, &last, w, n);
		}
	}
	fclose(in);
	fclose(exp);
	if (!libipt[0])
		die("say whether libipt decodes this (libipt yes | no REASON)", NULL);
	if (pt.err)
		die("out of memory", NULL);

	FILE *f = out_file(argv[2], "trace.pt");

	fwrite(pt.data, 1, pt.len, f);
	fclose(f);
	/* each run of consecutive code bytes is a raw file of its own */
	FILE *a = out_file(argv[2], "args");

	for (size_t i = 0; i < code.n;) {
		size_t j = i + 1;
		char name[64];

		while (j < code.n && code.addr[j] == code.addr[j - 1] + 1)
			j++;
		snprintf(name, sizeof(name), "code-%" PRIx64 ".bin", code.addr[i]);
		f = out_file(argv[2], name);
		fwrite(code.byte + i, 1, j - i, f);
		fclose(f);
		fprintf(a, "--raw %s/%s:0x%" PRIx64 " ", argv[2], name, code.addr[i]);
		i = j;
	}
	fprintf(a, "%s\n", args);
	fclose(a);
	f = out_file(argv[2], "status");
	fprintf(f, "%u\n", status);
	fclose(f);
	if (!strcmp(libipt, "yes")) {
		f = out_file(argv[2], "libipt");
		libipt_listing((const uint8_t *)pt.data, pt.len, f);
		fclose(f);
	}
	tk_buf_free(&pt);
	return 0;
}
