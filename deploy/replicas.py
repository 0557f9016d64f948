#!/usr/bin/env python3
"""N `tandem serve` replicas on loopback behind an nginx with prefix-affinity routing
(standard library only; docs/scaling.md, docs/adr/0025-replicas-behind-nginx.md).

- Each replica is `tandem serve --host 127.0.0.1 --port P <tandem args>` (bench/faults/
  faultlib.py's Server, which waits for /health), P a free port below the kernel's ephemeral
  range, so that a replica can be restarted on its port.
- nginx runs in the foreground (`daemon off`) from a generated config
  (deploy/nginx-tandem.conf.in) under its own prefix, on a loopback port. Its upstream hashes
  the X-Session-Id header (the client address without it) with consistent hashing.
- Health checks. Passive (nginx): a connection error, connect timeout or 503 moves the
  request to the next replica and counts against max_fails/fail_timeout. Active:
  deploy/health_supervisor.py's Supervisor polls every replica's /health and marks it
  `down` (or up) in the upstream file; here the reload also waits until nginx's old workers
  have stopped accepting (its error log, at level notice, says so).

Run by hand (Ctrl-C stops everything):
  python3 deploy/replicas.py --replicas 3 -- -m models/tandem-target -np 2 -t 1
Exit status 77 when nginx is not installed ($NGINX_BIN names another binary).
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bench", "faults"))
import faultlib as fl  # noqa: E402
import health_supervisor as hs  # noqa: E402

TEMPLATE = os.path.join(HERE, "nginx-tandem.conf.in")
SKIP = 77  # ctest's SKIP_RETURN_CODE


def find_nginx():
    """The nginx binary, or None: $NGINX_BIN if set (a path; one that is not executable means
    none), else nginx on PATH, else /usr/sbin/nginx (Debian's, often not on a user's PATH)."""
    forced = os.environ.get("NGINX_BIN")
    if forced is not None:
        return forced if os.access(forced, os.X_OK) else None
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def free_ports(n):
    """n ports of 127.0.0.1 that are free now, below the kernel's ephemeral range: outgoing
    connections (nginx's to the replicas, say) never take them, so a replica restarted on its
    port finds it free. Random, so that parallel runs rarely pick the same ones."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low = 10000 if ephemeral_low > 12000 else 1024
    ports = []
    for candidate in random.sample(range(low, ephemeral_low), min(4000, ephemeral_low - low)):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds
            try:
                s.bind((fl.HOST, candidate))
            except OSError:
                continue
        ports.append(candidate)
        if len(ports) == n:
            return ports
    raise RuntimeError("no %d free ports below %d" % (n, ephemeral_low))


def wait_for(pred, timeout, what, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(step)
    raise TimeoutError("timed out after %.0f s waiting for %s" % (timeout, what))


class Nginx:
    """One nginx master in the foreground, configured for the given replica addresses."""

    def __init__(self, nginx, prefix, addresses, upstream_header=True, max_fails=1, fail_timeout=10, port=None):
        self.nginx, self.prefix = nginx, prefix
        self.port = port or free_ports(1)[0]
        self.upstream_file = os.path.join(prefix, "upstream.conf")
        self.conf = os.path.join(prefix, "nginx.conf")
        self._lock = threading.Lock()
        for d in ("tmp", "logs"):
            os.makedirs(os.path.join(prefix, d), exist_ok=True)
        self.upstream = hs.UpstreamFile(self.upstream_file, addresses, max_fails, fail_timeout)
        fields = {
            "PREFIX": prefix,
            "UPSTREAM_FILE": self.upstream_file,
            "LISTEN": "%s:%d" % (fl.HOST, self.port),
            # As root, nginx would switch its workers to `nobody`, which cannot read the prefix.
            "USER_LINE": "user root;" if os.geteuid() == 0 else "",
            # Which replica answered (the test checks affinity with it); off in production.
            "UPSTREAM_HEADER_LINE": "add_header X-Upstream $upstream_addr always;" if upstream_header else "",
        }
        text = open(TEMPLATE).read()
        for k, v in fields.items():
            text = text.replace("@%s@" % k, v)
        with open(self.conf, "w") as f:
            f.write(text)
        with open(os.path.join(prefix, "stderr.log"), "w") as stderr:
            self.proc = subprocess.Popen([nginx, "-p", prefix, "-c", self.conf, "-g", "daemon off;"],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         preexec_fn=fl.exit_with_parent())
        try:
            wait_for(self._listening, 20, "nginx to listen on port %d" % self.port, step=0.05)
        except TimeoutError:
            self.stop()
            raise RuntimeError("nginx did not start:\n" + self.error_log())

    def _listening(self):
        if self.proc.poll() is not None:
            raise RuntimeError("nginx exited with %d:\n%s" % (self.proc.returncode, self.error_log()))
        try:
            socket.create_connection((fl.HOST, self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def error_log(self):
        try:
            with open(os.path.join(self.prefix, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def workers(self):
        """Pids of the master's worker processes (its children)."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == self.proc.pid and fields[0] != "Z":
                    out.append(int(pid))
            except (OSError, IndexError, ValueError):
                pass
        return out

    def set_down(self, address, down):
        """Marks a replica down (or up), rewrites the upstream and reloads. Returns once the
        old workers have stopped accepting (new connections see the new upstream)."""
        with self._lock:
            old = self.workers()
            if not self.upstream.set_down(address, down):
                return
            self.proc.send_signal(signal.SIGHUP)

            def old_workers_closed():
                log = self.error_log()
                return all(any(("%d#" % pid) in line and "gracefully shutting down" in line
                               for line in log.splitlines()) or not os.path.exists("/proc/%d" % pid)
                           for pid in old)

            wait_for(old_workers_closed, 20, "nginx to reload", step=0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: lets open streams finish
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Fleet:
    """Replicas + nginx + supervisor; `with Fleet(...) as f:` stops them all at the end."""

    def __init__(self, tandem, tandem_args, replicas=3, workdir=None, env=None, upstream_header=True,
                 supervisor_options=None, on_change=None):
        self.nginx_bin = find_nginx()
        if not self.nginx_bin:
            raise FileNotFoundError("nginx not found (apt-get install nginx)")
        self.workdir = workdir or tempfile.mkdtemp(prefix="tandem-replicas-")
        os.makedirs(self.workdir, exist_ok=True)
        self.replicas, self.nginx, self.supervisor = [], None, None
        try:
            ports = free_ports(replicas + 1)
            for i in range(replicas):
                log = os.path.join(self.workdir, "replica-%d.log" % i)
                self.replicas.append(fl.Server(tandem, tandem_args, env=env, log_path=log, with_parent=True,
                                               port=ports[i]))
            self.nginx = Nginx(self.nginx_bin, os.path.join(self.workdir, "nginx"), self.addresses(),
                               upstream_header=upstream_header, port=ports[-1])
            self.supervisor = hs.Supervisor(self.addresses(), self.nginx.set_down, on_change=on_change,
                                            **(supervisor_options or {}))
            self.supervisor.start()
        except BaseException:
            self.stop()
            raise

    @property
    def port(self):
        return self.nginx.port

    def addresses(self):
        return ["%s:%d" % (fl.HOST, r.port) for r in self.replicas]

    def stop(self):
        """Stops everything, each part even when another fails to stop; raises the first error."""
        errors = []
        for part in [self.supervisor, self.nginx] + list(self.replicas):
            if part is None:
                continue
            try:
                part.stop()
            except Exception as e:  # noqa: BLE001 - re-raised below, after the rest has stopped
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="arguments after -- go to every `tandem serve`")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--tandem", default=os.path.join(fl.repo_root(), "build", "src", "app", "tandem"))
    p.add_argument("--workdir", help="where nginx's prefix and the replicas' logs go (default: a temp dir)")
    p.add_argument("--no-upstream-header", action="store_true", help="do not add X-Upstream to responses")
    p.add_argument("tandem_args", nargs="*")
    args = p.parse_args()
    if not find_nginx():
        print("replicas: nginx not found (apt-get install nginx)", file=sys.stderr)
        return SKIP
    tandem_args = args.tandem_args or ["-m", os.path.join(fl.repo_root(), "models", "tandem-target")]

    def on_change(address, up):
        print("replicas: %s %s" % (address, "up" if up else "down (failed /health)"), flush=True)

    with Fleet(args.tandem, tandem_args, args.replicas, args.workdir, upstream_header=not args.no_upstream_header,
               on_change=on_change) as fleet:
        print("replicas: %s" % " ".join(fleet.addresses()), flush=True)
        print("replicas: proxy on http://%s:%d (nginx prefix %s)" % (fl.HOST, fleet.port, fleet.nginx.prefix),
              flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(1.0):
            pass
        print("replicas: stopping", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
