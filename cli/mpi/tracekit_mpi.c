/* tracekit-mpi: `tracekit profile`, `stats` or `decode --stat` over the ranks of an MPI job.
 *
 *   mpirun -np N tracekit-mpi profile|stats|decode [OPTIONS] FILE...
 *
 * Every rank plans over all inputs alike (the plan of `profile --shard`) and decodes shard
 * RANK+1 of N with its own -j threads; the partial results (tracekit/partial.h) are
 * gathered to rank 0 in rank order, which is input order, and rank 0 merges them as
 * `tracekit merge` does and writes the output: the bytes of `tracekit profile -j 1`.
 * A separate program, not an option of tracekit: only it links MPI, so tracekit itself
 * starts without an MPI runtime and runs where none is installed. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv)
{
	struct tk_cmd_opts o;
	int rank, size, status, rc, err_fd = -1;
	FILE *log = NULL;
	uint8_t *data = NULL;
	size_t len = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	static const struct { const char *name; const struct cli_command *cmd; int kind; } cmds[] = {
		{ "profile", &cli_cmd_profile, TK_PARTIAL_PROFILE },
		{ "stats", &cli_cmd_stats, TK_PARTIAL_STATS },
		{ "decode", &cli_cmd_decode, TK_PARTIAL_DECODE_STAT },
	};
	/* mpirun gives every rank a pseudo-terminal whatever its own output is, so "is it a
	 * terminal" cannot choose colour or progress here: off unless asked for */
	setenv("NO_COLOR", "1", 0);
	size_t k = 0;
	while (argc >= 2 && k < sizeof cmds / sizeof cmds[0] && strcmp(argv[1], cmds[k].name))
		k++;
	if (argc < 2 || k == sizeof cmds / sizeof cmds[0]) {
		if (rank == 0)
			fputs(usage, stderr);
		MPI_Finalize();
		return EXIT_USAGE;
	}
	if ((rc = cli_parse(cmds[k].cmd, argc - 1, argv + 1, &o)) != 0 ||
	    (rc = cli_need_files(&o, argv[1])) != 0 || o.shard ||
	    (cmds[k].kind == TK_PARTIAL_DECODE_STAT && !o.stat)) {
		if ((o.shard || rc == 0) && rank == 0)
			cli_error(NULL, UINT64_MAX, o.shard ? "tracekit-mpi: the ranks are the "
				  "shards (no --shard)" : "tracekit-mpi decode: only with --stat");
		MPI_Finalize();
		return rc < 0 ? EXIT_CLEAN : EXIT_USAGE;
	}
	if (o.progress == 1)   /* (1: the default, on a terminal; 2: --progress) */
		o.progress = 0;
	/* the other ranks' messages reach stderr through rank 0, after its own, in rank order:
	 * the order of the inputs, as one process prints them */
	if (rank && (log = tmpfile()) && (err_fd = dup(STDERR_FILENO)) >= 0) {
		fflush(stderr);
		dup2(fileno(log), STDERR_FILENO);
	}
	/* TK_MPI_TIMES: each phase's seconds on rank 0's stderr (bench/mpi.sh) */
	double t0 = MPI_Wtime(), t_built, t_gathered;
	status = cli_shard_build(&o, cmds[k].kind, (uint32_t)rank + 1, (uint32_t)size, 0,
				 &data, &len);
	if (status >= EXIT_USAGE) {
		/* an input this rank cannot read: the job ends now with that status, whatever
		 * the others are doing, rather than waiting for them */
		size_t n;
		char *text = slurp(log, &n);
		if (err_fd >= 0)
			dup2(err_fd, STDERR_FILENO);
		if (text)
			fwrite(text, 1, n, stderr);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, status);
	}
	size_t nlog;
	char *text = rank ? slurp(log, &nlog) : NULL;
	uint8_t *logs, *parts;
	int *loglens, *logoffs, *lens, *offs, *statuses = rank ? NULL : calloc((size_t)size, sizeof *statuses);

	MPI_Gather(&status, 1, MPI_INT, statuses, 1, MPI_INT, 0, MPI_COMM_WORLD);
	t_built = MPI_Wtime();   /* the slowest rank's plan, decoding and saving */
	rc = gather(text, rank ? nlog : 0, rank, size, &logs, &loglens, &logoffs);
	if (rc == 0)
		rc = gather(data, len, rank, size, &parts, &lens, &offs);
	t_gathered = MPI_Wtime();
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
				fprintf(stderr, "tracekit-mpi: %d ranks: plan+decode+save %.3f s, "
					"gather %.3f s (%d partials, %.3f MB), merge+write %.3f s; rank 0: "
					"save %.3f s, load %.3f s\n",
					size, t_built - t0, t_gathered - t_built, size,
					(offs[size - 1] + lens[size - 1]) / 1e6, MPI_Wtime() - t_gathered,
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
	if (log)
		fclose(log);
	MPI_Finalize();
	return status;
}
