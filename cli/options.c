/* Option parsing (the common options here, each format's own from its table) and help. */
#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tracekit/ipt.h"

/* The options every format shares; each format declares its own (tk_cmd_option_table). */
enum {
	OPT_FORMAT = 256, OPT_TO, OPT_NO_OFFSET, OPT_ELF, OPT_NO_DISASM, OPT_STAT, OPT_TIME,
	OPT_SORT, OPT_TOP, OPT_THREADS, OPT_STACKS, OPT_LINES, OPT_SOURCE, OPT_MAX_EVENTS,
	OPT_PROGRESS, OPT_NO_PROGRESS, OPT_NO_DEMANGLE, OPT_SHORT_NAMES, OPT_SHARD, OPT_MPI,
	OPT_PID, OPT_COMM,
	OPT_MIN_INSNS,
	OPT_COLOR,
	OPT_FORMAT_OWN = 1000,   /* + the index in format_opts */
};

static const struct option common_opts[] = {
	{ "jobs", required_argument, NULL, 'j' },
	{ "output", required_argument, NULL, 'o' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "to", required_argument, NULL, OPT_TO },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "no-offset", no_argument, NULL, OPT_NO_OFFSET },
	{ "elf", required_argument, NULL, OPT_ELF },
	{ "no-disasm", no_argument, NULL, OPT_NO_DISASM },
	{ "stat", no_argument, NULL, OPT_STAT },
	{ "time", optional_argument, NULL, OPT_TIME },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "threads", no_argument, NULL, OPT_THREADS },
	{ "stacks", no_argument, NULL, OPT_STACKS },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "source", no_argument, NULL, OPT_SOURCE },
	{ "max-events", required_argument, NULL, OPT_MAX_EVENTS },
	{ "no-demangle", no_argument, NULL, OPT_NO_DEMANGLE },
	{ "short-names", no_argument, NULL, OPT_SHORT_NAMES },
	{ "shard", required_argument, NULL, OPT_SHARD },
	{ "mpi", no_argument, NULL, OPT_MPI },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "function", required_argument, NULL, 'F' },
	{ "exclude", required_argument, NULL, 'N' },
	{ "depth", required_argument, NULL, 'D' },
	{ "min-time", required_argument, NULL, 't' },
	{ "min-insns", required_argument, NULL, OPT_MIN_INSNS },
	{ "color", optional_argument, NULL, OPT_COLOR },
};

/* The formats' options, each spelling once (two formats may share one: --tid). */
static const struct tk_cmd_option *format_opts[128];
static size_t nformat_opts;
static struct option long_opts[sizeof common_opts / sizeof common_opts[0] + 128 + 1];

static void options_setup(void)
{
	const struct tk_cmd_option *t;
	const char *title;
	size_t n = sizeof common_opts / sizeof common_opts[0];

	memcpy(long_opts, common_opts, sizeof common_opts);
	nformat_opts = 0;
	for (size_t i = 0; (t = tk_cmd_option_table(i, &title)); i++)
		for (; t->name; t++) {
			size_t k = 0;
			while (k < nformat_opts && strcmp(format_opts[k]->name, t->name))
				k++;
			if (k < nformat_opts || nformat_opts == 128)
				continue;
			format_opts[nformat_opts] = t;
			long_opts[n++] = (struct option){ t->name, t->arg ? required_argument : no_argument,
							  NULL, OPT_FORMAT_OWN + (int)nformat_opts++ };
		}
	long_opts[n] = (struct option){ NULL, 0, NULL, 0 };
}

/* The formats' options the command line gave (cli_format_opts_refused checks them
 * against each input's format). */
static const struct tk_cmd_option *given_opts[128];
static size_t ngiven_opts;
static unsigned char given_taken[128];   /* some input's format took it */
/* The shared options about code, calls and processes the command line gave, which a
 * pipeline log (Kanata, gem5) has none of: refused for such an input
 * (cli_format_opts_refused). */
static const char *const code_opts[] = { "elf", "no-demangle", "short-names", "function",
					 "exclude", "depth", "min-time", "min-insns", "pid",
					 "comm" };
