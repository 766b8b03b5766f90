// C++ exceptions thrown through several frames and caught.
#include <cstdio>
#include <stdexcept>

static int cleanups;

// A destructor run during unwinding: a cleanup landing pad, left through _Unwind_Resume.
struct guard {
	int k;
	~guard() { cleanups += k; }
};

__attribute__((noinline)) static int thrower(int n, int i)
{
	guard g{n & 1};
	if (n == 0) {
		if (i % 4 == 0)
			throw std::runtime_error("x");
		return i;
	}
	return thrower(n - 1, i) + 1;
}

int main()
{
	long s = 0;
	for (int i = 0; i < 200; i++) {
		try {
			s += thrower(i % 7, i);
		} catch (const std::exception &e) {
			s -= 5;
		}
	}
	std::printf("%ld %d\n", s, cleanups);
	return 0;
}
