/* tracekit COMMAND [OPTIONS] FILE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const struct cli_command *const cli_commands[] = {
	&cli_cmd_info, &cli_cmd_dump, &cli_cmd_decode, &cli_cmd_profile, &cli_cmd_stats,
	&cli_cmd_check, &cli_cmd_convert, &cli_cmd_report, &cli_cmd_record, &cli_cmd_merge,
	&cli_cmd_diff, NULL,
};

const struct cli_command *cli_find_command(const char *name)
{
	for (int i = 0; cli_commands[i]; i++)
		if (strcmp(cli_commands[i]->name, name) == 0)
			return cli_commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tracekit COMMAND [OPTIONS] FILE...\n\n"
		   "Records, decodes and analyses program-execution traces: Intel PT, LLVM XRay,\n"
		   "Kanata pipeline logs, Kunpeng xtrace and tracekit branch traces.\n\n"
		   "commands:\n");
	for (int i = 0; cli_commands[i]; i++)
		fprintf(f, "  %-9s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
	fprintf(f, "  %-9s %s\n", "help", "show help for a command: tracekit help COMMAND");
	fprintf(f, "\ntracekit --completion bash|zsh prints a shell completion script; "
		   "tracekit --version.\n");
	fprintf(f, "\nexit status: 0 clean, 1 finished but data was skipped, 2 usage error,\n"
		   "3 input unreadable or of an unknown format, 4 output could not be written.\n");
}

static int help(int argc, char **argv)
{
	if (argc < 1) {
		usage(stdout);
		return EXIT_CLEAN;
	}
	const struct cli_command *c = cli_find_command(argv[0]);
	if (!c) {
		cli_error(NULL, UINT64_MAX, "no command '%s' (try: tracekit help)", argv[0]);
		return EXIT_USAGE;
	}
	cli_help(c);
	return EXIT_CLEAN;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;

	return clock_gettime(id, &ts) ? 0 : (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* TK_PHASES: where the run's CPU went (docs/PERFORMANCE.md, "Serial fraction"): the main
 * thread outside worker pools is the serial part; merges are serial too but overlap the
 * workers, as does what other threads do in order (a timeline's formatter, a relay's
 * consumer). The CPU the process had used when main() began (CPU0: the exec, mostly the
 * spawning process's mappings torn down, and the dynamic loader) is printed apart: it is
 * 2-9 ms here for an empty C program too, as the parent is a shell or not. */
static void print_phases(double wall0, double cpu0)
{
	struct tk_pool_times t;
	double wall = clock_s(CLOCK_MONOTONIC) - wall0;
	double all = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	double main_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;

	tk_pool_times(&t);
	double outside = main_cpu - t.merge_cpu - t.inline_work_cpu;
	double other = all - main_cpu - t.worker_cpu;
	fprintf(stderr, "tracekit: phases: wall %.3f s, cpu %.3f s = serial %.3f (main thread "
		"outside pools) + merge %.3f (main thread in pools) + jobs %.3f (%.3f on workers, "
		"%.3f on the main thread; %llu jobs in %llu pools) + other threads %.3f (%.3f in "
		"order); serial fraction %.2f %%, with merges %.2f %%; before main() %.3f s (the "
		"exec, not counted)\n", wall, all, outside,
		t.merge_cpu, t.worker_cpu + t.inline_work_cpu, t.worker_cpu, t.inline_work_cpu,
		(unsigned long long)t.jobs, (unsigned long long)t.runs, other > 0 ? other : 0,
		t.ordered_cpu, all > 0 ? 100 * outside / all : 0,
		all > 0 ? 100 * (outside + t.merge_cpu) / all : 0, cpu0);
	struct tk_seam_counts sc;
	tk_seam_counts(&sc);
	if (sc.exact + sc.replayed + sc.decoded_again)
		fprintf(stderr, "tracekit: seams: %llu profiles merged, %llu replayed from their "
			"events (%llu of them given up early), %llu decoded again\n",
			(unsigned long long)sc.exact, (unsigned long long)sc.replayed,
			(unsigned long long)sc.given_up, (unsigned long long)sc.decoded_again);
	if (sc.grafted)
		fprintf(stderr, "tracekit: merges: %llu call-tree nodes of chunk profiles grafted, "
			"%llu of them new to the total\n", (unsigned long long)sc.grafted,
			(unsigned long long)sc.made);
}

int main(int argc, char **argv)
{
	int phases = getenv("TK_PHASES") != NULL;
	double wall0 = clock_s(CLOCK_MONOTONIC), cpu0 = phases ? clock_s(CLOCK_THREAD_CPUTIME_ID) : 0;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[1];
	if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
		printf("tracekit %s\n", TK_VERSION_STRING);
		return EXIT_CLEAN;
	}
	if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
		return help(argc - 2, argv + 2);
	if (strcmp(name, "--completion") == 0)
		return cli_completion(argv[2]);

	const struct cli_command *c = cli_find_command(name);
	if (!c) {
		cli_error(NULL, UINT64_MAX, "no command '%s' (try: tracekit help)", name);
		return EXIT_USAGE;
	}
	struct tk_cmd_opts o;
	if (phases)
		tk_pool_timing(1);
	tk_input_catch_sigbus();  /* an input truncated under us: an error, not SIGBUS */
	tk_outfile_catch_signals();  /* ^C or a kill removes the outputs' temporary files */
	int rc = cli_parse(c, argc - 1, argv + 1, &o);
	if (rc)
		return rc == -1 ? EXIT_CLEAN : rc;
	/* outputs of commands that do not end in cli_run_files */
	rc = cli_outputs_end(c->run(&o));
	if (phases)
		print_phases(wall0, cpu0);
	return rc;
}
