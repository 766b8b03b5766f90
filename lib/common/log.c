#include <stdarg.h>
#include <stdio.h>

#include "tracekit/common.h"

static tk_log_fn log_fn;
static void *log_ctx;
static enum tk_log_level log_max = TK_LOG_WARN;

void tk_set_log(tk_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
}

void tk_get_log(tk_log_fn *fn, void **ctx)
{
	*fn = log_fn;
	*ctx = log_ctx;
}

void tk_set_log_level(enum tk_log_level max_level)
{
	log_max = max_level;
}

void tk_log(enum tk_log_level level, const char *fmt, ...)
{
	char raw[1024], msg[1024];
	va_list ap;

	if (!log_fn || level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	tk_text_escape(msg, sizeof msg, raw);   /* names and text from the trace */
	log_fn(log_ctx, level, msg);
}

void tk_msg(tk_msg_fn fn, void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	    const char *fmt, ...)
{
	char raw[2048], msg[2048];
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	tk_text_escape(msg, sizeof msg, raw);   /* names and text from the trace */
	fn(ctx, level, file, offset, msg);
}
