/* Uses a function of the internal tier (include/tracekit/internal/), which libtracekit.so
 * does not export: linking it with the shared library must fail (tests/oracle/abi.sh). */
#include <tracekit/internal/util.h>

int main(void)
{
	struct tk_u64set s = { 0 };
	int rc = tk_u64set_add(&s, 1);
	tk_u64set_free(&s);
	return rc == 1 ? 0 : 1;
}
