// Non-streamed generation replies over cpp-httplib. The run is collected inside
// the route handler, before anything is sent, so its status (200, or the 4xx/5xx
// an error carries) is the real HTTP status — a content provider would have
// committed "200" before the result was known. While it waits, the client's
// connection is polled so a client that goes away cancels its request (frees
// its KV) instead of generating on. Thread-safe: state lives in the request.
#pragma once

#include <functional>
#include <string>
#include <utility>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tandem::server {

// GenerationRun::collect's shape: polls `alive`; returns {status, body}, or
// {499, ""} when `alive` turned false (the run is then cancelled).
using CollectFn = std::function<std::pair<int, std::string>(const std::function<bool()>& alive)>;

// Collects (polling client_connected(req)) and writes status and JSON body to
// `res`. Returns false when the client went away (nothing useful written;
// the connection is closed).
bool answer_collected(const httplib::Request& req, httplib::Response& res, const CollectFn& collect);

// Whether the connection `req` came on is still open. cpp-httplib 0.11 gives a
// handler no socket, so it is found once by its address pair among this
// process's sockets; not found: always true (no disconnect detection).
std::function<bool()> client_connected(const httplib::Request& req);

}  // namespace tandem::server
