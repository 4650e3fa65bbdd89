// The API of a server that does not lead (several servers on one PostgreSQL database, issue 17):
// until it takes the leader's lease it answers /healthz (200), /readyz (503, role follower, the
// leader's address and term) and every other request 503 naming the leader, in the message and
// in the header X-Carve-Leader, so that a client given several addresses (--server a,b,c) moves
// on to the leader. It holds no state: nothing is read from or written to the store.
#ifndef CARVE_RUNTIME_FOLLOWER_SERVER_H_
#define CARVE_RUNTIME_FOLLOWER_SERVER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace httplib {
class Server;
}

namespace carve {

class FollowerServer {
 public:
  FollowerServer(const std::string& tls_cert, const std::string& tls_key);
  ~FollowerServer();

  // Serves on the listening socket `fd` (which Stop closes).
  absl::Status Start(int fd);
  // Who leads now, as the lease row says ("" while nobody does).
  void SetLeader(const std::string& address, int64_t term);
  void Stop();

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::mutex mu_;
  std::string leader_;
  int64_t term_ = 0;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_FOLLOWER_SERVER_H_
