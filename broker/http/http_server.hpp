// HttpServer: HTTP/1.1 on the broker's own Asio loop (Boost.Beast), no
// thread of its own (doc/spec/http.md §1). It reads requests, bounded in
// head, body and time, and hands each to one handler, which answers it
// through its Exchange now or later (after requests to the instance's
// services), or turns it into a stream of Server-Sent Events. One request
// at a time per connection, kept alive between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

// One request and its answer. Whoever holds it may answer once; an
// exchange dropped unanswered answers 500 (a bug, never a hang).
class HttpExchange {
  public:
    virtual ~HttpExchange() = default;
    virtual const HttpRequest& request() const = 0;
    virtual void respond(int status, std::string content_type, std::string body,
                         std::map<std::string, std::string> headers = {}) = 0;
    // Answers 200 text/event-stream and keeps the connection for send();
    // `on_close` runs once when the client goes (or the server drops it).
    virtual void start_events(std::function<void()> on_close) = 0;
    // One event: "event: NAME\ndata: DATA\n\n". Dropped after close.
    virtual void send_event(std::string_view name, std::string_view data) = 0;
    // Ends the stream: the connection closes once what was sent is out.
    virtual void end_events() = 0;
    virtual bool closed() const = 0;
    // The request carried a valid token of `userid`: its connection counts
    // as that user's from now on (HttpServerLimits).
    virtual void authenticated(uint32_t userid) = 0;
};

// Connections count as anonymous until a request with a valid token comes,
// then as its user's. Past max_connections / 2 anonymous ones, or past
// max_connections in all, a new connection ends the oldest anonymous one
// that waits for a request (none: the new one is closed); past
// max_connections / 8 of one user, a user's connection ends that user's
// oldest waiting one. So nobody without a token holds more than half, and
// no user more than an eighth, however many connections they open.
struct HttpServerLimits {
    size_t max_body = 1 << 20;
    size_t max_connections = 256;
    size_t max_head = 16 << 10;
    size_t max_stream_backlog = 4 << 20;  // bytes of events a slow client may fall behind
};

class HttpServer {
  public:
    using Handler = std::function<void(std::shared_ptr<HttpExchange>)>;

    // Binds and listens on `listen` ("HOST:PORT", "[V6]:PORT", "*:PORT";
    // numeric addresses and localhost only: nothing is resolved on the
    // loop). Error names what is wrong.
    static Result<std::unique_ptr<HttpServer>> start(Reactor& reactor, const std::string& listen,
                                                     HttpServerLimits limits, Handler handler);
    ~HttpServer();

    // "ADDRESS:PORT" as bound (the port chosen for port 0).
    std::string bound() const;
    size_t connections() const;
    // Requests answered since start, by status (banyan_http_requests_total).
    const std::map<int, uint64_t>& answered() const;

    struct State;  // shared with the connections (http_server.cpp)

  private:
    explicit HttpServer(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

// Runs `fn`, logging what it throws: every callback of the HTTP code (Asio
// completions, answers of the services) is an exception barrier, so a bug
// in one request's handling never unwinds into the broker's loop.
void http_barrier(const char* what, const std::function<void()>& fn);

// "HOST:PORT" into an endpoint. Error: "LISTEN: expected HOST:PORT ...".
Result<boost::asio::ip::tcp::endpoint> parse_listen_address(const std::string& listen);

}  // namespace banyan
