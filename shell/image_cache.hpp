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

// This machine's architecture in OCI's words (amd64, arm64, ...).
std::string oci_architecture();

}  // namespace banyan
