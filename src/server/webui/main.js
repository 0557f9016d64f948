// Wires the page together: the chat, the policy panel, the plots, and the
// API-key dialog that opens whenever the server answers 401.
import { AuthRequired, apiKey, getJson, setApiKey } from './api.js';
import { Chat } from './chat.js';
import { renderPolicy } from './panel.js';
import { renderPlot } from './plots.js';
import { Telemetry } from './telemetry.js';

const $ = (id) => document.getElementById(id);
const connection = $('connection');

function setConnection(state, text) {
  connection.dataset.state = state;
  connection.textContent = text;
}

function askForKey(message) {
  const dialog = $('key-dialog');
  const error = $('key-error');
  // A key was sent and refused: say so; none was sent: just ask.
  error.hidden = !apiKey();
  error.textContent = apiKey() ? `The server refused this key (${message}).` : '';
  $('key-button').hidden = false;
  if (!dialog.open) dialog.showModal();
}

const last = (points) => (points.length ? points[points.length - 1][1] : null);
const pct = (v) => `${Math.round(v * 100)}%`;

function renderSeries(s, now) {
  const common = { now, since: telemetry.since, windowMs: Number($('window').value) * 60000 };
  renderPlot($('plot-tps'), { ...common, series: [{ points: s.tps }] });
  renderPlot($('plot-acc'), { ...common, series: [{ points: s.acc }], dots: s.requestAcc, yMax: 1, format: pct });
  renderPlot($('plot-kv'), { ...common, series: [{ points: s.kv }], yMax: 1, format: pct });
  renderPlot($('plot-queue'), { ...common, series: [{ points: s.waiting }, { points: s.running }] });
  const tps = last(s.tps);
  const acc = last(s.acc);
  const kv = last(s.kv);
  $('now-tps').textContent = tps === null ? '' : tps.toFixed(0);
  $('now-acc').textContent = acc === null ? '' : pct(acc);
  $('now-kv').textContent = kv === null ? '' : pct(kv);
  $('now-queue').textContent = `${last(s.waiting) ?? 0} / ${last(s.running) ?? 0}`;
}

const telemetry = new Telemetry({
  onPolicy: (p) => {
    renderPolicy($('policy'), p);
    setConnection('ok', 'connected');
    if (!$('model-id').textContent) loadModel();  // /v1/models answers 503 while the model loads
  },
  onSeries: renderSeries,
  onError: (err) => {
    if (err instanceof AuthRequired) {
      setConnection('error', 'API key needed');
      askForKey(err.message);
      return;  // polling resumes when a key is entered
    }
    setConnection('error', `unreachable: ${err.message}`);
    setTimeout(() => telemetry.start(), 2000);
  },
});

new Chat({
  messages: $('messages'), form: $('chat-form'), prompt: $('prompt'), system: $('system-prompt'),
  temperature: $('temperature'), seed: $('seed'), maxTokens: $('max-tokens'), send: $('send'), clear: $('clear'),
}, { onAuth: askForKey, onFinished: (result) => telemetry.addRequest(result.timings) });

$('key-form').addEventListener('submit', () => {
  setApiKey($('key-input').value.trim());
  $('key-input').value = '';
  telemetry.start();
  loadModel();
});
$('window').addEventListener('change', () => renderSeries(telemetry.series, Date.now()));
$('key-button').addEventListener('click', () => {
  $('key-error').hidden = true;
  $('key-dialog').showModal();
});

let modelRequest = null;
function loadModel() {
  modelRequest ??= getJson('/v1/models')
    .then((models) => {
      $('model-id').textContent = models.data && models.data[0] ? models.data[0].id : '';
      if (apiKey()) $('key-button').hidden = false;
    })
    .catch(() => {})  // the telemetry reports errors (and asks for a key); it retries on its next answer
    .finally(() => { modelRequest = null; });
}

telemetry.start();
loadModel();
