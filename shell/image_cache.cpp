#include "shell/image_cache.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <cerrno>
#include <csignal>
#include <climits>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/private_dir.hpp"
#include "core/text.hpp"
#include "core/text_file.hpp"

namespace banyan {
namespace fs = std::filesystem;
namespace {

Error image_error(const std::string& image, const std::string& why) {
    return make_error(EINVAL, fmt::format("image {}: {}", image, why));
}

// Runs a tool (tar, podman) to its end. `out`: its stdout, else /dev/null.
// Error: its last line of stderr, or how it ended.
Result<void> run_tool(const std::vector<std::string>& argv, std::string* out = nullptr) {
    UniqueFd err(memfd_create("tool-stderr", MFD_CLOEXEC));
    int pipe_fds[2] = {-1, -1};
    if (!err || (out && pipe2(pipe_fds, O_CLOEXEC) != 0))
        return make_error(errno, fmt::format("{}: {}", argv[0], std::strerror(errno)));
    UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = fork();  // (the holder has one thread)
    if (pid < 0)
        return make_error(errno, fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);  // (dup2 clears it on 0-2)
        dup2(null, 0);
        dup2(out ? write_end.get() : null, 1);
        dup2(err.get(), 2);
        execvp(args[0], args.data());
        dprintf(2, "%s\n", std::strerror(errno));
        _exit(127);
    }
    write_end.reset();
    if (out) {
        char buf[65536];
        ssize_t n;
        while ((n = read(read_end.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
            if (n > 0)
                out->append(buf, static_cast<size_t>(n));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return {};
    std::string text(4096, '\0');
    ssize_t n = pread(err.get(), text.data(), text.size(), std::max<off_t>(0, lseek(err.get(), 0, SEEK_END) - 4096));
    text.resize(std::max<ssize_t>(n, 0));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    std::string last = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    if (last.empty())
        last = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                 : fmt::format("signal {}", WTERMSIG(status));
    return make_error(EIO, fmt::format("{}: {}", argv[0], last));
}

Result<std::string> sha256_of_file(const std::string& path) {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    crypto_hash_sha256_state state;
    crypto_hash_sha256_init(&state);
    std::vector<unsigned char> buf(1 << 20);
    ssize_t n;
    while ((n = read(fd.get(), buf.data(), buf.size())) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            crypto_hash_sha256_update(&state, buf.data(), static_cast<unsigned long long>(n));
    if (n < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&state, digest);
    std::string hex;
    for (unsigned char c : digest)
        hex += fmt::format("{:02x}", c);
    return hex;
}

// A blob of the layout, by digest ("sha256:HEX"), checked against it.
Result<std::string> blob_path(const std::string& layout, const std::string& digest) {
    if (!digest.starts_with("sha256:") || digest.size() != 71 ||
        digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos)
        return make_error(EINVAL, fmt::format("unsupported digest '{}'", digest));
    return layout + "/blobs/sha256/" + digest.substr(7);
}

Result<nlohmann::json> read_json_blob(const std::string& layout, const std::string& digest) {
    auto path = blob_path(layout, digest);
    if (!path)
        return path.error();
    auto text = read_text_file(*path);
    if (!text)
        return text.error();
    if (auto sum = sha256_of_file(*path); !sum || *sum != digest.substr(7))
        return make_error(EINVAL, fmt::format("blob {} does not match its digest", digest));
    auto parsed = parse_json(*text);
    if (!parsed || !parsed->is_object())
        return make_error(EINVAL, fmt::format("blob {}: not a JSON object", digest));
    return std::move(*parsed);
}



// The digest of the manifest for this machine in the layout's index: the
// only one, or the one whose platform is this architecture (one nested
// index followed, which needs its blob).
Result<std::string> manifest_digest(const std::string& layout) {
    auto index_text = read_text_file(layout + "/index.json");
    if (!index_text)
        return make_error(ENOENT, "not an OCI image (no index.json)");
    auto index = parse_json(*index_text);
    if (!index || !index->is_object())
        return make_error(EINVAL, "index.json is not a JSON object");
    const std::string arch = oci_architecture();
    for (int depth = 0; depth < 2; depth++) {
        const auto& manifests = json_array_at(*index, "manifests");
        if (manifests.empty())
            return make_error(EINVAL, "the index lists no manifest");
        const nlohmann::json* chosen = manifests.size() == 1 ? &manifests[0] : nullptr;
        for (const auto& m : manifests) {  // the first for Linux on this architecture
            const auto& platform = json_object_at(m, {"platform"});
            if (!chosen && json_field<std::string>(platform, "architecture", "").value_or("") == arch &&
                json_field<std::string>(platform, "os", "linux").value_or("") == "linux")
                chosen = &m;
        }
        if (!chosen)
            return make_error(EINVAL, fmt::format("no manifest for {} in the index", arch));
        auto digest = json_field<std::string>(*chosen, "digest", "", "manifest");
        auto type = json_field<std::string>(*chosen, "mediaType", "", "manifest");
        if (auto e = first_error(digest, type))
            return *e;
        if (type->find("image.index") == std::string::npos)
            return *digest;
        auto nested = read_json_blob(layout, *digest);
        if (!nested)
            return nested.error();
        index = std::move(*nested);
    }
    return make_error(EINVAL, "indexes nested too deep");
}

struct Manifest {
    std::vector<std::string> layers;  // digests, lowest first
};

// The manifest `digest` of the layout; its config must be Linux on this
// architecture.
Result<Manifest> read_manifest(const std::string& layout, const std::string& digest) {
    auto manifest = read_json_blob(layout, digest);
    if (!manifest)
        return manifest.error();
    auto config_digest = json_field<std::string>(json_object_at(*manifest, {"config"}), "digest", "", "config");
    if (!config_digest)
        return config_digest.error();
    auto config = read_json_blob(layout, *config_digest);
    if (!config)
        return config.error();
    const std::string arch = oci_architecture();
    std::string image_arch = json_field<std::string>(*config, "architecture", "").value_or("");
    std::string os = json_field<std::string>(*config, "os", "").value_or("");
    if (image_arch != arch || os != "linux")
        return make_error(EINVAL, fmt::format("it is built for {}/{}; this node is {}/linux",
                                              os.empty() ? "?" : os, image_arch.empty() ? "?" : image_arch, arch));
    Manifest out;
    for (const auto& layer : json_array_at(*manifest, "layers")) {
        auto d = json_field<std::string>(layer, "digest", "", "layer");
        if (!d)
            return d.error();
        out.layers.push_back(*d);
    }
    if (out.layers.empty())
        return make_error(EINVAL, "the manifest has no layer");
    return out;
}

// Makes sure `path` and what it holds may be changed and removed by us
// (an image's read-only directories). Links are never followed: one may
// name a file of the host.
void make_writable(const fs::path& path) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(path, ec)))
        return;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_directory(ec) && !it->is_symlink(ec))
            fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
}

void remove_tree(const fs::path& path) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec)))
        return;
    make_writable(path);
    fs::remove_all(path, ec);  // (removes a link, never what it names)
}

