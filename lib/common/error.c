#include "tracekit/common.h"

static const char *const messages[TK_E__COUNT] = {
	[TK_OK] = "success",
	[TK_E_INTERNAL] = "internal error",
	[TK_E_INVAL] = "invalid argument",
	[TK_E_NOMEM] = "out of memory",
	[TK_E_IO] = "input/output error",
	[TK_E_EOF] = "end of input",
	[TK_E_TRUNCATED] = "truncated input",
	[TK_E_BAD_FORMAT] = "malformed input",
	[TK_E_BAD_OPCODE] = "unknown packet or record kind",
	[TK_E_UNKNOWN_FORMAT] = "unknown format",
	[TK_E_UNSUPPORTED] = "not supported",
	[TK_E_NOSYNC] = "no synchronisation point",
	[TK_E_NOMAP] = "code not in memory image",
	[TK_E_OVERFLOW] = "trace reports lost data",
	[TK_E_LIMIT] = "limit reached",
	[TK_E_CANCELLED] = "cancelled",
	[TK_E_DECOMPRESS] = "corrupt or truncated compressed data",
	[TK_E_NOT_FOUND] = "not found",
	[TK_E_BAD_STATE] = "invalid state for this call",
};

const char *tk_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err >= TK_E__COUNT || !messages[err])
		return "unknown error";
	return messages[err];
}
