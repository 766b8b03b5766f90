/* tracekit profile|stats --shard I/N: the partial result of the I-th of N balanced shards
 * of the plan over all inputs (include/tracekit/partial.h, docs/formats/partial.md), for
 * a batch scheduler's N independent processes; `tracekit merge` (cli/merge.c) makes the
 * output. A profile's shards are runs of the chunks of the plan over all inputs; the
 * statistics' (which add in any order) a run of each input's chunks. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/partial.h"

/* A token list of the options that decide the result (and the plan: -j, which XRay's
 * chunking follows), one per line: `tracekit merge` parses it again to open the inputs. */
static int add_tok(char **s, size_t *n, const char *opt, const char *val, int *bad)
{
	size_t need = strlen(opt) + (val ? strlen(val) + 1 : 0) + 2;
	char *q = realloc(*s, *n + need);

	if (!q)
		return -1;
	if (val && strchr(val, '\n'))
		*bad = 1;
	*s = q;
	*n += (size_t)sprintf(q + *n, val ? "%s\n%s\n" : "%s\n", opt, val);
	return 0;
}

static char *shard_options(const struct tk_cmd_opts *o, unsigned jobs)
{
	char *s = calloc(1, 1), num[32];
	size_t n = 0;
	int bad = 0, rc = s ? 0 : -1;

	for (int i = 0; i < o->n_elf && !rc; i++)
		rc = add_tok(&s, &n, "--elf", o->elf[i], &bad);
	for (int i = 0; i < o->n_raw && !rc; i++)
		rc = add_tok(&s, &n, "--raw", o->raw[i], &bad);
	for (int i = 0; i < o->n_module_path && !rc; i++)
		rc = add_tok(&s, &n, "--module-path", o->module_path[i], &bad);
	if (o->format && !rc)
		rc = add_tok(&s, &n, "--format", o->format, &bad);
	if (o->instr_map && !rc)
		rc = add_tok(&s, &n, "--instr-map", o->instr_map, &bad);
	if (o->cpu_model && !rc)
		rc = add_tok(&s, &n, "--cpu", o->cpu_model, &bad);
	const struct { const char *opt; int has; uint64_t v; } nums[] = {
		{ "--tid", o->has_tid, o->tid }, { "--tsc-hz", o->has_tsc_hz, o->tsc_hz },
		{ "--mtc-freq", o->mtc_freq != 0, o->mtc_freq },
		{ "--nom-freq", o->nom_freq != 0, o->nom_freq },
		{ "--cpuid-0x15.eax", o->cpuid_15_eax != 0, o->cpuid_15_eax },
		{ "--cpuid-0x15.ebx", o->cpuid_15_ebx != 0, o->cpuid_15_ebx },
		{ "-j", 1, jobs },
	};
	for (size_t i = 0; i < sizeof nums / sizeof nums[0] && !rc; i++)
		if (nums[i].has) {
			snprintf(num, sizeof num, "%llu", (unsigned long long)nums[i].v);
			rc = add_tok(&s, &n, nums[i].opt, num, &bad);
		}
	/* the workers the plan is cut for, all of the job's */
	if (o->plan_workers && !rc) {
		snprintf(num, sizeof num, "%u", o->plan_workers);
		rc = add_tok(&s, &n, "TK_PLAN_WORKERS", num, &bad);
	}
	/* the Intel PT chunk size of the tests (cli_source_opts) changes the plan too */
	if (getenv("TK_IPT_CHUNK") && !rc)
		rc = add_tok(&s, &n, "TK_IPT_CHUNK", getenv("TK_IPT_CHUNK"), &bad);
	if (rc || bad) {
		cli_error(NULL, UINT64_MAX, rc ? "out of memory" : "--shard: an option value holds "
			  "a line break, which a partial result cannot record");
		free(s);
		return NULL;
	}
	return s;
}

static int parse_shard(const char *arg, uint32_t *i, uint32_t *n)
{
	char *end;
	unsigned long a = strtoul(arg, &end, 10), b;

	if (end == arg || *end != '/' || (b = strtoul(end + 1, &end, 10), *end) || !a || a > b ||
	    b > 1000000) {
		cli_error(NULL, UINT64_MAX, "--shard: '%s' is not I/N with 1 <= I <= N", arg);
		return EXIT_USAGE;
	}
	*i = (uint32_t)a;
	*n = (uint32_t)b;
	return 0;
}

