// Catch2 v2 (Debian's 2.13) or v3, whichever CMake found (BB_CATCH2_V3 says which; both may be on
// the include path).
#pragma once
#if BB_CATCH2_V3
#include <catch2/catch_all.hpp>
using Catch::Approx;  // v2 puts Approx in the global namespace; v3 only in Catch::
#else
#include <catch2/catch.hpp>
#endif
