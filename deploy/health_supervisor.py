#!/usr/bin/env python3
"""Active /health checks for the replicas behind an nginx (standard library only;
docs/scaling.md, docs/adr/0025-replicas-behind-nginx.md).

Open-source nginx only checks passively (max_fails/fail_timeout). This supervisor polls each
replica's `GET /health` every `interval` seconds; after `fall` failed checks in a row (no
answer within `timeout`, or not 200: 503 while loading or draining) it marks the replica
`down` in the file nginx includes in its upstream block and reloads nginx (SIGHUP to the
master); after `rise` good checks in a row it puts it back. A `down` server stays in the hash
ring, so only its keys move, and they move back when it returns.

- `UpstreamFile`: writes the `server ...;` lines (atomically: a temp file, then rename).
- `Supervisor`: the polling thread; calls `apply(address, down)` on each change.

deploy/replicas.py uses both for its loopback fleet. Beside a production nginx:
  python3 deploy/health_supervisor.py --upstream-file /etc/nginx/tandem-upstream.conf \\
      --nginx-pid-file /run/nginx.pid 10.0.0.11:8080 10.0.0.12:8080
(all replicas start as `up`; the file is rewritten at once and nginx reloaded.)
"""

import argparse
import http.client
import os
import signal
import sys
import threading
import time


def parse_address(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("not HOST:PORT: %r" % text)
    return host, int(port)


class UpstreamFile:
    """The upstream's server lines, one per replica address, `down` for those marked down."""

    def __init__(self, path, addresses, max_fails=1, fail_timeout=10):
        self.path, self.addresses = path, list(addresses)
        self.max_fails, self.fail_timeout = max_fails, fail_timeout
        self.down = set()
        self.write()

    def write(self):
        lines = ["# written by deploy/health_supervisor.py; `down` = failed its active /health checks\n"]
        for a in self.addresses:
            state = " down" if a in self.down else ""
            lines.append("server %s max_fails=%d fail_timeout=%ds%s;\n" % (a, self.max_fails, self.fail_timeout, state))
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.replace(tmp, self.path)

    def set_down(self, address, down):
        """Returns True when this changed the file."""
        if (address in self.down) == down:
            return False
        (self.down.add if down else self.down.discard)(address)
        self.write()
        return True


def health_ok(address, timeout):
    host, port = parse_address(address)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        resp = conn.getresponse()
        resp.read()
        return resp.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class Supervisor(threading.Thread):
    """Polls every address's /health; `apply(address, down)` runs on each state change (on
    this thread) and `healthy[address]` flips once it has returned."""

    def __init__(self, addresses, apply, interval=0.25, timeout=1.0, fall=2, rise=2, on_change=None):
        super().__init__(daemon=True)
        self.addresses, self.apply = list(addresses), apply
        self.interval, self.timeout, self.fall, self.rise = interval, timeout, fall, rise
        self.on_change = on_change or (lambda address, up: None)
        self.healthy = {a: True for a in self.addresses}
        self._streak = {a: 0 for a in self.addresses}  # checks in a row that disagree with `healthy`
        self._halt = threading.Event()
        self.changes = []  # (monotonic time, address, up)

    def run(self):
        while not self._halt.wait(self.interval):
            for address in self.addresses:
                ok = health_ok(address, self.timeout)
                if ok == self.healthy[address]:
                    self._streak[address] = 0
                    continue
                self._streak[address] += 1
                if self._streak[address] >= (self.rise if ok else self.fall):
                    self._streak[address] = 0
                    self.apply(address, not ok)
                    self.healthy[address] = ok
                    self.changes.append((time.monotonic(), address, ok))
                    self.on_change(address, ok)

    def stop(self):
        self._halt.set()
        self.join(5)


def main():
    p = argparse.ArgumentParser(description="Active /health checks that mark replicas down in an nginx upstream")
    p.add_argument("--upstream-file", required=True, help="the file the nginx upstream block includes")
    p.add_argument("--nginx-pid-file", required=True, help="nginx's pid file (the master gets SIGHUP)")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--fall", type=int, default=2)
    p.add_argument("--rise", type=int, default=2)
    p.add_argument("--max-fails", type=int, default=1)
    p.add_argument("--fail-timeout", type=int, default=10)
    p.add_argument("replicas", nargs="+", help="HOST:PORT of each replica")
    args = p.parse_args()
    for a in args.replicas:
        parse_address(a)
    upstream = UpstreamFile(args.upstream_file, args.replicas, args.max_fails, args.fail_timeout)

    def reload_nginx():
        with open(args.nginx_pid_file) as f:
            os.kill(int(f.read().strip()), signal.SIGHUP)

    def apply(address, down):
        if upstream.set_down(address, down):
            reload_nginx()

    def on_change(address, up):
        print("health_supervisor: %s %s" % (address, "up" if up else "down"), flush=True)

    reload_nginx()
    sup = Supervisor(args.replicas, apply, args.interval, args.timeout, args.fall, args.rise, on_change)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sup.start()
    while not stop.wait(1.0):
        pass
    sup.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
