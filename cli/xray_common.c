/* XRay pieces shared by the commands that read XRay logs (info, profile, convert). */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int cli_xray_release_ok(const char *file, struct tk_input *in)
{
	/* a pipe or FIFO is read into memory, where giving pages back would lose the data */
	struct stat st;
	return strcmp(file, "-") != 0 && stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
	       tk_input_compression(in) == TK_COMP_NONE;
}

/* XRay: map the log, load --instr-map, index the buffers. */
struct tk_xray *cli_xray_open(const struct cli_opts *o, const char *file, struct tk_input *in,
			      struct tk_xray_map **map, int *status)
{
	const uint8_t *data;
	size_t len;
	int rc, err;

	*map = NULL;
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		*status = EXIT_INPUT;
		return NULL;
	}
	if (o->instr_map && !(*map = tk_xray_map_load(o->instr_map, &err))) {
		cli_error(o->instr_map, UINT64_MAX, "cannot load the instrumentation map: %s",
			  tk_strerror(err));
		*status = EXIT_INPUT;
		return NULL;
	}
	struct tk_xray_opts xo = { .sz = sizeof xo, .nthreads = o->jobs ? o->jobs : tk_cpu_count(),
				   .max_func_id = tk_xray_map_max_id(*map),
				   .release_input = cli_xray_release_ok(file, in) };
	cli_log_file(file);  /* until cli_xray_finish: the walks warn too */
	struct tk_xray *x = tk_xray_open(data, len, &xo, &err);
	if (!x) {
		cli_log_file(NULL);
		cli_error(file, err == -TK_E_TRUNCATED || err == -TK_E_BAD_FORMAT ? 0 : UINT64_MAX,
			  "not a readable XRay log: %s", tk_strerror(err));
		tk_xray_map_free(*map);
		*map = NULL;
		*status = EXIT_INPUT;
	}
	return x;
}

/* Exit status after a walk: gaps and orphan exits are reported on stderr. */
int cli_xray_finish(const char *file, struct tk_xray *x)
{
	const struct tk_xray_stats *st = tk_xray_stats(x);
	cli_log_file(NULL);
	if (st->orphan_exits)
		cli_warn(file, UINT64_MAX,
			 "%llu exits without their enters (the log starts mid-call: older records were wrapped away)",
			 (unsigned long long)st->orphan_exits);
	return cli_report_gaps(file, &st->gaps, "damaged or lost region");
}

struct account_ctx {
	const struct tk_xray *x;
	const struct tk_xray_map *map;
};

static const char *account_name(void *ctx, int32_t id)
{
	return tk_xray_map_name(((struct account_ctx *)ctx)->map, id);
}

static uint32_t account_tid(void *ctx, uint32_t track)
{
	const struct tk_xray_thread_info *ti = tk_xray_thread(((struct account_ctx *)ctx)->x, track);
	return ti ? ti->tid : track;
}

int cli_xray_account(struct tk_buf *out, const struct tk_prof *p, const struct tk_xray *x,
		     const struct tk_xray_map *map, struct tk_out_account_opts *ao)
{
	struct account_ctx c = { x, map };
	ao->ticks_per_sec = tk_xray_header(x)->cycle_frequency;
	ao->func_name = account_name;
	ao->thread_id = account_tid;
	ao->ctx = &c;
	return tk_out_account(out, p, ao);
}
