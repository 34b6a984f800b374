// Red zones (replay/case/poison.h): writes outside an allocation made in a RedZoneScope are found, alive
// or freed; nothing is said of writes inside; raw allocations work under them; none outside a scope.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include "catch.h"
#include "replay/case/poison.h"

using bb::replay::out_of_bounds_writes;
using bb::replay::RedZoneScope;

TEST_CASE("writes outside an allocation made in a red-zone scope are found, inside ones are not") {
  bb::replay::install_poisoning_allocator();
  (void)out_of_bounds_writes();
  at::Tensor inside, after, before;
  {
    RedZoneScope zones;
    inside = at::empty({10}, at::kFloat);
    after = at::empty({10}, at::kFloat);
    before = at::empty({10}, at::kFloat);
  }
  inside.fill_(1);  // (all ten elements, nothing beyond)
  CHECK(out_of_bounds_writes().empty());
  after.data_ptr<float>()[10] = 0;  // one float past the end
  const std::string past = out_of_bounds_writes();
  CHECK(past.find("allocation of 40 bytes") != std::string::npos);
  CHECK(past.find("4 of the 4096 bytes after its end (the nearest 1 byte after it)") != std::string::npos);
  CHECK(out_of_bounds_writes().empty() == false);  // (alive and still damaged: found again)
  after.reset();  // freed: said once more, then forgotten
  CHECK_FALSE(out_of_bounds_writes().empty());
  CHECK(out_of_bounds_writes().empty());
  before.data_ptr<float>()[-3] = 0;  // (bytes 12 to 9 before its start)
  CHECK(out_of_bounds_writes().find("4 of the 4096 bytes before its start (the nearest 9 bytes before it)") != std::string::npos);
  before.reset();
  (void)out_of_bounds_writes();
}

TEST_CASE("raw allocations work under red zones, and allocations outside a scope have none") {
  bb::replay::install_poisoning_allocator();
  c10::Allocator* a = c10::GetCPUAllocator();
  void* raw = nullptr;
  {
    RedZoneScope zones;
    raw = a->raw_allocate(100);
  }
  REQUIRE(raw);
  static_cast<char*>(raw)[100] = 1;
  a->raw_deallocate(raw);  // (the zoned pointer freed by the allocator's raw deleter, its damage said)
  CHECK(out_of_bounds_writes().find("after its end") != std::string::npos);
  void* plain = a->raw_allocate(100);
  a->raw_deallocate(plain);
  at::Tensor t = at::empty({4}, at::kFloat);
  t.fill_(2);
  CHECK(out_of_bounds_writes().empty());
}
