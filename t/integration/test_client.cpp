// banyan-test-client: raw RPCs and events against a running instance, for
// the integration tests (what no user command exposes on its own).
//   rpc TOPIC JSON [NODEID] [FLAGS]    prints the payload, or "error ERRNUM: TEXT" and exits 1;
//                                      JSON may be @FILE: the file's bytes are sent as they are;
//                                      FLAGS `streaming`: each answer's payload, to the stream's end
//   submit FILE                        submits the jobspec in FILE (YAML or JSON) as it is
//   events PREFIX COUNT                subscribes, prints "SEQ TOPIC" for COUNT events
//   publish TOPIC COUNT                publishes COUNT events
//   garbage                            sends bytes that are no message; exits 0 if dropped
//   intrude URI SERVER_KEY RANK        says hello over CURVE with a key pair of its own;
//                                      prints "refused" if no answer comes in 2 s
//   hello URI CERT RANK PROTOCOL       says hello over CURVE with the cluster's certificate,
//                                      as a broker of overlay protocol PROTOCOL; prints the
//                                      answer's protocol or "error ERRNUM: TEXT" (exits 1)
//   flood MIB                          writes MIB MiB of pings and reads no answer; prints
//                                      how much the broker took before it stopped reading
//   huge                               claims one message of 68 frames of 16 MiB; prints
//                                      how much was written before the broker dropped it
//   connections N [HOLD]               opens N connections; prints how many answer a ping,
//                                      and the first refusal; holds them HOLD seconds
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <zmq.hpp>

#include "core/client.hpp"
#include "core/curve_cert.hpp"
#include "core/text_file.hpp"
#include "sched/jobspec.hpp"

using namespace banyan;

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: banyan-test-client rpc TOPIC JSON|@FILE [NODEID [upstream|streaming]] | submit FILE | "
                 "events PREFIX COUNT | publish TOPIC COUNT | garbage | flood MIB | huge | connections N\n");
    return 2;
}

int die(const Error& e) {
    std::printf("error %d: %s\n", e.code, e.message.c_str());
    return 1;
}

// Each answer's payload on a line of its own, up to the last (the only
// one, but of a stream); an error answer as "error N: ..." (the end of a
// stream: "error 61: ..." for ENODATA).
int call(Client& client, const Message& req) {
    auto tag = client.send(req);
    if (!tag)
        return die(tag.error());
    for (;;) {
        auto msg = client.recv(std::chrono::seconds(30));
        if (!msg)
            return die(msg.error());
        if (msg->type != MessageType::response || msg->matchtag != *tag)
            continue;
        auto payload = response_payload(*msg);
        if (!payload)
            return die(payload.error());
        std::printf("%s\n", payload->dump().c_str());
        std::fflush(stdout);
        if (msg->is_final_response())
            return 0;
    }
}

int rpc(Client& client, int argc, char** argv) {
    uint32_t nodeid = argc > 4 ? static_cast<uint32_t>(std::stoul(argv[4])) : kNodeIdAny;
    Message req = Message::request(argv[2], nlohmann::json::object(), nodeid);
    if (argv[3][0] == '@') {
        // Raw text, not parsed here: the point may be text no parser should build.
        auto text = read_text_file(argv[3] + 1);
        if (!text)
            return die(text.error());
        req.payload = *text;
    } else {
        auto body = nlohmann::json::parse(argv[3], nullptr, false);
        if (body.is_discarded())
            return usage();
        req.payload = body.dump();
    }
    if (argc > 5 && std::string(argv[5]) == "upstream")
        req.flags |= msgflag::upstream;
    if (argc > 5 && std::string(argv[5]) == "streaming")
        req.flags |= msgflag::streaming;
    return call(client, req);
}

int submit(Client& client, const std::string& path) {
    auto text = read_text_file(path);
    if (!text)
        return die(text.error());
    auto doc = yaml_to_json(*text);
    if (!doc)
        return die(doc.error());
    return call(client, Message::request("job-manager.submit", {{"jobspec", *doc}}, 0));
}

