// libFuzzer target: the YAML trace reader (tracer/trace_yaml.h, through tracer/yaml_read.h).
// Checks, beyond "no crash, leak or hang": the text and the file give the same result; a trace that
// reads writes back to YAML that reads to the same trace (to_yaml is a fixed point after one round),
// and to TorchBench text that reads (bbtrace convert).
#include "tracer/format/torchbench.h"
#include "tests/fuzz/fuzz_common.h"
#include "tracer/format/trace_yaml.h"

namespace {

using bb::fuzz::outcome;

void round_trip(const bb::trace::Trace& t, const std::string& written) {
  bb::fuzz::require_same("the trace written as YAML", "ok\n" + written, "what reading that back gave",
                         outcome([&] { return bb::trace::to_yaml(bb::trace::parse_trace(written, "written")); }));
  const std::string tb = bb::trace::to_torchbench(t).text;
  if (tb.empty()) return;  // nothing the TorchBench format can express
  const std::string again = outcome([&] { return bb::trace::to_yaml(bb::trace::parse_torchbench(tb, "written")); });
  if (!bb::fuzz::ok(again)) bb::fuzz::require_same("the trace written as TorchBench", tb, "reading it", again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bb::fuzz::ScratchFile file;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string written;
  bb::trace::Trace parsed;
  const std::string from_text = outcome([&] {
    parsed = bb::trace::parse_trace(text, file.path());
    written = bb::trace::to_yaml(parsed);
    return written;
  });
  file.write(data, size);
  bb::fuzz::require_same("parse_trace", from_text, "load_trace",
                         outcome([&] { return bb::trace::to_yaml(bb::trace::load_trace(file.path())); }));
  if (bb::fuzz::ok(from_text)) round_trip(parsed, written);
  return 0;
}
