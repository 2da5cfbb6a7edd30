#include "resource/synthetic.hpp"

#include <fmt/format.h>

#include "core/byte_size.hpp"
#include "core/hostlist.hpp"

namespace banyan {

Result<std::vector<NodeDescription>> parse_synthetic_cluster(std::string_view text) {
    auto bad = [&](std::string why) { return make_error(EINVAL, fmt::format("synthetic '{}': {}", text, why)); };
    // The hostlist may contain ':' only after its brackets close, so split
    // at the first ": " (or ':' outside brackets).
    size_t colon = std::string_view::npos;
    int depth = 0;
    for (size_t i = 0; i < text.size(); i++) {
        depth += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
        if (text[i] == ':' && depth == 0) {
            colon = i;
            break;
        }
    }
    if (colon == std::string_view::npos)
        return bad("expected HOSTLIST: TYPE:COUNT,...");
    auto hosts = HostList::parse(text.substr(0, colon));
    if (!hosts)
        return bad(hosts.error().message);
    if (hosts->empty())
        return bad("no hosts");
    std::string_view levels = text.substr(colon + 1);
    while (!levels.empty() && levels.front() == ' ')
        levels.remove_prefix(1);

    uint64_t sockets = 1;
    uint64_t cores = 0;
    uint64_t gpus = 0;
    uint64_t memory = 0;
    size_t start = 0;
    while (start <= levels.size()) {
        size_t comma = levels.find(',', start);
        std::string_view item = levels.substr(start, comma == levels.npos ? levels.npos : comma - start);
        size_t sep = item.find(':');
        if (sep == std::string_view::npos)
            return bad(fmt::format("'{}': expected TYPE:COUNT", item));
        std::string_view type = item.substr(0, sep);
        std::string_view value = item.substr(sep + 1);
        if (type == "memory") {
            auto size = parse_byte_size(value, BareSize::bytes);
            if (!size)
                return bad(size.error().message);
            memory = *size;
        } else {
            auto count = parse_decimal(value, 1u << 16, fmt::format("'{}'", item));
            if (!count)
                return bad(count.error().message);
            if (type == "socket")
                sockets = *count;
            else if (type == "core")
                cores = *count;
            else if (type == "gpu")
                gpus = *count;
            else
                return bad(fmt::format("unknown type '{}' (expected socket, core, gpu or memory)", type));
        }
        if (comma == levels.npos)
            break;
        start = comma + 1;
    }
    if (cores == 0 || sockets == 0)
        return bad("a node needs at least one socket and one core");

    std::vector<NodeDescription> nodes;
    nodes.reserve(hosts->size());
    for (size_t r = 0; r < hosts->size(); r++) {
        NodeDescription n;
        n.rank = static_cast<uint32_t>(r);
        n.hostname = (*hosts)[r];
        for (uint64_t s = 0; s < sockets; s++) {
            SocketDescription sock;
            sock.cores = IdSet::range(static_cast<uint32_t>(s * cores), static_cast<uint32_t>((s + 1) * cores - 1));
            if (gpus > 0)
                sock.gpus = IdSet::range(static_cast<uint32_t>(s * gpus), static_cast<uint32_t>((s + 1) * gpus - 1));
            sock.memory = memory;
            n.sockets.push_back(std::move(sock));
        }
        nodes.push_back(std::move(n));
    }
    return nodes;
}

}  // namespace banyan
