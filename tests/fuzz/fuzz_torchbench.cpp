// libFuzzer target: the TorchBench operator-input reader (tracer/format/torchbench.h). Checks, beyond "no
// crash, leak or hang": the text and the file (load_any_trace, what bbtrace and bbreplay call) give the
// same result; a log that reads writes back to TorchBench text and to YAML that read.
#include "tracer/format/torchbench.h"
#include "tests/fuzz/fuzz_common.h"
#include "tracer/format/trace_yaml.h"

namespace {

using bb::fuzz::outcome;

void round_trip(const bb::trace::Trace& t) {
  const std::string tb = bb::trace::to_torchbench(t).text;
  if (!tb.empty()) {  // empty: nothing the format can express (an 'Operator:' line without 'cnt:' lines)
    const std::string again = outcome([&] { return bb::trace::to_yaml(bb::trace::parse_torchbench(tb, "written")); });
    if (!bb::fuzz::ok(again)) bb::fuzz::require_same("the log written back", tb, "reading it", again);
  }
  const std::string yaml = bb::trace::to_yaml(t);
  bb::fuzz::require_same("the log written as YAML", "ok\n" + yaml, "reading that",
                         outcome([&] { return bb::trace::to_yaml(bb::trace::parse_trace(yaml, "written")); }));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bb::fuzz::ScratchFile file;
  const std::string text(reinterpret_cast<const char*>(data), size);
  bb::trace::Trace parsed;
  const std::string from_text = outcome([&] {
    parsed = bb::trace::parse_torchbench(text, file.path());
    return bb::trace::to_yaml(parsed);
  });
  if (bb::trace::looks_like_torchbench(text)) {
    file.write(data, size);
    bb::fuzz::require_same("parse_torchbench", from_text, "load_any_trace",
                           outcome([&] { return bb::trace::to_yaml(bb::trace::load_any_trace(file.path())); }));
  }
  if (bb::fuzz::ok(from_text)) round_trip(parsed);
  return 0;
}
