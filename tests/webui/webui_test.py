#!/usr/bin/env python3
"""The built-in web page end to end (docs/webui.md).

  webui_test.py http     GET / and its files over plain HTTP: Content-Type, caching
                         headers, no key needed for the page but for the API, --no-webui.
  webui_test.py browser  headless Chromium (Debian's `chromium`) drives the page: is asked
                         for the API key (a wrong one refused; a keyless server never asks),
                         sends chats and sees them streamed, Stop cancels, sees the panel
                         go profiling -> settled, and exactness_declined with its detail
                         (TANDEM_GEMM=splitk); plots drawn; nothing fetched from
                         elsewhere, no script errors. --screenshots DIR writes one PNG per
                         state (docs/webui-*.png were made so). Exits 77 (ctest: skipped)
                         when no chromium is installed.

Real `tandem serve` processes on the bundled models; Python's standard library only.
Environment: TANDEM_BIN (the binary), TANDEM_SOURCE_DIR (the repo), TANDEM_CHROMIUM
(optional: the browser to use, a name on PATH or a path; skipped when it is missing).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

ROOT = os.environ.get('TANDEM_SOURCE_DIR', os.getcwd())
TANDEM = os.environ.get('TANDEM_BIN', os.path.join(ROOT, 'build/src/app/tandem'))
TARGET = os.path.join(ROOT, 'models/tandem-target')
DRAFT = os.path.join(ROOT, 'models/tandem-draft')
KEY = 'sk-webui-test'
SKIP = 77


class Server:
    """`tandem serve` on a free port with a fresh policy cache."""

    def __init__(self, tmp, name, extra_args=(), env=None, drafter=True, key=True, wait_ready=True):
        args = [TANDEM, 'serve', '-m', TARGET, '--port', '0', '-t', '2', *extra_args]
        if key:
            args += ['--api-key', KEY]
        if drafter:
            args += ['-md', DRAFT]
        environment = {**os.environ, 'TANDEM_CACHE_DIR': tempfile.mkdtemp(dir=tmp, prefix=f'{name}-cache-')}
        environment.update(env or {})
        self.proc = subprocess.Popen(args, env=environment, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        listening = threading.Event()
        self.port = None

        def read_log():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r'listening on http://127\.0\.0\.1:(\d+)', line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    listening.set()
            listening.set()

        threading.Thread(target=read_log, daemon=True).start()
        if not listening.wait(60) or self.port is None:
            raise AssertionError(f'{name}: no listening line:\n{"".join(self.log)}')
        self.base = f'http://127.0.0.1:{self.port}'
        if wait_ready:
            self.wait_ready()

    def wait_ready(self):
        deadline = time.monotonic() + 60
        while request(self.base + '/health')[0] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f'not ready:\n{"".join(self.log)}')
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        assert code == 0, f'exit {code} on SIGTERM:\n{"".join(self.log)}'


def request(url, method='GET', headers=None, body=None):
    """(status, headers, body bytes); HTTP errors are answers, not exceptions."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except (ConnectionError, urllib.error.URLError):
        return 0, {}, b''


def api(server, path, body=None):
    status, _, data = request(server.base + path, 'POST' if body is not None else 'GET',
                              {'Authorization': f'Bearer {KEY}'}, body)
    assert status == 200, f'{path}: {status} {data[:300]}'
    return json.loads(data)


# ---------------------------------------------------------------- http

