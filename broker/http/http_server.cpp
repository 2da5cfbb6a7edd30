#include "broker/http/http_server.hpp"

#include <chrono>
#include <algorithm>
#include <deque>
#include <functional>
#include <set>

#include <fcntl.h>

#include <fmt/format.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "core/log.hpp"
#include "core/text.hpp"

namespace banyan {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kFirstTimeout = std::chrono::seconds(10);  // a new connection's first request
constexpr auto kIdleTimeout = std::chrono::seconds(60);   // keep-alive between requests
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // an answer going out
constexpr auto kPingPeriod = std::chrono::seconds(25);    // an event stream's keep-alive comment

}  // namespace

void http_barrier(const char* what, const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        log::error("http", "{}: {}", what, e.what());
    }
}

Result<tcp::endpoint> parse_listen_address(const std::string& listen) {
    auto bad = [&](std::string_view why) {
        return make_error(EINVAL, fmt::format("http.listen: '{}': {} (expected HOST:PORT, as 127.0.0.1:8080, "
                                              "[::1]:8080 or *:8080)",
                                              one_line(listen), why));
    };
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return bad("no port");
    std::string host = listen.substr(0, colon), port_text = listen.substr(colon + 1);
    if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
        return bad("the port is not a number");
    unsigned long port = std::stoul(port_text);
    if (port > 65535)
        return bad("the port is over 65535");
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (host == "*")
        host = "0.0.0.0";
    else if (host == "localhost")
        host = "127.0.0.1";
    boost::system::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec)
        return bad("the host is not a numeric address (nothing is resolved)");
    return tcp::endpoint(address, static_cast<unsigned short>(port));
}

class Session;

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
    State(Reactor& r, HttpServerLimits l, Handler h) : reactor(r), acceptor(r.io()), limits(l), handler(std::move(h)) {}
    void accept();

    Reactor& reactor;
    tcp::acceptor acceptor;
    HttpServerLimits limits;
    Handler handler;
    // Makes room for one more connection, as HttpServerLimits says: false
    // when there is none to be had.
    bool make_room();
    // Ends the oldest waiting connection that `pick` chooses; false: none.
    bool end_oldest(const std::function<bool(const Session&)>& pick);

    std::set<Session*> sessions;
    uint64_t accepted = 0;
    std::map<int, uint64_t> answered;
    bool stopped = false;
};

// One connection: read a request, hand it on, write its answer, again.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(tcp::socket socket, std::shared_ptr<HttpServer::State> server)
        : stream_(std::move(socket)), server_(std::move(server)), serial_(++server_->accepted) {
        server_->sessions.insert(this);
    }
    ~Session() { server_->sessions.erase(this); }
    bool head_request() const { return request_.method() == http::verb::head; }

    void read_next();
    void answer(http::response<http::string_body> response);
    void start_events(std::function<void()> on_close);
    void send_raw(std::string bytes);
    void end_events();
    void close();
    bool closed() const { return closed_; }
    const HttpRequest& request() const { return request_; }
    // Waiting for a request (not handling one, not streaming): what a
    // connection limit may end.
    bool waiting() const { return reading_ && !closed_; }
    uint64_t serial() const { return serial_; }
    const std::optional<uint32_t>& user() const { return user_; }
    void set_user(uint32_t userid);

  private:
    void on_read(beast::error_code ec);
    void fail_request(int status, std::string message);
    void write_next();
    void watch_for_close();
    void schedule_ping();

    beast::tcp_stream stream_;
    std::shared_ptr<HttpServer::State> server_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    HttpRequest request_;
    bool keep_alive_ = false;
    bool closed_ = false;
    // Events mode: raw bytes go out in order; the connection ends after.
    bool events_ = false;
    bool ending_ = false;
    bool writing_ = false;
    std::deque<std::string> outbox_;
    size_t outbox_bytes_ = 0;
    std::function<void()> on_close_;
    char probe_ = 0;
    bool first_ = true;
    bool reading_ = false;
    uint64_t serial_ = 0;             // in the order accepted: lower is older
    std::optional<uint32_t> user_;  // by its last token; none: anonymous
    std::optional<asio::steady_timer> ping_;
    Clock::time_point write_began_{};
};

