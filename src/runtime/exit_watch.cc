#include "runtime/exit_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture but alpha
#endif

namespace carve {

namespace {

constexpr uint64_t kStop = ~uint64_t{0};

}  // namespace

ExitWatch::ExitWatch(std::function<void(int64_t)> on_exit) : on_exit_(std::move(on_exit)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || stop_fd_ < 0) return;  // Watch then refuses: the caller polls
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kStop;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) != 0) return;
  thread_ = std::thread([this] { Run(); });
}

ExitWatch::~ExitWatch() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    while (::write(stop_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pid, fd] : pidfds_) ::close(fd);
  pidfds_.clear();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

bool ExitWatch::Watch(int64_t pid) {
  if (!thread_.joinable() || pid <= 0) return false;
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd < 0) return false;  // ENOSYS before Linux 5.3, ESRCH once reaped
  std::lock_guard<std::mutex> lock(mu_);
  Close(pid);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(pid);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return false;
  }
  pidfds_[pid] = fd;
  return true;
}

void ExitWatch::Forget(int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  Close(pid);
}

size_t ExitWatch::watched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pidfds_.size();
}

void ExitWatch::Close(int64_t pid) {
  auto it = pidfds_.find(pid);
  if (it == pidfds_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
  ::close(it->second);
  pidfds_.erase(it);
}

void ExitWatch::Run() {
  std::vector<epoll_event> events(64);
  while (true) {
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // cannot wait any more: callers still poll
    std::vector<int64_t> ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kStop) return;
        auto pid = static_cast<int64_t>(events[i].data.u64);
        if (!pidfds_.count(pid)) continue;  // forgotten meanwhile
        Close(pid);
        ended.push_back(pid);
      }
    }
    for (int64_t pid : ended) on_exit_(pid);
  }
}

}  // namespace carve
