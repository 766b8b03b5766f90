/* tracekit-mpi: `tracekit profile`, `stats` or `decode --stat` over the ranks of an MPI job.
 *
 *   mpirun -np N tracekit-mpi profile|stats|decode [OPTIONS] FILE...
 *
 * Every rank plans over all inputs alike (the plan of `profile --shard`) and decodes shard
 * RANK+1 of N with its own -j threads; the partial results (tracekit/partial.h) are
 * gathered to rank 0 in rank order, which is input order, and rank 0 merges them as
 * `tracekit merge` does and writes the output: the bytes of `tracekit profile -j 1`.
 * A separate program, not an option of tracekit: only it links MPI, so tracekit itself
 * starts without an MPI runtime and runs where none is installed.
 *
 * MPI_Init takes about half a second here and most of it is waiting (0.1 s of CPU): where
 * the launcher says the rank in the environment, the rank decodes its shard on a thread
 * while MPI starts, and checks the launcher's word against MPI's once MPI is up (a rank
 * that guessed wrong decodes again). */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli.h"

static const char usage[] =
	"usage: mpirun -np N tracekit-mpi profile|stats|decode --stat [OPTIONS] FILE...\n"
	"\n"
	"tracekit profile, stats or decode --stat on N ranks: each decodes 1/N of the plan\n"
	"over all inputs (with -j threads), rank 0 merges and writes. The options are the\n"
	"command's (tracekit help profile, stats, decode; stats: Intel PT, perf.data, branch\n"
	"traces and xtrace; decode --stat: these too).\n";

/* What this rank printed on stderr (ranks other than 0 write it to a file), for rank 0. */
static char *slurp(FILE *f, size_t *n)
{
	long end;
	char *s;

	fflush(f);
	if (!f || (end = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) < 0 || !(s = malloc((size_t)end))) {
		*n = 0;
		return NULL;
	}
	*n = fread(s, 1, (size_t)end, f);
	return s;
}

/* The rank and size the launcher put in the environment (Open MPI; MPICH and Intel MPI's
 * PMI), 0 if it did not. */
static int launcher_rank(int *rank, int *size)
{
	static const char *const names[][2] = {
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
	};

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *r = getenv(names[i][0]), *n = getenv(names[i][1]);
		char *end1, *end2;
		long lr, ln;

		if (!r || !n)
			continue;
		lr = strtol(r, &end1, 10);
		ln = strtol(n, &end2, 10);
		if (*r && *n && !*end1 && !*end2 && lr >= 0 && ln > lr && ln <= INT_MAX) {
			*rank = (int)lr;
			*size = (int)ln;
			return 1;
		}
	}
	return 0;
}

/* This rank's stderr into a temporary file (its text reaches rank 0 in the gather). */
struct capture { FILE *log; int fd; };

static void capture_stderr(struct capture *c)
{
	c->fd = -1;
	if ((c->log = tmpfile()) && (c->fd = dup(STDERR_FILENO)) >= 0) {
		fflush(stderr);
		dup2(fileno(c->log), STDERR_FILENO);
	}
}

/* What was captured (malloc'd, *N bytes), stderr given back. */
static char *release_stderr(struct capture *c, size_t *n)
{
	char *text = c->log ? slurp(c->log, n) : NULL;

	if (c->fd >= 0) {
		fflush(stderr);
		dup2(c->fd, STDERR_FILENO);
		close(c->fd);
	}
	if (c->log)
		fclose(c->log);
	c->log = NULL;
	c->fd = -1;
	if (!text)
		*n = 0;
	return text;
}

/* One rank's shard, on a thread while MPI_Init runs. */
struct build {
	struct tk_cmd_opts *o;
	int kind, rank, size, status;
	uint8_t *data;
	size_t len;
};

static void *build_shard(void *arg)
{
	struct build *b = arg;

	b->status = cli_shard_build(b->o, b->kind, (uint32_t)b->rank + 1, (uint32_t)b->size, 0,
				    &b->data, &b->len);
	return NULL;
}

/* Bytes of every rank to rank 0 (*ALL and *LENS there, malloc'd; int-sized counts). */
static int gather(const void *data, size_t len, int rank, int size, uint8_t **all, int **lens,
		  int **offs)
{
	int n = len > INT_MAX ? -1 : (int)len, ok = 1;

	*all = NULL;
	*lens = *offs = NULL;
	if (rank == 0 && (!(*lens = calloc((size_t)size, sizeof **lens)) ||
			  !(*offs = calloc((size_t)size, sizeof **offs))))
		MPI_Abort(MPI_COMM_WORLD, EXIT_INPUT);
	MPI_Gather(&n, 1, MPI_INT, *lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		long long total = 0;
		for (int i = 0; i < size; i++) {
			ok &= (*lens)[i] >= 0;
			(*offs)[i] = (int)total;
			total += (*lens)[i] > 0 ? (*lens)[i] : 0;
		}
		ok &= total <= INT_MAX;
		if (ok && !(*all = malloc(total ? (size_t)total : 1)))
			ok = 0;
	}
	MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (!ok)
		return -1;
	MPI_Gatherv(data, n, MPI_BYTE, *all, *lens, *offs, MPI_BYTE, 0, MPI_COMM_WORLD);
	return 0;
}

