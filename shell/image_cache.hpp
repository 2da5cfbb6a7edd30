// Container images for jobs (doc/spec/shell.md §9.2): an OCI image layout
// directory, an OCI archive, or an image of the containers storage
// (podman), unpacked once per user and node into a cache of root file
// systems keyed by the image's digest, shared by that user's later jobs
// and bounded in size (least recently used entries go first). Runs in the
// container's holder (banyan-shell --container), never on a shell's loop:
// an unpack takes seconds.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

struct PreparedImage {
    std::string rootfs;  // the unpacked root file system
    // Held shared while the image is in use, so no eviction removes it.
    UniqueFd in_use;
};

// `image`: a path (a layout directory or an archive) or a name in the
// user's containers storage; `cache`: the user's cache directory (made
// private here); `bound`: its size bound in bytes. Error, one line: a
// missing or corrupt image, one for another architecture, a cache that is
// not the user's.
Result<PreparedImage> prepare_image(const std::string& image, const std::string& cache, uint64_t bound);

// PATH (absolute, as the container sees it) inside ROOT, as the kernel
// would resolve it with ROOT as "/" (openat2's RESOLVE_IN_ROOT): each link
// followed within ROOT (an absolute target from ROOT, ".." stopping at
// ROOT), the last component's too unless `follow_last` is false; what does
// not exist yet kept as it is. The result is ROOT followed by a path with
// no link in it, so nothing made there lands outside ROOT. Error: a loop
// of links.
Result<std::string> resolve_in_root(const std::string& root, const std::string& path, bool follow_last = true);

// This machine's architecture in OCI's words (amd64, arm64, ...).
std::string oci_architecture();

}  // namespace banyan
