#include "client_common.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/input_limits.h"
#include "runtime/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace carve::app {

using json = nlohmann::json;

namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void YamlEmit(YAML::Emitter& out, const json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      YamlEmit(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const json& v : j) YamlEmit(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    out << j.get<std::string>();
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();
  }
}

}  // namespace

[[noreturn]] void Die(const absl::Status& s) {
  std::cerr << "carve: " << TerminalSafe(s.message()) << "\n";
  std::exit(absl::IsInvalidArgument(s) ? 2 : 1);
}

// Flags, then CARVE_SERVER / CARVE_TOKEN / CARVE_CA, then what `carve dev` wrote to ./carve-data.
std::string ServerUrl(const Connection& c) {
  std::string server = c.server;
  if (server.empty() && std::getenv("CARVE_SERVER")) server = std::getenv("CARVE_SERVER");
  if (server.empty()) server = ReadFirstLine("carve-data/server");
  if (server.empty()) server = "http://127.0.0.1:7070";
  return server;
}

void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool StopSignalled(int64_t ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec t{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1'000'000)};
  return sigtimedwait(&set, nullptr, &t) > 0;
}

Connection Resolved(const Connection& c) {
  Connection out = c;
  out.server = ServerUrl(c);
  if (out.token.empty() && std::getenv("CARVE_TOKEN")) out.token = std::getenv("CARVE_TOKEN");
  if (out.token.empty()) out.token = ReadFirstLine("carve-data/admin.token");
  if (out.token.empty()) {
    Die(absl::UnauthenticatedError(
        "no token: pass --token, set CARVE_TOKEN, or run from the directory where `carve dev` "
        "wrote carve-data/admin.token"));
  }
  if (out.ca.empty() && std::getenv("CARVE_CA")) out.ca = std::getenv("CARVE_CA");
  return out;
}

ApiClient Client(const Connection& c) {
  const Connection r = Resolved(c);
  return ApiClient(r.server, r.token, r.ca);
}

json Check(absl::StatusOr<json> r) {
  if (!r.ok()) Die(r.status());
  return *r;
}

// Prints `j` as JSON or YAML when asked; returns false when the caller should print a table.
bool Structured(const Connection& c, json& j) {
  if (c.output == "json") {
    std::cout << j.dump(2) << "\n";
    return true;
  }
  if (c.output == "yaml") {
    YAML::Emitter out;
    YamlEmit(out, j);
    std::cout << out.c_str() << "\n";
    return true;
  }
  if (c.output != "table") {
    Die(absl::InvalidArgumentError("-o must be table, json or yaml"));
  }
  MakeTerminalSafe(j);
  return false;
}

std::string LocalTime(int64_t us, bool zone) {
  if (us <= 0) return "-";
  return absl::FormatTime(zone ? "%Y-%m-%d %H:%M:%S %Z" : "%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMicros(us), absl::LocalTimeZone());
}

std::string Text(const json& j, const char* key) {
  const json v = j.is_object() ? j.value(key, json()) : json();
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}

int64_t JobId(const std::string& text) {
  try {
    size_t used = 0;
    int64_t id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (...) {
  }
  Die(absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a job id (a number)")));
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "2026-11-30T10:00:00Z", "2026-11-30", "@1764496800" (Unix seconds) or "24h" / "7d" (ago).
int64_t TimeFlag(const std::string& flag, const std::string& text) {
  if (text.empty()) return 0;
  int64_t seconds = 0;
  if (text[0] == '@' && absl::SimpleAtoi(text.substr(1), &seconds)) return seconds * 1'000'000;
  absl::Time t;
  std::string err;
  for (const char* layout : {"%Y-%m-%dT%H:%M:%E*SZ", "%Y-%m-%dT%H:%M:%E*S%Ez", "%Y-%m-%d"}) {
    if (absl::ParseTime(layout, text, &t, &err)) return absl::ToUnixMicros(t);
  }
  std::string duration = text;
  int64_t scale = 1;
  if (!duration.empty() && duration.back() == 'd') {
    duration.back() = 'h';
    scale = 24;
  }
  if (auto ago = ParseDurationUs(duration); ago.ok() && *ago <= NowUs() / scale) {
    return NowUs() - *ago * scale;
  }
  Die(absl::InvalidArgumentError(absl::StrCat(
      flag, " \"", text, "\": write a time (2026-11-30T10:00:00Z, 2026-11-30, @UNIXSECONDS) or ",
      "how long ago (24h, 7d)")));
}

std::string ReadFileOrDie(const std::string& path) {
  if (path == "-") {  // `-f -`: standard input
    std::stringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path);
  if (!in) Die(absl::NotFoundError(path + ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace carve::app
