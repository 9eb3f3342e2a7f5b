// A C++ program whose hot loop is built from inlined templates and a
// lambda, for comparing inline chains with addr2line -f -i -C.
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace demo {

template <typename T>
struct Acc {
	T sum{};
	// apply is called through two template layers and inlined at -O2.
	template <typename F>
	inline void apply(const std::vector<T>& v, F f) {
		for (const T& x : v) sum += f(x);
	}
};

template <typename T>
static inline T twice(T x) {
	return x * 2 + (x >> 3);
}

__attribute__((noinline)) long run(const std::vector<long>& v, long k) {
	Acc<long> acc;
	acc.apply(v, [k](long x) { return twice(x) ^ k; });
	return acc.sum;
}

}  // namespace demo

int main(int argc, char** argv) {
	std::vector<long> v(1000);
	for (size_t i = 0; i < v.size(); i++) v[i] = (long)i * 7;
	long total = 0;
	long n = argc > 1 ? atol(argv[1]) : 1000;
	for (long i = 0; i < n; i++) total += demo::run(v, i);
	printf("%ld\n", total);
	return 0;
}
