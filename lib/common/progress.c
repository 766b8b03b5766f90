/* Progress lines for long runs, at most a few per second; the caller decides where they go
 * (the CLI prints them on stderr when it is a terminal). */
#include <stdio.h>
#include <time.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

uint64_t tk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tk_progress_init(struct tk_progress *p, const char *label, uint64_t total,
		      tk_progress_fn print, void *ctx)
{
	p->print = print;
	p->ctx = ctx;
	p->label = label ? label : "";
	p->total = total;
	p->done = 0;
	p->start_ns = p->last_ns = tk_now_ns();
}

static void emit(struct tk_progress *p, uint64_t now)
{
	char line[160];
	double secs = (double)(now - p->start_ns) / 1e9;
	double mb = (double)p->done / 1e6;

	double rate = secs > 0 ? mb / secs : 0.0;

	if (p->total && rate > 0 && p->done < p->total)
		snprintf(line, sizeof line, "%s: %.1f%% (%.0f of %.0f MB, %.0f MB/s, %.0f s left)",
			 p->label, 100.0 * (double)p->done / (double)p->total, mb,
			 (double)p->total / 1e6, rate, ((double)p->total / 1e6 - mb) / rate);
	else if (p->total)
		snprintf(line, sizeof line, "%s: %.1f%% (%.0f of %.0f MB, %.0f MB/s)", p->label,
			 100.0 * (double)p->done / (double)p->total, mb, (double)p->total / 1e6,
			 rate);
	else    /* no end known (a recording): how long so far */
		snprintf(line, sizeof line, "%s: %.0f s, %.1f MB (%.1f MB/s)", p->label, secs, mb,
			 rate);
	p->print(p->ctx, line);
}

void tk_progress_update_slow(struct tk_progress *p)
{
	uint64_t now = tk_now_ns();
	/* Stay quiet for the first second so short runs print nothing. */
	if (now - p->start_ns < 1000000000u || now - p->last_ns < 250000000u)
		return;
	p->last_ns = now;
	emit(p, now);
}

void tk_progress_finish(struct tk_progress *p)
{
	if (p->print && p->last_ns != p->start_ns)
		p->print(p->ctx, NULL); /* NULL: clear the line */
}
