// prepare_image: OCI layouts unpacked into a user's cache, layers applied
// in order with their whiteouts, digests and architecture checked, least
// recently used entries evicted past the bound, entries in use kept.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sodium.h>
#include <unistd.h>

#include "core/json_parse.hpp"
#include "sched/shell_options.hpp"
#include "shell/image_cache.hpp"
#include "t/unit/temp_dir.hpp"

using namespace banyan;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_bytes(const fs::path& p, const std::string& data) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
}

std::string put_blob(const fs::path& layout, const std::string& data) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(data.data()), data.size());
    std::string hex;
    for (unsigned char c : digest)
        hex += fmt::format("{:02x}", c);
    write_bytes(layout / "blobs" / "sha256" / hex, data);
    return "sha256:" + hex;
}

// A layer: a tar of `files` (path -> content; "" content and a trailing
// '/' make a directory).
std::string layer(const fs::path& scratch, const std::map<std::string, std::string>& files) {
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    for (const auto& [path, content] : files) {
        if (path.ends_with("/"))
            fs::create_directories(scratch / path);
        else
            write_bytes(scratch / path, content);
    }
    fs::path tar = scratch.string() + ".tar";
    REQUIRE(std::system(fmt::format("tar -C '{}' -cf '{}' .", scratch.string(), tar.string()).c_str()) == 0);
    return read_bytes(tar);
}

// An OCI layout at `layout` of these layers, for `arch`.
void make_layout(const fs::path& layout, const std::vector<std::string>& layers, const std::string& arch) {
    nlohmann::json manifest = {{"schemaVersion", 2},
                               {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                               {"layers", nlohmann::json::array()}};
    for (const auto& l : layers)
        manifest["layers"].push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar"}, {"digest", put_blob(layout, l)}});
    manifest["config"] = {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                          {"digest", put_blob(layout, nlohmann::json{{"architecture", arch}, {"os", "linux"}}.dump())}};
    std::string m = put_blob(layout, manifest.dump());
    write_bytes(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    write_bytes(layout / "index.json",
                nlohmann::json{{"schemaVersion", 2},
                               {"manifests", {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                               {"digest", m}}}}}
                    .dump());
}

size_t entries(const fs::path& cache) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(cache))
        n += e.is_directory() && e.path().filename().string().find('.') == std::string::npos;
    return n;
}

}  // namespace

TEST_CASE("prepare_image applies layers in order with their whiteouts, once") {
    REQUIRE(sodium_init() >= 0);
    TempDir dir;
    fs::path image = dir.path / "image", cache = dir.path / "cache";
    make_layout(image,
                {layer(dir.path / "l1", {{"a/x", "x"}, {"a/y", "y"}, {"b/z", "z"}, {"c/", ""}}),
                 layer(dir.path / "l2", {{"a/.wh.x", ""}, {"b/.wh..wh..opq", ""}, {"b/new", "new"}, {"c/d", "d"}})},
                oci_architecture());
    auto prepared = prepare_image(image, cache, 1 << 30);
    REQUIRE(prepared);
    fs::path root = prepared->rootfs;
    CHECK(read_bytes(root / "a/y") == "y");
    CHECK_FALSE(fs::exists(root / "a/x"));      // removed by a/.wh.x
    CHECK_FALSE(fs::exists(root / "b/z"));      // b is opaque in the upper layer
    CHECK(read_bytes(root / "b/new") == "new");
    CHECK(read_bytes(root / "c/d") == "d");
    CHECK_FALSE(fs::exists(root / "a/.wh.x"));  // no whiteout itself
    CHECK_FALSE(fs::exists(root / "b/.wh..wh..opq"));
    CHECK(fs::exists(cache / (fs::path(prepared->rootfs).parent_path().filename().string() + ".lock")));

    auto again = prepare_image(image, cache, 1 << 30);
    REQUIRE(again);
    CHECK(again->rootfs == prepared->rootfs);
    CHECK(entries(cache) == 1);
}

TEST_CASE("prepare_image refuses a corrupt layer, another architecture, a missing image") {
    REQUIRE(sodium_init() >= 0);
    TempDir dir;
    fs::path cache = dir.path / "cache";
    fs::path other = dir.path / "other";
    std::string arch = oci_architecture() == "s390x" ? "arm64" : "s390x";
    make_layout(other, {layer(dir.path / "l", {{"f", "f"}})}, arch);
    auto wrong = prepare_image(other, cache, 1 << 30);
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().message ==
          fmt::format("image {}: it is built for linux/{}; this node is {}/linux", other.string(), arch, oci_architecture()));

    fs::path corrupt = dir.path / "corrupt";
    std::string l = layer(dir.path / "l", {{"f", "f"}});
    make_layout(corrupt, {l}, oci_architecture());
    for (const auto& blob : fs::directory_iterator(corrupt / "blobs/sha256"))
        if (read_bytes(blob.path()) == l)
            write_bytes(blob.path(), l.substr(0, l.size() / 2));
    auto bad = prepare_image(corrupt, cache, 1 << 30);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("does not match its digest (a corrupt image)"));
    CHECK(entries(cache) == 0);  // nothing half-made stays

    auto missing = prepare_image((dir.path / "none").string(), cache, 1 << 30);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message == fmt::format("image {}: No such file or directory", (dir.path / "none").string()));
}