int events(Client& client, const std::string& prefix, int count) {
    if (auto r = client.rpc("event.subscribe", {{"topic", prefix}}); !r)
        return die(r.error());
    std::printf("subscribed\n");
    std::fflush(stdout);
    for (int i = 0; i < count;) {
        auto msg = client.recv(std::chrono::seconds(30));
        if (!msg)
            return die(msg.error());
        if (msg->type != MessageType::event)
            continue;
        std::printf("%u %s\n", msg->sequence, msg->topic.c_str());
        std::fflush(stdout);  // a test waits for each line
        i++;
    }
    return 0;
}

// A raw connection to the instance's socket ($BANYAN_URI); -1 on failure.
int raw_connect() {
    std::string path = std::getenv("BANYAN_URI") ? std::getenv("BANYAN_URI") : "";
    if (path.rfind("local://", 0) == 0)
        path = path.substr(8);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Writes `bytes` over and over (up to `limit`) until the broker stops
// taking them for a second, or closes; returns how much it took.
size_t write_until_stopped(int fd, const std::string& bytes, size_t limit, bool& closed) {
    size_t written = 0;
    closed = false;
    while (written < limit) {
        pollfd pfd{fd, POLLOUT, 0};
        if (poll(&pfd, 1, 1000) <= 0)
            break;  // not taken for a second
        ssize_t n = send(fd, bytes.data() + written % bytes.size(), bytes.size() - written % bytes.size(),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            closed = true;
            break;
        }
        written += static_cast<size_t>(n);
    }
    return written;
}

int flood(size_t mib) {
    int fd = raw_connect();
    if (fd < 0)
        return 1;
    std::string pings;
    for (uint32_t tag = 1; pings.size() < (1u << 20); tag++) {
        Message ping = Message::request("broker.ping", {{"pad", std::string(200, 'x')}}, 0);
        ping.matchtag = tag;
        pings += encode_stream(ping);
    }
    bool closed = false;
    size_t written = write_until_stopped(fd, pings, mib << 20, closed);
    std::printf("flood: the broker took %zu MiB of %zu and %s\n", written >> 20, mib,
                closed                   ? "closed the connection"
                : written >= (mib << 20) ? "read it all"
                                         : "stopped reading");
    close(fd);
    return 0;
}

int huge() {
    int fd = raw_connect();
    if (fd < 0)
        return 1;
    auto u32 = [](uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                           static_cast<char>(v)};
    };
    std::string head = u32(68) + u32(16u << 20);
    bool closed = false;
    size_t written = write_until_stopped(fd, head, head.size(), closed);
    std::string zeros(1 << 20, '\0');  // the first frame's bytes, then the second's length (0)
    for (int i = 0; i < 16 && !closed; i++)
        written += write_until_stopped(fd, zeros, zeros.size(), closed);
    written += write_until_stopped(fd, u32(16u << 20) + std::string(1 << 20, 'x'), 64u << 20, closed);
    char c;
    bool dropped = closed || read(fd, &c, 1) == 0;
    std::printf("huge: %s after %zu MiB\n", dropped ? "dropped" : "not dropped", written >> 20);
    close(fd);
    return dropped ? 0 : 1;
}

int connections(int count, int hold_seconds) {
    std::vector<Client> held;
    std::string refusal;
    int answered = 0;
    for (int i = 0; i < count; i++) {
        auto c = Client::connect();
        if (!c)
            return die(c.error());
        if (auto r = c->rpc("broker.ping", nlohmann::json::object(), 0, std::chrono::seconds(10)); r)
            answered++;
        else if (refusal.empty())
            refusal = r.error().message;
        held.push_back(std::move(*c));
    }
    std::printf("connections: %d of %d answered%s%s\n", answered, count,
                refusal.empty() ? "" : "; refused: ", refusal.c_str());
    std::fflush(stdout);
    sleep(static_cast<unsigned>(hold_seconds));
    return 0;
}

int garbage() {
    // Raw bytes that claim a 2 GiB frame: the broker must drop the connection.
    int fd = raw_connect();
    if (fd < 0)
        return 1;
    const char bytes[] = "\x00\x00\x00\x01\x7f\xff\xff\xff";
    if (write(fd, bytes, 8) != 8)
        return 1;
    char buf[16];
    ssize_t n = read(fd, buf, sizeof buf);  // 0: the broker closed on us
    close(fd);
    std::printf("%s\n", n == 0 ? "dropped" : "not dropped");
    return n == 0 ? 0 : 1;
}