static const char *given_code_opt;
/* convert's --sort, --top or --threads: for a profile target, which a pipeline log's
 * conversions never are (its --to json is Chrome JSON); report's --top: its function
 * table, which a pipeline log's page has not */
static const char *given_table_opt;
/* --time alone (decode, dump): times printed, which only Intel PT and branch traces have
 * in those listings */
static int given_time_flag;
static int given_deferred;               /* cli_format_opts_defer */
static enum tk_cmd_kind given_kind;      /* the command the options were given to */
static const char *given_cmd;            /* ... its name */

/* Some format's table has option NAME for commands of KIND. */
static int option_declared(const char *name, enum tk_cmd_kind kind)
{
	const struct tk_cmd_option *t;
	const char *title;

	for (size_t i = 0; (t = tk_cmd_option_table(i, &title)); i++)
		for (; t->name; t++)
			if (!strcmp(t->name, name) && (t->commands & TK_CMD_BIT(kind)))
				return 1;
	return 0;
}

/* The shared options every command takes (a command's cli_command.takes names the rest). */
static const char *const every_command[] = { "jobs", "output", "quiet", "help", "format",
					     "progress", "no-progress", "color" };

/* The long name of common option C (getopt's value), or NULL for a format's option. */
static const char *common_name(int c)
{
	for (size_t i = 0; i < sizeof common_opts / sizeof common_opts[0]; i++)
		if (common_opts[i].val == c)
			return common_opts[i].name;
	return NULL;
}

/* Whether CMD reads the common option NAME ("time-window": --time A:B). */
static int common_taken(const struct cli_command *cmd, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < sizeof every_command / sizeof every_command[0]; i++)
		if (!strcmp(every_command[i], name))
			return 1;
	for (const char *p = cmd->takes; p && (p = strstr(p, name)); p += len)
		if ((p == cmd->takes || p[-1] == ' ') && (p[len] == ' ' || !p[len]))
			return 1;
	return 0;
}

/* "A:B" with digits (or 0x hex) on either side and nothing else. */
static int looks_like_range(const char *s)
{
	const char *colon = strchr(s, ':');
	if (!colon || strchr(colon + 1, ':'))
		return 0;
	for (const char *p = s; *p; p++)
		if (p != colon && !isxdigit((unsigned char)*p) && *p != 'x')
			return 0;
	return 1;
}

static int num_arg(const char *opt, const char *arg, uint64_t *v)
{
	if (tk_cmd_parse_u64(arg, v) < 0) {
		cli_error(NULL, UINT64_MAX, "%s: not a number: '%s'", opt, arg);
		return EXIT_USAGE;
	}
	return 0;
}

/* uftrace's durations: a number and ns, us, ms or s (ns when none) into *NS. */
static int duration_arg(const char *opt, const char *arg, uint64_t *ns)
{
	static const struct { const char *unit; uint64_t ns; } units[] = {
		{ "", 1 }, { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	};
	char *end;
	errno = 0;
	unsigned long long v = isdigit((unsigned char)*arg) ? strtoull(arg, &end, 10) : 0;

	for (size_t i = 0; isdigit((unsigned char)*arg) && !errno && i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(end, units[i].unit) && v <= UINT64_MAX / units[i].ns) {
			*ns = v * units[i].ns;
			return 0;
		}
	cli_error(NULL, UINT64_MAX, "%s: expected a duration (N with ns, us, ms or s), got '%s'",
		  opt, arg);
	return EXIT_USAGE;
}

static int list_arg(const char *opt, const char **list, int *n, const char *arg)
{
	if (*n >= TK_CMD_MAX_LIST) {
		cli_error(NULL, UINT64_MAX, "too many %s options (at most %d)", opt, TK_CMD_MAX_LIST);
		return EXIT_USAGE;
	}
	list[(*n)++] = arg;
	return 0;
}

/* --pid N[,N...] (repeatable): the processes to keep. */
static int pid_list(const char *arg, struct tk_cmd_opts *o)
{
	char buf[4096], *save = NULL;
	uint64_t v;

	snprintf(buf, sizeof buf, "%s", arg);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		if (tk_cmd_parse_u64(w, &v) < 0 || v > UINT32_MAX) {
			cli_error(NULL, UINT64_MAX, "--pid: not a process id: '%s'", w);
			return EXIT_USAGE;
		}
		if (o->npids == TK_CMD_MAX_LIST) {
			cli_error(NULL, UINT64_MAX, "--pid: at most %d processes", TK_CMD_MAX_LIST);
			return EXIT_USAGE;
		}
		o->pids[o->npids++] = (uint32_t)v;
	}
	if (!o->npids) {
		cli_error(NULL, UINT64_MAX, "--pid: expected N[,N...], got '%s'", arg);
		return EXIT_USAGE;
	}
	return 0;
}

