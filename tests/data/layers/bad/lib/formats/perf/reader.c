/* perf may use ipt, but through ipt's public headers only */
#include "formats/ipt/internal.h"
