// DbWorker: one sqlite connection on a thread of its own, so that an event
// loop never waits on the disk (rank 0's loop must never wait: DESIGN.md,
// Reliability). Work runs on that thread one piece at a time, in the order
// it was given; each piece's `done` then runs on the loop, in the same
// order, never inside the call that queued it. Work may touch only the
// Database and what it captured by value: nothing the loop uses.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "core/reactor.hpp"
#include "core/sqlite.hpp"

namespace banyan {

class DbWorker {
  public:
    // Takes `db` (opened on the calling thread) to a new thread.
    DbWorker(Reactor& reactor, Database db);
    // Runs the work already queued, then joins the thread. A `done` that
    // has not run on the loop yet never runs.
    ~DbWorker();
    DbWorker(const DbWorker&) = delete;
    DbWorker& operator=(const DbWorker&) = delete;

    // Runs work(db) on the thread, then done(result) on the loop. Work
    // returns a Result; an exception out of it (bad_alloc, a bug) reaches
    // `done` as an EIO error, so whoever waits on it always hears back.
    template <typename Work, typename Done>
    void run(Work work, Done done) {
        using T = std::invoke_result_t<Work&, Database&>;
        auto result = std::make_shared<std::optional<T>>();
        submit(
            [work = std::move(work), result](Database& db) mutable {
                try {
                    result->emplace(work(db));
                } catch (const std::exception& e) {
                    result->emplace(make_error(EIO, db.path() + ": " + e.what()));
                } catch (...) {
                    result->emplace(make_error(EIO, db.path() + ": an exception of unknown type"));
                }
            },
            [done = std::move(done), result]() mutable { done(std::move(**result)); });
    }

    // Runs work(db) on the thread and waits for its result: for start-up
    // and shutdown only, never while the loop serves requests.
    template <typename Work>
    auto run_and_wait(Work work) -> std::invoke_result_t<Work&, Database&> {
        using T = std::invoke_result_t<Work&, Database&>;
        auto promise = std::make_shared<std::promise<T>>();
        auto future = promise->get_future();
        submit(
            [work = std::move(work), promise](Database& db) mutable {
                try {
                    promise->set_value(work(db));
                } catch (...) {
                    promise->set_exception(std::current_exception());
                }
            },
            nullptr);
        return future.get();
    }

  private:
    struct Task {
        std::function<void(Database&)> work;
        std::function<void()> done;  // null: nothing to run on the loop
    };
    void submit(std::function<void(Database&)> work, std::function<void()> done);
    void serve();

    Reactor& reactor_;
    Database db_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Task> tasks_;
    bool stopping_ = false;
    // Held by the loop side; a `done` posted to the loop runs only while
    // this worker still exists (both checked on the loop's thread).
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    std::thread thread_;
};

}  // namespace banyan