/* --cpu LIST (perf's spelling: 0,2-3): the CPUs to keep, as ranges. A value with a '/'
 * is FAMILY/MODEL[/STEPPING] (ptxed's), or auto or none: the processor whose errata
 * decoding reads. */
static int cpu_list(const char *arg, struct tk_cmd_opts *o)
{
	char buf[4096], *save = NULL;
	uint32_t errata;

	if (strchr(arg, '/') || !strcmp(arg, "auto") || !strcmp(arg, "none")) {
		if (tk_ipt_cpu_parse(arg, &errata) < 0) {
			cli_error(NULL, UINT64_MAX, "--cpu: not FAMILY/MODEL[/STEPPING] (6/142, "
				  "ptxed's), auto or none: '%s'", arg);
			return EXIT_USAGE;
		}
		o->cpu_model = arg;
		return 0;
	}
	snprintf(buf, sizeof buf, "%s", arg);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(w, '-');
		uint64_t lo, hi;
		if (dash)
			*dash = 0;
		if (tk_cmd_parse_u64(w, &lo) < 0 || lo >= UINT32_MAX ||
		    (dash && (tk_cmd_parse_u64(dash + 1, &hi) < 0 || hi >= UINT32_MAX || hi < lo))) {
			if (dash)
				*dash = '-';
			cli_error(NULL, UINT64_MAX, "--cpu: not a CPU or range of CPUs: '%s' (want a "
				  "LIST such as 0,2-3, or FAMILY/MODEL[/STEPPING], auto, none)", w);
			return EXIT_USAGE;
		}
		if (o->ncpus == TK_CMD_MAX_LIST) {
			cli_error(NULL, UINT64_MAX, "--cpu: at most %d CPUs or ranges", TK_CMD_MAX_LIST);
			return EXIT_USAGE;
		}
		o->cpus[2 * o->ncpus] = (uint32_t)lo;
		o->cpus[2 * o->ncpus++ + 1] = (uint32_t)(dash ? hi : lo);
	}
	if (!o->ncpus) {
		cli_error(NULL, UINT64_MAX, "--cpu: expected LIST (0,2-3) or FAMILY/MODEL, got '%s'", arg);
		return EXIT_USAGE;
	}
	return 0;
}

/* A format's option into its field of O. */
static int format_arg(const struct tk_cmd_option *t, const char *arg, struct tk_cmd_opts *o)
{
	char *base = (char *)o, opt[64];
	int rc = 0;

	snprintf(opt, sizeof opt, "--%s", t->name);
	switch (t->kind) {
	case TK_OPT_FLAG:
		*(int *)(base + t->field) = t->value ? t->value : 1;
		break;
	case TK_OPT_U64:
		rc = num_arg(opt, arg, (uint64_t *)(base + t->field));
		if (!rc && t->given)
			*(int *)(base + t->given) = 1;
		break;
	case TK_OPT_STRING:
		*(const char **)(base + t->field) = arg;
		break;
	case TK_OPT_LIST:
		rc = list_arg(opt, (const char **)(base + t->field), (int *)(base + t->given), arg);
		break;
	}
	return rc;
}

