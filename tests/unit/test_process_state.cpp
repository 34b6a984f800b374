// bbreplay's process-state check (replay/process_state): a change is described and set back.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "catch.h"
#include "replay/process_state.h"

TEST_CASE("process-wide state a kernel changed is named and set back") {
  const bb::replay::ProcessState before = bb::replay::process_state();
  CHECK(bb::replay::restore_process_state(before).empty());  // nothing changed
  at::set_num_threads(before.threads + 1);
  at::globalContext().setBenchmarkCuDNN(!before.cudnn_benchmark);
  at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&) { return std::unique_ptr<at::ObserverContext>(); }));
  REQUIRE_FALSE(before.record_function_callbacks);  // (a test process registers none of its own)
  const std::string what = bb::replay::restore_process_state(before);
  CHECK(what.find("intra-op threads") != std::string::npos);
  CHECK(what.find("cuDNN benchmark") != std::string::npos);
  CHECK(what.find("RecordFunction callbacks") != std::string::npos);
  CHECK(what.find("CPU allocator") == std::string::npos);  // only what changed
  CHECK(at::get_num_threads() == before.threads);
  CHECK(at::globalContext().benchmarkCuDNN() == before.cudnn_benchmark);
  CHECK_FALSE(at::hasCallbacks());
  CHECK(bb::replay::restore_process_state(before).empty());  // all set back
}
