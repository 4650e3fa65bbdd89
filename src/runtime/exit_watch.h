#ifndef CARVE_RUNTIME_EXIT_WATCH_H_
#define CARVE_RUNTIME_EXIT_WATCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace carve {

// Tells, as it happens, that a watched process has exited: each pid gets a pidfd
// (pidfd_open, Linux 5.3 and later), which becomes readable when the process exits, and one
// thread waits on all of them with epoll. The callback runs on that thread, once per watched
// pid, and must not block; it only says that the process ended (reaping it and reading how it
// ended stay with the caller). Where pidfds are not available Watch returns false and the
// caller keeps polling. Thread-safe.
class ExitWatch {
 public:
  explicit ExitWatch(std::function<void(int64_t pid)> on_exit);
  ~ExitWatch();
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

  // Starts watching `pid`. False when it cannot be watched (no pidfd support, no such process):
  // the caller learns of its end by polling. A process that has already exited (a zombie not yet
  // reaped) is reported at once. Watching a pid again replaces the earlier watch.
  bool Watch(int64_t pid);
  // Stops watching `pid` (no callback after this returns, unless one is already running).
  void Forget(int64_t pid);
  // Pids watched and not yet reported.
  size_t watched() const;

 private:
  void Run();
  void Close(int64_t pid);  // with mu_ held

  std::function<void(int64_t)> on_exit_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd that ends Run
  mutable std::mutex mu_;
  std::map<int64_t, int> pidfds_;  // pid -> its pidfd
  std::thread thread_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_EXIT_WATCH_H_