/* The messages a shard prints about its inputs' data, kept for the merge to repeat
 * (struct tk_partial_message): while RECORDING, from any worker. */
struct shard_msgs {
	struct tk_partial *part;
	uint32_t input;
	int recording;                /* (not the closing summary: the merge prints its own) */
	int in_summary;               /* the source's closing summary is being printed */
	const struct tk_cmd_part *cmd_part;  /* a command's, which marks its summary */
	int show_summary;             /* print it (a shard of its own, not an MPI rank's) */
	size_t cap;
	pthread_mutex_t lock;
};

static void shard_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
		      const char *msg)
{
	struct shard_msgs *m = ctx;
	struct tk_partial *p = m->part;
	char *text;

	int summary = m->in_summary || (m->cmd_part && m->cmd_part->summary);

	if (!summary || m->show_summary)
		cli_msg(NULL, level, file, offset, msg);
	pthread_mutex_lock(&m->lock);
	int recording = m->recording && !summary;
	if (recording && p->nmessages == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		struct tk_partial_message *q = realloc(p->messages, cap * sizeof *q);
		if (q) {
			p->messages = q;
			m->cap = cap;
		}
	}
	if (recording && p->nmessages < m->cap && (text = strdup(msg)) != NULL)
		p->messages[p->nmessages++] = (struct tk_partial_message){ m->input, level, offset, text };
	pthread_mutex_unlock(&m->lock);
}

struct shard_in {
	struct tk_input *in;
	struct tk_format_info fi;
	struct tk_source *s;
	struct tk_chunk *plan;
	size_t n;
	struct tk_partial_part *parts;  /* the chunks' profiles, then the rest (malloc'd data) */
	size_t nparts;
};

static void shard_free(struct shard_in *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tk_source_free(v[i].s);
		tk_input_free(v[i].in);
		free(v[i].plan);
		for (size_t k = 0; k < v[i].nparts; k++)
			free((uint8_t *)v[i].parts[k].data);
		free(v[i].parts);
	}
	free(v);
}

uint64_t cli_save_ns, cli_load_ns;

static int keep_part(struct shard_in *v, uint32_t chunk, const struct tk_prof *p)
{
	struct tk_partial_part *pt = &v->parts[v->nparts];
	uint8_t *data;
	uint64_t t0 = tk_now_ns();
	int rc = tk_prof_save(p, &data, &pt->len);

	cli_save_ns += tk_now_ns() - t0;
	if (rc < 0)
		return rc;
	pt->chunk = chunk;
	pt->data = data;
	v->nparts++;
	return 0;
}

static int keep_chunk(void *ctx, size_t chunk, const struct tk_prof *p)
{
	return keep_part(ctx, (uint32_t)chunk, p);
}

/* The profiles of chunks [FIRST, FIRST + COUNT) of V's plan, each unfinished, as bytes;
 * then the rest, what belongs to no one chunk. */
static int shard_profile(const char *file, struct shard_in *v, size_t first, size_t count,
			 struct shard_msgs *msgs)
{
	struct tk_run_part part = { .sz = sizeof part, .first = first, .count = count,
				    .keep = keep_chunk, .ctx = v };
	int err = 0, rc;
	struct tk_prof *p;
	struct tk_partial_input *pi = &msgs->part->inputs[msgs->input];

	if (!tk_source_symbols(v->s, &err) || !(p = tk_run_prof_new(v->s, &err))) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	/* what the decoding says about the data (not the symbols: the merge loads them too) */
	msgs->recording = 1;
	if (!(v->parts = calloc(count + 1, sizeof *v->parts)))
		rc = -TK_E_NOMEM;
	else if ((rc = tk_run_profile_part(v->s, p, &part)) >= 0)
		rc = keep_part(v, TK_PARTIAL_REST, p);
	tk_prof_free(p);
	msgs->recording = 0;
	tk_source_losses(v->s, &pi->lost);
	msgs->in_summary = 1;
	int status = tk_source_report(v->s) ? EXIT_SKIPPED : EXIT_CLEAN;
	msgs->in_summary = 0;
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return status;
}