void cli_help(const struct cli_command *cmd)
{
	const struct tk_cmd_option *t;
	const char *title;

	fputs(cmd->usage, stdout);
	/* the names --format takes, from the registry (record reads no trace) */
	if (cmd->kind != TK_CMD_RECORD) {
		fputs("\nFormats (--format NAME skips detection):\n ", stdout);
		for (int id = 1; id < TK_FMT__COUNT; id++)
			printf("%s %s", id > 1 ? "," : "", tk_format_name((enum tk_format_id)id));
		putchar('\n');
	}
	for (size_t i = 0; (t = tk_cmd_option_table(i, &title)); i++) {
		int any = 0;
		for (; t->name; t++) {
			char spelling[64];

			if (!(t->commands & TK_CMD_BIT(cmd->kind)) || !t->help)
				continue;   /* (no help: told with the option before it) */
			if (!any++)
				printf("\n%s:\n", title);
			snprintf(spelling, sizeof spelling, "--%s%s%s", t->name, t->arg ? " " : "",
				 t->arg ? t->arg : "");
			if (strlen(spelling) > 16)   /* the help on a line of its own */
				printf("  %s\n%20s%s\n", spelling, "", t->help);
			else
				printf("  %-18s%s\n", spelling, t->help);
		}
	}
}

/* Append the WL bytes at WORD to BUF (space-separated) unless they are there. */
static void add_word(char *buf, size_t n, size_t *len, const char *word, size_t wl)
{
	char w[64];

	if (wl >= sizeof w)
		return;
	memcpy(w, word, wl);
	w[wl] = 0;
	for (const char *p = buf; (p = strstr(p, w)); p += wl)
		if ((p == buf || p[-1] == ' ') && (p[wl] == ' ' || !p[wl]))
			return;
	if (*len + wl + 2 > n)
		return;
	if (*len)
		buf[(*len)++] = ' ';
	memcpy(buf + *len, w, wl + 1);
	*len += wl;
}

size_t cli_command_options(const struct cli_command *cmd, char *buf, size_t n)
{
	const struct tk_cmd_option *t;
	const char *title;
	size_t len = 0;

	buf[0] = 0;
	options_setup();
	/* the shared options it reads, with their one-letter spellings */
	for (size_t i = 0; i < sizeof common_opts / sizeof common_opts[0]; i++) {
		const struct option *c = &common_opts[i];
		char w[64];
		if (!common_taken(cmd, c->name) &&
		    (c->val != OPT_TIME || !common_taken(cmd, "time-window")))
			continue;
		if (c->val < 256) {
			snprintf(w, sizeof w, "-%c", c->val);
			add_word(buf, n, &len, w, 2);
		}
		int wl = snprintf(w, sizeof w, "--%s", c->name);
		add_word(buf, n, &len, w, (size_t)wl);
	}
	for (size_t i = 0; (t = tk_cmd_option_table(i, &title)); i++)
		for (; t->name; t++)
			if (t->commands & TK_CMD_BIT(cmd->kind)) {
				char w[64];
				int wl = snprintf(w, sizeof w, "--%s", t->name);
				add_word(buf, n, &len, w, (size_t)wl);
			}
	return len;
}

/* --stacks, --lines and --source are other spellings of --to folded, lines and source: two
 * of them naming different outputs are refused, not one silently preferred. */