def check_http(tmp):
    s = Server(tmp, 'http', drafter=False)
    try:
        status, headers, body = request(s.base + '/')
        assert status == 200, status
        assert headers['Content-Type'] == 'text/html; charset=utf-8', headers['Content-Type']
        assert headers['Cache-Control'] == 'no-cache'
        assert headers['X-Content-Type-Options'] == 'nosniff'
        assert "default-src 'none'" in headers['Content-Security-Policy']
        etag = headers['ETag']
        assert re.fullmatch(r'"[0-9a-f]{16}"', etag), etag
        html = body.decode()
        assert '<title>tandem</title>' in html
        # Every file the page names is served, with its type; nothing from another host.
        refs = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert '/webui/main.js' in refs and '/webui/app.css' in refs, refs
        types = {'.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8'}
        scripts = []
        for ref in [r for r in refs if r.startswith('/webui/')]:
            st, h, b = request(s.base + ref)
            assert st == 200, (ref, st)
            assert h['Content-Type'] == types[os.path.splitext(ref)[1]], (ref, h['Content-Type'])
            assert h['ETag'] and h['Cache-Control'] == 'no-cache', ref
            scripts.append(b.decode())
        # main.js imports the other modules (which import api.js); each is served too.
        main_js = request(s.base + '/webui/main.js')[2].decode()
        modules = re.findall(r"from '\./([a-z]+\.js)'", main_js)
        assert len(modules) >= 4, modules
        for module in modules:
            st, h, b = request(s.base + '/webui/' + module)
            assert st == 200 and h['Content-Type'] == types['.js'], module
            scripts.append(b.decode())
        for text in [html, *scripts]:
            assert not re.search(r'https?://(?!www\.w3\.org/2000/svg)', text), 'a URL to another host'
        # Revalidation: the same ETag gives 304 and no body; a stale one the page again.
        st, h, b = request(s.base + '/', headers={'If-None-Match': etag})
        assert st == 304 and b == b'', st
        assert h['ETag'] == etag
        st, _, b = request(s.base + '/', headers={'If-None-Match': '"0000000000000000"'})
        assert st == 200 and b == body
        st, _, _ = request(s.base + '/', headers={'If-None-Match': f'W/{etag}'})
        assert st == 304, st
        # The page needs no key, the API does; an unknown file under /webui/ is not a page file.
        assert request(s.base + '/v1/models')[0] == 401
        assert request(s.base + '/v1/internal/mtp-policy')[0] == 401
        assert request(s.base + '/webui/nope.js')[0] == 401
        st, _, b = request(s.base + '/webui/nope.js', headers={'X-Api-Key': KEY})
        assert st == 404 and json.loads(b)['error']['code'] == 'not_found', (st, b)
        st, h, b = request(s.base + '/', 'HEAD')
        assert st == 200 and b == b'' and h['ETag'] == etag, (st, b)
        st, h, _ = request(s.base + '/', 'POST', {'X-Api-Key': KEY}, {})
        assert st == 405 and h['Allow'] == 'GET', st
    finally:
        s.stop()
    s = Server(tmp, 'nowebui', ['--no-webui'], drafter=False)
    try:
        st, _, b = request(s.base + '/', headers={'X-Api-Key': KEY})
        assert st == 404 and json.loads(b)['error']['code'] == 'not_found', (st, b)
        assert request(s.base + '/')[0] == 401, 'without the page, / is an API path like any other'
        assert request(s.base + '/webui/main.js', headers={'X-Api-Key': KEY})[0] == 404
    finally:
        s.stop()
    # The flag's variables: TANDEM_NO_WEBUI (and llama-server's LLAMA_ARG_NO_WEBUI), checked at start-up.
    s = Server(tmp, 'nowebui-env', env={'TANDEM_NO_WEBUI': 'yes'}, drafter=False, key=False)
    try:
        assert request(s.base + '/')[0] == 404
        assert request(s.base + '/v1/models')[0] == 200
    finally:
        s.stop()
    bad = subprocess.run([TANDEM, 'serve', '-m', TARGET, '--port', '0'], env={**os.environ, 'LLAMA_ARG_NO_WEBUI': 'perhaps'},
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "LLAMA_ARG_NO_WEBUI='perhaps'" in bad.stderr and 'not a boolean' in bad.stderr, \
        (bad.returncode, bad.stderr)
    # An embedded file's name is matched exactly ('.' is not a wildcard).
    s = Server(tmp, 'exact', drafter=False, key=False)
    try:
        assert request(s.base + '/webui/app.css')[0] == 200
        assert request(s.base + '/webui/appXcss')[0] == 404
    finally:
        s.stop()
    print('webui http: ok')


# ---------------------------------------------------------------- browser

def find_chromium():
    """TANDEM_CHROMIUM when set (and only it), else the first of Debian's and others' names on PATH."""
    chosen = os.environ.get('TANDEM_CHROMIUM')
    for name in [chosen] if chosen else ['chromium', 'chromium-browser', 'google-chrome']:
        if shutil.which(name):
            return shutil.which(name)
    return None


def js(value):
    return json.dumps(value)


class Page:
    def __init__(self, browser, screenshots):
        self.b = browser
        self.screenshots = screenshots

    def state(self):
        return self.b.evaluate("document.getElementById('policy').dataset.state")

    def field(self, name):
        return self.b.evaluate(f"document.querySelector('[data-field={js(name)}]').textContent")

    def enter_key(self, key):
        self.b.wait_for("document.getElementById('key-dialog').open", 'the API-key dialog', 20)
        self.b.evaluate(f"""(() => {{
          document.getElementById('key-input').value = {js(key)};
          document.getElementById('key-form').requestSubmit();
        }})()""")
        self.b.wait_for("!document.getElementById('key-dialog').open && "
                        "document.getElementById('connection').dataset.state === 'ok'", 'connected with the key')

    def settings(self, temperature, seed, max_tokens, system=''):
        self.b.evaluate(f"""(() => {{
          document.getElementById('temperature').value = {js(str(temperature))};
          document.getElementById('seed').value = {js(str(seed))};
          document.getElementById('max-tokens').value = {js(str(max_tokens))};
          document.getElementById('system-prompt').value = {js(system)};
        }})()""")

    def chat(self, text, timeout=60):
        """Sends `text` from the composer; returns the reply {text, chunks, cls, stats}."""
        n = self.b.evaluate("document.querySelectorAll('.msg.assistant, .msg.error').length")
        self.b.evaluate(f"""(() => {{
          document.getElementById('prompt').value = {js(text)};
          document.getElementById('chat-form').requestSubmit();
        }})()""")
        return self.b.wait_for(f"""(() => {{
          const m = document.querySelectorAll('#messages > .msg:not(.user)')[{n}];
          if (!m || !m.dataset.done) return null;
          return {{text: m.querySelector('.text').textContent, chunks: Number(m.dataset.chunks),
                   cls: m.className, stats: (m.querySelector('.stats') || {{}}).textContent || ''}};
        }})()""", f'the reply to {text!r}', timeout)

    def shot(self, name):
        if self.screenshots:
            # For the picture only: a few seconds of the tokens/s plot, not one point at its edge.
            self.b.wait_for("Number(document.getElementById('plot-tps').dataset.points) >= 4", 'plot history', 20)
            self.b.screenshot(os.path.join(self.screenshots, f'webui-{name}.png'))


def wait_plot_above_zero(page, plot_id, what):
    page.b.wait_for(f"Number(document.getElementById('{plot_id}').dataset.max) > 0", what)


PROMPTS = ['Call me Ishmael.', 'What is the whale?', 'Tell me about the sea.', 'Who is the captain?',
           'Where does the ship sail?', 'What did Queequeg say?', 'Describe the harpoon.',
           'What is in the hold?', 'How deep is the ocean?', 'Why do sailors sing?', 'What lies ahead?',
           'Who keeps the watch?', 'What is the weather?', 'Name the boats.', 'Where is Nantucket?',
           'What is spermaceti?']


def drive_profiling_to_settled(page, server):
    page.b.navigate(server.base + '/')
    # A wrong key is refused, and said so.
    page.b.wait_for("document.getElementById('key-dialog').open", 'the API-key dialog', 20)
    page.b.evaluate("""(() => {
      document.getElementById('key-input').value = 'sk-wrong';
      document.getElementById('key-form').requestSubmit();
    })()""")
    refusal = page.b.wait_for("document.getElementById('key-dialog').open && "
                              "!document.getElementById('key-error').hidden && "
                              "document.getElementById('key-error').textContent", 'the refusal of a wrong key')
    assert refusal.startswith('The server refused this key'), refusal
    page.enter_key(KEY)
    page.b.wait_for("document.getElementById('policy').dataset.state === 'profiling'", 'state profiling')
    assert page.field('samples').startswith('0 of 4'), page.field('samples')
    assert page.field('K (block size)') == '4'
    assert page.field('hardware').startswith('cpu:'), page.field('hardware')
    model = page.b.wait_for("document.getElementById('model-id').textContent", 'the model id')
    assert model == 'tandem-target', model

    # A streamed reply equals the server's own non-streamed answer to the same request.
    page.settings(temperature=0, seed=7, max_tokens=48, system='You are a sailor.')
    reply = page.chat(PROMPTS[0])
    assert reply['cls'] == 'msg assistant', reply
    assert reply['chunks'] > 1 and reply['text'], reply
    assert re.search(r'\d+ tokens .* tok/s', reply['stats']), reply['stats']
    direct = api(server, '/v1/chat/completions', {
        'messages': [{'role': 'system', 'content': 'You are a sailor.'}, {'role': 'user', 'content': PROMPTS[0]}],
        'temperature': 0, 'seed': 7, 'max_tokens': 48})
    assert direct['choices'][0]['message']['content'] == reply['text'], (direct, reply)
    print(f'webui browser: streamed reply in {reply["chunks"]} chunks equals the non-streamed one')

    body = api(server, '/v1/internal/mtp-policy')
    assert body['state'] == 'profiling', body
    page.b.wait_for(f"document.querySelector('[data-field=samples]').textContent.startsWith('{body['samples']} of')",
                    'the panel showing the samples')
    page.shot('profiling')

    # Each chat is a B=1 request the policy samples; it settles by 12 samples at the latest.
    page.settings(temperature=0.8, seed=11, max_tokens=48)
    page.b.evaluate("document.getElementById('clear').click()")
    sent = 0
    for prompt in PROMPTS[1:]:
        if api(server, '/v1/internal/mtp-policy')['state'] != 'profiling':
            break
        reply = page.chat(prompt)
        assert reply['cls'] == 'msg assistant' and reply['chunks'] >= 1, reply
        sent += 1
    page.b.wait_for("document.getElementById('policy').dataset.state === 'settled'", 'state settled', 30)
    body = api(server, '/v1/internal/mtp-policy')
    assert body['state'] == 'settled', body
    badge = page.b.evaluate("document.getElementById('policy-state').textContent")
    assert badge == f'settled · {body["verdict"]}', badge
    assert page.b.evaluate("document.getElementById('policy-why').textContent").startswith(
        f'Verdict {body["verdict"]}')
    speedup = page.field('estimated speedup')
    assert re.fullmatch(r'\d+\.\d\d× \[\d+\.\d\d, \d+\.\d\d\] vs threshold \d\.\d\d', speedup), speedup
    assert page.field('acceptance rate') == f'{round(body["acceptance_rate"] * 100)}%', page.field('acceptance rate')
    # The plots: tokens/s above zero, acceptance with this page's requests as dots.
    page.b.wait_for("Number(document.getElementById('plot-tps').dataset.points) >= 2", 'a tokens/s plot')
    wait_plot_above_zero(page, 'plot-tps', 'tokens/s above zero')
    wait_plot_above_zero(page, 'plot-acc', 'an acceptance rate above zero')
    assert page.b.evaluate("document.querySelectorAll('#plot-acc circle.dot').length") >= 1
    assert page.b.evaluate("Number(document.getElementById('plot-kv').dataset.points)") >= 2
    assert page.b.evaluate("Number(document.getElementById('plot-queue').dataset.points)") >= 2
    page.shot('settled')
    print(f'webui browser: profiling -> settled ({body["verdict"]}, {body["samples"]} samples, {sent} chats)')


def wait_metric(server, pattern, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        text = request(server.base + '/metrics', headers={'X-Api-Key': KEY})[2].decode()
        if re.search(pattern, text):
            return
        assert time.monotonic() < deadline, f'timed out: {what}\n{text}'
        time.sleep(0.05)


def drive_declined(page, server):
    page.b.navigate(server.base + '/')
    # A server without keys: the page never asks for one.
    page.b.wait_for("document.getElementById('connection').dataset.state === 'ok'", 'connected without a key')
    assert not page.b.evaluate("document.getElementById('key-dialog').open"), 'asked for a key'
    assert page.b.evaluate("document.getElementById('key-button').hidden"), 'offered a key'
    page.b.wait_for("document.getElementById('policy').dataset.state === 'exactness_declined'",
                    'state exactness_declined')
    detail = api(server, '/v1/internal/mtp-policy')['decline_detail']
    assert 'differs from the single-token chain' in detail, detail
    why = page.b.evaluate("document.getElementById('policy-why').textContent")
    assert why == f'Declined by the exactness probe: {detail}', why
    assert page.field('speculation') == 'off'
    page.settings(temperature=0, seed=3, max_tokens=32)
    reply = page.chat('What is the whale?')  # still served, by classic decode
    assert reply['cls'] == 'msg assistant' and reply['text'], reply
    assert 'drafts accepted' not in reply['stats'], reply['stats']
    wait_plot_above_zero(page, 'plot-tps', 'the chat in the tokens/s plot')
    assert page.b.evaluate("document.querySelectorAll('#plot-acc circle.dot').length") == 0, 'no drafts, no dots'
    page.shot('declined')
    print('webui browser: exactness_declined with its detail')

    # Stop: the request is cancelled on the server, not just hidden in the page. With -np 1 and
    # a long request holding the one slot, the page's request waits in the queue until stopped.
    # The holder streams (end of text suppressed) until this test closes its connection.
    holder = urllib.request.urlopen(urllib.request.Request(
        server.base + '/v1/completions', method='POST',
        headers={'X-Api-Key': KEY, 'Content-Type': 'application/json'},
        data=json.dumps({'prompt': 'Call me Ishmael.', 'max_tokens': 1900, 'temperature': 0, 'stream': True,
                         'logit_bias': {'0': -100, '2': -100}}).encode()), timeout=60)
    assert holder.readline().startswith(b'data: '), 'the holder streams'
    n = page.b.evaluate("document.querySelectorAll('#messages > .msg:not(.user)').length")
    page.b.evaluate("""(() => {
      document.getElementById('prompt').value = 'Tell me a story.';
      document.getElementById('chat-form').requestSubmit();
    })()""")
    wait_metric(server, r'tandem:num_requests_waiting\{model_name="[^"]*"\} 1\b', "the page's request queued")
    page.b.evaluate("document.getElementById('send').click()")  # the Send button is Stop meanwhile
    stats = page.b.wait_for(f"""(() => {{ const m = document.querySelectorAll('#messages > .msg:not(.user)')[{n}];
      return m.dataset.done && m.querySelector('.stats').textContent; }})()""", 'the stopped reply')
    assert stats == 'stopped', stats
    wait_metric(server, r'tandem:num_requests_waiting\{model_name="[^"]*"\} 0\b', 'the stopped request gone from the queue')
    wait_metric(server, r'finished_reason="abort"\} [1-9]', 'the stopped request counted as aborted')
    holder.close()
    wait_metric(server, r'tandem:num_requests_running\{model_name="[^"]*"\} 0\b', 'the holder cancelled')
    print('webui browser: Stop cancels the request on the server')


def drive_loading(page, server):
    """While the model loads (held for up to 30 s; stopped as soon as seen): worker_not_ready."""
    page.b.navigate(server.base + '/')
    page.b.wait_for("document.getElementById('policy').dataset.state === 'unavailable'", 'state unavailable')
    why = page.b.evaluate("document.getElementById('policy-why').textContent")
    assert why == 'The model is loading.', why
    assert page.field('speculation') == '—'  # mtp_enabled is null until the engine publishes
    print('webui browser: worker_not_ready while the model loads')


def check_browser(tmp, screenshots):
    chromium = find_chromium()
    if not chromium:
        wanted = os.environ.get('TANDEM_CHROMIUM') or 'chromium'
        print(f'SKIPPED: {wanted} is not installed (scripts/install-deps.sh installs Debian\'s `chromium`)')
        return SKIP
    browser = cdp.Browser(chromium, tempfile.mkdtemp(dir=tmp, prefix='chromium-'), 1100, 860)
    page = Page(browser, screenshots)
    origins = []
    try:
        s = Server(tmp, 'loading', env={'TANDEM_LOAD_DELAY_MS': '30000'}, drafter=False, key=False, wait_ready=False)
        origins.append(s.base)
        try:
            drive_loading(page, s)
        finally:
            s.stop()
        s = Server(tmp, 'profiling')
        origins.append(s.base)
        try:
            drive_profiling_to_settled(page, s)
        finally:
            s.stop()
        s = Server(tmp, 'declined', ['-np', '1'], env={'TANDEM_GEMM': 'splitk', 'TANDEM_ENABLE_MTP_B1': '1'},
                   key=False)
        origins.append(s.base)
        try:
            drive_declined(page, s)
        finally:
            s.stop()
        # Nothing from anywhere else, no script errors, no Content-Security-Policy violation.
        for _, method, params in browser.events:
            if method == 'Network.requestWillBeSent':
                url = params['request']['url']
                assert url == 'about:blank' or url.startswith('data:') or any(
                    url.startswith(o + '/') for o in origins), url
            assert method != 'Runtime.exceptionThrown', params
            if method == 'Log.entryAdded':
                assert 'Content Security Policy' not in params['entry'].get('text', ''), params
    finally:
        browser.close()
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('mode', choices=['http', 'browser'])
    parser.add_argument('--screenshots', help='write webui-<state>.png here')
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix='tandem-webui-')
    try:
        if args.mode == 'http':
            check_http(tmp)
            return 0
        return check_browser(tmp, args.screenshots)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
