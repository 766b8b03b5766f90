/* Linked into every cmocka test: TK_TEST_CASE=NAME runs only the case NAME. ctest runs each
 * case of a test file as a test of its own (tests/CMakeLists.txt), so that no one process
 * holds many slow cases: under the sanitizers on a loaded 2-core machine a file of fifteen
 * recorder cases took over 300 s as one test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

__attribute__((constructor)) static void tk_case_filter(void)
{
	const char *name = getenv("TK_TEST_CASE");
	if (name && *name)
		cmocka_set_test_filter(name);
}
