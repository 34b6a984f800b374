// Catch2 v2 (Debian's 2.13) or v3, whichever the build found.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
