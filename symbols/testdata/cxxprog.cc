// cxxprog.cc: C++ test target for demangling: namespaces, templates,
// overloads, a lambda and a class method. No iostream, to stay small.
#include <cstdio>

namespace outer {
namespace inner {

template <typename T>
T __attribute__((noinline)) twice(T v) { return v + v; }

struct Widget {
	int n;
	int __attribute__((noinline)) scale(int k) const { return n * k; }
};

int __attribute__((noinline)) overload(int x) { return x + 1; }
double __attribute__((noinline)) overload(double x) { return x + 0.5; }

} // namespace inner
} // namespace outer

int main(int argc, char **)
{
	auto lam = [argc](int v) __attribute__((noinline)) { return v * argc; };
	outer::inner::Widget w{argc};
	int r = outer::inner::twice<int>(argc) + w.scale(2) + lam(3) +
		outer::inner::overload(argc) +
		(int)outer::inner::twice<double>(outer::inner::overload(1.0));
	std::printf("%d\n", r);
	return r & 1;
}
