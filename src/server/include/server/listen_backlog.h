// listen_backlog.h — the accept queue of the server's listening socket
// (tandem_server; public so that a test can hold it to its promise).
//
// Debian's cpp-httplib is a compiled library built with its default
// CPPHTTPLIB_LISTEN_BACKLOG of 5: a burst of connections (64 clients starting
// at once, `vllm bench serve --request-rate inf`) overflows the accept queue,
// the kernel drops the extra SYNs and those clients retry after a second —
// a 1 s time to first token, or now and then a reset connection. httplib
// keeps the socket private, so after bind_to_port this finds the listening
// socket bound to `port` among the process's descriptors and calls listen()
// again with a larger backlog (Linux takes a second listen() as a new
// backlog, capped by net.core.somaxconn).
#pragma once

namespace tandem::server {

inline constexpr int kListenBacklog = 4096;

// The listening TCP sockets bound to `port` get `backlog`; returns how many.
int raise_listen_backlog(int port, int backlog = kListenBacklog);

}  // namespace tandem::server
