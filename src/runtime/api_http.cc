#include "runtime/api_http.h"

#include <cctype>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/input_limits.h"
#include "runtime/log.h"

namespace carve {

using json = nlohmann::json;

namespace {

std::string CodeName(const absl::Status& s) {
  std::string name = absl::StatusCodeToString(s.code());
  for (char& c : name) c = c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

}  // namespace

absl::Status WithHttpStatus(absl::Status s, int http_status) {
  s.SetPayload(kHttpStatusPayload, absl::Cord(std::to_string(http_status)));
  return s;
}

int HttpStatus(const absl::Status& s) {
  if (auto code = s.GetPayload(kHttpStatusPayload); code.has_value()) {
    int n = 0;
    if (absl::SimpleAtoi(std::string(*code), &n)) return n;
  }
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2) + "\n", "application/json");
}

void ReplyError(httplib::Response& res, const absl::Status& s) {
  int status = HttpStatus(s);
  // 503 is the store's failure, logged once where it happened; other 5xx are the server's bugs.
  if (status >= 500 && status != 503) LogError("answered ", status, ": ", s.ToString());
  Reply(res, status, {{"error", {{"code", CodeName(s)}, {"message", s.message()}}}});
}

bool IsFormBody(const httplib::Request& req) {
  std::string type = absl::AsciiStrToLower(req.get_header_value("Content-Type"));
  return absl::StartsWith(type, "application/x-www-form-urlencoded") ||
         absl::StartsWith(type, "multipart/form-data");
}

absl::Status FormBodyError() {
  return WithHttpStatus(
      absl::InvalidArgumentError("the API takes JSON bodies: send them with Content-Type: "
                                 "application/json, not as a form"),
      415);
}

// The depth is checked before anything is built (a body nested 1,000,000 deep once overflowed
// the stack); the tree is returned by value, never copied.
absl::StatusOr<json> Body(const httplib::Request& req) {
  if (IsFormBody(req)) return FormBodyError();
  return ParseJsonBody(req.body);
}

absl::StatusOr<int64_t> NonNegativeParam(const httplib::Request& req, const char* name,
                                         int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(req.get_param_value(name), &v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": \"", req.get_param_value(name), "\" is not a non-negative integer"));
  }
  return v;
}

absl::StatusOr<int64_t> IdParam(const httplib::Request& req) {
  int64_t id;
  if (!absl::SimpleAtoi(req.matches[1].str(), &id)) {
    return absl::InvalidArgumentError("the job id must be a number");
  }
  return id;
}

absl::StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(req.get_param_value(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": \"", req.get_param_value(name), "\" is not an integer"));
  }
  return v;
}

absl::StatusOr<Window> WindowParams(const httplib::Request& req) {
  auto since = NonNegativeParam(req, "since_us", 0);
  if (!since.ok()) return since.status();
  auto until = NonNegativeParam(req, "until_us", 0);
  if (!until.ok()) return until.status();
  return Window{*since, *until};
}

void StreamPages(httplib::Response& res, const std::string& type, std::string first, int64_t next,
                 NextPage more, std::string tail) {
  auto state = std::make_shared<std::pair<std::string, int64_t>>(std::move(first), next);
  res.set_chunked_content_provider(type, [state, more = std::move(more), tail = std::move(tail)](
                                             size_t, httplib::DataSink& sink) {
    if (!state->first.empty()) {
      sink.write(state->first.data(), state->first.size());
      state->first.clear();
    }
    if (state->second == 0) {
      if (!tail.empty()) sink.write(tail.data(), tail.size());
      sink.done();
      return true;
    }
    int64_t after = std::exchange(state->second, 0);
    auto page = more(after, &state->second);
    if (!page.ok()) return false;
    state->first = *std::move(page);
    return true;
  });
}

void Respond(httplib::Response& res, const absl::StatusOr<json>& r, int ok) {
  if (r.ok()) {
    Reply(res, ok, *r);
  } else {
    ReplyError(res, r.status());
  }
}

}  // namespace carve
