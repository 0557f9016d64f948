// raise_listen_backlog: a listening socket with a tiny accept queue completes
// only a few handshakes while nobody accepts; once raised, all of a burst of
// connections complete (the kernel queues them) — what keeps a burst of
// clients from waiting a second for a SYN retry (server/listen_backlog.h).
#include "server/listen_backlog.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace tandem::server {
namespace {

// Connects `count` non-blocking clients to 127.0.0.1:port; returns how many
// completed the handshake within `wait_ms` (nobody accepts them).
int connected_within(int port, int count, int wait_ms) {
  std::vector<int> fds;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    fds.push_back(fd);
  }
  usleep(static_cast<useconds_t>(wait_ms) * 1000);
  int done = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t len = sizeof error;
    if (poll(&p, 1, 0) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) ++done;
    close(fd);
  }
  return done;
}

// A loopback listener with a backlog of 1; its port.
int listener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at), 0);
  EXPECT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof at;
  getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len);
  *port = ntohs(at.sin_port);
  return fd;
}

TEST(ListenBacklog, ABurstOfConnectionsIsQueuedOnceRaised) {
  int small_port = 0, raised_port = 0;
  const int small = listener(&small_port), raised = listener(&raised_port);
  EXPECT_EQ(raise_listen_backlog(raised_port, 256), 1);
  EXPECT_LT(connected_within(small_port, 32, 200),
            32);  // the queue of 1 (+1) fills; the rest wait for a retry
  EXPECT_EQ(connected_within(raised_port, 32, 200), 32);
  EXPECT_EQ(raise_listen_backlog(0), 0) << "no socket listens on port 0";
  close(small);
  close(raised);
}

}  // namespace
}  // namespace tandem::server
