#include "catch.h"
#include "tracer/signature_table.h"

using bb::tracer::KeyWords;
using bb::tracer::SignatureTable;

TEST_CASE("the per-thread table finds what it stored, through growth") {
  auto table = std::make_unique<SignatureTable>();
  const int n = 5000;
  for (int i = 0; i < n; ++i) {
    KeyWords k{uint64_t(i), uint64_t(i * 7), 3};
    auto* s = table->insert(k, bb::tracer::hash_key(k.data(), k.size()), i, {});
    REQUIRE(s);
    bb::tracer::bump(s->counters.count);
  }
  REQUIRE(table->published() == n);
  for (int i = 0; i < n; ++i) {
    KeyWords k{uint64_t(i), uint64_t(i * 7), 3};
    auto* s = table->find(k, bb::tracer::hash_key(k.data(), k.size()));
    REQUIRE(s);
    CHECK(s->sig == uint32_t(i));
    CHECK(table->slot(i).counters.count.load() == 1);
  }
  KeyWords missing{1, 2};
  CHECK(table->find(missing, bb::tracer::hash_key(missing.data(), 2)) == nullptr);
}

TEST_CASE("keys with equal hashes are still told apart") {
  auto table = std::make_unique<SignatureTable>();
  KeyWords a{1}, b{2};
  table->insert(a, 42, 0, {});
  table->insert(b, 42, 1, {});
  CHECK(table->find(a, 42)->sig == 0);
  CHECK(table->find(b, 42)->sig == 1);
}
