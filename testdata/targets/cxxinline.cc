/*
 * cxxinline: C++ built with -O2 -g, where most of the call chain exists
 * only in DWARF: templates and a lambda inlined into one real function.
 * A symbolizer must produce the inlined frames (DW_TAG_inlined_subroutine)
 * that share the pc of their containing function, as gdb prints them.
 *
 *   comm     innermost frame first
 *   spin     (inlined) Mixer<unsigned long>::step, (inlined) the lambda
 *            in spin_inlined, (inlined) repeat_forever<lambda>,
 *            spin_inlined (real), spin_thread (real), std::thread's
 *            invoker (libstdc++), start_thread, clone3  (a busy loop:
 *            the pc is anywhere in the inlined code)
 *   wait     futex wait inside std::condition_variable::wait (libstdc++
 *            and libc), (inlined) the lambda in wait_thread and
 *            wait_forever, wait_thread
 *   main     std::this_thread::sleep_for (nanosleep in libc), main
 *
 * Prints "ready" once both threads run, then publishes a progress counter
 * every 10 ms (STACKTOP_PROGRESS, as target.h does for the C targets).
 */
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

namespace {

volatile unsigned long sink;
volatile int spinning, waiting, wake;

// Mixer is a template whose member is small enough to be inlined.
template <typename T>
struct Mixer {
	T state;
	inline T step(T v)
	{
		state = (state ^ v) * 0x9e3779b97f4a7c15ull + (state >> 29);
		return state;
	}
};

// repeat_forever calls f for ever; always inlined into its caller.
template <typename F>
[[gnu::always_inline]] inline void repeat_forever(F &&f)
{
	for (;;)
		f();
}

[[gnu::noinline]] void spin_inlined(unsigned long seed)
{
	Mixer<unsigned long> m{seed};
	auto body = [&m]() { sink = m.step(sink); };
	spinning = 1;
	repeat_forever(body);
}

[[gnu::noinline]] void spin_thread()
{
	pthread_setname_np(pthread_self(), "spin");
	spin_inlined(12345);
}

std::mutex mu;
std::condition_variable never;

template <typename Pred>
[[gnu::always_inline]] inline void wait_forever(std::unique_lock<std::mutex> &lock, Pred pred)
{
	never.wait(lock, pred);
}

[[gnu::noinline]] void wait_thread()
{
	pthread_setname_np(pthread_self(), "wait");
	std::unique_lock<std::mutex> lock(mu);
	waiting = 1;
	wait_forever(lock, [] { return wake != 0; });
}

void progress_write(const char *path, unsigned long long v)
{
	if (path == nullptr)
		return;
	std::string tmp = std::string(path) + ".tmp";
	{
		std::ofstream f(tmp, std::ios::trunc);
		f << v << "\n";
		if (!f)
			return;
	}
	std::rename(tmp.c_str(), path);
}

} // namespace

int main()
{
	const char *progress = std::getenv("STACKTOP_PROGRESS");
	std::thread spin(spin_thread);
	std::thread wait(wait_thread);
	while (!spinning || !waiting)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	// wait_thread set waiting before the wait: give it time to block.
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	progress_write(progress, 0);
	std::puts("ready");
	std::fflush(stdout);
	for (unsigned long long i = 1;; i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
		progress_write(progress, i);
	}
}
