// PromptStopServer: an httplib::Server whose idle keep-alive connections end
// as soon as stop_waiting() is called. cpp-httplib 0.11's own keep-alive wait
// polls the socket until its timeout (5 s here) without looking at the
// server's state, so one idle client connection held stop() — and the
// process's exit — for the whole timeout. Here the wait between two requests
// of a connection also watches a wake-up pipe; a request that is being read
// or answered is not touched (it ends as before, then the connection closes).
// A request must also arrive at a minimum rate (set_request_deadline).
// Internal to server/ (it needs httplib.h). stop_waiting() is thread-safe.
#pragma once

#include <httplib.h>

#include <atomic>

namespace tandem::server {

class PromptStopServer : public httplib::Server {
 public:
  PromptStopServer();
  ~PromptStopServer() override;

  // Idle connections close now, and every connection closes after its current request.
  void stop_waiting();
  bool stopping() const { return stopping_.load(); }

  // On this worker thread, the bytes its current request had sent when it passed the read
  // limit, or 0. cpp-httplib 0.11 checks its payload limit against Content-Length only: a chunked
  // body of any size was read into memory. A request may now read the payload limit twice over
  // (chunk framing) plus 1 MiB (its head); past that the read fails, and the error handler
  // answers 413 when this is set.
  static int64_t request_over_limit();

  // A request (its head and body) must arrive within `grace_ms` plus one second for every
  // `min_bytes_per_s` bytes received; a slower one is dropped. cpp-httplib's read timeout
  // bounds each read, not the request: a client sending one byte every few seconds held a
  // worker for ever, and 128 of them (one per worker) left the server answering nothing.
  void set_request_deadline(int grace_ms, int min_bytes_per_s) {
    request_grace_ms_ = grace_ms;
    request_min_rate_ = min_bytes_per_s;
  }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits until `sock` has a request's bytes (true), or the keep-alive timeout
  // passes, the peer closes or stop_waiting() is called (false).
  bool wait_for_request(socket_t sock) const;
  // Closes the sending side, then reads and discards what the client still sends until it closes
  // (or kLingerMs pass, or it is silent for kLingerIdleMs, or stop_waiting()). Needed when a reply
  // (413, 401) went out before the request's body was read: close() with unread bytes sends a TCP
  // reset, and the client's kernel then drops the reply it has not yet read; a client that sends
  // its whole body before reading saw "connection reset" instead of the 413. nginx's lingering close.
  void linger_until_peer_closes(socket_t sock) const;
  static constexpr int kLingerMs = 5000;
  static constexpr int kLingerIdleMs = 1000;
  // The most bytes one request may send (head, body and chunk framing).
  int64_t max_request_bytes() const;

  int wake_[2] = {-1, -1};  // a pipe; readable once stop_waiting() has written to it
  int request_grace_ms_ = 10000;
  int request_min_rate_ = 1024;
  std::atomic<bool> stopping_{false};
};

}  // namespace tandem::server
