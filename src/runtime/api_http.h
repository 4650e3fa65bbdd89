// Helpers shared by the REST API's route files: JSON replies, errors, parameters.
#ifndef CARVE_RUNTIME_API_HTTP_H_
#define CARVE_RUNTIME_API_HTTP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace carve {

int HttpStatus(const absl::Status& s);
void Reply(httplib::Response& res, int status, const nlohmann::json& body);
// {"error": {"code": "not_found", "message": ...}} with the status's HTTP code.
void ReplyError(httplib::Response& res, const absl::Status& s);
void Respond(httplib::Response& res, const absl::StatusOr<nlohmann::json>& r, int ok = 200);
absl::StatusOr<nlohmann::json> Body(const httplib::Request& req);
absl::StatusOr<int64_t> IdParam(const httplib::Request& req);
int64_t IntParam(const httplib::Request& req, const char* name, int64_t fallback);

}  // namespace carve

#endif  // CARVE_RUNTIME_API_HTTP_H_
