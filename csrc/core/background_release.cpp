#include "core/background_release.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include <unistd.h>

namespace tlm {

namespace {

// The threads are detached and counted: a release waits until the one before it is done,
// and so does the process at exit. The freeing thread touches nothing but that count, so a
// process forked while it runs (a data loader's worker) inherits no lock it holds; the child
// has no such thread, and the count it inherited is not its own (the pid says so).
class Releaser {
 public:
  void release(std::shared_ptr<void> owned) {
    std::lock_guard<std::mutex> lock(callers_);  // callers one at a time; the thread never takes it
    wait_for_running();
    running_.fetch_add(1);
    pid_ = ::getpid();
    try {
      std::thread([this, held = std::move(owned)]() mutable {
        held.reset();
        running_.fetch_sub(1);
      }).detach();
    } catch (const std::system_error&) {
      running_.fetch_sub(1);  // no thread to be had: the lambda holding `owned` freed it here
    }
  }

  ~Releaser() { wait_for_running(); }

 private:
  void wait_for_running() {
    if (pid_ != ::getpid()) {
      running_.store(0);  // a forked child: its parent's threads do not run here
      return;
    }
    while (running_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::mutex callers_;
  std::atomic<int> running_{0};
  std::atomic<pid_t> pid_{0};
};

Releaser& releaser() {
  static Releaser r;  // destroyed at exit, once the last release is done
  return r;
}

}  // namespace

void release_in_background(std::shared_ptr<void> owned) {
  if (owned) releaser().release(std::move(owned));
}

}  // namespace tlm
