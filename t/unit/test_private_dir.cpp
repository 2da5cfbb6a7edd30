// make_private_dir / make_private_file: what the broker refuses to trust;
// mark_close_on_exec_of: a library's files never reach a job.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/descriptors.hpp"
#include "core/private_dir.hpp"
#include "t/unit/temp_dir.hpp"

using namespace banyan;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& p) {
    struct stat st{};
    REQUIRE(lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("private dirs are made 0700, whole paths at once", "[private_dir]") {
    TempDir t;
    REQUIRE(make_private_dir((t.path / "a/b/c").string(), 0700).ok());
    CHECK(mode_of(t.path / "a") == 0700);
    CHECK(mode_of(t.path / "a/b/c") == 0700);
    // Again: it exists and is fine.
    CHECK(make_private_dir((t.path / "a/b/c").string(), 0700).ok());
    // A sticky world-writable ancestor (as /tmp) is fine.
    fs::create_directory(t.path / "sticky");
    chmod((t.path / "sticky").c_str(), 01777);
    CHECK(make_private_dir((t.path / "sticky/mine").string(), 0700).ok());
}

TEST_CASE("private dirs: what others may write, or links, are refused in one line", "[private_dir]") {
    TempDir t;
    fs::create_directory(t.path / "open");
    chmod((t.path / "open").c_str(), 0777);
    auto open = make_private_dir((t.path / "open").string(), 0700);
    REQUIRE_FALSE(open.ok());
    CHECK(open.error().message == (t.path / "open").string() + ": writable by other users");
    auto below = make_private_dir((t.path / "open/x").string(), 0700);
    REQUIRE_FALSE(below.ok());
    CHECK(below.error().message == (t.path / "open").string() + ": writable by other users (and not sticky)");
    fs::create_directory_symlink(t.path / "open", t.path / "link");
    auto link = make_private_dir((t.path / "link").string(), 0700);
    REQUIRE_FALSE(link.ok());
    CHECK(link.error().message.find("a symbolic link") != std::string::npos);
    std::ofstream(t.path / "file") << "x";
    CHECK(make_private_dir((t.path / "file").string(), 0700).error().message.find("not a directory") !=
          std::string::npos);
}

TEST_CASE("private dirs owned by another user are refused (as root)", "[private_dir]") {
    if (geteuid() != 0) {
        WARN("not root: cannot give a directory to another user here");
        return;
    }
    TempDir t;
    // What a guest does in /tmp before the broker starts.
    fs::create_directory(t.path / "theirs");
    REQUIRE(chown((t.path / "theirs").c_str(), 65534, 65534) == 0);
    auto mine = make_private_dir((t.path / "theirs").string(), 0700);
    REQUIRE_FALSE(mine.ok());
    CHECK(mine.error().message == (t.path / "theirs").string() + ": owned by uid 65534, not by this user (uid 0)");
    auto inside = make_private_dir((t.path / "theirs/rank-0").string(), 0700);
    REQUIRE_FALSE(inside.ok());
    CHECK(inside.error().message.find("owned by uid 65534, not by this user (uid 0) or root") != std::string::npos);
    std::ofstream(t.path / "their.db") << "x";
    REQUIRE(chown((t.path / "their.db").c_str(), 65534, 65534) == 0);
    CHECK(make_private_file((t.path / "their.db").string()).error().message.find("owned by uid 65534") !=
          std::string::npos);
}

TEST_CASE("private files are 0600 and never links", "[private_dir]") {
    TempDir t;
    REQUIRE(make_private_file((t.path / "new.db").string()).ok());
    CHECK(mode_of(t.path / "new.db") == 0600);
    std::ofstream(t.path / "old.db") << "x";
    chmod((t.path / "old.db").c_str(), 0644);
    REQUIRE(make_private_file((t.path / "old.db").string()).ok());
    CHECK(mode_of(t.path / "old.db") == 0600);
    fs::create_symlink(t.path / "old.db", t.path / "swapped.db");
    auto link = make_private_file((t.path / "swapped.db").string());
    REQUIRE_FALSE(link.ok());
    CHECK(link.error().message == (t.path / "swapped.db").string() + ": a symbolic link");
}

TEST_CASE("descriptors: a file's and its -suffixed companions' descriptors are marked close-on-exec, no other",
          "[descriptors]") {
    TempDir dir;
    std::string db = (dir.path / "x.db").string();
    int main_fd = open(db.c_str(), O_RDWR | O_CREAT, 0600);  // as a library might: no O_CLOEXEC
    int wal_fd = open((db + "-wal").c_str(), O_RDWR | O_CREAT, 0600);
    int other_fd = open((dir.path / "x.dbx").string().c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE((main_fd >= 0 && wal_fd >= 0 && other_fd >= 0));
    CHECK(mark_close_on_exec_of(fs::canonical(db).string()) == 2);
    CHECK((fcntl(main_fd, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK((fcntl(wal_fd, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK((fcntl(other_fd, F_GETFD) & FD_CLOEXEC) == 0);
    for (int fd : {main_fd, wal_fd, other_fd})
        close(fd);
}