/* The statistics (or decode --stat's counts) of shard PART->shard of input FILE's chunks,
 * as its one result. */
static int shard_stats(struct tk_cmd_opts *o, const char *file, struct shard_in *v,
		       struct tk_partial_input *pi, struct shard_msgs *msgs)
{
	struct tk_cmd_part cp = { .shard = msgs->part->shard, .nshards = msgs->part->nshards };
	int decode = msgs->part->command == TK_PARTIAL_DECODE_STAT;
	struct tk_cmd c = *cli_cmd(o, decode ? "decode" : "stats");
	int status;

	if (!tk_cmd_stats_partial(v->fi.id, decode)) {
		cli_error(file, UINT64_MAX, "%s --shard: not for %s input (run it on the whole "
			  "input)", decode ? "decode --stat" : "stats", tk_format_description(v->fi.id));
		return EXIT_USAGE;
	}
	if (!(v->parts = calloc(1, sizeof *v->parts))) {
		cli_error(file, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	c.part = &cp;
	c.msg = shard_msg;
	c.ctx = msgs;
	msgs->recording = 1;
	msgs->cmd_part = &cp;
	status = tk_cmd_op(v->fi.id, decode ? TK_CMD_DECODE : TK_CMD_STATS)(&c, file, v->in,
									 &v->fi, NULL);
	msgs->recording = 0;
	msgs->cmd_part = NULL;
	pi->lost = cp.lost;
	pi->nchunks = cp.nchunks;
	pi->first = cp.count ? cp.first : 0;
	pi->count = cp.count;
	if (cp.data)
		v->parts[v->nparts++] = (struct tk_partial_part){ TK_PARTIAL_REST, cp.data, cp.len };
	else if (status < EXIT_USAGE)
		status = (cli_error(file, UINT64_MAX, "no partial result was made"), EXIT_INPUT);
	pi->parts = v->parts;
	pi->nparts = v->nparts;
	return status;
}

int cli_shard_build(struct tk_cmd_opts *o, int command, uint32_t shard, uint32_t nshards,
		    int show_summary, uint8_t **data, size_t *len)
{
	struct tk_partial part = { .version = TK_PARTIAL_VERSION, .command = (uint32_t)command,
				   .shard = shard, .nshards = nshards };
	struct shard_in *v;
	uint64_t total = 0, at = 0;
	int status = EXIT_CLEAN, rc;
	struct shard_msgs msgs = { .part = &part, .show_summary = show_summary,
				   .lock = PTHREAD_MUTEX_INITIALIZER };

	*data = NULL;
	*len = 0;
	if (!(v = calloc((size_t)o->nargs, sizeof *v)) ||
	    !(part.inputs = calloc((size_t)o->nargs, sizeof *part.inputs))) {
		free(v);
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	part.ninputs = (size_t)o->nargs;
	/* the plan follows the thread count (XRay's chunks): every shard and the merge use
	 * this one, recorded in the partial */
	if (!o->jobs)
		o->jobs = tk_cpu_count();
	/* chunks for the job's workers, not one process's: N ranks of -j 1 each share an XRay
	 * log's chunks instead of one taking its single chunk */
	if (!o->plan_workers)
		o->plan_workers = o->jobs * nshards < 65536 ? o->jobs * nshards : 65536;
	/* every shard plans over all inputs the same way */
	for (int i = 0; i < o->nargs && status < EXIT_USAGE; i++) {
		const char *file = o->args[i];
		struct tk_partial_input *pi = &part.inputs[i];
		struct tk_source_opts so;

		pi->name = file;
		if ((rc = cli_open(o, file, &v[i].in, &v[i].fi))) {
			status = rc;
		} else if ((rc = cli_format_opts_refused(file, &v[i].fi))) {
			status = rc;
		} else if (!strcmp(file, "-") || tk_partial_hash(file, &pi->hash, &pi->size) < 0) {
			cli_error(file, UINT64_MAX, "--shard needs regular files that every shard "
				  "and the merge read alike");
			status = EXIT_INPUT;
		} else if (command != TK_PARTIAL_PROFILE) {
			msgs.input = (uint32_t)i;
			if ((rc = shard_stats(o, file, &v[i], pi, &msgs)) > status)
				status = rc;
			continue;
		} else if ((rc = cli_profile_unsupported(file, &v[i].fi))) {
			status = rc;
		} else if (so = cli_source_opts(o, &v[i].fi), so.msg = shard_msg, so.ctx = &msgs,
			   tk_source_open_input(&v[i].s, file, v[i].in, &so) < 0) {
			status = EXIT_INPUT;
		} else if ((rc = tk_source_plan(v[i].s, &v[i].plan, &v[i].n)) < 0) {
			cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
			status = EXIT_INPUT;
		}
		for (size_t j = 0; status < EXIT_USAGE && j < v[i].n; j++)
			total += v[i].plan[j].end > v[i].plan[j].begin ?
				 v[i].plan[j].end - v[i].plan[j].begin : pi->size;
		pi->nchunks = (uint32_t)v[i].n;
	}
	for (int i = 0; command == TK_PARTIAL_PROFILE && i < o->nargs && status < EXIT_USAGE; i++) {
		struct tk_partial_input *pi = &part.inputs[i];
		size_t first = v[i].n, count = 0;

		for (size_t j = 0; j < v[i].n; j++) {
			const struct tk_chunk *c = &v[i].plan[j];
			uint64_t size = c->end > c->begin ? c->end - c->begin : pi->size;
			if (tk_partial_shard_of(at, size, total, part.nshards) == part.shard) {
				first = count ? first : j;
				count++;
			}
			at += size;
		}
		pi->first = (uint32_t)(count ? first : 0);
		pi->count = (uint32_t)count;
		msgs.input = (uint32_t)i;
		if (count && (rc = shard_profile(o->args[i], &v[i], first, count, &msgs)) > status)
			status = rc;
		pi->parts = v[i].parts;
		pi->nparts = v[i].nparts;
	}
	part.status = (uint32_t)status;
	if (status < EXIT_USAGE) {
		if (!(part.options = shard_options(o, o->jobs))) {
			status = EXIT_USAGE;
		} else if ((rc = tk_partial_write(&part, data, len)) < 0) {
			cli_error(NULL, UINT64_MAX, "%s", tk_strerror(rc));
			status = EXIT_INPUT;
		}
		free((char *)part.options);
	}
	free(part.inputs);
	for (size_t i = 0; i < part.nmessages; i++)
		free((char *)part.messages[i].text);
	free(part.messages);
	shard_free(v, (size_t)o->nargs);
	return status;
}

int cli_mpi_refused(const char *name)
{
#ifdef TK_HAVE_MPI
	cli_error(NULL, UINT64_MAX, "--mpi: MPI runs are tracekit-mpi's: mpirun -np N "
		  "tracekit-mpi %s [OPTIONS] FILE...", name);
#else
	cli_error(NULL, UINT64_MAX, "--mpi: this build has no MPI (install libopenmpi-dev "
		  "and build again for tracekit-mpi), or use --shard I/N and tracekit merge");
	(void)name;
#endif
	return EXIT_USAGE;
}

int cli_shard_write(struct tk_cmd_opts *o, int command)
{
	const char *name = command == TK_PARTIAL_STATS ? "stats" :
			   command == TK_PARTIAL_DECODE_STAT ? "decode --stat" : "profile";
	uint32_t shard, nshards;
	uint8_t *data;
	size_t len;
	int status, rc;

	if ((rc = parse_shard(o->shard, &shard, &nshards)) || (rc = cli_need_files(o, name)))
		return rc;
	if (!o->output || !strcmp(o->output, "-") || o->to || o->stacks || o->lines || o->source) {
		cli_error(NULL, UINT64_MAX, "%s --shard: writes a partial result to -o FILE; the "
			  "output's kind (--to) is chosen by tracekit merge", name);
		return EXIT_USAGE;
	}
	if ((status = cli_shard_build(o, command, shard, nshards, 1, &data, &len)) < EXIT_USAGE) {
		struct tk_buf out;

		if ((rc = cli_out_open(o, &out)) == 0) {
			for (size_t k = 0; k < len; k += 65536)
				tk_buf_put(&out, data + k, len - k < 65536 ? len - k : 65536);
			rc = cli_out_close(&out);
		}
		status = rc > status ? rc : status;
	}
	free(data);
	return status;
}
