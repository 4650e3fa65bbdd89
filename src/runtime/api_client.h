#ifndef CARVE_RUNTIME_API_CLIENT_H_
#define CARVE_RUNTIME_API_CLIENT_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Client;
}

namespace carve {

// A client of Carve's REST API: bearer token, JSON in and out, and the server's JSON errors
// turned back into a Status with the server's message.
class ApiClient {
 public:
  // `server` is "http://host:port", "https://host:port" (or "host:port"). An https server's
  // certificate must chain to `ca_file` (PEM) when given, else to the system's CAs, and name the
  // host.
  ApiClient(const std::string& server, std::string token, const std::string& ca_file = "");
  ~ApiClient();

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body,
                                      const std::map<std::string, std::string>& headers = {});
  // Raw body (logs): the response text and its headers.
  absl::StatusOr<std::string> GetText(const std::string& path,
                                      std::map<std::string, std::string>* headers = nullptr);
  absl::StatusOr<nlohmann::json> PostText(const std::string& path, const std::string& body);

 private:
  std::string server_;
  std::string token_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_API_CLIENT_H_
