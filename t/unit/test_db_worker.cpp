#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "core/db_worker.hpp"

using namespace banyan;

namespace {

struct TempDb {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("banyan-dbworker-" + std::to_string(getpid()));
    TempDb() { std::filesystem::create_directories(dir); }
    ~TempDb() { std::filesystem::remove_all(dir); }
    Database open() {
        auto db = Database::open((dir / "test.db").string(), "t");
        REQUIRE(db.ok());
        return std::move(*db);
    }
};

}  // namespace

TEST_CASE("a db worker runs work on its own thread and answers on the loop, in order", "[db_worker]") {
    TempDb temp;
    Reactor reactor;
    DbWorker worker(reactor, temp.open());
    REQUIRE(worker.run_and_wait([](Database& db) { return db.exec("CREATE TABLE t (x INTEGER)"); }).ok());
    const auto loop_thread = std::this_thread::get_id();
    std::vector<int> answered;
    bool other_thread = true;
    for (int i = 0; i < 20; i++)
        worker.run(
            [i, loop_thread, &other_thread](Database& db) -> Result<int> {
                other_thread = other_thread && std::this_thread::get_id() != loop_thread;
                (void)db.query("INSERT INTO t VALUES (?)", {int64_t{i}});
                return i;
            },
            [&](Result<int> n) {
                CHECK(std::this_thread::get_id() == loop_thread);
                answered.push_back(*n);
                if (answered.size() == 20)
                    reactor.stop();
            });
    CHECK(answered.empty());  // never inside the call
    reactor.run_for(std::chrono::seconds(5));
    REQUIRE(answered.size() == 20);
    CHECK(std::is_sorted(answered.begin(), answered.end()));
    CHECK(other_thread);
    auto rows = worker.run_and_wait([](Database& db) { return db.query("SELECT count(*) FROM t"); });
    REQUIRE(rows.ok());
    CHECK(std::get<int64_t>((*rows)[0][0]) == 20);
}

TEST_CASE("a throw in a db worker's work reaches its caller as an error; the worker goes on", "[db_worker]") {
    TempDb temp;
    Reactor reactor;
    DbWorker worker(reactor, temp.open());
    std::optional<Error> first;
    bool second_done = false;
    worker.run([](Database&) -> Result<int> { throw std::runtime_error("injected"); },
               [&](Result<int> r) { first = r.ok() ? Error{} : r.error(); });
    worker.run([](Database&) -> Result<int> { return 1; },
               [&](Result<int>) {
                   second_done = true;
                   reactor.stop();
               });
    reactor.run_for(std::chrono::seconds(5));
    REQUIRE(first);
    CHECK(first->code == EIO);
    CHECK(first->message.find("test.db: injected") != std::string::npos);
    CHECK(second_done);
    CHECK_THROWS(worker.run_and_wait([](Database&) -> int { throw std::runtime_error("injected"); }));
}

TEST_CASE("a db worker runs queued work before it stops, and no answer after", "[db_worker]") {
    TempDb temp;
    Reactor reactor;
    bool answered = false;
    {
        DbWorker worker(reactor, temp.open());
        (void)worker.run_and_wait([](Database& db) { return db.exec("CREATE TABLE t (x INTEGER)"); });
        worker.run([](Database& db) { return db.query("INSERT INTO t VALUES (1)"); },
                   [&](const Result<std::vector<SqlRow>>&) { answered = true; });
    }
    reactor.run_for(std::chrono::milliseconds(50));
    CHECK_FALSE(answered);  // its worker was gone
    DbWorker again(reactor, temp.open());
    auto rows = again.run_and_wait([](Database& db) { return db.query("SELECT count(*) FROM t"); });
    REQUIRE(rows.ok());
    CHECK(std::get<int64_t>((*rows)[0][0]) == 1);  // but the write was done
}
