/* Outputs (standard output or -o FILE, never over an input, never half-written) and the
 * loop over a command's input files. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* The outputs open now (a command may have a timeline and a profile open together): the
 * file each writes and its name for messages. */
static struct {
	struct tk_buf *buf;
	struct tk_outfile *file;    /* NULL: standard output */
	const char *name;
} outputs[4];

/* Whether PATH is one of the files the command reads (said, if so). --elf and --raw
 * name FILE:ADDR. */
static int same_as_input(const struct tk_cmd_opts *o, const char *path)
{
	const char *in[3 * TK_CMD_MAX_LIST + 1];
	char stripped[2 * TK_CMD_MAX_LIST][4096];
	size_t n = 0, ns = 0;

	for (int i = 0; i < o->nargs && n < 3 * TK_CMD_MAX_LIST; i++)
		in[n++] = o->args[i];
	for (int k = 0; k < 2; k++) {
		const char *const *l = k ? o->raw : o->elf;
		for (int i = 0; i < (k ? o->n_raw : o->n_elf); i++) {
			const char *c = strrchr(l[i], ':');
			if (c && access(l[i], F_OK) < 0 && (size_t)(c - l[i]) < sizeof stripped[0]) {
				snprintf(stripped[ns], sizeof stripped[0], "%.*s", (int)(c - l[i]), l[i]);
				in[n++] = stripped[ns++];
			} else {
				in[n++] = l[i];
			}
		}
	}
	if (o->instr_map)
		in[n++] = o->instr_map;
	int i = tk_outfile_same(path, in, n);
	if (i >= 0)
		cli_error(path, UINT64_MAX, "-o names an input (%s): refusing to overwrite it", in[i]);
	return i >= 0;
}

struct tk_outfile *cli_outfile_open(const struct tk_cmd_opts *o, const char *path, int *status)
{
	struct tk_outfile *f;
	int err;

	if (same_as_input(o, path)) {
		*status = EXIT_USAGE;
		return NULL;
	}
	if (!(f = tk_outfile_open(path, &err))) {
		cli_error(path, UINT64_MAX, "cannot create: %s", strerror(errno));
		*status = EXIT_OUTPUT;
	}
	return f;
}

/* Several inputs with -o FILE: one file holds each input's output in turn (as standard
 * output would), renamed into place once all are done (cli_run_files). */
static struct {
	int on;
	struct tk_outfile *file;
	int failed;               /* a write failed: the file is not kept */
} held;

/* Outputs written whole, renamed into place when the command ends well (cli_outputs_end):
 * an input that cannot be read after an output began leaves the file before as it was. */
static struct {
	struct tk_outfile *file;
	const char *name;
} written[8];
static size_t nwritten;

int cli_outputs_end(int status)
{
	int keep = status <= EXIT_SKIPPED;

	for (size_t i = 0; i < nwritten; i++)
		if (tk_outfile_close(written[i].file, keep) < 0 && keep) {
			cli_error(written[i].name, UINT64_MAX, "write failed: %s", strerror(errno));
			status = EXIT_OUTPUT;
		}
	nwritten = 0;
	return status;
}

