#include "runtime/api_http.h"

#include <cctype>

#include "absl/strings/numbers.h"

namespace carve {

using json = nlohmann::json;

namespace {

std::string CodeName(const absl::Status& s) {
  std::string name = absl::StatusCodeToString(s.code());
  for (char& c : name) c = c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

}  // namespace

int HttpStatus(const absl::Status& s) {
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
  Reply(res, HttpStatus(s), {{"error", {{"code", CodeName(s)}, {"message", s.message()}}}});
}

absl::StatusOr<json> Body(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("the body is not valid JSON");
  }
  return j;
}

absl::StatusOr<int64_t> IdParam(const httplib::Request& req) {
  int64_t id;
  if (!absl::SimpleAtoi(req.matches[1].str(), &id)) {
    return absl::InvalidArgumentError("the job id must be a number");
  }
  return id;
}

int64_t IntParam(const httplib::Request& req, const char* name, int64_t fallback) {
  int64_t v;
  if (req.has_param(name) && absl::SimpleAtoi(req.get_param_value(name), &v)) return v;
  return fallback;
}

void Respond(httplib::Response& res, const absl::StatusOr<json>& r, int ok) {
  if (r.ok()) {
    Reply(res, ok, *r);
  } else {
    ReplyError(res, r.status());
  }
}

}  // namespace carve