namespace {

class Exchange : public HttpExchange {
  public:
    explicit Exchange(std::shared_ptr<Session> session) : session_(std::move(session)) {}
    ~Exchange() override {
        if (!answered_ && !session_->closed())
            respond(500, "application/json", R"({"status": 500, "message": "the request was left unanswered"})", {});
    }
    const HttpRequest& request() const override { return session_->request(); }
    void respond(int status, std::string content_type, std::string body,
                 std::map<std::string, std::string> headers) override {
        if (answered_)
            return;
        answered_ = true;
        http::response<http::string_body> response{static_cast<http::status>(status), 11};
        response.set(http::field::server, "banyan");
        response.set(http::field::content_type, content_type);
        response.set(http::field::cache_control, "no-store");
        for (auto& [name, value] : headers)
            response.set(name, value);
        size_t length = body.size();
        if (!session_->head_request())
            response.body() = std::move(body);
        response.prepare_payload();
        if (session_->head_request())
            response.content_length(length);  // HEAD: the length, no body
        session_->answer(std::move(response));
    }
    void start_events(std::function<void()> on_close) override {
        if (answered_)
            return;
        answered_ = true;
        session_->start_events(std::move(on_close));
    }
    void send_event(std::string_view name, std::string_view data) override {
        // data is one line (JSON text has no raw newline).
        session_->send_raw(fmt::format("event: {}\ndata: {}\n\n", name, data));
    }
    void end_events() override { session_->end_events(); }
    bool closed() const override { return session_->closed(); }
    void authenticated(uint32_t userid) override { session_->set_user(userid); }

  private:
    std::shared_ptr<Session> session_;
    bool answered_ = false;
};

}  // namespace

void Session::read_next() {
    parser_.emplace();
    parser_->body_limit(server_->limits.max_body);
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits.max_head));
    // The idle wait before a request, then the head and body within 10 s
    // of its first byte are one timeout here: Beast's stream has one.
    // A new connection has 10 s for its first request, a kept-alive one
    // 60 s for its next: a client that never finishes holds a slot briefly.
    stream_.expires_after(first_ ? kFirstTimeout : kIdleTimeout);
    first_ = false;
    reading_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void Session::on_read(beast::error_code ec) {
    reading_ = false;
    http_barrier("read", [&] {
        if (closed_)
            return;
        if (ec == http::error::body_limit)
            return fail_request(413,
                                fmt::format("the body is over {} bytes (http.max-body)", server_->limits.max_body));
        if (ec == http::error::header_limit)
            return fail_request(431, "the request head is too large");
        if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset ||
            ec == asio::error::operation_aborted || ec == asio::error::eof)
            return close();
        if (ec)
            return fail_request(400, fmt::format("malformed HTTP request: {}", ec.message()));
        request_ = parser_->release();
        keep_alive_ = request_.keep_alive();
        stream_.expires_never();  // the handler may take its time (requests to services)
        server_->handler(std::make_shared<Exchange>(shared_from_this()));
    });
}

// An answer to a request that could not be read whole: the connection
// cannot be trusted to be at a request boundary, so it closes after.
void Session::fail_request(int status, std::string message) {
    keep_alive_ = false;
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::content_type, "application/json");
    response.body() = nlohmann::json{{"status", status}, {"message", message}}.dump();
    response.prepare_payload();
    answer(std::move(response));
}

void Session::answer(http::response<http::string_body> response) {
    if (closed_)
        return;
    server_->answered[response.result_int()]++;
    response.keep_alive(keep_alive_);
    auto message = std::make_shared<http::response<http::string_body>>(std::move(response));
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *message, [self = shared_from_this(), message](beast::error_code ec, size_t) {
        http_barrier("write", [&] {
            if (ec || !self->keep_alive_)
                return self->close();
            self->read_next();
        });
    });
}

