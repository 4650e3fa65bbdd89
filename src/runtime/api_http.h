// Helpers shared by the REST API's route files: JSON replies, errors, parameters.
#ifndef CARVE_RUNTIME_API_HTTP_H_
#define CARVE_RUNTIME_API_HTTP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace carve {

// The HTTP status for `s`: its code's, or the one WithHttpStatus attached (415, ...).
int HttpStatus(const absl::Status& s);
inline constexpr char kHttpStatusPayload[] = "carve/http-status";
absl::Status WithHttpStatus(absl::Status s, int http_status);
void Reply(httplib::Response& res, int status, const nlohmann::json& body);
// {"error": {"code": "not_found", "message": ...}} with the status's HTTP code.
void ReplyError(httplib::Response& res, const absl::Status& s);
void Respond(httplib::Response& res, const absl::StatusOr<nlohmann::json>& r, int ok = 200);
// The request's JSON body: nesting deeper than 64 levels and form-encoded bodies (415) are
// refused before anything is parsed.
absl::StatusOr<nlohmann::json> Body(const httplib::Request& req);
// Whether the body is sent as a form (form-urlencoded or multipart), which the API does not take.
bool IsFormBody(const httplib::Request& req);
absl::Status FormBodyError();
// A query parameter that must be a non-negative integer when present: InvalidArgument otherwise.
absl::StatusOr<int64_t> NonNegativeParam(const httplib::Request& req, const char* name,
                                         int64_t fallback);
absl::StatusOr<int64_t> IdParam(const httplib::Request& req);
// A query parameter that must be an integer when present (`fallback` when absent).
absl::StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t fallback);
// A report's window: ?since_us=&until_us= (microseconds since the epoch; 0 or absent: open).
struct Window {
  int64_t since_us = 0;
  int64_t until_us = 0;
};
absl::StatusOr<Window> WindowParams(const httplib::Request& req);
// A response streamed page by page (a list that may be far larger than one response in memory):
// `first`, then `more(after, &next)` from `next` on until a page sets next to 0, then `tail`. A
// page that fails ends the stream short (the client sees a cut-off body, not a complete one).
using NextPage = std::function<absl::StatusOr<std::string>(int64_t after, int64_t* next)>;
void StreamPages(httplib::Response& res, const std::string& type, std::string first, int64_t next,
                 NextPage more, std::string tail = "");

}  // namespace carve

#endif  // CARVE_RUNTIME_API_HTTP_H_
