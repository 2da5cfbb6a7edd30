// What a process hands on to the programs it starts: nothing but what it
// means to (doc/spec/shell.md §1, "Descriptors"). Every descriptor Banyan
// opens is close-on-exec; these two cover what it did not open itself.
#pragma once

#include <string>

namespace banyan {

// Closes every descriptor numbered `first` or above, except `keep` (-1:
// none). Async-signal-safe: for a child between fork and exec.
void close_descriptors_from(int first, int keep = -1);

// Marks every descriptor numbered `first` or above close-on-exec: what a
// daemon inherited from whoever started it (a terminal's, a test
// harness's) is then never passed on to its children.
void mark_close_on_exec_from(int first);

// Marks close-on-exec every descriptor this process has open on `path`
// or on a file named `path` followed by `-` and more (sqlite's -wal and
// -shm): for files a library opened, whose own flags it cannot set.
// Returns how many there are.
int mark_close_on_exec_of(const std::string& path);

}  // namespace banyan
