/* exec: the trace ends cleanly at exec and the new program (not traced) leaves it alone. */
#include <stdio.h>
#include <unistd.h>
static int f(int x) { return x & 1 ? x * 3 : x / 2; }
int main(void) { long s = 0; for (int i = 0; i < 100; i++) s += f(i); printf("%ld\n", s); fflush(stdout); execl("/bin/echo", "echo", "exec'd", (char *)0); return 1; }
