#ifndef INCLUDE_TRACEKIT_COMMON_H
#define INCLUDE_TRACEKIT_COMMON_H
/* fixture: a well-placed public header */
#endif
