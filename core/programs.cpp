#include "core/programs.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace banyan {
namespace {

namespace fs = std::filesystem;

fs::path running_program() {
    std::error_code ec;
    auto self = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : self;
}

// PREFIX, from the directory of the running program, which is one of
// PREFIX/bin, PREFIX/sbin, PREFIX/libexec/banyan.
fs::path install_prefix() {
    fs::path dir = running_program().parent_path();
    if (dir.filename() == "banyan" && dir.parent_path().filename() == BANYAN_INSTALL_LIBEXECDIR)
        return dir.parent_path().parent_path();
    return dir.parent_path();
}

}  // namespace

std::string program_path(std::string_view name) {
    std::error_code ec;
    auto beside = running_program().parent_path() / name;
    if (fs::exists(beside, ec))
        return beside.string();
    const char* dir = name == "banyan-broker"                            ? BANYAN_INSTALL_SBINDIR
                      : name == "banyan" || name == "banyan-sched-query" ? BANYAN_INSTALL_BINDIR
                                                                         : BANYAN_INSTALL_LIBEXECDIR "/banyan";
    return (install_prefix() / dir / name).string();
}

std::string data_dir() {
    return (install_prefix() / BANYAN_INSTALL_DATADIR / "banyan").string();
}

std::string system_config_dir() {
    fs::path prefix = install_prefix();
    return prefix == "/usr" ? "/etc" : (prefix / "etc").string();
}

std::vector<std::string> environment_binding_now() {
    std::vector<std::string> env;
    for (char** e = environ; *e; e++)
        if (!std::string_view(*e).starts_with("LD_BIND_NOW="))
            env.emplace_back(*e);
    env.emplace_back("LD_BIND_NOW=1");
    return env;
}

}  // namespace banyan
