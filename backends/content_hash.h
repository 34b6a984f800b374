// A 128-bit content hash (two independent 64-bit FNV-1a streams): the compile cache's key
// (compiler.cpp), and what tells the parts of one bbreplay run from parts of another (replay/parts/part.cpp).
// Not cryptographic: it tells contents apart, it does not resist forgery.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace bb::backends {

struct ContentHash {
  uint64_t a = 1469598103934665603ull, b = 0x84222325cbf29ce4ull;
  // One field: its bytes, then a separator (so that "ab","c" and "a","bc" differ).
  void add(const std::string& s) {
    for (unsigned char c : s) {
      a = (a ^ c) * 1099511628211ull;
      b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    a = (a ^ 0xff) * 1099511628211ull;  // field separator
  }
  std::string hex() const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
    return buf;
  }
};

}  // namespace bb::backends
