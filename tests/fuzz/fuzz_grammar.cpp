// Fuzz target: grammar sources a client controls. The first byte picks the
// form: 'S' a JSON Schema (converted to GBNF, which must then parse), 'T' a
// tool's parameters schema in every tool-call syntax, anything else GBNF text.
// A grammar that builds is run over the rest of the input as bytes, through
// its automaton. Every input must give a grammar or a Status — never a crash
// or a hang.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "grammar/automaton.h"
#include "grammar/json_schema.h"
#include "grammar/tool_calls.h"

namespace {

void run(const std::string& gbnf, const std::string& input) {
  auto g = tandem::grammar::parse_gbnf(gbnf);
  if (!g.ok()) return;
  tandem::grammar::ByteAutomaton a(std::make_shared<const tandem::grammar::Grammar>(std::move(*g)));
  int32_t s = a.start();
  for (unsigned char c : input.substr(0, 256)) {
    if (s < 0) break;
    s = a.next(s, c);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::grammar;
  if (size == 0 || size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 'S' || data[0] == 'T') {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(text);
    } catch (const std::exception&) {
      return 0;
    }
    if (data[0] == 'S') {
      auto gbnf = json_schema_to_gbnf(schema);
      if (!gbnf.ok()) return 0;
      if (!parse_gbnf(*gbnf).ok()) std::abort();  // a converted schema must always parse
      run(*gbnf, text);
      return 0;
    }
    for (ToolCallFormat f : {ToolCallFormat::hermes, ToolCallFormat::llama3, ToolCallFormat::mistral}) {
      auto gbnf = tool_call_gbnf(f, {{"f", schema}}, true);
      if (gbnf.ok() && !parse_gbnf(*gbnf).ok()) std::abort();
      parse_tool_calls(f, text);
    }
    return 0;
  }
  run(text, text);
  return 0;
}
