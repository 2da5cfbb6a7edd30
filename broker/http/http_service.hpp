// HttpService: rank 0's HTTP face (doc/spec/http.md), off unless
// [http] listen is set. It owns the server, checks tokens, serves the
// dashboard's files, and turns each API request into requests to the
// instance's services as the token's user:
//   http_service.cpp  config, tokens (http.token, http.info), dispatch, files
//   rest_api.cpp      /api/v1/
//   metrics.cpp       /metrics
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "broker/http/http_server.hpp"

namespace banyan {

// One API call: the exchange and who makes it.
struct HttpCall {
    std::shared_ptr<HttpExchange> exchange;
    uint32_t uid = 0;
    uint32_t rolemask = role::none;
    bool anonymous = true;                     // no token (an open path)
    bool token_in_query = false;               // ?access_token= (the dashboard: set as a cookie)
    std::string query_token;
    std::string path;                          // without the query
    std::map<std::string, std::string> query;  // decoded
};

class HttpService {
  public:
    // Rank 0: serves when [http] listen is set, else only answers http.*
    // with ENOSYS naming the key. Other ranks: nothing. Error names the
    // config key or the token key file.
    static Result<std::unique_ptr<HttpService>> start(Broker& broker);
    ~HttpService();

  private:
    explicit HttpService(Broker& broker) : broker_(broker), history_timer_(broker.reactor()) {}
    Result<void> configure();
    void register_methods();
    void on_token(const Message& req);
    void on_request(std::shared_ptr<HttpExchange> exchange);
    // The token's user, or answers 401 itself and returns false.
    // `cookie_ok`: the dashboard's files also take the banyan_token cookie.
    bool authenticate(HttpCall& call, bool open, bool cookie_ok);
    void serve_file(const HttpCall& call);

    // rest_api.cpp
    void api(HttpCall call);
    void api_jobs(const HttpCall& call);
    void api_job(const HttpCall& call, uint64_t id);
    void api_eventlog(const HttpCall& call, uint64_t id);
    void api_profile(const HttpCall& call, uint64_t id);
    // SSE of job events: every visible job's, or one job's to its end.
    void stream_events(const HttpCall& call, std::optional<uint64_t> job);
    void api_output(const HttpCall& call, uint64_t id);
    void api_submit(const HttpCall& call);
    void api_cancel(const HttpCall& call, uint64_t id);
    void api_resources(const HttpCall& call);
    void api_events(const HttpCall& call);
    // GET history, GET usage: accounting.history / accounting.usage with
    // the query's parameters as their fields.
    void api_accounting(const HttpCall& call, bool history);
    // Asks `topic` of the instance as the caller; `ok` gets the answer's
    // payload, an error answer becomes the HTTP error that fits it.
    // `wrong_state`: the status of EINVAL (409 where it means the job's state).
    void ask(const HttpCall& call, std::string topic, nlohmann::json body, std::function<void(nlohmann::json)> ok,
             int wrong_state = 400);

    // metrics.cpp
    void metrics(const HttpCall& call);
    void sample_history();

    Broker& broker_;
    std::unique_ptr<HttpServer> server_;
    std::string listen_;
    std::vector<std::string> open_paths_;
    std::string token_key_;
    std::map<std::string, std::pair<std::string, std::string>> files_;  // URL path -> content type, content
    // The last hour, one sample every 10 s (GET /api/v1/activity).
    struct Sample {
        double t;
        uint64_t pending, running, completed;
    };
    std::deque<Sample> history_;
    uint64_t last_completed_ = 0;
    bool history_started_ = false;
    Timer history_timer_;
};

// A user's name, looked up once per uid (rest_api.cpp).
std::string user_name_of(uint32_t uid);
// The HTTP status of an error answer's errnum (http.md §3).
int http_status_of(int errnum, int wrong_state = 400);
// {"status": N, "message": TEXT} and its answer.
void respond_error(HttpExchange& exchange, int status, std::string_view message);
void respond_json(HttpExchange& exchange, int status, const nlohmann::json& body);

}  // namespace banyan