/* Wait until every rank is here, asleep between looks: MPI's own waits poll, and a rank
 * waiting for the others (for the slowest rank's decoding, or for rank 0's merge before
 * MPI_Finalize) would take a core from them where ranks share cores (a 2-core machine
 * under -np 2: rank 0 used 0.18 s more CPU than rank 1, polling). */
static void wait_all(void)
{
	MPI_Request req;
	int done = 0;

	MPI_Ibarrier(MPI_COMM_WORLD, &req);
	while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
		nanosleep(&(struct timespec){ 0, 200 * 1000 }, NULL);
}

static double mpi_start_s;   /* how long MPI_Init took (TK_MPI_TIMES) */

static void mpi_start(int *argc, char ***argv, int *rank, int *size)
{
	uint64_t t0 = tk_now_ns();
	int provided;

	/* FUNNELED: the -j workers and the early shard thread never call MPI */
	MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	mpi_start_s = (tk_now_ns() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	struct tk_cmd_opts o;
	struct capture cap = { NULL, -1 };
	struct build b = { 0 };
	pthread_t thread;
	int rank, size, status, rc, early;
	uint8_t *data = NULL;
	size_t len = 0;
	static const struct { const char *name; const struct cli_command *cmd; int kind; } cmds[] = {
		{ "profile", &cli_cmd_profile, TK_PARTIAL_PROFILE },
		{ "stats", &cli_cmd_stats, TK_PARTIAL_STATS },
		{ "decode", &cli_cmd_decode, TK_PARTIAL_DECODE_STAT },
	};

	/* no Open MPI notice when the job ends with MPI_Abort (below): the status says it, and
	 * tracekit's own messages say why (read by MPI_Init; set before any thread starts) */
	setenv("OMPI_MCA_orte_execute_quiet", "1", 0);
	early = launcher_rank(&rank, &size);
	if (!early)
		mpi_start(&argc, &argv, &rank, &size);
	/* mpirun gives every rank a pseudo-terminal whatever its own output is, so "is it a
	 * terminal" cannot choose colour or progress here: off unless asked for */
	setenv("NO_COLOR", "1", 0);
	size_t k = 0;
	while (argc >= 2 && k < sizeof cmds / sizeof cmds[0] && strcmp(argv[1], cmds[k].name))
		k++;
	if (argc < 2 || k == sizeof cmds / sizeof cmds[0]) {
		if (rank == 0)
			fputs(usage, stderr);
		status = EXIT_USAGE;
		goto finalize;
	}
	if ((rc = cli_parse(cmds[k].cmd, argc - 1, argv + 1, &o)) != 0 ||
	    (rc = cli_need_files(&o, argv[1])) != 0 || o.shard ||
	    (cmds[k].kind == TK_PARTIAL_DECODE_STAT && !o.stat)) {
		if ((o.shard || rc == 0) && rank == 0)
			cli_error(NULL, UINT64_MAX, o.shard ? "tracekit-mpi: the ranks are the "
				  "shards (no --shard)" : "tracekit-mpi decode: only with --stat");
		status = rc < 0 ? EXIT_CLEAN : EXIT_USAGE;
		goto finalize;
	}
	if (o.progress == 1)   /* (1: the default, on a terminal; 2: --progress) */
		o.progress = 0;
	/* the other ranks' messages reach stderr through rank 0, after its own, in rank order:
	 * the order of the inputs, as one process prints them. A rank decoding before MPI is
	 * up keeps its own too (its rank is not sure yet); not with progress, which is live. */
	int overlap = early && !o.progress, decoded;

	if (overlap)
		capture_stderr(&cap);
	/* TK_MPI_TIMES: each phase's seconds on rank 0's stderr (bench/mpi.sh) */
	double t0 = tk_now_ns() / 1e9, t_built, t_gathered;
	b = (struct build){ &o, cmds[k].kind, rank, size, 0, NULL, 0 };
	decoded = overlap && pthread_create(&thread, NULL, build_shard, &b) == 0;
	if (early)
		mpi_start(&argc, &argv, &rank, &size);
	if (decoded)
		pthread_join(thread, NULL);
	if (!decoded || rank != b.rank || size != b.size) {
		/* not decoded yet, or decoded as the launcher's environment said where MPI
		 * says another rank (an environment that was not this job's) */
		size_t n;
		if (cap.log)
			free(release_stderr(&cap, &n));
		free(b.data);
		decoded = 0;
		b = (struct build){ &o, cmds[k].kind, rank, size, 0, NULL, 0 };
		if (rank)
			capture_stderr(&cap);
		build_shard(&b);
	}
	status = b.status;
	data = b.data;
	len = b.len;
	size_t nlog = 0;
	char *text = cap.log ? release_stderr(&cap, &nlog) : NULL;

	if (rank == 0 && text) {        /* rank 0's own, captured while MPI started */
		fwrite(text, 1, nlog, stderr);
		free(text);
		text = NULL;
	}
	if (status >= EXIT_USAGE) {
		/* an input this rank cannot read: the job ends now with that status, whatever
		 * the others are doing, rather than waiting for them */
		if (text)
			fwrite(text, 1, nlog, stderr);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, status);
	}
	uint8_t *logs, *parts;
	int *loglens, *logoffs, *lens, *offs, *statuses = rank ? NULL : calloc((size_t)size, sizeof *statuses);

	wait_all();
	MPI_Gather(&status, 1, MPI_INT, statuses, 1, MPI_INT, 0, MPI_COMM_WORLD);
	t_built = tk_now_ns() / 1e9;   /* the slowest rank's plan, decoding and saving */
	rc = gather(text, rank ? nlog : 0, rank, size, &logs, &loglens, &logoffs);
	if (rc == 0)
		rc = gather(data, len, rank, size, &parts, &lens, &offs);
	t_gathered = tk_now_ns() / 1e9;
	if (rank == 0) {
		uint8_t **bufs = calloc((size_t)size, sizeof *bufs);
		size_t *blens = calloc((size_t)size, sizeof *blens);
		char (*names)[32] = calloc((size_t)size, sizeof *names);
		const char **pnames = calloc((size_t)size, sizeof *pnames);

		for (int i = 1; rc == 0 && i < size; i++)
			fwrite(logs + logoffs[i], 1, (size_t)loglens[i], stderr);
		for (int i = 0; i < size; i++)
			status = statuses[i] > status ? statuses[i] : status;
		if (rc < 0 || !bufs || !blens || !names || !pnames) {
			cli_error(NULL, UINT64_MAX, "the partial results do not fit in one gather "
				  "(2 GiB): use more ranks or profile --shard");
			status = EXIT_INPUT;
		} else {
			for (int i = 0; i < size; i++) {
				snprintf(names[i], sizeof names[i], "rank %d", i);
				pnames[i] = names[i];
				blens[i] = (size_t)lens[i];
				if ((bufs[i] = malloc(blens[i] ? blens[i] : 1)))
					memcpy(bufs[i], parts + offs[i], blens[i]);
			}
			rc = cli_merge_partials(&o, pnames, bufs, blens, size, 0);
			status = rc > status ? rc : status;
			if (getenv("TK_MPI_TIMES"))
				fprintf(stderr, "tracekit-mpi: %d ranks: MPI start %.3f s%s, plan+decode+save %.3f s, "
					"gather %.3f s (%d partials, %.3f MB), merge+write %.3f s; rank 0: "
					"save %.3f s, load %.3f s\n",
					size, mpi_start_s, decoded ? " (while decoding)" : "",
					t_built - t0, t_gathered - t_built, size,
					(offs[size - 1] + lens[size - 1]) / 1e6, tk_now_ns() / 1e9 - t_gathered,
					cli_save_ns / 1e9, cli_load_ns / 1e9);
		}
		free(bufs);
		free(blens);
		free(names);
		free(pnames);
		free(parts);
		free(lens);
		free(offs);
		free(logs);
		free(loglens);
		free(logoffs);
		free(statuses);
	} else {
		status = EXIT_CLEAN;    /* the job's status is rank 0's */
	}
	free(text);
	free(data);
	/* a status other than 0 (damaged data): mpirun would end the job 2 s after its ranks
	 * and print a notice; MPI_Abort with that status ends it at once, every output of
	 * every rank written by now (rank 0 wrote the others' messages) */
	if (rank == 0 && status != EXIT_CLEAN) {
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, status);
	}
	wait_all();   /* (the other ranks for rank 0's merge) */
	MPI_Finalize();
	return status;
finalize:
	if (early)
		mpi_start(&argc, &argv, &rank, &size);
	if (status != EXIT_CLEAN) {   /* (as above: rank 0 printed why) */
		/* every rank parsed the same command line: the others wait in MPI for rank 0's
		 * abort. Open MPI 4.1's mpirun crashed or hung in its own teardown about once in
		 * 100 launches on a loaded machine when one rank aborted while another ended
		 * through MPI_Finalize; never in 600 with the others waiting, as here and above. */
		wait_all();
		if (rank == 0) {
			fflush(NULL);
			MPI_Abort(MPI_COMM_WORLD, status);
		}
		wait_all();   /* (never done: rank 0 does not join it) */
	}
	MPI_Finalize();
	return rank ? EXIT_CLEAN : status;
}