// Says HELLO to the broker at URI as RANK over CURVE, from a DEALER with
// the given key pair, and leaves the DEALER to be read.
void send_hello(zmq::socket_t& dealer, const std::string& uri, const std::string& server_key,
                const std::string& public_key, const std::string& secret_key, nlohmann::json hello_body) {
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::routing_id, hello_body["rank"].dump());
    dealer.set(zmq::sockopt::curve_serverkey, server_key);
    dealer.set(zmq::sockopt::curve_publickey, public_key);
    dealer.set(zmq::sockopt::curve_secretkey, secret_key);
    dealer.connect(uri);
    Message hello = Message::request("overlay.hello", std::move(hello_body), 0);
    hello.routed = true;
    hello.matchtag = 1;
    Frames frames = encode(hello);
    for (size_t i = 0; i < frames.size(); i++)
        dealer.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

int intrude(const std::string& uri, const std::string& server_key, const std::string& rank) {
    auto keys = CurveCert::generate();
    if (!keys)
        return die(keys.error());
    zmq::context_t context(1);
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    send_hello(dealer, uri, server_key, keys->public_key, keys->secret_key,
               {{"rank", std::stoi(rank)}, {"uuid", "intruder"}, {"version", "0.1.0"}, {"hostname", "intruder"}});
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(2000));
    std::printf("%s\n", (item.revents & ZMQ_POLLIN) ? "answered" : "refused");
    return (item.revents & ZMQ_POLLIN) ? 1 : 0;
}

int hello(const std::string& uri, const std::string& cert_path, const std::string& rank, const std::string& protocol) {
    auto cert = CurveCert::load(cert_path);
    if (!cert)
        return die(cert.error());
    zmq::context_t context(1);
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    send_hello(dealer, uri, cert->public_key, cert->public_key, cert->secret_key,
               {{"rank", std::stoi(rank)},
                {"uuid", "test-client"},
                {"version", "0.1.0"},
                {"protocol", std::stoi(protocol)},
                {"hostname", "test-client"}});
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) > 0) {
        Frames answer;
        zmq::message_t part;
        do {
            (void)dealer.recv(part);
            answer.emplace_back(part.to_string());
        } while (part.more());
        auto msg = decode(answer);
        if (!msg || msg->type != MessageType::response)
            continue;  // a heartbeat, say
        if (msg->errnum) {
            std::printf("error %u: %s\n", msg->errnum, msg->error_text().c_str());
            return 1;
        }
        auto body = msg->json();
        std::printf("joined: protocol %s\n",
                    body && body->contains("protocol") ? (*body)["protocol"].dump().c_str() : "?");
        return 0;
    }
    std::printf("no answer\n");
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2)
        return usage();
    std::string verb = argv[1];
    if (verb == "garbage")
        return garbage();
    if (verb == "intrude" && argc == 5)
        return intrude(argv[2], argv[3], argv[4]);
    if (verb == "hello" && argc == 6)
        return hello(argv[2], argv[3], argv[4], argv[5]);
    if (verb == "flood" && argc == 3)
        return flood(std::stoul(argv[2]));
    if (verb == "huge")
        return huge();
    if (verb == "connections" && (argc == 3 || argc == 4))
        return connections(std::atoi(argv[2]), argc == 4 ? std::atoi(argv[3]) : 0);
    auto client = Client::connect();
    if (!client)
        return die(client.error());
    if (verb == "rpc" && argc >= 4)
        return rpc(*client, argc, argv);
    if (verb == "submit" && argc == 3)
        return submit(*client, argv[2]);
    if (verb == "events" && argc == 4)
        return events(*client, argv[2], std::atoi(argv[3]));
    if (verb == "publish" && argc == 4) {
        for (int i = 0; i < std::atoi(argv[3]); i++)
            if (auto r = client->rpc("event.publish", {{"topic", argv[2]}, {"payload", {{"i", i}}}}); !r)
                return die(r.error());
        return 0;
    }
    return usage();
}
