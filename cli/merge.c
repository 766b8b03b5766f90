/* tracekit merge: the partial results of `profile|stats|decode --stat --shard I/N`
 * (cli/shard.c), read back and merged in input order into the command's output. The
 * inputs are opened again (by the names the partials record, checked against size and
 * hash) for their symbols, and to decode a chunk again where its seam with the one before
 * cannot be merged exactly (a longjmp across it). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/partial.h"

static const char usage[] =
	"usage: tracekit merge [OPTIONS] PART...\n"
	"\n"
	"Merge the partial results of `tracekit profile|stats|decode --stat --shard I/N -o\n"
	"PART FILE...` (all N shards, any order) into the output the command prints for\n"
	"FILE...: the same bytes.\n"
	"The trace files (and --elf files) must be readable here under the names the shards\n"
	"were given; their size and hash are checked.\n"
	"\n"
	"  --to FMT        text, json, csv, folded, pprof, calltree, lines, blocks, source,\n"
	"                  account, account-csv\n"
	"  --sort KEY      sort by KEY\n"
	"  --top N         only the first N rows\n"
	"  --threads       per thread instead of merged\n"
	"  --stacks, --lines, --source, --no-demangle, --short-names: as profile's\n"
	"  -o FILE         write to FILE\n"
	"\n"
	"Refused (exit 2): partials of other inputs, options, commands or shard counts, a\n"
	"missing or repeated shard. Unreadable or damaged partial (exit 3): the file and offset.\n";

struct part_file {
	const char *path;
	uint8_t *data;
	size_t len;
	struct tk_partial p;
};

static const char *const command_names[] = {
	[TK_PARTIAL_PROFILE] = "profile", [TK_PARTIAL_STATS] = "stats",
	[TK_PARTIAL_DECODE_STAT] = "decode" };

static struct {
	struct part_file *v;          /* by shard */
	uint32_t n;
	size_t input;                 /* the next input merge_input is called for */
	int repeat;                   /* print the shards' messages (cli_merge_partials) */
} m;

static int read_part(struct part_file *f)
{
	struct tk_partial_error e;
	const char *path = f->path;
	int rc;

	if ((rc = tk_partial_read(&f->p, f->data, f->len, &e)) < 0) {
		cli_error(path, e.offset, "%s", e.msg);
		return EXIT_INPUT;
	}
	if (f->p.command < TK_PARTIAL_PROFILE || f->p.command > TK_PARTIAL_DECODE_STAT) {
		cli_error(path, UINT64_MAX, "a partial result of another command (%u): merge takes "
			  "those of profile, stats and decode --stat --shard", f->p.command);
		return EXIT_USAGE;
	}
	return 0;
}

