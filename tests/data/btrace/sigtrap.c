/* A program with its own SIGTRAP handler: the recorder must refuse it. */
#include <signal.h>
#include <stdio.h>

static void on_trap(int sig) { (void)sig; }

int main(void)
{
	signal(SIGTRAP, on_trap);
	puts("not reached under the recorder");
	return 0;
}
