// Client: a blocking connection to a broker's local socket, the one RPC
// helper of the CLI and of tests. Requests get a fresh matchtag; responses
// are paired with their request by it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/jobid.hpp"
#include "core/message.hpp"
#include "core/result.hpp"

namespace banyan {

class Client {
  public:
    // Connects to the socket at `uri` ("local:///path" or a plain path);
    // empty: $BANYAN_URI. "URI#ID1/ID2" reaches the nested instance of job
    // ID2 inside job ID1's, through the instance at URI: every request is
    // wrapped in job-manager.proxy, once per level (doc/spec/instances.md
    // §5), and its answer is the nested instance's. Error says which socket
    // and why, or that no instance was found when BANYAN_URI is unset.
    static Result<Client> connect(std::string uri = "");

    Client(Client&& other) noexcept;
    Client& operator=(Client&& other) noexcept;
    ~Client();

    // Sends a message; a request that wants a response gets a matchtag,
    // which is returned. While the broker does not take it (it reads a
    // connection only while that one takes its answers), what the broker
    // sends meanwhile is kept for recv(). A connection the broker refused
    // returns the broker's reason.
    Result<uint32_t> send(Message msg);
    // Waits for the next message; ETIMEDOUT after `timeout` when given,
    // ECONNRESET when the broker closed the connection.
    Result<Message> recv(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    // Sends a request and waits for its response: the payload, or the
    // error response turned into an Error (errnum, errstr).
    Result<nlohmann::json> rpc(std::string topic, const nlohmann::json& body = nlohmann::json::object(),
                               uint32_t nodeid = kNodeIdAny,
                               std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    const std::string& path() const { return path_; }
    // This connection's URI: local://PATH, with #ID1/ID2 through jobs.
    std::string uri() const;

  private:
    Client(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    // Reads what the broker has sent so far into the decoder, without
    // waiting.
    void take_available();

    int fd_ = -1;
    std::string path_;
    std::vector<JobId> via_;  // nested instances' jobs, outermost first
    uint32_t next_matchtag_ = 1;
    StreamDecoder decoder_;
};

// Turns an error response into an Error; a success response into its payload.
Result<nlohmann::json> response_payload(const Message& response);

}  // namespace banyan