/* Every shard once, all of one job: the same options, inputs and plan. */
static int check_set(struct part_file *v, int n)
{
	const struct tk_partial *a = &v[0].p;

	for (int i = 0; i < n; i++) {
		const struct tk_partial *b = &v[i].p;
		if (b->nshards != a->nshards || strcmp(b->options, a->options) ||
		    b->ninputs != a->ninputs || b->command != a->command) {
			cli_error(v[i].path, UINT64_MAX, "not of the same job as %s (%s)", v[0].path,
				  b->command != a->command ? "another command" :
				  b->nshards != a->nshards ? "another shard count" :
				  b->ninputs != a->ninputs ? "other inputs" : "other options");
			return EXIT_USAGE;
		}
		for (size_t k = 0; k < a->ninputs; k++) {
			const struct tk_partial_input *x = &a->inputs[k], *y = &b->inputs[k];
			if (strcmp(x->name, y->name) || x->size != y->size || x->hash != y->hash ||
			    x->nchunks != y->nchunks) {
				cli_error(v[i].path, UINT64_MAX, "not of the same job as %s (input %zu: "
					  "%s, %llu bytes; there: %s, %llu bytes%s)", v[0].path, k + 1,
					  y->name, (unsigned long long)y->size, x->name,
					  (unsigned long long)x->size,
					  x->hash != y->hash ? ", other content" : "");
				return EXIT_USAGE;
			}
		}
	}
	m.n = a->nshards;
	if (!(m.v = calloc(m.n, sizeof *m.v))) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	for (int i = 0; i < n; i++) {
		struct part_file *slot = &m.v[v[i].p.shard - 1];
		if (slot->path) {
			cli_error(v[i].path, UINT64_MAX, "shard %u/%u given twice (also %s)",
				  v[i].p.shard, m.n, slot->path);
			return EXIT_USAGE;
		}
		*slot = v[i];
	}
	for (uint32_t k = 0; k < m.n; k++)
		if (!m.v[k].path) {
			cli_error(NULL, UINT64_MAX, "shard %u/%u is missing (%d partials given)", k + 1,
				  m.n, n);
			return EXIT_USAGE;
		}
	/* the shards' chunk ranges follow one another and cover each input's plan */
	for (size_t k = 0; k < a->ninputs; k++) {
		uint32_t next = 0;
		for (uint32_t s = 0; s < m.n; s++) {
			const struct tk_partial_input *x = &m.v[s].p.inputs[k];
			if (x->count && x->first != next) {
				cli_error(m.v[s].path, UINT64_MAX, "input %s: chunks from %u, expected "
					  "%u: not planned as the other shards", x->name, x->first, next);
				return EXIT_USAGE;
			}
			next += x->count;
		}
		if (next != a->inputs[k].nchunks) {
			cli_error(NULL, UINT64_MAX, "input %s: the shards hold %u of its %u chunks",
				  a->inputs[k].name, next, a->inputs[k].nchunks);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* The recorded options (one token a line) into O, as the shards had them. */
static int apply_options(struct tk_cmd_opts *o, const char *opts, char **copy)
{
	struct tk_cmd_opts r;
	char *argv[4 * TK_CMD_MAX_LIST + 32];
	int argc = 0;

	argv[argc++] = "merge";
	if (!(*copy = strdup(opts)))
		return EXIT_INPUT;
	for (char *t = strtok(*copy, "\n"); t; t = strtok(NULL, "\n")) {
		if (!strcmp(t, "TK_PLAN_WORKERS")) {
			char *val = strtok(NULL, "\n");
			o->plan_workers = val ? (unsigned)strtoul(val, NULL, 10) : 0;
			continue;
		}
		if (!strcmp(t, "TK_IPT_CHUNK")) {
			char *val = strtok(NULL, "\n");
			if (val)
				setenv("TK_IPT_CHUNK", val, 1);
			continue;
		}
		if (argc >= (int)(sizeof argv / sizeof argv[0]) - 1)
			break;
		argv[argc++] = t;
	}
	argv[argc] = NULL;
	uint32_t cmd = m.v[0].p.command;
	if (cli_parse(cmd == TK_PARTIAL_STATS ? &cli_cmd_stats : cmd == TK_PARTIAL_DECODE_STAT ?
		      &cli_cmd_decode : &cli_cmd_profile, argc, argv, &r) != 0) {
		cli_error(NULL, UINT64_MAX, "the partials' options do not parse: %s", opts);
		return EXIT_USAGE;
	}
	cli_opts_take_recorded(o, &r);
	o->stat = cmd == TK_PARTIAL_DECODE_STAT;
	return 0;
}

/* The result PT of partial file F into *TOTAL (FIRST: nothing is in it yet). */
static int merge_part(struct tk_source *s, struct tk_prof **total, const struct tk_partial_part *pt,
		      const struct part_file *f, int first)
{
	struct tk_partial_error e;
	uint64_t t0 = tk_now_ns();
	struct tk_prof *p = tk_prof_load(*total, pt->data, pt->len, &e);
	int rc;

	cli_load_ns += tk_now_ns() - t0;
	if (!p) {
		cli_error(f->path, (uint64_t)(pt->data - f->data) + e.offset, "%s", e.msg);
		return -TK_E_BAD_FORMAT;
	}
	if (pt->chunk == TK_PARTIAL_REST && first) {
		/* the whole profile of a source decoded in order: it is the total itself */
		tk_prof_free(*total);
		*total = p;
		return 0;
	}
	if (pt->chunk == TK_PARTIAL_REST || tk_prof_seam_exact(*total, p)) {
		rc = tk_prof_merge_take(*total, p);
	} else {
		/* a return in the chunk may end calls of the chunks before (longjmp): decoded
		 * again into the total, as one process does (its blocks counted already) */
		struct tk_run_part part = { .sz = sizeof part, .first = pt->chunk, .count = 1,
					    .no_blocks = 1 };
		rc = tk_run_profile_part(s, *total, &part);
	}
	tk_prof_free(p);
	return rc;
}

/* What the shards' decoding of input K lost, added up in shard order (the input's). */
static struct tk_losses shards_lost(size_t k)
{
	struct tk_losses sum = { 0 };

	for (uint32_t i = 0; i < m.n; i++)
		tk_losses_add(&sum, &m.v[i].p.inputs[k].lost);
	return sum;
}

/* The shards' statistics (or decode --stat's counts) of input K (FILE) added up, then
 * written by the format's operation. */
static int merge_stats(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, size_t k)
{
	struct tk_cmd_part_bytes *load = calloc(m.n, sizeof *load);
	struct tk_cmd_part cp = { .load = load };
	struct tk_cmd c = *cli_cmd(o, command_names[m.v[0].p.command]);
	int decode = m.v[0].p.command == TK_PARTIAL_DECODE_STAT, status;

	if (!tk_cmd_stats_partial(fi->id, decode) || !load) {
		free(load);
		return load ? cli_unsupported("merge", file, fi) : EXIT_INPUT;
	}
	for (uint32_t i = 0; i < m.n; i++)
		for (size_t j = 0; j < m.v[i].p.inputs[k].nparts; j++) {
			const struct tk_partial_part *pt = &m.v[i].p.inputs[k].parts[j];
			load[cp.nload++] = (struct tk_cmd_part_bytes){
				m.v[i].path, pt->data, pt->len, (uint64_t)(pt->data - m.v[i].data) };
		}
	if (cp.nload != m.n) {   /* every shard saves one, if of no chunk */
		cli_error(file, UINT64_MAX, "%zu of %u shards hold its statistics", cp.nload, m.n);
		free(load);
		return EXIT_INPUT;
	}
	c.part = &cp;
	cp.lost = shards_lost(k);
	status = tk_cmd_op(fi->id, decode ? TK_CMD_DECODE : TK_CMD_STATS)(&c, file, in, fi, NULL);
	free(load);
	return status;
}

/* The shards' profiles of input FILE (the next one) merged in order, then written. */
static int merge_input(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	size_t k = m.input++;
	const struct tk_partial_input *want = &m.v[0].p.inputs[k];
	struct tk_source_opts so = cli_source_opts(o, fi);
	struct tk_source *s;
	struct tk_prof *total;
	struct tk_sym *sym;
	uint64_t hash, size;
	int err = 0, rc = 0;

	if (tk_partial_hash(file, &hash, &size) < 0 || size != want->size || hash != want->hash) {
		cli_error(file, UINT64_MAX, "not the file the shards read (size or content changed)");
		return EXIT_INPUT;
	}
	/* what the shards said about this input's data, in shard order: one process's order */
	for (uint32_t i = 0; m.repeat && i < m.n; i++)
		for (size_t j = 0; j < m.v[i].p.nmessages; j++) {
			const struct tk_partial_message *msg = &m.v[i].p.messages[j];
			if (msg->input == k)
				cli_msg(NULL, (enum tk_log_level)msg->level, file, msg->offset, msg->text);
		}
	if (m.v[0].p.command != TK_PARTIAL_PROFILE)
		return merge_stats(o, file, in, fi, k);
	if (tk_source_open_input(&s, file, in, &so) < 0)
		return EXIT_INPUT;
	if ((rc = cli_profile_output_refused(o, file, fi, s))) {
		tk_source_free(s);
		return rc;
	}
	if (!(sym = tk_source_symbols(s, &err)) || !(total = tk_run_prof_new(s, &err))) {
		if (sym)
			cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		tk_source_free(s);
		return EXIT_INPUT;
	}
	/* the chunks' profiles in order, as tk_run_profile merges them; then the rest */
	int merged = 0;
	for (int rest = 0; rest < 2; rest++)
		for (uint32_t i = 0; i < m.n && rc >= 0; i++) {
			const struct tk_partial_input *x = &m.v[i].p.inputs[k];
			for (size_t j = 0; j < x->nparts && rc >= 0; j++) {
				const struct tk_partial_part *pt = &x->parts[j];
				if ((pt->chunk == TK_PARTIAL_REST) != rest)
					continue;
				rc = merge_part(s, &total, pt, &m.v[i], !merged++);
			}
		}
	int status = EXIT_CLEAN;
	if (rc >= 0 && (rc = tk_prof_finish(total)) >= 0)
		status = cli_is_account(o->to) ? cli_profile_account(o, file, total, sym, s)
			 : cli_profile_write(o, total, sym, s);
	else if (rc != -TK_E_BAD_FORMAT)
		cli_error(file, UINT64_MAX, "merge failed: %s", tk_strerror(rc));
	if (rc < 0)
		status = EXIT_INPUT;
	/* what was lost, told once for the input as one process tells it */
	struct tk_losses lost = shards_lost(k);
	tk_source_add_losses(s, &lost);
	if (rc >= 0 && tk_source_report(s) && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	tk_prof_free(total);
	tk_source_free(s);
	return status;
}

int cli_merge_partials(struct tk_cmd_opts *o, const char *const *pnames, uint8_t **data,
		       const size_t *len, int nparts, int repeat)
{
	struct part_file *v;
	char *opts = NULL;
	int status = 0;

	if (cli_is_account(o->to) && tk_out_account_sort_key(o->sort) < 0) {
		cli_error(NULL, UINT64_MAX, "--sort: unknown key '%s' (funcid, count, min, med, "
			  "90p, 99p, max, sum)", o->sort);
		status = EXIT_USAGE;
	}
	if (!status)
		status = cli_table_opts_refused(o);
	if (!(v = calloc((size_t)nparts, sizeof *v))) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		status = EXIT_INPUT;
	}
	for (int i = 0; v && i < nparts; i++)
		v[i] = (struct part_file){ .path = pnames[i], .data = data[i], .len = len[i] };
	for (int i = 0; i < nparts && !status; i++)
		status = read_part(&v[i]);
	if (!status)
		status = check_set(v, nparts);
	if (!status)
		status = apply_options(o, v[0].p.options, &opts);
	if (!status) {
		/* the inputs as the shards named them, one profile each as profile prints them */
		const struct tk_partial *a = &m.v[0].p;
		char **names = calloc(a->ninputs + 1, sizeof *names);
		if (!names) {
			status = EXIT_INPUT;
		} else {
			for (size_t k = 0; k < a->ninputs; k++)
				names[k] = (char *)a->inputs[k].name;
			o->args = names;
			o->nargs = (int)a->ninputs;
			m.repeat = repeat;
			status = cli_run_files(o, command_names[a->command], merge_input);
			/* data a shard skipped is skipped in the output too */
			for (uint32_t i = 0; i < m.n; i++)
				if (status < (int)m.v[i].p.status)
					status = (int)m.v[i].p.status;
			free(names);
		}
	}
	for (int i = 0; i < nparts; i++) {
		if (v)
			tk_partial_clear(&v[i].p);
		free(data[i]);
	}
	free(v);
	free(m.v);
	free(opts);
	memset(&m, 0, sizeof m);
	return status;
}

static int run(struct tk_cmd_opts *o)
{
	uint8_t **data = calloc((size_t)o->nargs + 1, sizeof *data);
	size_t *len = calloc((size_t)o->nargs + 1, sizeof *len);
	int status = 0;

	if (!o->nargs) {
		cli_error(NULL, UINT64_MAX, "merge: no partial results given (see: tracekit help merge)");
		status = EXIT_USAGE;
	} else if (!data || !len) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		status = EXIT_INPUT;
	}
	for (int i = 0; i < o->nargs && !status; i++)
		status = cli_read_whole(o->args[i], &data[i], &len[i]);
	if (!status)
		status = cli_merge_partials(o, (const char *const *)o->args, data, len, o->nargs, 1);
	else
		for (int i = 0; data && i < o->nargs; i++)
			free(data[i]);
	free(data);
	free(len);
	return status;
}

const struct cli_command cli_cmd_merge = {
	.name = "merge",
	.summary = "merge the partial results of profile --shard I/N",
	.usage = usage,
	.kind = TK_CMD__COUNT,   /* no format's options: the partials carry the shards' */
	.run = run,
	.to = "text json csv folded pprof calltree lines blocks source",
	.takes = "to sort top threads stacks lines source no-demangle short-names",
};
