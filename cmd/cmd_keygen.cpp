// banyan keygen: write a new cluster certificate (CURVE key pair).
#include <fmt/format.h>

#include "cmd/cli_util.hpp"
#include "core/curve_cert.hpp"

namespace banyan::cli {

void add_keygen(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("keygen", "Write a new cluster certificate for the overlay's CURVE security");
    static std::string path;
    cmd->add_option("FILE", path, "where to write it (must not exist)")->required();
    cmd->callback([&exit_code] {
        CurveCert cert = must(CurveCert::generate());
        must(cert.save(path));
        fmt::print("wrote {} (public key {})\n", path, cert.public_key);
        exit_code = 0;
    });
}

}  // namespace banyan::cli
