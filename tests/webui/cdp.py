"""A small Chrome DevTools Protocol client over --remote-debugging-pipe.

Chromium reads commands from fd 3 and writes replies and events to fd 4, each
message one JSON object ended by a NUL byte. No port, no WebSocket, no package
beyond Python's standard library. One page target, flat sessions; every wait
has a deadline and fails with what it was waiting for.
"""

import base64
import fcntl
import json
import os
import select
import subprocess
import time


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, chromium, profile_dir, width=1100, height=760):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Above 10 so that moving them to 3 and 4 cannot overwrite one another.
        keep_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        keep_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

        def child_fds():
            os.dup2(keep_r, 3)
            os.dup2(keep_w, 4)

        args = [chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-breakpad',
                '--remote-debugging-pipe', f'--user-data-dir={profile_dir}', '--no-first-run',
                '--no-default-browser-check', '--disable-extensions', '--disable-background-networking',
                '--disable-component-update', '--disable-sync', '--mute-audio', '--hide-scrollbars',
                f'--window-size={width},{height}', 'about:blank']
        # The browser's own log, for the error message when it fails to start or dies.
        self._log_path = os.path.join(profile_dir, 'chromium.log')
        with open(self._log_path, 'wb') as log:
            self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child_fds,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        for fd in (to_chrome_r, from_chrome_w, keep_r, keep_w):
            os.close(fd)
        self._next_id = 0
        self._buffer = b''
        self.events = []  # every event received, in order: (sessionId, method, params)
        self.session = None
        target = self.call('Target.createTarget', {'url': 'about:blank'}, session=False)
        attached = self.call('Target.attachToTarget', {'targetId': target['targetId'], 'flatten': True},
                             session=False)
        self.session = attached['sessionId']
        for domain in ('Page', 'Runtime', 'Network', 'Log'):
            self.call(f'{domain}.enable')
        self.call('Emulation.setDeviceMetricsOverride',
                  {'width': width, 'height': height, 'deviceScaleFactor': 1, 'mobile': False})

    def close(self):
        try:
            self.call('Browser.close', session=False, timeout=5)
        except (CdpError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)

    def log_tail(self, lines=20):
        try:
            with open(self._log_path, errors='replace') as f:
                return ''.join(f.readlines()[-lines:])
        except OSError:
            return ''

    def _read(self, deadline):
        while b'\0' not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f'timed out waiting for the browser; its log ends:\n{self.log_tail()}')
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                data = os.read(self._from_chrome, 1 << 20)
                if not data:
                    raise CdpError(f'the browser closed its pipe (exit {self.proc.poll()}); its log ends:\n'
                                   f'{self.log_tail()}')
                self._buffer += data
        message, self._buffer = self._buffer.split(b'\0', 1)
        return json.loads(message)

    def call(self, method, params=None, session=True, timeout=30):
        self._next_id += 1
        message = {'id': self._next_id, 'method': method, 'params': params or {}}
        if session and self.session:
            message['sessionId'] = self.session
        try:
            os.write(self._to_chrome, json.dumps(message).encode() + b'\0')
        except BrokenPipeError:
            self.proc.wait(timeout=10)
            raise CdpError(f'the browser is gone (exit {self.proc.returncode}); its log ends:\n{self.log_tail()}')
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get('id') == self._next_id:
                if 'error' in reply:
                    raise CdpError(f'{method}: {reply["error"]}')
                return reply.get('result', {})
            if 'method' in reply:
                self.events.append((reply.get('sessionId'), reply['method'], reply.get('params', {})))

    def wait_event(self, method, timeout=30, since=0):
        """The first event `method` at index >= since; reads more until it comes."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(since, len(self.events)):
                if self.events[i][1] == method:
                    return self.events[i][2]
            since = len(self.events)
            reply = self._read(deadline)
            if 'method' in reply:
                self.events.append((reply.get('sessionId'), reply['method'], reply.get('params', {})))

    def navigate(self, url, timeout=30):
        mark = len(self.events)
        self.call('Page.navigate', {'url': url})
        self.wait_event('Page.loadEventFired', timeout, since=mark)

    def evaluate(self, expression, timeout=30):
        result = self.call('Runtime.evaluate', {'expression': expression, 'awaitPromise': True,
                                                'returnByValue': True}, timeout=timeout + 5)
        if 'exceptionDetails' in result:
            details = result['exceptionDetails']
            text = details.get('exception', {}).get('description') or details.get('text')
            raise CdpError(f'{text}\n  in: {expression[:300]}')
        return result['result'].get('value')

    def wait_for(self, condition, what, timeout=30):
        """Polls the JS expression `condition` in the page until it is truthy; returns its value."""
        script = f"""new Promise((resolve, reject) => {{
          const start = performance.now();
          const check = () => {{
            let value;
            try {{ value = ({condition}); }} catch (e) {{ value = undefined; }}
            if (value) resolve(value);
            else if (performance.now() - start > {timeout * 1000}) reject(new Error({json.dumps('timed out: ' + what)}));
            else setTimeout(check, 50);
          }};
          check();
        }})"""
        return self.evaluate(script, timeout=timeout)

    def screenshot(self, path):
        data = self.call('Page.captureScreenshot', {'format': 'png'})['data']
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))
