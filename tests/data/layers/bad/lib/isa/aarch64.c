/* isa is below the formats: classification may not include a format's header */
#include "tracekit/xtrace.h"
