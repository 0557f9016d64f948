#include "server/collected_reply.h"

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

#include "core/log.h"

namespace tandem::server {
namespace {

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// The connected TCP socket whose local port and peer address/port are req's; -1 if none.
int find_connection(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    if (port_of(local) != req.local_port || port_of(peer) != req.remote_port) continue;
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&peer), peer_len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0 ||
        req.remote_addr != host)
      continue;
    found = fd;
    break;
  }
  closedir(dir);
  return found;
}

}  // namespace

std::function<bool()> client_connected(const httplib::Request& req) {
  const int fd = find_connection(req);
  if (fd < 0) {
    spdlog::debug("connection of {}:{} not found; a disconnect will not cancel its request", req.remote_addr,
                  req.remote_port);
    return [] { return true; };
  }
  // The handler's thread holds the connection open until the handler returns,
  // so `fd` stays this connection while the probe is in use.
  return [fd] {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return true;  // nothing pending: still there
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return false;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);  // a pipelined request: still there
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  };
}

bool answer_collected(const httplib::Request& req, httplib::Response& res, const CollectFn& collect) {
  auto [status, body] = collect(client_connected(req));
  if (status == 499) {
    res.status = 499;
    res.set_header("Connection", "close");
    res.set_content("{}", "application/json");  // non-empty: the error handler leaves it alone
    return false;
  }
  res.status = status;
  res.set_content(body, "application/json");
  return true;
}

}  // namespace tandem::server