TEST_CASE("the cache evicts the least recently used entries not in use") {
    REQUIRE(sodium_init() >= 0);
    TempDir dir;
    fs::path cache = dir.path / "cache";
    std::map<char, fs::path> images;
    for (char c : std::string("ABCD")) {
        images[c] = dir.path / std::string(1, c);
        // 100 KB each, different.
        make_layout(images[c], {layer(dir.path / "l", {{"data", std::string(100000, c)}})}, oci_architecture());
    }
    const uint64_t bound = 250000;  // two images fit, not three
    auto root_of = [&](char c) {
        auto p = prepare_image(images[c], cache, bound);
        REQUIRE(p);
        return fs::path(p->rootfs);
    };
    fs::path a = root_of('A');
    fs::path b = root_of('B');
    usleep(20000);
    root_of('A');  // A is now newer than B
    auto held = prepare_image(images['B'], cache, bound);
    REQUIRE(held);
    std::optional<PreparedImage> b_in_use = std::move(*held);
    fs::path c = root_of('C');  // evicts: B is older but in use, so A goes
    CHECK(fs::exists(b));
    CHECK_FALSE(fs::exists(a));
    CHECK(fs::exists(c));
    b_in_use.reset();
    usleep(20000);
    fs::path d = root_of('D');  // B is the oldest, and free now
    CHECK_FALSE(fs::exists(b));
    CHECK(fs::exists(c));
    CHECK(fs::exists(d));
    CHECK(entries(cache) == 2);
}

TEST_CASE("shell option container: an image, mounts of clean absolute paths, per task only with it") {
    auto with = [](nlohmann::json options) { return read_shell_options({{"shell", {{"options", options}}}}); };
    auto ok = with({{"container", {{"image", "/img"}, {"mounts", {{{"source", "/a"}, {"destination", "/b"}, {"readonly", true}}}}}},
                    {"container-per-task", true}});
    REQUIRE(ok);
    CHECK(ok->container_image == "/img");
    REQUIRE(ok->container_mounts.size() == 1);
    CHECK((ok->container_mounts[0].source == "/a" && ok->container_mounts[0].destination == "/b" &&
           ok->container_mounts[0].readonly));
    CHECK(ok->container_per_task);
    CHECK(with({{"container", {{"image", "debian"}}}})->container_image == "debian");
    CHECK(read_shell_options(nlohmann::json::object())->container_image.empty());
    CHECK(with({{"container", "/img"}}).error().message ==
          R"(-o container="/img": expected {"image": IMAGE, "mounts": [...]})");
    for (auto [source, destination] : {std::pair{"a", "/b"}, {"/a", "b"}, {"/a/../etc", "/b"}, {"/a", "/"}, {"/a", "/b/./c"}})
        CHECK(with({{"container", {{"image", "/i"}, {"mounts", {{{"source", source}, {"destination", destination}}}}}}})
                  .error()
                  .message == fmt::format("--container-mount={}:{}: expected SOURCE:DESTINATION[:ro], both absolute "
                                          "paths without . or .. (and not /)",
                                          source, destination));
    CHECK(with({{"container-per-task", true}}).error().message == "-o container-per-task: only with --container");
}

TEST_CASE("prepare_image resolves every layer's links inside the image, never on the host") {
    REQUIRE(sodium_init() >= 0);
    TempDir dir;
    fs::path outside = dir.path / "outside";
    fs::create_directories(outside);
    fs::path image = dir.path / "image";
    // Layer 1: etc -> OUTSIDE (absolute) and up -> ../../.. ; layer 2:
    // etc/x, up/z, a whiteout of etc/y, and a link a -> etc of its own.
    fs::remove_all(dir.path / "s1");
    fs::create_directories(dir.path / "s1");
    fs::create_symlink(outside, dir.path / "s1/etc");
    fs::create_symlink("../../..", dir.path / "s1/up");
    REQUIRE(std::system(fmt::format("tar -C '{0}/s1' -cf '{0}/s1.tar' .", dir.path.string()).c_str()) == 0);
    std::ofstream(outside / "y") << "keep";
    fs::remove_all(dir.path / "s2");
    fs::create_directories(dir.path / "s2/etc");
    fs::create_directories(dir.path / "s2/up");
    std::ofstream(dir.path / "s2/etc/x") << "x";
    std::ofstream(dir.path / "s2/etc/.wh.y") << "";
    std::ofstream(dir.path / "s2/up/z") << "z";
    fs::create_symlink("etc", dir.path / "s2/a");
    REQUIRE(std::system(fmt::format("tar -C '{0}/s2' -cf '{0}/s2.tar' ./a ./etc ./up", dir.path.string()).c_str()) == 0);
    make_layout(image, {read_bytes(dir.path / "s1.tar"), read_bytes(dir.path / "s2.tar")}, oci_architecture());
    auto p = prepare_image(image, dir.path / "cache", 1 << 30);
    REQUIRE(p);
    fs::path root = p->rootfs;
    CHECK_FALSE(fs::exists(outside / "x"));  // nothing written on the host
    CHECK(fs::exists(outside / "y"));        // nor removed there
    CHECK(read_bytes(root / outside.relative_path() / "x") == "x");  // etc/x: where the link leads inside
    CHECK(read_bytes(root / "z") == "z");     // up/z: ".." stops at the root
    CHECK_FALSE(fs::exists(dir.path / "z"));

    // A link within the image (bin -> usr/bin, as Debian's) is followed.
    fs::path merged = dir.path / "merged";
    fs::remove_all(dir.path / "s1");
    fs::create_directories(dir.path / "s1/usr/bin");
    fs::create_symlink("usr/bin", dir.path / "s1/bin");
    REQUIRE(std::system(fmt::format("tar -C '{0}/s1' -cf '{0}/s1.tar' .", dir.path.string()).c_str()) == 0);
    make_layout(merged, {read_bytes(dir.path / "s1.tar"), layer(dir.path / "l2", {{"bin/tool", "t"}})}, oci_architecture());
    auto ok = prepare_image(merged, dir.path / "cache2", 1 << 30);
    REQUIRE(ok);
    CHECK(read_bytes(fs::path(ok->rootfs) / "usr/bin/tool") == "t");
}
