// Directories and files that only the instance owner may change: the
// broker's run directory (its local socket, job run directories) and state
// directory (the databases). A directory another user owns or may write
// lets that user swap what the broker reads back (a guest who replaced
// jobs.db had its job run as the owner).
#pragma once

#include <string>

#include "core/result.hpp"

namespace banyan {

// Makes `path` and its missing parents (mode `mode`, e.g. 0700), then
// checks the whole way down: every existing ancestor is owned by root or
// this user and not writable by others unless sticky (as /tmp), and `path`
// itself is a directory (not a link) owned by this user that no one else
// may write. Does not loosen or tighten an existing directory's mode.
// Error names the directory and what is wrong, in one line:
// "/tmp/x: owned by uid 1000, not by this user (uid 0)".
Result<void> make_private_dir(const std::string& path, unsigned mode);

// Makes sure `path`, if it exists, is a regular file (not a link) owned by
// this user, and sets its mode to 0600; creates it empty with 0600 if not.
// For databases: sqlite gives its -wal and -shm files the same mode.
Result<void> make_private_file(const std::string& path);

}  // namespace banyan
