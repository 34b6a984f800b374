// Catch2 v2 (Debian's 2.13) or v3, whichever CMake found (BB_CATCH2_V3 says which; both may be on
// the include path).
#pragma once
// c10's logging header defines a glog-style CHECK(cond) that aborts the process; included after
// Catch2 (through any torch header) it silently replaced Catch2's CHECK, so a failing check ended
// the test binary instead of being reported, and passing ones were not counted. Take c10's header
// first (it is include-guarded: later includes change nothing) and drop its CHECK.
#if __has_include(<c10/util/Logging.h>)
#include <c10/util/Logging.h>
#undef CHECK
#define BB_TEST_C10_LOGGING 1
#endif
#if BB_CATCH2_V3
#include <catch2/catch_all.hpp>
using Catch::Approx;  // v2 puts Approx in the global namespace; v3 only in Catch::
#else
#include <catch2/catch.hpp>
#endif
#if BB_TEST_C10_LOGGING
#include <string>
#include <vector>
namespace Catch {
// c10 also streams any std::vector (an unconstrained operator<<), which makes Catch2 stream vectors
// whose elements cannot be: print them element by element, as Catch2 prints other ranges.
template <typename T, typename A>
struct StringMaker<std::vector<T, A>> {
  static std::string convert(const std::vector<T, A>& v) { return ::Catch::Detail::rangeToString(v.begin(), v.end()); }
};
}  // namespace Catch
#endif
