// Polls GET /metrics and GET /v1/internal/mtp-policy once a second and keeps
// the last 15 minutes of derived series: tokens/s and acceptance rate (from
// counter differences between two polls), KV-cache usage and the queue
// (gauges). Also keeps one point per chat request this page made, with its
// own acceptance rate (from the response's timings).
import { getJson, getText, parsePrometheus } from './api.js';

export const MAX_WINDOW_MS = 15 * 60 * 1000;  // the longest window the page offers
const POLL_MS = 1000;

function trim(points, now) {
  while (points.length && points[0][0] < now - MAX_WINDOW_MS) points.shift();
}

export class Telemetry {
  constructor({ onPolicy, onSeries, onError }) {
    this.onPolicy = onPolicy;
    this.onSeries = onSeries;
    this.onError = onError;
    this.series = { tps: [], acc: [], kv: [], waiting: [], running: [], requestAcc: [] };
    this.previous = null;
    this.timer = null;
    this.since = null;  // the first poll's time: plots start there until the window is full
  }

  start() {
    if (this.timer === null) this.timer = setTimeout(() => this.poll(), 0);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  // A finished chat of this page: its acceptance rate as a dot on the plot.
  addRequest(timings) {
    if (!timings || !timings.draft_n) return;
    this.series.requestAcc.push([Date.now(), timings.draft_n_accepted / timings.draft_n]);
    this.onSeries(this.series, Date.now());
  }

  async poll() {
    try {
      const [policy, metricsText] = await Promise.all([
        getJson('/v1/internal/mtp-policy'),
        getText('/metrics'),
      ]);
      this.onPolicy(policy);
      this.addMetrics(parsePrometheus(metricsText), Date.now());
      this.timer = setTimeout(() => this.poll(), POLL_MS);
    } catch (err) {
      this.timer = null;
      this.onError(err);  // the page restarts polling (after a key prompt, or a retry)
    }
  }

  addMetrics(m, now) {
    if (this.since === null) this.since = now;
    const get = (name) => m.get(name) ?? 0;
    const current = {
      t: now,
      tokens: get('tandem:generation_tokens_total'),
      drafted: get('tandem:spec_decode_num_draft_tokens_total'),
      accepted: get('tandem:spec_decode_num_accepted_tokens_total'),
    };
    const s = this.series;
    if (this.previous) {
      const dt = (current.t - this.previous.t) / 1000;
      const drafted = current.drafted - this.previous.drafted;
      s.tps.push([now, dt > 0 ? Math.max(0, current.tokens - this.previous.tokens) / dt : 0]);
      // No drafts in this interval: a gap, not a zero (nothing was measured).
      s.acc.push([now, drafted > 0 ? (current.accepted - this.previous.accepted) / drafted : null]);
    }
    this.previous = current;
    s.kv.push([now, get('tandem:kv_cache_usage_perc')]);
    s.waiting.push([now, get('tandem:num_requests_waiting')]);
    s.running.push([now, get('tandem:num_requests_running')]);
    for (const points of Object.values(s)) trim(points, now);
    this.onSeries(s, now);
  }
}