void Session::start_events(std::function<void()> on_close) {
    if (closed_) {
        if (on_close)
            on_close();
        return;
    }
    events_ = true;
    server_->answered[200]++;
    on_close_ = std::move(on_close);
    stream_.expires_never();
    // The body ends when the connection does (no length, no chunks):
    // what every EventSource reads.
    send_raw(
        "HTTP/1.1 200 OK\r\nServer: banyan\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        "Connection: close\r\n\r\n");
    watch_for_close();
    // A comment every 25 s: proxies keep the stream, and a peer gone
    // without a word, or one that stopped reading, is found.
    ping_.emplace(stream_.get_executor());
    schedule_ping();
}

void Session::schedule_ping() {
    ping_->expires_after(kPingPeriod);
    ping_->async_wait([self = shared_from_this()](beast::error_code ec) {
        http_barrier("stream ping", [&] {
            if (ec || self->closed_)
                return;
            if (self->writing_ && Clock::now() - self->write_began_ > kWriteTimeout)
                return self->close();  // not reading what we send
            self->send_raw(": ping\n\n");
            self->schedule_ping();
        });
    });
}

// A client of an event stream sends nothing more: a read that completes
// means it closed (or broke the protocol), and either way it is done.
void Session::watch_for_close() {
    stream_.socket().async_read_some(asio::buffer(&probe_, 1), [self = shared_from_this()](beast::error_code, size_t) {
        http_barrier("stream close", [&] { self->close(); });
    });
}

void Session::send_raw(std::string bytes) {
    if (closed_ || ending_)
        return;
    outbox_bytes_ += bytes.size();
    outbox_.push_back(std::move(bytes));
    if (outbox_bytes_ > server_->limits.max_stream_backlog) {
        log::info("http", "an event stream fell {} bytes behind: closed", outbox_bytes_);
        return close();
    }
    write_next();
}

void Session::end_events() {
    if (closed_)
        return;
    ending_ = true;
    if (!writing_ && outbox_.empty())
        close();
}

void Session::write_next() {
    if (writing_ || outbox_.empty() || closed_)
        return;
    writing_ = true;
    write_began_ = Clock::now();
    asio::async_write(stream_.socket(), asio::buffer(outbox_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                          http_barrier("stream write", [&] {
                              self->writing_ = false;
                              if (ec)
                                  return self->close();
                              self->outbox_bytes_ -= self->outbox_.front().size();
                              self->outbox_.pop_front();
                              if (self->outbox_.empty() && self->ending_)
                                  return self->close();
                              self->write_next();
                          });
                      });
}

void Session::close() {
    if (closed_)
        return;
    closed_ = true;
    server_->sessions.erase(this);  // a slot is free once closed, whoever still holds the session
    if (ping_)
        ping_->cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    if (auto fn = std::exchange(on_close_, nullptr))
        fn();
}

void Session::set_user(uint32_t userid) {
    if (user_ == userid)
        return;
    user_ = userid;
    size_t theirs = 0;
    for (Session* s : server_->sessions)
        theirs += s->user_ == userid;
    if (theirs > std::max<size_t>(1, server_->limits.max_connections / 8))
        server_->end_oldest([this, userid](const Session& s) { return &s != this && s.user() == userid; });
}

bool HttpServer::State::end_oldest(const std::function<bool(const Session&)>& pick) {
    Session* oldest = nullptr;
    for (Session* s : sessions)
        if (s->waiting() && pick(*s) && (!oldest || s->serial() < oldest->serial()))
            oldest = s;
    if (!oldest)
        return false;
    oldest->close();
    return true;
}

bool HttpServer::State::make_room() {
    size_t anonymous = 0;
    for (Session* s : sessions)
        anonymous += !s->user();
    // The new connection is anonymous too: it may not take a user's place.
    bool anonymous_full = anonymous + 1 > std::max<size_t>(1, limits.max_connections / 2);
    if (!anonymous_full && sessions.size() < limits.max_connections)
        return true;
    return end_oldest([](const Session& s) { return !s.user(); });
}

void HttpServer::State::accept() {
    acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        http_barrier("accept", [&] {
            if (self->stopped)
                return;
            if (!ec) {
                // (Asio accepts without SOCK_CLOEXEC: set before anything
                // else runs on this thread, which is the one that spawns.)
                fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
                if (!self->make_room()) {
                    beast::error_code ignored;
                    socket.close(ignored);  // over the limit: closed at once
                } else {
                    auto session = std::make_shared<Session>(std::move(socket), self);
                    session->read_next();
                }
            } else if (ec == asio::error::operation_aborted) {
                return;
            } else {
                // Out of file descriptors, say: try again in a moment, not at once.
                log::warning("http", "accept: {}", ec.message());
                auto retry = std::make_shared<asio::steady_timer>(self->acceptor.get_executor());
                retry->expires_after(std::chrono::milliseconds(500));
                retry->async_wait([self, retry](beast::error_code) {
                    if (!self->stopped)
                        self->accept();
                });
                return;
            }
            self->accept();
        });
    });
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(Reactor& reactor, const std::string& listen,
                                                      HttpServerLimits limits, Handler handler) {
    auto endpoint = parse_listen_address(listen);
    if (!endpoint)
        return endpoint.error();
    auto state = std::make_shared<State>(reactor, limits, std::move(handler));
    beast::error_code ec;
    state->acceptor.open(endpoint->protocol(), ec);
    // Never inherited: a job's task that accepted on it would read other
    // users' requests, their tokens with them.
    if (!ec && fcntl(state->acceptor.native_handle(), F_SETFD, FD_CLOEXEC) != 0)
        ec.assign(errno, boost::system::system_category());
    if (!ec)
        state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
        state->acceptor.bind(*endpoint, ec);
    if (!ec)
        state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        return make_error(EADDRINUSE, fmt::format("http.listen: cannot listen on {}: {}", listen, ec.message()));
    state->accept();
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

HttpServer::~HttpServer() {
    state_->stopped = true;
    beast::error_code ec;
    state_->acceptor.close(ec);
    // Sessions end as their pending operations complete: close them now.
    std::vector<Session*> open(state_->sessions.begin(), state_->sessions.end());  // close() erases
    for (Session* s : open)
        s->close();
}

std::string HttpServer::bound() const {
    beast::error_code ec;
    auto ep = state_->acceptor.local_endpoint(ec);
    if (ec)
        return "";
    return ep.address().is_v6() ? fmt::format("[{}]:{}", ep.address().to_string(), ep.port())
                                : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

size_t HttpServer::connections() const {
    return state_->sessions.size();
}

const std::map<int, uint64_t>& HttpServer::answered() const {
    return state_->answered;
}

}  // namespace banyan
