/* fork: parent and child each run their own code; the child writes its own trace. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static long spin(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i % 3 == 0) ? i : -1;
	return s;
}

__attribute__((noipa)) static long before(long n)
{
	return spin(n) + (n & 1 ? 1 : 2);
}

__attribute__((noipa)) static long child_work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i & 4) ? 1 : i;
	return s;
}

int main(void)
{
	long s = before(1000);
	pid_t pid = fork();
	if (pid == 0) {
		s += child_work(2000);
		printf("child %ld\n", s);
		return 0;
	}
	waitpid(pid, NULL, 0);
	s += spin(500);
	printf("parent %ld\n", s);
	return 0;
}
