/* Symbol names as people read them: C++ (Itanium) and Rust (legacy and v0) demangled by
 * libiberty, as c++filt prints them, or shortened (no template arguments, no parameters),
 * each name demangled once and kept. */
#ifndef TK_IMAGE_DEMANGLE_H
#define TK_IMAGE_DEMANGLE_H

enum demangle_mode { DEMANGLE_FULL, DEMANGLE_NONE, DEMANGLE_SHORT };

struct demangler;

struct demangler *demangler_new(enum demangle_mode mode);
void demangler_free(struct demangler *d);
/* NAME as the mode shows it: NAME itself when it does not change (or on lack of memory),
 * else a string that lives as long as D. Thread-safe. */
const char *demangle(struct demangler *d, const char *name);

#endif
