#include "prompt_stop_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tandem::server {
namespace {

// Requests that moved at least this many bytes (body read + reply written) return freed memory.
constexpr int64_t kTrimAfterBytes = int64_t{1} << 20;

int to_ms(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

// poll() for `events` on `sock` for up to `ms`, retried on EINTR: >0 ready, 0 timeout, <0 error.
int wait_for(socket_t sock, short events, int ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms);
    if (r >= 0 || errno != EINTR) return r;
  }
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {};
  const socklen_t len = a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) == 0)
    ip = host;
  if (a.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
}

// When a request that began at `start` and has sent `received` bytes must have sent more:
// `grace_ms` after its start, plus a second for every `min_rate` bytes.
std::chrono::steady_clock::time_point request_deadline(std::chrono::steady_clock::time_point start,
                                                       int64_t received, int grace_ms, int min_rate) {
  return start + std::chrono::milliseconds(grace_ms + received * 1000 / std::max(min_rate, 1));
}

// The current request's bytes when it passed its read limit (request_over_limit()), per worker.
thread_local int64_t over_limit_bytes = 0;

// One request's view of a connection's socket as cpp-httplib's Stream, with
// a read buffer. Timeouts as httplib's SocketStream: each read waits up to
// the read timeout, each write up to the write timeout; reads also end at the
// request's deadline (request_deadline), which the bytes received push back.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(socket_t sock, int read_ms, int write_ms, int grace_ms, int min_rate, int64_t max_bytes)
      : sock_(sock),
        read_ms_(read_ms),
        write_ms_(write_ms),
        grace_ms_(grace_ms),
        min_rate_(min_rate),
        max_bytes_(max_bytes),
        start_(std::chrono::steady_clock::now()) {
    over_limit_bytes = 0;
  }

  bool buffered() const { return pos_ < end_; }
  bool is_readable() const override {
    if (buffered()) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            request_deadline(start_, received_, grace_ms_, min_rate_) - std::chrono::steady_clock::now())
            .count();
    if (left <= 0) {  // too slow: the read fails and httplib drops the request
      too_slow_ = true;
      return false;
    }
    return wait_for(sock_, POLLIN, static_cast<int>(std::min<int64_t>(read_ms_, left))) > 0;
  }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_ms_) > 0 && peer_alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (received_ >= max_bytes_) {
        over_limit_bytes = received_;
        return -1;
      }
      if (!is_readable()) return -1;
      const ssize_t n = recv_retrying(buffer_, sizeof(buffer_), 0);
      if (n <= 0) return n;
      received_ += n;
      pos_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buffer_ + pos_, n);
    pos_ += n;
    consumed_ += static_cast<int64_t>(n);
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n > 0) sent_ += n;
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  // Bytes of this request read and of its response written.
  int64_t bytes_moved() const { return received_ + sent_; }

  // Bytes a previous request's stream read past its end (a pipelined request), read first.
  void prefill(const std::string& bytes) {
    const size_t n = std::min(bytes.size(), sizeof(buffer_));
    std::memcpy(buffer_, bytes.data(), n);
    pos_ = 0;
    end_ = n;
  }
  // What was read from the socket but not handed to httplib: the start of the next request.
  std::string unread() const { return std::string(buffer_ + pos_, end_ - pos_); }

  // Called once the request's head is parsed (httplib reads it a byte at a time).
  void head_read(const httplib::Request& req) {
    head_bytes_ = consumed_;
    chunked_ = req.get_header_value("Transfer-Encoding") == "chunked";
    content_length_ = req.has_header("Content-Length")
                          ? std::strtoll(req.get_header_value("Content-Length").c_str(), nullptr, 10)
                          : 0;
  }
  // Whether httplib read the request's whole body, so that what follows is the next request.
  // A body a 401 never read is not: the connection must close rather than parse it as one.
  bool body_read() const {
    if (head_bytes_ < 0 || over_limit_bytes > 0) return false;
    if (chunked_) return consumed_ > head_bytes_;
    return consumed_ == head_bytes_ + content_length_;
  }

  // Whether the request's head was read and its body was not (refused unread, or past the limit):
  // the client may still be sending it. Not for a client dropped as too slow.
  bool body_left_unread() const { return head_bytes_ >= 0 && !body_read() && !too_slow_; }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t recv_retrying(char* ptr, size_t size, int flags) const {
    for (;;) {
      const ssize_t n = ::recv(sock_, ptr, size, flags);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
  // As httplib: a peer that closed shows as readable with nothing to peek.
  bool peer_alive() const {
    const int r = wait_for(sock_, POLLIN, 0);
    if (r == 0) return true;
    if (r < 0) return false;
    char c;
    return recv_retrying(&c, 1, MSG_PEEK) > 0;
  }

  socket_t sock_;
  int read_ms_, write_ms_;
  int grace_ms_, min_rate_;
  int64_t max_bytes_;
  std::chrono::steady_clock::time_point start_;
  int64_t received_ = 0, sent_ = 0;
  int64_t consumed_ = 0, head_bytes_ = -1, content_length_ = 0;
  bool chunked_ = false;
  mutable bool too_slow_ = false;
  char buffer_[4096];
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

int64_t PromptStopServer::request_over_limit() { return over_limit_bytes; }

int64_t PromptStopServer::max_request_bytes() const {
  constexpr int64_t kHeadBytes = int64_t{1} << 20;
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  const auto payload =
      static_cast<int64_t>(std::min<size_t>(payload_max_length_, static_cast<size_t>(kMax / 4)));
  return payload * 2 + kHeadBytes;
}

PromptStopServer::PromptStopServer() {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;  // then idle waits run to their timeout
}

PromptStopServer::~PromptStopServer() {
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void PromptStopServer::stop_waiting() {
  if (stopping_.exchange(true) || wake_[1] < 0) return;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);  // never read: stays readable
}

bool PromptStopServer::wait_for_request(socket_t sock) const {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  pollfd fds[2] = {{sock, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  for (;;) {
    if (stopping_.load()) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return false;
    const int r = ::poll(fds, wake_[0] >= 0 ? 2 : 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (fds[1].revents != 0) return false;
    return fds[0].revents != 0;  // data, or a hang-up the request read then reports
  }
}

bool PromptStopServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  std::string pipelined;  // the next request's first bytes, read with the previous one
  bool linger = false;    // the last request's body was not all read: the client may still be sending it
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET && !stopping_.load();
       --left) {
    if (pipelined.empty() && !wait_for_request(sock)) break;
    // A stream per request, as httplib's loop; what the previous one read past its request is
    // this one's start (httplib's own loop dropped it: a pipelined request got no answer).
    ConnectionStream stream(sock, to_ms(read_timeout_sec_, read_timeout_usec_),
                            to_ms(write_timeout_sec_, write_timeout_usec_), request_grace_ms_,
                            request_min_rate_, max_request_bytes());
    stream.prefill(pipelined);
    bool connection_closed = false;
    // The last request allowed, or a stop under way: the response says Connection: close.
    ok = process_request(stream, left == 1 || stopping_.load(), connection_closed,
                         [&stream](httplib::Request& req) { stream.head_read(req); });
    // A request or reply of megabytes was parsed or built as JSON: millions of small blocks,
    // freed now. glibc keeps freed memory in the worker's arena (up to 8 per core) rather than
    // returning it, so a dozen 8 MB bodies left the server at 3.3 GB resident for good (2 cores;
    // more arenas on larger machines). malloc_trim hands the free pages back.
    if (stream.bytes_moved() >= kTrimAfterBytes) malloc_trim(0);
    if (!ok || connection_closed || !stream.body_read()) {
      linger = stream.body_left_unread();
      break;
    }
    pipelined = stream.unread();
  }
  if (linger) linger_until_peer_closes(sock);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

void PromptStopServer::linger_until_peer_closes(socket_t sock) const {
  using clock = std::chrono::steady_clock;
  ::shutdown(sock, SHUT_WR);  // the reply is complete: FIN after it
  const auto deadline = clock::now() + std::chrono::milliseconds(kLingerMs);
  pollfd fds[2] = {{sock, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  char discard[16384];
  for (;;) {
    if (stopping_.load()) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return;
    const int r =
        ::poll(fds, wake_[0] >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left, kLingerIdleMs)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || fds[1].revents != 0) return;  // silent for kLingerIdleMs, an error, or a stop
    const ssize_t n = ::recv(sock, discard, sizeof(discard), 0);
    if (n == 0 || (n < 0 && errno != EINTR)) return;  // the peer closed (or reset): nothing left to lose
  }
}

}  // namespace tandem::server