// A member's path relative to the root: "./" and "/" in front dropped.
// Error: a ".." in it.
Result<std::string> member_path(const char* name) {
    std::string path = name ? name : "";
    std::string out;
    for (const auto& part : split(path, '/')) {
        if (part == "..")
            return make_error(EINVAL, fmt::format("{}: a file outside the root", path));
        if (!part.empty() && part != ".")
            out += (out.empty() ? "" : "/") + part;
    }
    return out;
}

struct ReadArchive {
    archive* a = archive_read_new();
    ~ReadArchive() { archive_read_free(a); }
};

Result<void> open_layer(ReadArchive& r, const std::string& blob) {
    archive_read_support_filter_all(r.a);
    archive_read_support_format_tar(r.a);
    if (archive_read_open_filename(r.a, blob.c_str(), 1 << 16) != ARCHIVE_OK)
        return make_error(EIO, fmt::format("cannot read it: {}", archive_error_string(r.a)));
    return {};
}

// Applies one layer on `root` (libarchive: any compression), as a
// container engine does: its whiteouts first (a file of a lower layer
// removed, or an opaque directory emptied), then its files. Every path is
// resolved inside the root (resolve_in_root), so no link of any layer
// leads a file out of it; libarchive then follows no link at all.
Result<void> apply_layer(const std::string& blob, const std::string& root) {
    ReadArchive listing;
    if (auto r = open_layer(listing, blob); !r)
        return r;
    archive_entry* e = nullptr;
    std::vector<std::pair<std::string, std::string>> whiteouts;  // (directory, name; "" for opaque)
    int status;
    while ((status = archive_read_next_header(listing.a, &e)) == ARCHIVE_OK) {
        auto rel = member_path(archive_entry_pathname(e));
        if (!rel)
            return rel.error();
        fs::path p(*rel);
        std::string base = p.filename().string();
        if (base == ".wh..wh..opq")
            whiteouts.emplace_back(p.parent_path().string(), "");
        else if (base.starts_with(".wh."))
            whiteouts.emplace_back(p.parent_path().string(), base.substr(4));
    }
    if (status != ARCHIVE_EOF)
        return make_error(EIO, fmt::format("cannot read it: {}", archive_error_string(listing.a)));
    for (const auto& [dir, name] : whiteouts) {
        auto at = resolve_in_root(root, "/" + dir);
        if (!at)
            return at.error();
        std::error_code ec;
        if (!name.empty()) {
            remove_tree(fs::path(*at) / name);
            continue;
        }
        if (!fs::is_directory(fs::symlink_status(*at, ec)))
            continue;
        for (auto it = fs::directory_iterator(*at, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
            remove_tree(it->path());
    }
    ReadArchive files;
    if (auto r = open_layer(files, blob); !r)
        return r;
    bool as_root = geteuid() == 0;
    std::unique_ptr<archive, int (*)(archive*)> disk(archive_write_disk_new(), archive_write_free);
    archive_write_disk_set_options(disk.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                   ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                   ARCHIVE_EXTRACT_UNLINK |
                                                   (as_root ? ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_XATTR : 0));
    while ((status = archive_read_next_header(files.a, &e)) == ARCHIVE_OK) {
        auto rel = member_path(archive_entry_pathname(e));
        if (!rel)
            return rel.error();
        std::string base = fs::path(*rel).filename().string();
        mode_t type = archive_entry_filetype(e);
        // The container's /dev is made for it, and only root makes
        // device files.
        if (rel->empty() || base.starts_with(".wh.") || *rel == "dev" || rel->starts_with("dev/") ||
            (!as_root && (type == AE_IFCHR || type == AE_IFBLK)))
            continue;
        // A directory over a lower layer's link to one keeps the link
        // (bin -> usr/bin), as container engines do.
        std::string parent = fs::path(*rel).parent_path().string();
        auto where = resolve_in_root(root, "/" + (type == AE_IFDIR ? *rel : parent));
        if (!where)
            return where.error();
        std::string full = type == AE_IFDIR ? *where : *where + "/" + base;
        archive_entry_set_pathname(e, full.c_str());
        if (const char* target = archive_entry_hardlink(e)) {
            auto linked = member_path(target);
            auto inside = linked ? resolve_in_root(root, "/" + *linked, false) : Result<std::string>(linked.error());
            if (!inside)
                return inside.error();
            archive_entry_set_hardlink(e, inside->c_str());
        }
        if (archive_write_header(disk.get(), e) < ARCHIVE_WARN)
            return make_error(EIO, fmt::format("{}: {}", *rel, archive_error_string(disk.get())));
        const void* block;
        size_t size;
        la_int64_t offset;
        int r;
        while ((r = archive_read_data_block(files.a, &block, &size, &offset)) == ARCHIVE_OK)
            if (archive_write_data_block(disk.get(), block, size, offset) < ARCHIVE_WARN)
                return make_error(EIO, fmt::format("{}: {}", *rel, archive_error_string(disk.get())));
        if (r != ARCHIVE_EOF)
            return make_error(EIO, fmt::format("{}: {}", *rel, archive_error_string(files.a)));
        if (archive_write_finish_entry(disk.get()) < ARCHIVE_WARN)
            return make_error(EIO, fmt::format("{}: {}", *rel, archive_error_string(disk.get())));
    }
    if (status != ARCHIVE_EOF)
        return make_error(EIO, fmt::format("cannot read it: {}", archive_error_string(files.a)));
    if (archive_write_close(disk.get()) != ARCHIVE_OK)
        return make_error(EIO, archive_error_string(disk.get()));
    return {};
}

uint64_t tree_size(const fs::path& root) {
    uint64_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_regular_file(ec) && !it->is_symlink(ec))
            total += it->file_size(ec);
    return total;
}

// Unpacks the layout's image into CACHE/KEY (its root file system and its
// size), through KEY.part: a cache entry is whole or absent.
Result<void> unpack(const std::string& layout, const Manifest& manifest, const std::string& entry) {
    std::string part = entry + ".part";
    remove_tree(part);
    std::string root = part + "/rootfs";
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec)
        return make_error(ec.value(), fmt::format("{}: {}", root, ec.message()));
    for (const auto& digest : manifest.layers) {
        auto blob = blob_path(layout, digest);
        if (!blob)
            return blob.error();
        auto sum = sha256_of_file(*blob);
        if (!sum)
            return make_error(sum.error().code, fmt::format("layer {}: {}", digest, sum.error().message));
        if (*sum != digest.substr(7))
            return make_error(EINVAL, fmt::format("layer {} does not match its digest (a corrupt image)", digest));
        if (auto r = apply_layer(*blob, root); !r)
            return make_error(r.error().code, fmt::format("layer {}: {}", digest, r.error().message));
    }
    chmod(root.c_str(), 0755);
    std::string size = std::to_string(tree_size(root));
    if (auto fd = UniqueFd(open((part + "/size").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        !fd || write(fd.get(), size.data(), size.size()) != static_cast<ssize_t>(size.size()))
        return make_error(errno, fmt::format("{}/size: {}", part, std::strerror(errno)));
    if (rename(part.c_str(), entry.c_str()) != 0)
        return make_error(errno, fmt::format("{}: {}", entry, std::strerror(errno)));
    return {};
}

// Removes the least recently used entries not in use until the cache is
// within `bound`; `keep` stays whatever its size.
// Removes what a holder killed while it unpacked left behind: its scratch
// copy and an entry it was evicting (named by its pid, which is gone), and
// a half-made entry (whose lock is free).
void sweep_leftovers(const std::string& cache) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(cache, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::string name = it->path().filename().string();
        auto dot = name.rfind('.');
        if (dot == std::string::npos)
            continue;
        std::string suffix = name.substr(dot + 1);
        bool by_pid = name.starts_with("scratch.") || name.find(".evicted.") != std::string::npos;
        if (by_pid && !suffix.empty() && suffix.find_first_not_of("0123456789") == std::string::npos) {
            pid_t pid = static_cast<pid_t>(std::strtol(suffix.c_str(), nullptr, 10));
            if (pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH)
                remove_tree(it->path());
        } else if (suffix == "part") {
            UniqueFd lock(open((cache + "/" + name.substr(0, dot) + ".lock").c_str(), O_RDONLY | O_CLOEXEC));
            if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) == 0)
                remove_tree(it->path());
        }
    }
}

