// Unwritten outputs (policy/verify/result_checks): elements that differ between two runs whose new memory was
// poisoned differently, less those native leaves unwritten as well.
#include <ATen/ATen.h>

#include "catch.h"
#include "policy/verify/result_checks.h"

using bb::verify::Values;

TEST_CASE("elements that differ between two runs are found per result and per list element") {
  at::Tensor a = at::zeros({2, 3}), b = a.clone();
  b.index_put_({1, 2}, 5.0);
  at::Tensor seed_a = at::full({}, 7, at::kLong), seed_b = at::full({}, -1, at::kLong);
  Values ra{a, c10::List<at::Tensor>({a, seed_a})}, rb{b, c10::List<at::Tensor>({a, seed_b})};
  auto masks = bb::verify::differing_elements(ra, rb);
  REQUIRE(masks.size() == 2);
  REQUIRE(masks[0].size() == 1);
  REQUIRE(masks[0][0].defined());
  CHECK(masks[0][0].sum().item<int64_t>() == 1);
  CHECK(masks[0][0][1][2].item<bool>());
  REQUIRE(masks[1].size() == 2);
  CHECK_FALSE(masks[1][0].defined());  // the same bytes: nothing differs
  REQUIRE(masks[1][1].defined());
  CHECK(masks[1][1].item<bool>());
  CHECK(bb::verify::unwritten_elements(ra, rb).find("result 0: 1 of 6 elements") == 0);
}

TEST_CASE("elements native leaves unwritten are not the kernel's fault; others still are") {
  at::Tensor out_a = at::ones({4}), out_b = out_a.clone();
  at::Tensor seed_a = at::full({}, 7, at::kLong), seed_b = at::full({}, -1, at::kLong);
  Values a{out_a, seed_a}, b{out_b, seed_b};
  // native's own two runs differ in the seed too (cuDNN attention without dropout)
  auto native = bb::verify::differing_elements(Values{out_a, seed_a}, Values{out_a, seed_b});
  CHECK(bb::verify::unwritten_elements(a, b).find("result 1") == 0);
  CHECK(bb::verify::unwritten_elements(a, b, native).empty());
  out_b[3] = 2.0;  // the kernel also left an element of the output unwritten: still caught
  CHECK(bb::verify::unwritten_elements(a, Values{out_b, seed_b}, native).find("result 0: 1 of 4") == 0);
}