int cli_out_open(const struct tk_cmd_opts *o, struct tk_buf *out)
{
	struct tk_outfile *f = NULL;
	size_t slot = 0;
	int status;

	while (slot < sizeof outputs / sizeof outputs[0] && outputs[slot].buf)
		slot++;
	if (slot == sizeof outputs / sizeof outputs[0]) {
		cli_error(NULL, UINT64_MAX, "internal error: too many outputs open");
		return EXIT_INPUT;
	}
	if (held.on && held.file) {
		f = held.file;
	} else if (o->output && strcmp(o->output, "-") != 0) {
		if (!(f = cli_outfile_open(o, o->output, &status)))
			return status;
		if (held.on)
			held.file = f;
	}
	if (tk_buf_init(out, f ? tk_outfile_fd(f) : STDOUT_FILENO, 1 << 20) < 0) {
		if (f && f != held.file)
			tk_outfile_close(f, 0);
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	outputs[slot].buf = out;
	outputs[slot].file = f;
	outputs[slot].name = f ? o->output : "standard output";
	return 0;
}

int cli_out_close(struct tk_buf *out)
{
	int rc = tk_buf_flush(out), errnum = out->errnum;
	size_t slot = 0;

	/* by address, or by descriptor if the caller moved the buffer */
	while (slot < sizeof outputs / sizeof outputs[0] && outputs[slot].buf != out &&
	       !(outputs[slot].file && tk_outfile_fd(outputs[slot].file) == out->fd))
		slot++;
	if (slot == sizeof outputs / sizeof outputs[0]) {
		tk_buf_free(out);
		return rc < 0 ? EXIT_OUTPUT : 0;
	}
	const char *name = outputs[slot].name;
	/* a failed output is removed: the file it was to replace stays as it was */
	if (outputs[slot].file && outputs[slot].file == held.file)
		held.failed |= rc < 0;   /* closed after the last input */
	else if (outputs[slot].file && rc >= 0 && nwritten < sizeof written / sizeof written[0])
		written[nwritten++] = (typeof(written[0])){ outputs[slot].file, outputs[slot].name };
	else if (outputs[slot].file && tk_outfile_close(outputs[slot].file, rc >= 0) < 0 && rc >= 0) {
		rc = -TK_E_IO;
		errnum = errno;
	}
	outputs[slot].buf = NULL;
	tk_buf_free(out);
	if (rc == -TK_E_NOMEM) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	if (rc < 0) {
		cli_error(name, UINT64_MAX, "write failed: %s",
			  errnum ? strerror(errnum) : tk_strerror(rc));
		return EXIT_OUTPUT;
	}
	return 0;
}

int cli_need_files(const struct tk_cmd_opts *o, const char *cmd)
{
	if (o->nargs > 0)
		return 0;
	cli_error(NULL, UINT64_MAX, "%s: no input file (see: tracekit help %s)", cmd, cmd);
	return EXIT_USAGE;
}

/* Outputs that are one document (JSON, gzip'd protobuf, CSV with its header, a trace
 * file): two of them one after the other are not one of them. convert's default output
 * is always one. */
static int one_document(const char *cmd, const char *to)
{
	static const char *const docs[] = { "json", "pprof", "csv", "perfetto", "chrome",
					     "xray-yaml", "yaml", "kanata", "ipt", "account-csv",
					     "callgrind" };

	if (!to)
		return strcmp(cmd, "convert") == 0;
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
		if (strcmp(to, docs[i]) == 0)
			return 1;
	return 0;
}

/* A compressed input cut short was read up to the cut (the library said where), or the
 * file shrank while read (said here): data lost. */
int cli_input_status(const struct tk_input *in, int status)
{
	uint64_t off;
	int cut = tk_input_cut(in, &off);
	if (cut == TK_INPUT_SHRANK)
		cli_error(tk_input_name(in), off, "the file was truncated while being read; "
			  "what lay from here on is lost");
	return cut && status < EXIT_SKIPPED ? EXIT_SKIPPED : status;
}

int cli_run_files(struct tk_cmd_opts *o, const char *cmd, cli_run_file_fn run_file)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, cmd)))
		return rc;
	if (o->nargs > 1 && one_document(cmd, o->to)) {
		cli_error(NULL, UINT64_MAX, "%s: %d inputs would give %d %s documents in one output, "
			  "which no reader takes as one: give one input per run", cmd, o->nargs,
			  o->nargs, o->to ? o->to : "converted");
		return EXIT_USAGE;
	}
	held.on = o->nargs > 1;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = cli_format_opts_refused(o->args[i], &fi);
			if (!rc)
				rc = cli_input_status(in, run_file(o, o->args[i], in, &fi));
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	int keep = !held.failed && status <= EXIT_SKIPPED;
	if (held.file && tk_outfile_close(held.file, keep) < 0 && keep) {
		cli_error(o->output, UINT64_MAX, "write failed: %s", strerror(errno));
		status = EXIT_OUTPUT;
	}
	memset(&held, 0, sizeof held);
	return cli_outputs_end(status);
}

