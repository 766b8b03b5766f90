/* A symbol table of Rust names, legacy (_ZN...17h<hash>E) and v0 (_R...), as rustc 1.8x
 * writes them (tests/oracle/demangle.sh): C functions that carry those names. */
#include <stdio.h>

#define RUST(fn, sym) __attribute__((noinline)) long fn(long x) __asm__(sym); \
	__attribute__((noinline)) long fn(long x) { __asm__ volatile(""); return x + 1; }

RUST(legacy_main, "_ZN1r4main17h086b0cfd890a8ea9E")
RUST(legacy_area, "_ZN1r6shapes11Sq$LT$T$GT$4area17h2a61a83ad1dd58b5E")
RUST(legacy_closure, "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17ha86af84d9cc65291E")
RUST(v0_main, "_RNvCs6GmmlP4bgsG_1r4main")
RUST(v0_area, "_RNvMNtCs6GmmlP4bgsG_1r6shapesINtB2_2SqyE4areaB4_")
RUST(v0_closure, "_RNCNCNCNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal00s_0B9_")

int main(void)
{
	long s = 0;
	for (long i = 0; i < 3; i++)
		s += legacy_main(i) + legacy_area(i) + legacy_closure(i) + v0_main(i) + v0_area(i) +
		     v0_closure(i);
	printf("%ld\n", s);
	return 0;
}
