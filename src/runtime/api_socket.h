// The API's transport: an exclusively bound listening socket, TLS files, and the httplib server
// that serves on that socket (plain or TLS) and hands handlers the Authorization header exactly as
// the client sent it (httplib percent-decodes header values and cuts them at NUL).
#ifndef CARVE_RUNTIME_API_SOCKET_H_
#define CARVE_RUNTIME_API_SOCKET_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace carve {

// Binds HOST:PORT (PORT 0: any free port) with SO_REUSEADDR only, never SO_REUSEPORT, so no other
// socket, of this user or another, can bind the same port and take part of its connections.
// FailedPrecondition "port N is in use (another carve server?); try --listen" when one holds it.
absl::StatusOr<int> ListenExclusive(const std::string& host, int port);
// The port a bound socket has.
int LocalPort(int fd);
// True when every address HOST resolves to is a loopback address (127.0.0.0/8, ::1).
bool IsLoopbackHost(const std::string& host);
// Loads a PEM certificate (chain) and its private key as the TLS server will; the error names
// the file that is wrong.
absl::Status CheckTlsFiles(const std::string& cert, const std::string& key);

// An httplib server, TLS when `cert` and `key` are given, whose handlers see the raw
// Authorization header. It serves on a socket given to AdoptListenSocket.
std::unique_ptr<httplib::Server> NewApiHttpServer(const std::string& cert, const std::string& key);
// Makes `server` (from NewApiHttpServer) serve on the listening socket `fd` at
// listen_after_bind(); the server closes it when it stops.
void AdoptListenSocket(httplib::Server& server, int fd);

}  // namespace carve

#endif  // CARVE_RUNTIME_API_SOCKET_H_
