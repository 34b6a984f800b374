// bbreplay --shard K/N: the parts are disjoint, complete, stable and balanced by cost.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "catch.h"
#include "replay/parts/shard.h"

using namespace bb::replay;

namespace {

// Costs shaped like a real trace's: many cheap cases and a few expensive ones (big matmuls).
std::vector<uint64_t> skewed_costs(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> c(n);
  for (auto& x : c) x = 2000 + rng() % 5000 + (rng() % 20 == 0 ? rng() % 2000000 : 0);
  return c;
}

std::vector<uint64_t> loads(const std::vector<uint64_t>& costs, size_t n) {
  std::vector<uint64_t> load(n, 0);
  const auto part = assign_parts(costs, n);
  for (size_t i = 0; i < costs.size(); ++i) load[part[i]] += costs[i];
  return load;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the parts of a run are disjoint and together every case, in case order") {
  const auto costs = skewed_costs(503, 1);
  for (size_t n : {1, 2, 3, 7, 64}) {
    std::vector<int> seen(costs.size(), 0);
    for (size_t k = 0; k < n; ++k) {
      const auto part = shard_cases(costs, {k, n});
      CHECK(std::is_sorted(part.begin(), part.end()));
      for (size_t i : part) ++seen[i];
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  }
}

TEST_CASE("the same K/N always selects the same cases") {
  const auto costs = skewed_costs(200, 2);
  CHECK(shard_cases(costs, {1, 4}) == shard_cases(costs, {1, 4}));
  auto copy = costs;
  CHECK(shard_cases(copy, {3, 4}) == shard_cases(costs, {3, 4}));
  // ties are broken by position, not by anything that could differ between runs
  const std::vector<uint64_t> equal(10, 5);
  CHECK(shard_cases(equal, {0, 3}) == std::vector<size_t>{0, 3, 6, 9});
  CHECK(shard_cases(equal, {2, 3}) == std::vector<size_t>{2, 5, 8});
}

TEST_CASE("parts are balanced by cost, not by count") {
  // one case as costly as all others together: alone in its part
  std::vector<uint64_t> costs(10, 1);
  costs[4] = 9;
  CHECK(shard_cases(costs, {0, 2}) == std::vector<size_t>{4});
  CHECK(loads(costs, 2) == std::vector<uint64_t>{9, 9});
  // on a skewed trace, no part exceeds the mean by more than the costliest case (the LPT bound)
  const auto skewed = skewed_costs(1000, 3);
  const uint64_t total = std::accumulate(skewed.begin(), skewed.end(), uint64_t{0});
  const uint64_t largest = *std::max_element(skewed.begin(), skewed.end());
  for (size_t n : {2, 3, 8}) {
    const auto l = loads(skewed, n);
    const uint64_t most = *std::max_element(l.begin(), l.end());
    CHECK(most <= total / n + largest);
    // a split by count alone (every n-th case) is worse here
    std::vector<uint64_t> by_count(n, 0);
    for (size_t i = 0; i < skewed.size(); ++i) by_count[i % n] += skewed[i];
    CHECK(most <= *std::max_element(by_count.begin(), by_count.end()));
  }
}

TEST_CASE("more parts than cases leaves parts empty, not cases out") {
  const std::vector<uint64_t> costs = {5, 3};
  CHECK(shard_cases(costs, {0, 4}) == std::vector<size_t>{0});
  CHECK(shard_cases(costs, {1, 4}) == std::vector<size_t>{1});
  CHECK(shard_cases(costs, {3, 4}).empty());
}

TEST_CASE("--shard is K/N with K from 0 and below N") {
  CHECK(parse_shard("0/1").k == 0);
  CHECK(parse_shard("2/3").n == 3);
  const std::string beyond = error_of([] { parse_shard("3/3"); });
  CHECK(says(beyond, "must be below N = 3"));
  CHECK(says(beyond, "--array=0-2"));
  CHECK(says(error_of([] { parse_shard("0/0"); }), "at least 1"));
  for (const char* bad : {"", "1", "1/", "/2", "-1/2", "1/2/3", "a/b", " 1/2", "1/2 ", "1.0/2", "99999999999/2"})
    CHECK(says(error_of([&] { parse_shard(bad); }), "expected K/N"));
}

TEST_CASE("a case costs more with more data, and a timed one more than a checked one") {
  bb::trace::TraceEntry small, large;
  bb::trace::ArgValue a;
  a.kind = bb::trace::ArgKind::Tensor;
  bb::trace::TensorMeta t;
  t.shape = {16};
  t.stride = {1};
  a.tensors = {t};
  small.args = {a};
  a.tensors[0]->shape = {4096, 4096};
  a.tensors[0]->stride = {4096, 1};
  large.args = {a};
  CHECK(tensor_bytes(large.args) == 4096 * 4096 * 4);
  const CostModel timed{true, 25, 2.0}, checked{false, 25, 2.0};
  CHECK(case_cost(large, "traced", checked) > case_cost(small, "traced", checked));
  CHECK(case_cost(small, "traced", timed) > case_cost(small, "traced", checked));
  CHECK(case_cost(small, "noncontiguous", timed) == case_cost(small, "noncontiguous", checked));  // never timed
  CHECK(case_cost(large, "empty", checked) < case_cost(large, "traced", checked));
  // the traced device time weighs a timed case
  bb::trace::TraceEntry slow = small;
  slow.count = 10;
  slow.device_time = bb::trace::DeviceTime{10, 10 * 50000000ull, 50000000, 50000000, 50000000};  // 50 ms a call
  CHECK(case_cost(slow, "traced", timed) > case_cost(small, "traced", timed) + 1000000);
}
