"""Shared pieces of the fault and load drivers (standard library only).

- `Server`: starts `tandem serve` on a free loopback port (127.0.0.1 only), keeps its log,
  waits for /health, reads /metrics and the process's VmRSS, stops it.
- `Conn`: a minimal HTTP/1.1 client over a raw socket, so that a test controls exactly
  when and how the connection goes away (FIN or RST, before the response, after the
  headers, mid-stream, mid-chunk) and can check the chunked framing byte for byte.
- `Stream`: one request on its own thread, read to its end (or never read: a stalled client).
- `check_stream`: the rules a complete SSE stream of /v1/chat/completions or
  /v1/completions must follow (one final event per choice, usage, `data: [DONE]` last).

Nothing here talks to any address other than 127.0.0.1.
"""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

HOST = "127.0.0.1"
NO_EOS = {"0": -100, "2": -100}  # the bundled models' eos ids: keeps a stream going to max_tokens


def repo_root():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class ProtocolError(Exception):
    """The server broke HTTP or SSE framing (always a violation)."""


# --------------------------------------------------------------------------- server


def exit_with_parent(sig=signal.SIGTERM):
    """A Popen preexec_fn: the child gets `sig` when the thread that started it dies (Linux
    PR_SET_PDEATHSIG), so that a killed driver leaves no process behind. Start such children
    from the main thread: the signal follows the thread, not the process. libc is looked up
    here, in the parent: the child, forked from a threaded process, only makes the call."""
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(sig))  # PR_SET_PDEATHSIG = 1


