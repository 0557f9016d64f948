// The chat: a conversation kept in the page, sent whole with each turn to
// POST /v1/chat/completions (stream: true) with the settings' system prompt,
// temperature, seed and max tokens. The reply grows as chunks arrive; its
// element carries data-chunks (chunks received) and data-done when finished.
import { AuthRequired, streamChat } from './api.js';

function bubble(messages, cls, text = '') {
  const div = document.createElement('div');
  div.className = `msg ${cls}`;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  div.append(body);
  messages.append(div);
  messages.scrollTop = messages.scrollHeight;
  return div;
}

function statsLine(result, ms) {
  const parts = [];
  const u = result.usage;
  const t = result.timings;
  if (u) parts.push(`${u.completion_tokens} tokens`);
  if (t && t.predicted_per_second) parts.push(`${t.predicted_per_second.toFixed(0)} tok/s`);
  if (t && t.draft_n) parts.push(`${t.draft_n_accepted} of ${t.draft_n} drafts accepted`);
  if (result.finishReason) parts.push(`finish: ${result.finishReason}`);
  parts.push(`${(ms / 1000).toFixed(2)} s`);
  return parts.join(' · ');
}

export class Chat {
  // el: {messages, form, prompt, system, temperature, seed, maxTokens, send, clear}
  constructor(el, { onAuth, onFinished }) {
    this.el = el;
    this.onAuth = onAuth;
    this.onFinished = onFinished;
    this.history = [];
    this.controller = null;
    el.form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (!this.controller) this.send();
    });
    // Stop is the same button while a reply streams; handled on click, before the form's
    // own checks, so it works with an empty composer.
    el.send.addEventListener('click', (e) => {
      if (!this.controller) return;
      e.preventDefault();
      this.controller.abort();
    });
    el.prompt.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        el.form.requestSubmit();
      }
    });
    el.clear.addEventListener('click', () => {
      if (this.controller) this.controller.abort();
      this.history = [];
      el.messages.replaceChildren();
    });
  }

  request() {
    const messages = [];
    const system = this.el.system.value.trim();
    if (system) messages.push({ role: 'system', content: system });
    messages.push(...this.history);
    const body = { messages, temperature: Number(this.el.temperature.value || 0) };
    if (this.el.seed.value !== '') body.seed = Number(this.el.seed.value);
    if (this.el.maxTokens.value !== '') body.max_tokens = Number(this.el.maxTokens.value);
    return body;
  }

  async send() {
    const text = this.el.prompt.value.trim();
    if (!text) return;
    this.el.prompt.value = '';
    bubble(this.el.messages, 'user', text);
    this.history.push({ role: 'user', content: text });
    const reply = bubble(this.el.messages, 'assistant');
    const body = reply.querySelector('.text');
    reply.dataset.chunks = '0';
    this.controller = new AbortController();
    this.el.send.textContent = 'Stop';
    this.el.send.classList.add('stop');
    const started = performance.now();
    let content = '';
    try {
      const result = await streamChat(this.request(), (delta) => {
        content += delta;
        body.textContent = content;
        reply.dataset.chunks = String(Number(reply.dataset.chunks) + 1);
        this.el.messages.scrollTop = this.el.messages.scrollHeight;
      }, this.controller.signal);
      this.history.push({ role: 'assistant', content });
      const stats = document.createElement('span');
      stats.className = 'stats';
      stats.textContent = statsLine(result, performance.now() - started);
      reply.append(stats);
      this.onFinished(result);
    } catch (err) {
      if (err.name === 'AbortError') {
        this.history.push({ role: 'assistant', content });
        reply.append(Object.assign(document.createElement('span'), { className: 'stats', textContent: 'stopped' }));
      } else {
        this.history.pop();  // the turn did not happen; the user can send it again
        reply.className = 'msg error';
        body.textContent = err.message;
        this.el.prompt.value = text;
        if (err instanceof AuthRequired) this.onAuth(err.message);
      }
    } finally {
      reply.dataset.done = 'true';
      this.controller = null;
      this.el.send.textContent = 'Send';
      this.el.send.classList.remove('stop');
    }
  }
}
