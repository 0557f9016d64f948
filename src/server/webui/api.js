// The server's own HTTP API, as the page uses it. The API key (when the server
// has one) lives in this tab's sessionStorage and goes out as a Bearer token;
// a 401 surfaces as AuthRequired so the page can ask for the key.
const KEY_STORAGE = 'tandem.apiKey';

export class AuthRequired extends Error {}

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || '';
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

async function errorMessage(res) {
  try {
    const body = await res.json();
    return (body.error && body.error.message) || `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

async function apiFetch(path, init = {}) {
  const headers = { ...(init.headers || {}) };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const res = await fetch(path, { ...init, headers, cache: 'no-store' });
  if (res.status === 401) throw new AuthRequired(await errorMessage(res));
  if (!res.ok) throw new Error(await errorMessage(res));
  return res;
}

export async function getJson(path) {
  return (await apiFetch(path)).json();
}

export async function getText(path) {
  return (await apiFetch(path)).text();
}

// One server-sent event's `data:` payloads.
function eventData(event) {
  return event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
}

// POST /v1/chat/completions with stream: true. Calls onDelta(text) for every
// content chunk as it arrives; resolves with {chunks, finishReason, usage,
// timings} after [DONE]. `signal` aborts the request (the server cancels it).
export async function streamChat(request, onDelta, signal) {
  const res = await apiFetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const result = { chunks: 0, finishReason: null, usage: null, timings: null };
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended before [DONE]');
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const data of eventData(event)) {
        if (data === '[DONE]') return result;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) {
          result.usage = chunk.usage;
          result.timings = chunk.timings || null;
        }
        for (const choice of chunk.choices || []) {
          const text = choice.delta && choice.delta.content;
          if (text) {
            result.chunks++;
            onDelta(text);
          }
          if (choice.finish_reason) result.finishReason = choice.finish_reason;
        }
      }
    }
  }
}

// Prometheus text format: "name{labels} value" per line; comments skipped.
// Returns a Map from "name{labels}" (as written) to a number (NaN for "NaN").
export function parsePrometheus(text) {
  const samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    if (space <= 0) continue;
    // Every series carries model_name="..." first (one model per server): drop it, so keys
    // read as tandem:name or tandem:name{other="labels"}.
    const key = line.slice(0, space).replace(/model_name="(?:[^"\\]|\\.)*",?/, '').replace('{}', '');
    samples.set(key, Number(line.slice(space + 1)));
  }
  return samples;
}
