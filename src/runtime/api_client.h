#ifndef CARVE_RUNTIME_API_CLIENT_H_
#define CARVE_RUNTIME_API_CLIENT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Client;
class Result;
struct Response;
}  // namespace httplib

namespace carve {

// A client of Carve's REST API: bearer token, JSON in and out, and the server's JSON errors
// turned back into a Status with the server's message.
class ApiClient {
 public:
  // `server` is "http://host:port", "https://host:port" (or "host:port"), or several of them
  // separated by commas (several servers on one PostgreSQL store, one of them leading): a call
  // goes to the server that answered last, and moves on to the next one when that one cannot be
  // reached, or to the one a follower names as leader (a 503 with X-Carve-Leader, when it is in
  // the list); a call already sent is never sent twice. An https server's certificate must chain
  // to `ca_file` (PEM) when given, else to the system's CAs, and name the host.
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
  // Sends with `call` to the current server, moving on as the constructor says.
  template <typename Call>
  absl::StatusOr<const httplib::Response*> Send(Call call);

  std::vector<std::string> servers_;
  std::string token_;
  std::string ca_file_;
  size_t current_ = 0;
  std::vector<std::unique_ptr<httplib::Client>> http_;  // one per server, made when first used
  std::unique_ptr<httplib::Result> last_;               // the answer Send pointed to
};

}  // namespace carve

#endif  // CARVE_RUNTIME_API_CLIENT_H_
