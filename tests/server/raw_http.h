// A raw HTTP client for the server tests: sends bytes as given (any version,
// framing or lie) on a fresh connection to 127.0.0.1 and reads until the
// server closes it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace tandem::server::testing {

// A connection to 127.0.0.1:`port` whose reads wait up to `timeout_s`; -1 if it cannot connect.
inline int connect_local(int port, int timeout_s = 10) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  timeval timeout{timeout_s, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(s);
    return -1;
  }
  return s;
}

// Sends `request` and returns everything read until the server closes the connection
// (or a read waits `timeout_s`); "" if it cannot connect.
inline std::string exchange(int port, const std::string& request, int timeout_s = 10) {
  const int s = connect_local(port, timeout_s);
  if (s < 0) return "";
  if (send(s, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    close(s);
    return "";
  }
  std::string reply;
  char buffer[4096];
  for (ssize_t n; (n = recv(s, buffer, sizeof(buffer), 0)) > 0;) reply.append(buffer, static_cast<size_t>(n));
  close(s);
  return reply;
}

// The status code of a reply ("HTTP/1.1 404 ..." -> 404); -1 if it has none.
inline int status_of(const std::string& reply) {
  return reply.size() > 12 && reply.compare(0, 5, "HTTP/") == 0 ? std::atoi(reply.c_str() + 9) : -1;
}

}  // namespace tandem::server::testing