class Server:
    def __init__(self, tandem, args, env=None, log_path=None, ready_timeout=120.0, wait_ready=True, port=0,
                 with_parent=False):
        # with_parent: SIGTERM to the server when the starting thread dies (exit_with_parent).
        self.log_lines = []
        self._log_file = open(log_path, "w") if log_path else None
        full_env = dict(os.environ)
        full_env.update(env or {})
        cmd = [tandem, "serve", "--host", HOST, "--port", str(port)] + list(args)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, preexec_fn=exit_with_parent() if with_parent else None)
        self.port = None
        self._port_seen = threading.Event()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if not self._port_seen.wait(ready_timeout) or self.port is None:
            self.kill()
            raise RuntimeError("tandem serve printed no 'listening on' line:\n" + self.log())
        if wait_ready:
            self.wait_ready(ready_timeout)

    def _read_log(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            self.log_lines.append(line)
            if self._log_file:
                self._log_file.write(line)
                self._log_file.flush()
            if self.port is None:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    self._port_seen.set()
        self._port_seen.set()

    def log(self):
        return "".join(self.log_lines)

    def wait_ready(self, timeout=120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tandem serve exited while loading:\n" + self.log())
            try:
                if http_get(self.port, "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("tandem serve not ready in %.0f s:\n%s" % (timeout, self.log()))

    def metrics(self):
        status, body = http_get(self.port, "/metrics", timeout=30)
        if status != 200:
            raise RuntimeError("/metrics answered %d" % status)
        return parse_metrics(body.decode())

    def rss_kb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def smaps(self):
        """[(start address, size kB, rss kB, name)] of every mapping ('' for anonymous ones)."""
        out = []
        try:
            with open("/proc/%d/smaps" % self.proc.pid) as f:
                cur = None
                for line in f:
                    head = line.split()
                    if "-" in head[0] and not head[0].endswith(":"):
                        start, end = (int(x, 16) for x in head[0].split("-"))
                        cur = [start, (end - start) // 1024, 0, head[5] if len(head) > 5 else ""]
                        out.append(cur)
                    elif head[0] == "Rss:" and cur is not None:
                        cur[2] = int(head[1])
        except OSError:
            pass
        return [tuple(m) for m in out]

    def malloc_stats(self, timeout=60.0):
        """glibc's totals {system, in_use} in bytes, by making the server call malloc_stats()
        under gdb (a pause of about a second; the report lands in the server's log). None when
        gdb is missing or cannot attach."""
        seen = len(self.log_lines)
        try:
            subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex", "call (void)malloc_stats()"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = self.log_lines[seen:]
            for i, line in enumerate(lines):
                if line.startswith("Total (incl. mmap):") and i + 2 < len(lines):
                    values = [int(x.split("=")[1]) for x in lines[i + 1:i + 3]]
                    return {"system": values[0], "in_use": values[1]}
            time.sleep(0.05)
        return None

    def signal(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout):
        """Exit status, or None if it is still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    def stop(self, timeout=20.0):
        """SIGTERM, then SIGKILL after `timeout`. Returns (exit status or None if killed, seconds)."""
        t0 = time.monotonic()
        self.signal(signal.SIGTERM)
        code = self.wait(timeout)
        took = time.monotonic() - t0
        self.kill()
        return code, took


def smaps_split(maps):
    """{anon, file, other} resident kB: anonymous and [heap] mappings (malloc arenas, the KV
    pool, repacked weights), file mappings (the mmapped model, libraries), the rest."""
    split = {"anon_kb": 0, "file_kb": 0, "other_kb": 0}
    for _, _, rss, name in maps:
        key = "anon_kb" if name in ("", "[heap]") else "file_kb" if name.startswith("/") else "other_kb"
        split[key] += rss
    return split


def smaps_growth(before, after, top=4):
    """The mappings whose resident size grew most between two smaps() snapshots."""
    was = {m[0]: m for m in before}
    rows = []
    for start, size, rss, name in after:
        old = was.get(start)
        grew = rss - (old[2] if old else 0)
        rows.append({"start": hex(start), "size_kb": size, "rss_kb": rss, "grew_kb": grew, "name": name or "[anon]",
                     "new": old is None})
    rows.sort(key=lambda r: -r["grew_kb"])
    return rows[:top]


def parse_metrics(text):
    """name{labels} -> value, with tandem's model_name label left out of the key."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        name = re.sub(r'model_name="(?:[^"\\]|\\.)*",?', "", name).replace("{}", "")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def tandem_args(target, drafter=None, threads=1, parallel=None, extra=()):
    args = ["-m", target, "-t", str(threads)]
    if drafter:
        args += ["-md", drafter]
    if parallel:
        args += ["-np", str(parallel)]
    return args + list(extra)


def temp_cache(prefix):
    """A private cache directory (TANDEM_CACHE_DIR) that goes when the process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def isolated_env(cache_dir):
    # Speculation pinned on (when a drafter is loaded) and a private policy cache, as the
    # e2e harness does: a verdict persisted by another run must not decide which path runs.
    return {"TANDEM_ENABLE_MTP_B1": "1", "TANDEM_CACHE_DIR": cache_dir}


# --------------------------------------------------------------------------- HTTP client


class Conn:
    """One HTTP/1.1 connection to 127.0.0.1:port. Reads are bounded by `timeout` each."""

    def __init__(self, port, timeout=120.0, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # a small receive buffer: a client that stops reading blocks the server's writes soon
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.closed = False

    def send_raw(self, data):
        self.sock.sendall(data)

    def send_request(self, method, path, body=None, headers=None):
        body_bytes = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % HOST, "Connection: keep-alive"]
        if body is not None:
            lines += ["Content-Type: application/json", "Content-Length: %d" % len(body_bytes)]
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body_bytes)

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ProtocolError("connection closed by the server (%d bytes unread)" % len(self.buf))
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 1 << 20:
                raise ProtocolError("header line over 1 MiB")
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_head(self):
        """(status, {lower-case header: value})."""
        status_line = self._line().decode("latin-1")
        m = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
        if not m:
            raise ProtocolError("bad status line %r" % status_line)
        headers = {}
        while True:
            line = self._line().decode("latin-1")
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(m.group(1)), headers

    def body_chunks(self, headers):
        """Yields the body's pieces: chunked (strictly checked, ends at the 0 chunk) or Content-Length."""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = self._line().decode("latin-1")
                try:
                    size = int(size_line.split(";")[0], 16)
                except ValueError:
                    raise ProtocolError("bad chunk size line %r" % size_line)
                if size == 0:
                    while self._line():  # trailers, then the empty line
                        pass
                    return
                data = self._exactly(size)
                if self._exactly(2) != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                yield data
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if n:
                yield self._exactly(n)
        else:
            raise ProtocolError("response has neither chunked encoding nor Content-Length")

    def read_body(self, headers):
        return b"".join(self.body_chunks(headers))

    def sse_events(self, headers):
        """Yields each SSE event's data (str) as it arrives; checks every event is `data: ...`."""
        pending = b""
        for piece in self.body_chunks(headers):
            pending += piece
            while b"\n\n" in pending:
                event, _, pending = pending.partition(b"\n\n")
                text = event.decode("utf-8")
                if not text.startswith("data: "):
                    raise ProtocolError("SSE event without 'data: ': %r" % text[:200])
                yield text[len("data: "):]
        if pending.strip():
            raise ProtocolError("stream ended inside an event: %r" % pending[:200])

    def read_some_raw(self, n):
        """Reads about n raw bytes off the socket (framing ignored): for a mid-chunk disconnect."""
        got = len(self.buf)
        while got < n:
            data = self.sock.recv(min(65536, n - got))
            if not data:
                break
            got += len(data)
        self.buf = b""

    def abort(self, rst=False):
        """Drops the connection: a FIN (close) or, with rst, a TCP reset (SO_LINGER 0)."""
        if self.closed:
            return
        self.closed = True
        try:
            if rst:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
        except OSError:
            pass

    def close(self):
        self.abort(False)


def http_get(port, path, timeout=10.0, headers=None):
    c = Conn(port, timeout)
    try:
        c.send_request("GET", path, headers=headers)
        status, h = c.read_head()
        return status, c.read_body(h)
    finally:
        c.close()


def http_post_json(port, path, body, timeout=120.0):
    c = Conn(port, timeout)
    try:
        c.send_request("POST", path, body)
        status, h = c.read_head()
        return status, h, c.read_body(h)
    finally:
        c.close()


class Stream(threading.Thread):
    """One streaming (or plain) request read to its end on its own thread."""

    def __init__(self, port, path, body, read=True, rcvbuf=None, headers=None, timeout=60.0):
        super().__init__(daemon=True)
        self.port, self.path, self.body, self.read = port, path, body, read
        self.rcvbuf, self.request_headers, self.timeout = rcvbuf, headers, timeout
        self.events, self.status, self.error, self.complete, self.raw = [], None, None, False, b""
        self.headers = {}  # the response's, lower-case names
        self.first_content = threading.Event()

    def run(self):
        try:
            conn = Conn(self.port, timeout=self.timeout, rcvbuf=self.rcvbuf)
            self.conn = conn
            conn.send_request("POST", self.path, self.body, self.request_headers)
            self.status, headers = conn.read_head()
            self.headers = headers
            if not self.read:
                return  # a stalled client: never reads; the test closes it at the end
            if not self.body.get("stream"):
                self.raw = conn.read_body(headers)
                self.complete = True
                conn.close()
                return
            for data in conn.sse_events(headers):
                self.events.append(data)
                if data != "[DONE]":
                    j = json.loads(data)
                    for c in j.get("choices", []):
                        if (c.get("text") or (c.get("delta") or {}).get("content")):
                            self.first_content.set()
            self.complete = True
            conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = "%s: %s" % (type(e).__name__, e)


# --------------------------------------------------------------------------- checks


def check_stream(events, chat, n=1, max_tokens=None, include_usage=False, finishes=("stop", "length")):
    """Checks a complete SSE stream (a list of event data strings). Returns
    {"texts", "finish", "usage"}; raises ProtocolError naming the first broken rule."""
    if not events or events[-1] != "[DONE]":
        raise ProtocolError("the stream does not end with data: [DONE] (last: %r)" % (events[-1:] or None))
    if "[DONE]" in events[:-1]:
        raise ProtocolError("data: [DONE] before the end")
    want_object = "chat.completion.chunk" if chat else "text_completion"
    texts = [""] * n
    finish = [None] * n
    started = [False] * n
    usage = None
    ids = set()
    for raw in events[:-1]:
        try:
            j = json.loads(raw)
        except ValueError:
            raise ProtocolError("event is not JSON: %r" % raw[:200])
        if "error" in j:
            raise ProtocolError("error event: %r" % raw[:300])
        if j.get("object") != want_object:
            raise ProtocolError("object %r, expected %r" % (j.get("object"), want_object))
        ids.add(j.get("id"))
        if usage is not None:
            raise ProtocolError("an event after the usage chunk")
        if not j.get("choices"):
            if "usage" not in j:
                raise ProtocolError("a chunk with no choices and no usage")
            if not include_usage:
                raise ProtocolError("usage chunk although include_usage was not asked for")
            if any(f is None for f in finish):
                raise ProtocolError("usage chunk before every choice finished")
            usage = j["usage"]
            continue
        for c in j["choices"]:
            i = c.get("index")
            if not isinstance(i, int) or not 0 <= i < n:
                raise ProtocolError("choice index %r out of range" % i)
            if finish[i] is not None:
                raise ProtocolError("choice %d: an event after its finish_reason" % i)
            if chat:
                delta = c.get("delta")
                if not isinstance(delta, dict):
                    raise ProtocolError("chat chunk without delta")
                if not started[i] and delta.get("role") != "assistant":
                    raise ProtocolError("choice %d: first delta has no role 'assistant'" % i)
                texts[i] += delta.get("content") or ""
            else:
                if not isinstance(c.get("text"), str):
                    raise ProtocolError("completion chunk without text")
                texts[i] += c["text"]
            started[i] = True
            if c.get("finish_reason") is not None:
                if c["finish_reason"] not in finishes:
                    raise ProtocolError("choice %d: finish_reason %r (allowed: %s)" % (i, c["finish_reason"], finishes))
                finish[i] = c["finish_reason"]
    if len(ids) != 1 or None in ids:
        raise ProtocolError("chunk ids not one non-null id: %r" % sorted(map(str, ids))[:4])
    for i, f in enumerate(finish):
        if f is None:
            raise ProtocolError("choice %d has no event with a finish_reason" % i)
    if include_usage:
        if usage is None:
            raise ProtocolError("include_usage asked for but no usage chunk")
        check_usage(usage, n, max_tokens, finish)
    return {"texts": texts, "finish": finish, "usage": usage}


def check_usage(usage, n, max_tokens, finish):
    ct, pt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    if not isinstance(ct, int) or not isinstance(pt, int) or pt <= 0:
        raise ProtocolError("usage malformed: %r" % usage)
    if usage.get("total_tokens") != ct + pt:
        raise ProtocolError("usage total_tokens != prompt + completion: %r" % usage)
    if max_tokens is not None:
        if ct > n * max_tokens:
            raise ProtocolError("completion_tokens %d > n * max_tokens %d" % (ct, n * max_tokens))
        if all(f == "length" for f in finish) and ct != n * max_tokens:
            raise ProtocolError("all choices finished 'length' but completion_tokens %d != %d" % (ct, n * max_tokens))


def check_completion_body(body, chat, n=1, max_tokens=None):
    """A non-streaming reply's JSON body; returns {"texts", "finish", "usage"}."""
    try:
        j = json.loads(body)
    except ValueError:
        raise ProtocolError("reply body is not JSON: %r" % body[:200])
    if j.get("object") != ("chat.completion" if chat else "text_completion"):
        raise ProtocolError("object %r" % j.get("object"))
    choices = j.get("choices") or []
    if len(choices) != n:
        raise ProtocolError("%d choices, expected %d" % (len(choices), n))
    finish = [c.get("finish_reason") for c in choices]
    if any(f not in ("stop", "length") for f in finish):
        raise ProtocolError("finish_reason %r" % finish)
    texts = [(c.get("message") or {}).get("content", "") if chat else c.get("text", "") for c in choices]
    check_usage(j.get("usage") or {}, n, max_tokens, finish)
    return {"texts": texts, "finish": finish, "usage": j["usage"]}


def run_cases(prog, cases, description, set_args):
    """The scripts' shared main: parses --tandem/--threads/--cases, hands the parsed
    arguments to `set_args`, runs each named case (a function returning a dict of figures),
    prints PASS/FAIL per case and exits 1 on any failure."""
    import argparse
    import sys
    names = ",".join(cases)
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tandem", default=os.path.join(repo_root(), "build", "src", "app", "tandem"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cases", default=names)
    args = p.parse_args()
    if not os.path.exists(args.tandem):
        sys.exit("%s: %s not found (--tandem)" % (prog, args.tandem))
    set_args(args)
    failed = 0
    for name in args.cases.split(","):
        t0 = time.monotonic()
        try:
            figures = cases[name]()
            print("%s: %-8s PASS (%.1f s) %s" % (prog, name, time.monotonic() - t0, json.dumps(figures)), flush=True)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("%s: %-8s FAIL (%.1f s): %s: %s" % (prog, name, time.monotonic() - t0, type(e).__name__, e),
                  flush=True)
    sys.exit(1 if failed else 0)
