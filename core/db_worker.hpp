// DbWorker: one sqlite connection on a thread of its own, so that an event
// loop never waits on the disk (rank 0's loop must never wait: DESIGN.md,
// Reliability). Work runs on that thread one piece at a time, in the order
// it was given; each piece's `done` then runs on the loop, in the same
// order, never inside the call that queued it. Work may touch only the
// Database and what it captured by value: nothing the loop uses.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "core/log.hpp"
#include "core/reactor.hpp"
#include "core/sqlite.hpp"

namespace banyan {

// Db: Database (sqlite), or any SqlStore (the accounting store's).
template <class Db>
class BasicDbWorker {
  public:
    // Takes `db` (opened on the calling thread) to a new thread.
    BasicDbWorker(Reactor& reactor, std::unique_ptr<Db> db)
        : reactor_(reactor), db_(std::move(db)), thread_([this] { serve(); }) {}
    template <class D>
        requires std::is_same_v<D, Db> && (!std::is_abstract_v<Db>)
    BasicDbWorker(Reactor& reactor, D db) : BasicDbWorker(reactor, std::make_unique<Db>(std::move(db))) {}
    // Runs the work already queued, then joins the thread. A `done` that
    // has not run on the loop yet never runs.
    ~BasicDbWorker() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_one();
        thread_.join();
        *alive_ = false;
    }
    BasicDbWorker(const BasicDbWorker&) = delete;
    BasicDbWorker& operator=(const BasicDbWorker&) = delete;

    // Runs work(db) on the thread, then done(result) on the loop. Work
    // returns a Result; an exception out of it (bad_alloc, a bug) reaches
    // `done` as an EIO error, so whoever waits on it always hears back.
    template <typename Work, typename Done>
    void run(Work work, Done done) {
        using T = std::invoke_result_t<Work&, Db&>;
        auto result = std::make_shared<std::optional<T>>();
        submit(
            [work = std::move(work), result](Db& db) mutable {
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
    auto run_and_wait(Work work) -> std::invoke_result_t<Work&, Db&> {
        using T = std::invoke_result_t<Work&, Db&>;
        auto promise = std::make_shared<std::promise<T>>();
        auto future = promise->get_future();
        submit(
            [work = std::move(work), promise](Db& db) mutable {
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
        std::function<void(Db&)> work;
        std::function<void()> done;  // null: nothing to run on the loop
    };
    void submit(std::function<void(Db&)> work, std::function<void()> done) {
        {
            std::lock_guard lock(mutex_);
            tasks_.push_back({std::move(work), std::move(done)});
        }
        wake_.notify_one();
    }
    void serve() {
        for (;;) {
            Task task;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
                if (tasks_.empty())
                    return;  // stopping, and everything queued has run
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            try {
                task.work(*db_);
            } catch (const std::exception& e) {
                log::error("db", "{}: {}", db_->path(), e.what());
                continue;
            } catch (...) {
                log::error("db", "{}: unknown exception", db_->path());
                continue;
            }
            if (task.done)
                reactor_.post([alive = std::weak_ptr<bool>(alive_), done = std::move(task.done)] {
                    if (auto a = alive.lock(); a && *a)
                        done();
                });
        }
    }

    Reactor& reactor_;
    std::unique_ptr<Db> db_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Task> tasks_;
    bool stopping_ = false;
    // Held by the loop side; a `done` posted to the loop runs only while
    // this worker still exists (both checked on the loop's thread).
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    std::thread thread_;
};

using DbWorker = BasicDbWorker<Database>;

}  // namespace banyan
