/* an example uses only the public API */
#include "tracekit/internal/eh_frame_hdr.h"
