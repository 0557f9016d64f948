#include "scheduler/policy_hint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/policy.h"

namespace tandem::scheduler {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

double round2(double v) { return std::round(v * 100.0) / 100.0; }

Status os_error(const std::string& what, const std::string& path) {
  return io_error(what + " " + path + ": " + std::strerror(errno));
}

// Field readers: each names the field and what is wrong with it.
Expected<double> number_in(const json& j, const char* name, double lo, double hi) {
  if (!j.contains(name)) return invalid_argument(std::string("missing field ") + name);
  const json& v = j.at(name);
  if (!v.is_number()) return invalid_argument(std::string("field ") + name + " is not a number: " + v.dump());
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    return invalid_argument(std::string("field ") + name + " = " + v.dump() + " is outside [" +
                            json(lo).dump() + ", " + json(hi).dump() + "]");
  return d;
}

Expected<int> integer_in(const json& j, const char* name, int lo, int hi) {
  if (!j.contains(name)) return invalid_argument(std::string("missing field ") + name);
  const json& v = j.at(name);
  if (!v.is_number_integer())
    return invalid_argument(std::string("field ") + name + " is not an integer: " + v.dump());
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    return invalid_argument(std::string("field ") + name + " = " + v.dump() + " is outside [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(i);
}

Expected<std::string> string_of(const json& j, const char* name) {
  if (!j.contains(name)) return invalid_argument(std::string("missing field ") + name);
  const json& v = j.at(name);
  if (!v.is_string()) return invalid_argument(std::string("field ") + name + " is not a string: " + v.dump());
  return v.get<std::string>();
}

Status check_key(const json& j, const PolicyKey& key) {
  for (const auto& [name, want] : {std::pair<const char*, const std::string*>{"target", &key.target},
                                   {"drafter", &key.drafter},
                                   {"hardware", &key.hardware}}) {
    TANDEM_ASSIGN_OR_RETURN(const std::string got, string_of(j, name));
    if (got != *want) return invalid_argument(std::string("it was written for another key (") + name + ")");
  }
  TANDEM_ASSIGN_OR_RETURN(const int k, integer_in(j, "block_size", 0, 1 << 20));
  if (k != key.block_size) return invalid_argument("it was written for another key (block_size)");
  return Status::Ok();
}

// The numbers must be the ones an estimate produces, and the verdict the one
// they imply: a hand-edited verdict or interval is not a measurement.
Status check_consistent(const Hint& h, const VerdictRule& rule) {
  if (!(h.speedup_low <= h.speedup && h.speedup <= h.speedup_high))
    return invalid_argument("speedup " + json(h.speedup).dump() + " is outside its own interval [" +
                            json(h.speedup_low).dump() + ", " + json(h.speedup_high).dump() + "]");
  const double half =
      t_quantile_975(h.samples - 1) * h.speedup_log_stddev / std::sqrt(static_cast<double>(h.samples));
  if (std::fabs(h.speedup_high - h.speedup * std::exp(half)) > 1e-9 * h.speedup_high ||
      std::fabs(h.speedup_low - h.speedup * std::exp(-half)) > 1e-9 * h.speedup_high)
    return invalid_argument("the interval does not follow from speedup, speedup_log_stddev and samples");
  const char* verdict = h.verdict ? "enable" : "decline";
  if (h.settle_reason == "interval_cleared") {
    SpeedupEstimate e;
    e.speedup = h.speedup, e.low = h.speedup_low, e.high = h.speedup_high, e.has_interval = true;
    if (rule.confident(e) != std::optional<bool>(h.verdict))
      return invalid_argument(std::string("verdict ") + verdict + " is not what its interval clears");
  } else if (h.settle_reason == "max_samples") {
    if (h.samples != kSamplesMax)
      return invalid_argument("settle_reason max_samples with " + std::to_string(h.samples) + " samples");
    if (rule.verdict(h.speedup) != h.verdict)
      return invalid_argument(std::string("verdict ") + verdict + " contradicts its speedup " +
                              json(h.speedup).dump());
  } else {
    return invalid_argument("settle_reason '" + h.settle_reason + "' is not interval_cleared/max_samples");
  }
  return Status::Ok();
}

}  // namespace

std::string hint_json(const PolicyKey& key, const Hint& h) {
  const json body = {{"version", kHintVersion},
                     {"kernel_version", h.kernel_version},
                     {"target", key.target},
                     {"drafter", key.drafter},
                     {"hardware", key.hardware},
                     {"block_size", key.block_size},
                     {"verdict", h.verdict ? "enable" : "decline"},
                     {"acceptance_rate", round2(h.acceptance_rate)},
                     {"samples", h.samples},
                     {"speedup", h.speedup},
                     {"speedup_log_stddev", h.speedup_log_stddev},
                     {"speedup_low", h.speedup_low},
                     {"speedup_high", h.speedup_high},
                     {"settle_reason", h.settle_reason}};
  return body.dump(2) + "\n";
}

Expected<Hint> parse_hint(const std::string& text, const PolicyKey& key, int kernel_version,
                          const VerdictRule& rule) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(std::string("malformed JSON (") + e.what() + ")");
  }
  if (!j.is_object()) return invalid_argument("not a JSON object");
  if (!j.contains("version") || !j.at("version").is_number_integer() ||
      j.at("version").get<int64_t>() != kHintVersion)
    return invalid_argument("version " + j.value("version", json(nullptr)).dump() + " is not " +
                            std::to_string(kHintVersion));
  TANDEM_RETURN_IF_ERROR(check_key(j, key));
  Hint h;
  TANDEM_ASSIGN_OR_RETURN(h.kernel_version, integer_in(j, "kernel_version", 0, 1 << 30));
  if (h.kernel_version != kernel_version)
    return invalid_argument("it was measured with kernel version " + std::to_string(h.kernel_version) +
                            ", this build runs " + std::to_string(kernel_version));
  TANDEM_ASSIGN_OR_RETURN(const std::string verdict, string_of(j, "verdict"));
  if (verdict != "enable" && verdict != "decline")
    return invalid_argument("verdict '" + verdict + "' is not enable/decline");
  h.verdict = verdict == "enable";
  TANDEM_ASSIGN_OR_RETURN(h.samples, integer_in(j, "samples", kSamplesRequired, kSamplesMax));
  TANDEM_ASSIGN_OR_RETURN(h.acceptance_rate, number_in(j, "acceptance_rate", 0.0, 1.0));
  TANDEM_ASSIGN_OR_RETURN(h.speedup, number_in(j, "speedup", 0.0, kHintMaxSpeedup));
  if (h.speedup <= 0) return invalid_argument("field speedup must be above 0");
  TANDEM_ASSIGN_OR_RETURN(h.speedup_log_stddev, number_in(j, "speedup_log_stddev", 0.0, kHintMaxLogStddev));
  TANDEM_ASSIGN_OR_RETURN(h.speedup_low, number_in(j, "speedup_low", 0.0, kHintMaxSpeedup));
  TANDEM_ASSIGN_OR_RETURN(h.speedup_high, number_in(j, "speedup_high", 0.0, 1e9));
  TANDEM_ASSIGN_OR_RETURN(h.settle_reason, string_of(j, "settle_reason"));
  TANDEM_RETURN_IF_ERROR(check_consistent(h, rule));
  return h;
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) return io_error("cannot create " + target.parent_path().string() + ": " + ec.message());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("cannot create", tmp);
  auto fail = [&](const std::string& what) {
    Status s = os_error(what, tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot fsync");
  if (::close(fd) != 0) {
    Status s = os_error("cannot close", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = os_error("cannot rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable once the directory entry is.
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

int remove_stale_temp_files(const std::string& path) {
  const fs::path target(path);
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    // Still being written by a live process (another server on the same cache): leave it.
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (fs::remove(entry.path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace tandem::scheduler
