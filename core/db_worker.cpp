#include "core/db_worker.hpp"

#include <exception>

#include "core/log.hpp"

namespace banyan {

DbWorker::DbWorker(Reactor& reactor, Database db)
    : reactor_(reactor), db_(std::move(db)), thread_([this] { serve(); }) {}

DbWorker::~DbWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
    *alive_ = false;
}

void DbWorker::submit(std::function<void(Database&)> work, std::function<void()> done) {
    {
        std::lock_guard lock(mutex_);
        tasks_.push_back({std::move(work), std::move(done)});
    }
    wake_.notify_one();
}

void DbWorker::serve() {
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
            task.work(db_);
        } catch (const std::exception& e) {
            log::error("db", "{}: {}", db_.path(), e.what());
            continue;
        } catch (...) {
            log::error("db", "{}: unknown exception", db_.path());
            continue;
        }
        if (task.done)
            reactor_.post([alive = std::weak_ptr<bool>(alive_), done = std::move(task.done)] {
                if (auto a = alive.lock(); a && *a)
                    done();
            });
    }
}

}  // namespace banyan