void evict(const std::string& cache, const std::string& keep, uint64_t bound) {
    sweep_leftovers(cache);
    struct Entry {
        std::string name;
        int64_t used;
        uint64_t size;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(cache, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::string name = it->path().filename().string();
        struct stat st {};
        if (name.find('.') != std::string::npos || lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        auto text = read_text_file(it->path().string() + "/size");
        uint64_t size = text ? std::strtoull(text->c_str(), nullptr, 10) : 0;
        total += size;
        if (name != keep)
            entries.push_back({name, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, size});
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    for (const auto& e : entries) {
        if (total <= bound)
            return;
        std::string path = cache + "/" + e.name;
        UniqueFd lock(open((path + ".lock").c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
        if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
            continue;  // in use by a job
        std::string doomed = fmt::format("{}.evicted.{}", path, getpid());
        if (rename(path.c_str(), doomed.c_str()) == 0) {
            remove_tree(doomed);
            total -= std::min(total, e.size);
        }
    }
}

enum class ImageKind { layout, archive, storage };

}  // namespace

Result<std::string> resolve_in_root(const std::string& root, const std::string& path, bool follow_last) {
    std::deque<std::string> todo;
    auto push_front = [&todo](const std::string& p) {
        auto parts = split(p, '/');
        todo.insert(todo.begin(), parts.begin(), parts.end());
    };
    push_front(path);
    std::vector<std::string> done;
    auto joined = [&] {
        std::string out = root;
        for (const auto& d : done)
            out += "/" + d;
        return out;
    };
    int links = 0;
    while (!todo.empty()) {
        std::string part = std::move(todo.front());
        todo.pop_front();
        if (part.empty() || part == ".")
            continue;
        if (part == "..") {
            if (!done.empty())
                done.pop_back();
            continue;
        }
        std::string at = joined() + "/" + part;
        bool last = std::all_of(todo.begin(), todo.end(), [](const std::string& t) { return t.empty() || t == "."; });
        struct stat st {};
        if ((follow_last || !last) && lstat(at.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            if (++links > 40)
                return make_error(ELOOP, fmt::format("{}: too many symbolic links in the image", path));
            std::string target(PATH_MAX, '\0');
            ssize_t n = readlink(at.c_str(), target.data(), target.size());
            if (n < 0)
                return make_error(errno, fmt::format("{}: {}", at, std::strerror(errno)));
            target.resize(static_cast<size_t>(n));
            if (target.starts_with("/"))
                done.clear();
            push_front(target);
            continue;
        }
        done.push_back(part);
    }
    return joined();
}

std::string oci_architecture() {
    utsname u{};
    uname(&u);
    std::string m = u.machine;
    if (m == "x86_64")
        return "amd64";
    if (m == "aarch64")
        return "arm64";
    if (m == "i686" || m == "i386")
        return "386";
    if (m == "ppc64le" || m == "s390x" || m == "riscv64")
        return m;
    return m;
}

Result<PreparedImage> prepare_image(const std::string& image, const std::string& cache, uint64_t bound) {
    if (image.empty())
        return make_error(EINVAL, "an empty image name");
    if (auto r = make_private_dir(cache, 0700); !r)
        return make_error(r.error().code, fmt::format("the image cache: {}", r.error().message));
    struct stat st {};
    ImageKind kind = ImageKind::storage;
    if (stat(image.c_str(), &st) == 0)
        kind = S_ISDIR(st.st_mode) ? ImageKind::layout : ImageKind::archive;
    else if (image.starts_with("/") || image.starts_with("./") || image.starts_with("../"))
        return image_error(image, std::strerror(errno));
    // Where a layout is read from: the image itself, or a scratch copy in
    // the cache (an archive's contents, containers storage's export).
    std::string scratch = fmt::format("{}/scratch.{}", cache, getpid());
    struct Cleanup {
        std::string path;
        ~Cleanup() { remove_tree(path); }
    } cleanup{scratch};
    std::string layout = image, key, digest;
    bool extracted = kind != ImageKind::archive;  // the archive's blobs are out
    if (kind == ImageKind::archive) {
        // Its index alone, to name the entry: a cached image costs no
        // more than reading the archive through.
        layout = scratch;
        std::error_code ec;
        if (fs::create_directories(layout, ec); ec)
            return make_error(ec.value(), fmt::format("{}: {}", layout, ec.message()));
        if (auto r = run_tool({"tar", "-xf", image, "-C", layout, "index.json", "oci-layout"}); !r)
            return image_error(image, "not an OCI archive (" + r.error().message + ")");
        if (!manifest_digest(layout)) {  // a nested index: its blob is needed
            if (auto r = run_tool({"tar", "-xf", image, "-C", layout}); !r)
                return image_error(image, "a corrupt OCI archive (" + r.error().message + ")");
            extracted = true;
        }
    } else if (kind == ImageKind::storage) {
        std::string id;
        if (auto r = run_tool({"podman", "image", "inspect", "--format", "{{.Id}}", "--", image}, &id); !r)
            return image_error(image, "no such file, and not in the containers storage (" + r.error().message + ")");
        id.erase(id.find_last_not_of("\n ") + 1);
        if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos)
            return image_error(image, fmt::format("podman gave the id '{}'", id));
        key = "podman-" + id;
    }
    if (key.empty()) {
        auto d = manifest_digest(layout);
        if (!d)
            return image_error(image, d.error().message);
        digest = *d;
        key = "sha256-" + digest.substr(7);
    }
    std::string entry = cache + "/" + key;
    UniqueFd lock(open((entry + ".lock").c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock)
        return make_error(errno, fmt::format("{}.lock: {}", entry, std::strerror(errno)));
    // Shared while used; exclusive to unpack. An eviction may come between
    // the two (flock does not convert atomically): look again.
    for (int attempt = 0; attempt < 5; attempt++) {
        if (flock(lock.get(), LOCK_SH) != 0)
            return make_error(errno, fmt::format("{}.lock: {}", entry, std::strerror(errno)));
        if (access((entry + "/rootfs").c_str(), F_OK) == 0) {
            utimensat(AT_FDCWD, entry.c_str(), nullptr, 0);  // used now
            return PreparedImage{.rootfs = entry + "/rootfs", .in_use = std::move(lock)};
        }
        if (flock(lock.get(), LOCK_EX) != 0)
            return make_error(errno, fmt::format("{}.lock: {}", entry, std::strerror(errno)));
        if (access((entry + "/rootfs").c_str(), F_OK) == 0)
            continue;  // another job unpacked it meanwhile
        if (!extracted && kind == ImageKind::archive) {
            if (auto r = run_tool({"tar", "-xf", image, "-C", layout}); !r)
                return image_error(image, "a corrupt OCI archive (" + r.error().message + ")");
            extracted = true;
        } else if (kind == ImageKind::storage && digest.empty()) {
            layout = scratch + "/layout";
            std::error_code ec;
            if (fs::create_directories(scratch, ec); ec)
                return make_error(ec.value(), fmt::format("{}: {}", scratch, ec.message()));
            if (auto r = run_tool({"podman", "save", "--format", "oci-dir", "-o", layout, "--", image}); !r)
                return image_error(image, r.error().message);
            auto d = manifest_digest(layout);
            if (!d)
                return image_error(image, d.error().message);
            digest = *d;
        }
        auto manifest = read_manifest(layout, digest);
        if (!manifest)
            return image_error(image, manifest.error().message);
        if (auto r = unpack(layout, *manifest, entry); !r) {
            remove_tree(entry + ".part");
            return image_error(image, r.error().message);
        }
        evict(cache, key, bound);
    }
    return make_error(EAGAIN, fmt::format("image {}: evicted from the cache as often as it was unpacked", image));
}

}  // namespace banyan
