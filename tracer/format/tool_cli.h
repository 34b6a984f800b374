// What the command-line tools (bbtrace, bbreplay) share: parsing their arguments with the exit statuses
// they all use (0 after --help, 2 for a usage error), and the one-line report of an error that ends
// them: "tool: file:line:column: message" for a bad input, "tool: message" for a bad use; status 2.
// Header-only (CLI11); for the tools' main() only.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "tracer/format/input.h"

namespace bb::tool {

// A command line that asks for what cannot be done ("--gpus needs --device cuda").
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses into `app`: nullopt to go on, else the status to exit with (CLI11 has printed why).
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// Runs the tool's work: its status, or 2 after a bad input or a bad use, said on stderr as `name: what`.
inline int run(const char* name, const std::function<int()>& work) {
  try {
    return work();
  } catch (const format::InputError& e) {
    std::cerr << name << ": " << e.what() << "\n";
  } catch (const UsageError& e) {
    std::cerr << name << ": " << e.what() << "\n";
  }
  return 2;
}

}  // namespace bb::tool