static int one_output(const struct cli_command *cmd, const struct tk_cmd_opts *o)
{
	const struct { int given; const char *flag, *to; } alias[] = {
		{ o->stacks, "--stacks", "folded" },
		{ o->lines, "--lines", "lines" },
		{ o->source, "--source", "source" },
	};
	char first[64] = "";   /* the first output named, as the user spelled it */
	const char *to = o->to;

	if (to)
		snprintf(first, sizeof first, "--to %s", to);
	for (size_t i = 0; i < sizeof alias / sizeof *alias; i++) {
		if (!alias[i].given)
			continue;
		if (!to) {
			to = alias[i].to;
			snprintf(first, sizeof first, "%s (--to %s)", alias[i].flag, to);
		} else if (strcmp(to, alias[i].to)) {
			cli_error(NULL, UINT64_MAX, "%s: %s and %s (--to %s) name two outputs: give one",
				  cmd->name, first, alias[i].flag, alias[i].to);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* Returns 0, EXIT_USAGE, or -1 when help was printed. */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct tk_cmd_opts *o)
{
	int c, rc = 0;
	uint64_t v;

	memset(o, 0, sizeof *o);
	ngiven_opts = 0;
	given_deferred = 0;
	given_code_opt = given_table_opt = NULL;
	given_time_flag = 0;
	given_kind = cmd->kind;
	given_cmd = cmd->name;
	o->progress = 1;
	o->color = -1;
	options_setup();
	optind = 1;
	opterr = 0;
	/* Options may follow file names, except for record, which stops at the first
	 * non-option ('+') so that `record -- CMD ARGS` keeps CMD's own options. */
	const char *shortopts = strcmp(cmd->name, "record") == 0 ? "+j:o:qh" : "j:o:qhF:N:D:t:";
	while ((c = getopt_long(argc, argv, shortopts, long_opts, NULL)) != -1) {
		const char *name = c == '?' ? NULL : common_name(c);
		/* a shared option the command would not read is refused, not ignored (--time:
		 * below, where its two forms are told apart) */
		if (name && c != OPT_TIME && !common_taken(cmd, name)) {
			cli_error(NULL, UINT64_MAX, "%s: --%s is not an option of %s (see: tracekit "
				  "help %s)", cmd->name, name, cmd->name, cmd->name);
			return EXIT_USAGE;
		}
		for (size_t i = 0; name && !given_code_opt && i < sizeof code_opts / sizeof *code_opts; i++)
			if (!strcmp(name, code_opts[i]))
				given_code_opt = code_opts[i];
		if (name && !given_table_opt &&
		    ((cmd->kind == TK_CMD_CONVERT && (c == OPT_SORT || c == OPT_THREADS)) ||
		     ((cmd->kind == TK_CMD_CONVERT || cmd->kind == TK_CMD_REPORT) && c == OPT_TOP)))
			given_table_opt = name;
		switch (c) {
		case 'j':
			if ((rc = num_arg("-j", optarg, &v)))
				return rc;
			if (v > 1024) {
				cli_error(NULL, UINT64_MAX, "-j: at most 1024 threads");
				return EXIT_USAGE;
			}
			o->jobs = (unsigned)v;
			break;
		case 'o': o->output = optarg; break;
		case 'q': o->quiet = 1; break;
		case 'h': cli_help(cmd); return -1;
		case OPT_FORMAT:
			if (tk_format_by_name(optarg) == TK_FMT_UNKNOWN) {
				cli_error(NULL, UINT64_MAX, "--format: unknown format '%s'", optarg);
				return EXIT_USAGE;
			}
			o->format = optarg;
			break;
		case OPT_TO: o->to = optarg; break;
		case OPT_PROGRESS: o->progress = 2; break;
		case OPT_NO_PROGRESS: o->progress = 0; break;
		case OPT_NO_OFFSET: o->no_offset = 1; break;
		case OPT_ELF: if ((rc = list_arg("--elf", o->elf, &o->n_elf, optarg))) return rc; break;
		case OPT_NO_DISASM: o->no_disasm = 1; break;
		case OPT_STAT: o->stat = 1; break;
		case OPT_TIME:
			/* --time alone: print times (decode); --time A:B or --time=A:B: a window
			 * (profile, convert). A following word that looks like a range is taken. */
			if (!optarg && optind < argc && looks_like_range(argv[optind]))
				optarg = argv[optind++];
			if (!common_taken(cmd, optarg ? "time-window" : "time")) {
				cli_error(NULL, UINT64_MAX, "%s: %s is not an option of %s (%s; see: "
					  "tracekit help %s)", cmd->name, optarg ? "--time A:B" : "--time",
					  cmd->name, common_taken(cmd, "time") ? "--time alone prints "
					  "times" : common_taken(cmd, "time-window") ? "a window is --time "
					  "A:B" : "no times", cmd->name);
				return EXIT_USAGE;
			}
			given_time_flag = !optarg;
			if (optarg)
				o->time_window = optarg;
			else
				o->time = 1;
			break;
		case OPT_SORT: o->sort = optarg; break;
		case OPT_TOP: if ((rc = num_arg("--top", optarg, &o->top))) return rc; break;
		case OPT_THREADS: o->threads = 1; break;
		case OPT_STACKS: o->stacks = 1; break;
		case OPT_LINES: o->lines = 1; break;
		case OPT_SOURCE: o->source = 1; break;
		case OPT_NO_DEMANGLE: o->no_demangle = 1; break;
		case OPT_SHORT_NAMES: o->short_names = 1; break;
		case OPT_PID: if ((rc = pid_list(optarg, o))) return rc; break;
		case OPT_COMM: o->comm = optarg; break;
		case OPT_SHARD: o->shard = optarg; break;
		case OPT_MPI: o->mpi = 1; break;
		case 'F': if ((rc = list_arg("-F", o->focus, &o->n_focus, optarg))) return rc; break;
		case 'N': if ((rc = list_arg("-N", o->exclude, &o->n_exclude, optarg))) return rc; break;
		case 'D':
			if ((rc = num_arg("-D", optarg, &o->depth)))
				return rc;
			if (!o->depth || o->depth > UINT32_MAX) {
				cli_error(NULL, UINT64_MAX, "-D: a depth from 1, got '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 't': if ((rc = duration_arg("--min-time", optarg, &o->min_ns))) return rc; break;
		case OPT_MIN_INSNS: if ((rc = num_arg("--min-insns", optarg, &o->min_insns))) return rc; break;
		case OPT_COLOR:
			/* auto: stdout is a terminal and NO_COLOR is unset (no-color.org) */
			if (!optarg || !strcmp(optarg, "always"))
				o->color = 1;
			else if (!strcmp(optarg, "auto"))
				o->color = -1;
			else if (!strcmp(optarg, "never"))
				o->color = 0;
			else {
				cli_error(NULL, UINT64_MAX, "--color: auto, always or never, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_MAX_EVENTS: if ((rc = num_arg("--max-events", optarg, &o->max_events))) return rc; break;
		case '?':
		default:
			if (c >= OPT_FORMAT_OWN && c < OPT_FORMAT_OWN + (int)nformat_opts) {
				const struct tk_cmd_option *t = format_opts[c - OPT_FORMAT_OWN];
				size_t k = 0;

				/* an option the command would not read is refused, not ignored */
				if (!option_declared(t->name, cmd->kind)) {
					cli_error(NULL, UINT64_MAX, "%s: --%s is not an option of %s (see: "
						  "tracekit help %s)", cmd->name, t->name, cmd->name, cmd->name);
					return EXIT_USAGE;
				}
				if ((rc = format_arg(t, optarg, o)))
					return rc;
				while (k < ngiven_opts && given_opts[k] != t)
					k++;
				if (k == ngiven_opts)
					given_opts[ngiven_opts++] = t;
				break;
			}
			if (optopt && optopt < 256)
				cli_error(NULL, UINT64_MAX, "%s: unknown option '-%c' (see: tracekit help %s)",
					  cmd->name, optopt, cmd->name);
			else
				cli_error(NULL, UINT64_MAX, "%s: unknown option or missing value '%s' (see: tracekit help %s)",
					  cmd->name, argv[optind - 1], cmd->name);
			return EXIT_USAGE;
		}
	}
	if (o->color < 0)
		o->color = isatty(STDOUT_FILENO) && !o->output && !getenv("NO_COLOR");
	o->args = argv + optind;
	o->nargs = argc - optind;
	o->tid32 = (uint32_t)o->tid;
	if (getenv("TK_KANATA_CHUNK"))   /* tests: small Kanata chunks (shards' plans too) */
		o->kanata_chunk = strtoull(getenv("TK_KANATA_CHUNK"), NULL, 10);
	if ((rc = one_output(cmd, o)))
		return rc;
	if (o->cpu && (rc = cpu_list(o->cpu, o)))
		return rc;
	for (int n = 0; n < 4; n++) {   /* --filter:addrN_*: what IA32_RTIT_ADDRn_CFG can be */
		const struct tk_ipt_addr_filter *f = &o->addr_filter;

		if (f->cfg[n] > 2 || (f->cfg[n] && f->a[n] > f->b[n])) {
			cli_error(NULL, UINT64_MAX, "--filter:addr%d_cfg %llu with [0x%llx, 0x%llx]: "
				  "want 0 (off), 1 (trace only inside) or 2 (stop inside), and A <= B",
				  n, (unsigned long long)f->cfg[n], (unsigned long long)f->a[n],
				  (unsigned long long)f->b[n]);
			return EXIT_USAGE;
		}
	}
	o->filter = (struct tk_thread_filter){ .pids = o->pids, .npids = (size_t)o->npids,
					       .tids = &o->tid32, .ntids = o->has_tid != 0,
					       .comm = o->comm, .cpus = o->cpus,
					       .ncpus = (size_t)o->ncpus };
	return 0;
}

void cli_opts_take_recorded(struct tk_cmd_opts *o, const struct tk_cmd_opts *r)
{
	memcpy(o->elf, r->elf, sizeof o->elf);
	o->n_elf = r->n_elf;
	memcpy(o->raw, r->raw, sizeof o->raw);
	o->n_raw = r->n_raw;
	memcpy(o->module_path, r->module_path, sizeof o->module_path);
	o->n_module_path = r->n_module_path;
	o->format = r->format;
	o->instr_map = r->instr_map;
	o->has_tid = r->has_tid;
	o->tid = r->tid;
	o->has_tsc_hz = r->has_tsc_hz;
	o->tsc_hz = r->tsc_hz;
	o->mtc_freq = r->mtc_freq;
	o->nom_freq = r->nom_freq;
	o->cpuid_15_eax = r->cpuid_15_eax;
	o->cpuid_15_ebx = r->cpuid_15_ebx;
	o->cpu_model = r->cpu_model;
	o->addr_filter = r->addr_filter;
	o->jobs = r->jobs;
}

/* "TITLE, TITLE and TITLE": the tables that declare option NAME, into BUF. */
static const char *declared_by(const char *name, char *buf, size_t size)
{
	const struct tk_cmd_option *t;
	const char *title, *with[8];
	size_t n = 0, len = 0;

	buf[0] = 0;
	for (size_t k = 0; (t = tk_cmd_option_table(k, &title)); k++)
		for (; t->name; t++)
			if (!strcmp(t->name, name) && n < 8)
				with[n++] = title;
	for (size_t k = 0; k < n && len < size; k++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s",
					!k ? "" : k + 1 < n ? ", " : " and ", with[k]);
	return buf;
}

int cli_format_opts_refused(const char *file, const struct tk_format_info *fi)
{
	char titles[256];

	unsigned has = tk_cmd_format_has(fi->id);
	if (!(has & TK_CMD_HAS_CALLS) && (given_code_opt || given_table_opt) && !given_deferred) {
		cli_error(file, UINT64_MAX, "--%s: %s input has no code, calls or processes%s",
			  given_code_opt ? given_code_opt : given_table_opt,
			  tk_format_description(fi->id), given_code_opt ? "" : " (no function table)");
		return EXIT_USAGE;
	}
	if (given_time_flag && !given_deferred && !(has & TK_CMD_HAS_TIME_COLUMNS)) {
		cli_error(file, UINT64_MAX, "--time (times printed) is for Intel PT and branch "
			  "traces, not for %s input", tk_format_description(fi->id));
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < ngiven_opts; i++) {
		const char *name = given_opts[i]->name;

		if (tk_cmd_format_takes(fi->id, given_kind, name)) {
			given_taken[i] = 1;
			continue;
		}
		if (given_deferred)
			continue;
		int elsewhere = 0;   /* the format's option, for other commands */
		for (int k = 0; k < TK_CMD__COUNT && !elsewhere; k++)
			elsewhere = tk_cmd_format_takes(fi->id, (enum tk_cmd_kind)k, name);
		if (elsewhere) {
			cli_error(file, UINT64_MAX, "--%s: %s does not read it for %s input (tracekit "
				  "help %s)", name, given_cmd, tk_format_description(fi->id), given_cmd);
			return EXIT_USAGE;
		}
		cli_error(file, UINT64_MAX, "--%s is an option for %s, not for %s input", name,
			  declared_by(name, titles, sizeof titles), tk_format_description(fi->id));
		return EXIT_USAGE;
	}
	return 0;
}

void cli_format_opts_defer(void)
{
	given_deferred = 1;
	memset(given_taken, 0, sizeof given_taken);
}

int cli_format_opts_untaken(const char *cmd)
{
	char titles[256];

	for (size_t i = 0; i < ngiven_opts; i++)
		if (!given_taken[i]) {
			const char *name = given_opts[i]->name;

			cli_error(NULL, UINT64_MAX, "%s: --%s is an option for %s, and no input is one",
				  cmd, name, declared_by(name, titles, sizeof titles));
			return EXIT_USAGE;
		}
	return 0;
}
