// Hand-written SVG line plots over a time window: grid lines with their
// values, one polyline per series (broken where a value is null), optional
// dots. The x axis starts at the window's start, or at the first sample while
// the page has been open for less than the window. Each <svg> gets
// data-points (points drawn) and data-max (the largest value) for tests and tools.
const NS = 'http://www.w3.org/2000/svg';
const W = 320;
const H = 64;
const LEFT = 34;  // room for the y labels
const BOTTOM = 11;  // room for the x labels
const MIN_SPAN_MS = 10000;

function element(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// 1, 2, 5 × 10^n at or above v (at least `floor`).
export function niceCeiling(v, floor = 1) {
  if (!(v > floor)) return floor;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function ago(ms) {
  const s = Math.round(ms / 1000);
  return s < 120 ? `-${s} s` : `-${Math.round(s / 60)} min`;
}

// series: [{points: [[t, v|null]]}], dots: [[t, v]]; yMax fixed or null (auto);
// format(v) labels the y axis; since: the first sample's time.
export function renderPlot(svg, { series, dots = [], now, windowMs, since, yMax = null, format = null }) {
  let max = 0;
  for (const s of series) for (const [, v] of s.points) if (v !== null && v > max) max = v;
  for (const [, v] of dots) if (v > max) max = v;
  const top = yMax ?? niceCeiling(max);
  const label = format ?? ((v) => (top < 10 ? v.toFixed(1) : v.toFixed(0)));
  const start = Math.min(now - MIN_SPAN_MS, Math.max(now - windowMs, since ?? now));
  const x = (t) => LEFT + ((t - start) / (now - start)) * (W - LEFT);
  const y = (v) => H - BOTTOM - (Math.min(v, top) / top) * (H - BOTTOM - 4);
  svg.replaceChildren();
  for (const v of [0, top / 2, top]) {
    svg.append(element('line', { class: 'grid', x1: LEFT, x2: W, y1: y(v), y2: y(v) }));
    svg.append(element('text', { class: 'label', x: LEFT - 3, y: y(v) + 3, 'text-anchor': 'end' }, label(v)));
  }
  svg.append(element('text', { class: 'label', x: LEFT, y: H - 1 }, ago(now - start)));
  svg.append(element('text', { class: 'label', x: W, y: H - 1, 'text-anchor': 'end' }, 'now'));
  let drawn = 0;
  series.forEach((s, i) => {
    let run = [];
    const flush = () => {
      // A lone point (one poll, or one between gaps) has no line to draw: a dot in the series' colour.
      if (run.length === 1) {
        const [cx, cy] = run[0].split(',');
        svg.append(element('circle', { class: `point${i}`, cx, cy, r: 1.5 }));
      } else if (run.length) {
        svg.append(element('polyline', { class: `series${i}`, points: run.join(' ') }));
      }
      run = [];
    };
    for (const [t, v] of s.points) {
      if (t < start) continue;
      if (v === null) {
        flush();
        continue;
      }
      run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      drawn++;
    }
    flush();
  });
  for (const [t, v] of dots) {
    if (t < start) continue;
    svg.append(element('circle', { class: 'dot', cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2.5 }));
    drawn++;
  }
  svg.dataset.points = String(drawn);
  svg.dataset.max = String(max);
}
