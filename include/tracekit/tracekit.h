/* tracekit: records, decodes and analyses program-execution traces. */
#ifndef TRACEKIT_H
#define TRACEKIT_H

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/detect.h"
#include "tracekit/isa.h"
#include "tracekit/ipt.h"
#include "tracekit/perf.h"
#include "tracekit/xray.h"
#include "tracekit/kanata.h"
#include "tracekit/gem5.h"
#include "tracekit/xtrace.h"
#include "tracekit/source.h"
#include "tracekit/run.h"
#include "tracekit/partial.h"
#include "tracekit/btrace.h"
#include "tracekit/image.h"
#include "tracekit/flow.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/prof.h"
#include "tracekit/symbolize.h"
#include "tracekit/out.h"

#endif
