// Names that demangle in interesting ways (tests/oracle/demangle.sh): namespaces, a class
// template and a function template, operators, a lambda, an anonymous namespace.
#include <cstdio>
#include <vector>

#define NOINLINE __attribute__((noinline))

namespace geo {
struct Vec {
	long x, y;
	NOINLINE Vec operator+(const Vec &o) const { return { x + o.x, y + o.y }; }
	NOINLINE bool operator<(const Vec &o) const { return x < o.x || (x == o.x && y < o.y); }
};

template <typename T, int N> struct Ring {
	T v[N] = {};
	int at = 0;
	NOINLINE void push(const T &t) { v[at++ % N] = t; }
};
}  // namespace geo

template <typename T> NOINLINE T twice(T t) { return t + t; }

namespace {
NOINLINE long hidden(std::vector<long> &v)
{
	long s = 0;
	for (long x : v)
		s += x;
	return s;
}
}  // namespace

int main()
{
	geo::Ring<geo::Vec, 4> ring;
	std::vector<long> v;
	long acc = 0;
	auto add = [&acc](long x) NOINLINE { acc += x; };
	for (long i = 0; i < 20; i++) {
		geo::Vec a{ i, i + 1 }, b{ 2, 3 };
		ring.push(a + b);
		if (b < a)
			v.push_back(twice(i));
		add(twice(1.5) > 2 ? i : 0);
	}
	std::printf("%ld %ld\n", hidden(v), acc);
	return 0;
}
