#include "broker/http/http_service.hpp"

#include <ctime>
#include <fstream>
#include <sstream>

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>
#include <boost/beast/core/string.hpp>

#include "core/byte_size.hpp"
#include "core/config.hpp"
#include "core/json_field.hpp"
#include "core/jwt.hpp"
#include "core/log.hpp"
#include "core/programs.hpp"

namespace banyan {
namespace {

constexpr double kDefaultTokenLife = 86400;
constexpr double kMaxTokenLife = 365 * 86400.0;

// The dashboard's files: only these names are served, so no path from a
// request is ever joined to a directory (http.md §6).
const std::map<std::string, std::pair<std::string, std::string>> kDashboardFiles = {
    {"/", {"index.html", "text/html; charset=utf-8"}},
    {"/index.html", {"index.html", "text/html; charset=utf-8"}},
    {"/app.js", {"app.js", "text/javascript; charset=utf-8"}},
    {"/style.css", {"style.css", "text/css; charset=utf-8"}},
};

int hex_value(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

// %XX decoded (and '+' as a space in a query); error on a broken escape.
Result<std::string> percent_decode(std::string_view text, bool query) {
    std::string out;
    for (size_t i = 0; i < text.size(); i++) {
        if (text[i] == '%') {
            int hi = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
            int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return make_error(EINVAL, fmt::format("a broken %-escape in '{}'", one_line(text)));
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else {
            out += query && text[i] == '+' ? ' ' : text[i];
        }
    }
    return out;
}

// A size: bytes, or a number with a unit as "1m" (core/byte_size.hpp).
Result<size_t> parse_size(const Config& config, std::string_view key, size_t fallback) {
    if (!config.has(key))
        return fallback;
    if (auto n = config.get_int(key, 1, int64_t{1} << 40); n)
        return static_cast<size_t>(*n);
    auto text = config.get_string(key);
    if (!text)
        return make_error(EINVAL, fmt::format("{}: {}: expected bytes, or a size as \"1m\"", config.source(), key));
    auto bytes = parse_byte_size(*text, BareSize::bytes, uint64_t{1} << 40);
    if (!bytes)
        return make_error(EINVAL, fmt::format("{}: {}: {}", config.source(), key, bytes.error().message));
    return static_cast<size_t>(*bytes);
}

}  // namespace

int http_status_of(int errnum, int wrong_state) {
    switch (errnum) {
        case EINVAL:
            return wrong_state;
        case EPROTO:
            return 400;
        case EPERM:
        case EACCES:
            return 403;
        case ENOENT:
        case ENOSYS:
            return 404;
        case EEXIST:
            return 409;
        case EDQUOT:
            return 429;
        case E2BIG:
        case EMSGSIZE:
            return 413;
        default:
            return 503;
    }
}

void respond_json(HttpExchange& exchange, int status, const nlohmann::json& body) {
    exchange.respond(status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void respond_error(HttpExchange& exchange, int status, std::string_view message) {
    respond_json(exchange, status, {{"status", status}, {"message", message}});
}

Result<std::unique_ptr<HttpService>> HttpService::start(Broker& broker) {
    if (broker.bootstrap().rank != 0)
        return std::unique_ptr<HttpService>();
    std::unique_ptr<HttpService> svc(new HttpService(broker));
    if (auto r = svc->configure(); !r)
        return r.error();
    svc->register_methods();
    return svc;
}

HttpService::~HttpService() {
    server_.reset();
}

Result<void> HttpService::configure() {
    const Config& config = broker_.bootstrap().config;
    auto listen = config.get_string("http.listen", "");
    if (!listen)
        return listen.error();
    if (listen->empty())
        return {};
    auto open = config.get_string_array("http.open", std::vector<std::string>{});
    if (!open)
        return open.error();
    for (const auto& p : *open)
        if (p != "/metrics" && p != "/")
            return make_error(EINVAL,
                              fmt::format("{}: http.open: '{}': expected \"/metrics\" or \"/\" (the dashboard's "
                                          "files); the API always needs a token",
                                          config.source(), one_line(p)));
    auto max_body = parse_size(config, "http.max-body", 1 << 20);
    if (!max_body)
        return max_body.error();
    auto key_path = config.get_string("http.token-key", broker_.bootstrap().statedir + "/http-token.key");
    if (!key_path)
        return key_path.error();
    auto key = load_or_make_token_key(*key_path);
    if (!key)
        return make_error(key.error().code, "http.token-key: " + key.error().message);
    token_key_ = std::move(*key);
    open_paths_ = *open;
    // The dashboard is read once, at start: serving it touches no disk.
    std::string web = data_dir() + "/web";
    for (const auto& [url, file] : kDashboardFiles) {
        std::ifstream in(web + "/" + file.first, std::ios::binary);
        if (!in)
            continue;
        std::ostringstream text;
        text << in.rdbuf();
        files_[url] = {file.second, text.str()};
    }
    if (files_.empty())
        log::warning("http", "no dashboard in {}: / answers 404", web);
    auto server = HttpServer::start(broker_.reactor(), *listen, {.max_body = *max_body},
                                    [this](std::shared_ptr<HttpExchange> ex) { on_request(std::move(ex)); });
    if (!server)
        return server.error();
    server_ = std::move(*server);
    listen_ = server_->bound();
    log::info("http", "serving on http://{}", listen_);
    sample_history();
    history_timer_.start_repeating(std::chrono::seconds(10), [this] { sample_history(); });
    return {};
}

void HttpService::register_methods() {
    broker_.register_method("http.info", false, [this](const Message& req) {
        if (!server_)
            return broker_.respond_error(req, ENOSYS, "this instance serves no HTTP: set [http] listen");
        broker_.respond(Message::response_to(req, {{"listen", listen_}, {"open", open_paths_}}));
    });
    broker_.register_method("http.token", false, [this](const Message& req) { on_token(req); });
}

void HttpService::on_token(const Message& req) {
    if (!server_)
        return broker_.respond_error(req, ENOSYS, "this instance serves no HTTP: set [http] listen");
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto uid = json_field<uint32_t>(*body, "uid", req.userid, "http.token");
    auto expires = json_field<std::string>(*body, "expires", "", "http.token");
    if (auto e = first_error(uid, expires))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*uid != req.userid && !(req.rolemask & role::owner))
        return broker_.respond_error(req, EPERM,
                                     "http.token: only the instance owner may make a token for another user");
    double life = kDefaultTokenLife;
    if (!expires->empty()) {
        auto d = parse_duration(*expires);
        if (!d || *d <= 0 || *d > kMaxTokenLife)
            return broker_.respond_error(
                req, EINVAL, fmt::format("--expires={}: expected a duration from 1s to 365d", one_line(*expires)));
        life = *d;
    }
    TokenClaims claims;
    claims.uid = *uid;
    claims.user = user_name_of(*uid);
    claims.issued = std::time(nullptr);
    claims.expires = claims.issued + static_cast<int64_t>(life);
    auto token = make_token(token_key_, claims);
    if (!token)
        return broker_.respond_error(req, token.error().code, token.error().message);
    broker_.respond(Message::response_to(
        req, {{"token", *token}, {"uid", claims.uid}, {"user", claims.user}, {"expires", claims.expires}}));
}

void HttpService::on_request(std::shared_ptr<HttpExchange> exchange) {
    const auto& request = exchange->request();
    std::string_view target(request.target().data(), request.target().size());
    HttpCall call;
    call.exchange = exchange;
    size_t q = target.find('?');
    auto path = percent_decode(target.substr(0, q), false);
    if (!path || path->empty() || (*path)[0] != '/' || path->find('\0') != std::string::npos)
        return respond_error(*exchange, 400, fmt::format("bad path '{}'", one_line(target.substr(0, q))));
    call.path = *path;
    if (q != std::string_view::npos) {
        std::string_view rest = target.substr(q + 1);
        while (!rest.empty()) {
            size_t amp = rest.find('&');
            std::string_view pair = rest.substr(0, amp);
            size_t eq = pair.find('=');
            auto name = percent_decode(pair.substr(0, eq), true);
            auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
            if (!name || !value)
                return respond_error(*exchange, 400, (!name ? name : value).error().message);
            if (!name->empty())
                call.query[*name] = *value;
            rest = amp == std::string_view::npos ? "" : rest.substr(amp + 1);
        }
    }
    bool is_get = request.method() == boost::beast::http::verb::get;
    bool is_head_or_get = is_get || request.method() == boost::beast::http::verb::head;
    auto open = [&](const char* p) {
        return std::find(open_paths_.begin(), open_paths_.end(), p) != open_paths_.end();
    };
    if (call.path.rfind("/api/v1/", 0) == 0) {
        if (!authenticate(call, false, false))
            return;
        return api(std::move(call));
    }
    if (call.path == "/metrics") {
        if (!is_head_or_get)
            return exchange->respond(405, "application/json", R"({"status": 405, "message": "/metrics: only GET"})",
                                     {{"Allow", "GET"}});
        if (!authenticate(call, open("/metrics"), false))
            return;
        return metrics(call);
    }
    if (kDashboardFiles.count(call.path)) {
        if (!is_head_or_get)
            return exchange->respond(405, "application/json",
                                     fmt::format(R"({{"status": 405, "message": "{}: only GET"}})", call.path),
                                     {{"Allow", "GET"}});
        if (!authenticate(call, open("/"), true))
            return;
        return serve_file(call);
    }
    respond_error(*exchange, 404, fmt::format("no such path: {}", one_line(call.path)));
}

bool HttpService::authenticate(HttpCall& call, bool open, bool cookie_ok) {
    const auto& request = call.exchange->request();
    std::string token;
    auto header = request.find(boost::beast::http::field::authorization);
    if (header != request.end()) {
        std::string_view value(header->value().data(), header->value().size());
        // (The scheme is case-insensitive: RFC 9110 §11.1.)
        if (value.size() < 7 || !boost::beast::iequals(boost::beast::string_view(value.data(), 7), "Bearer ")) {
            respond_error(*call.exchange, 401, "Authorization: expected 'Bearer TOKEN'");
            return false;
        }
        token = value.substr(7);
    } else if (auto q = call.query.find("access_token"); q != call.query.end()) {
        if (request.method() != boost::beast::http::verb::get) {
            respond_error(*call.exchange, 401, "access_token: only a GET may carry its token in the query");
            return false;
        }
        token = q->second;
        call.token_in_query = true;
    } else if (auto c = request.find(boost::beast::http::field::cookie); c != request.end() && cookie_ok) {
        // The dashboard's own files only: a browser sends no header with
        // <script src>, but the cookie set with the page (serve_file).
        std::string_view cookies(c->value().data(), c->value().size());
        size_t at = cookies.find("banyan_token=");
        if (at != std::string_view::npos) {
            std::string_view value = cookies.substr(at + 13);
            token = value.substr(0, value.find(';'));
        }
    }
    if (call.token_in_query)
        call.query_token = token;
    call.query.erase("access_token");
    if (token.empty()) {
        if (open)
            return true;
        call.exchange->respond(
            401, "application/json",
            nlohmann::json{{"status", 401},
                           {"message", "no token: send Authorization: Bearer TOKEN (made by banyan token create)"}}
                .dump(),
            {{"WWW-Authenticate", "Bearer"}});
        return false;
    }
    auto claims = check_token(token_key_, token, std::time(nullptr));
    if (!claims) {
        call.exchange->respond(401, "application/json",
                               nlohmann::json{{"status", 401}, {"message", claims.error().message}}.dump(),
                               {{"WWW-Authenticate", "Bearer error=\"invalid_token\""}});
        return false;
    }
    call.anonymous = false;
    call.uid = claims->uid;
    call.exchange->authenticated(claims->uid);
    call.rolemask = broker_.connector().role_of(claims->uid);
    return true;
}

void HttpService::serve_file(const HttpCall& call) {
    auto it = files_.find(call.path);
    if (it == files_.end())
        return respond_error(*call.exchange, 404,
                             fmt::format("the dashboard is not installed ({}/web)", one_line(data_dir())));
    std::map<std::string, std::string> headers;
    if (call.token_in_query)
        headers["Set-Cookie"] = fmt::format("banyan_token={}; Path=/; HttpOnly; SameSite=Strict", call.query_token);
    call.exchange->respond(200, it->second.first, it->second.second, headers);
}

}  // namespace banyan
