// Hand-written SVG line plots over a fixed time window: grid lines with their
// values, one polyline per series (broken where a value is null), optional
// dots. Each <svg> gets data-points (points drawn) for tests and tools.
const NS = 'http://www.w3.org/2000/svg';
const W = 320;
const H = 90;
const LEFT = 34;  // room for the y labels
const BOTTOM = 12;  // room for the x labels

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

// series: [{points: [[t, v|null]], cls}], dots: [[t, v]]; yMax fixed or null (auto);
// format(v) labels the y axis.
export function renderPlot(svg, { series, dots = [], now, windowMs, yMax = null, format = String }) {
  let top = yMax;
  if (top === null) {
    let max = 0;
    for (const s of series) for (const [, v] of s.points) if (v !== null && v > max) max = v;
    top = niceCeiling(max);
  }
  const x = (t) => LEFT + ((t - (now - windowMs)) / windowMs) * (W - LEFT);
  const y = (v) => (H - BOTTOM) - (Math.min(v, top) / top) * (H - BOTTOM - 4);
  svg.replaceChildren();
  for (const v of [0, top / 2, top]) {
    svg.append(element('line', { class: 'grid', x1: LEFT, x2: W, y1: y(v), y2: y(v) }));
    svg.append(element('text', { class: 'label', x: LEFT - 3, y: y(v) + 3, 'text-anchor': 'end' }, format(v)));
  }
  const minutes = Math.round(windowMs / 60000);
  svg.append(element('text', { class: 'label', x: LEFT, y: H - 1 }, `-${minutes} min`));
  svg.append(element('text', { class: 'label', x: W, y: H - 1, 'text-anchor': 'end' }, 'now'));
  let drawn = 0;
  series.forEach((s, i) => {
    let run = [];
    const flush = () => {
      if (run.length) svg.append(element('polyline', { class: s.cls || `series${i}`, points: run.join(' ') }));
      run = [];
    };
    for (const [t, v] of s.points) {
      if (v === null) { flush(); continue; }
      run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      drawn++;
    }
    flush();
  });
  for (const [t, v] of dots) {
    svg.append(element('circle', { class: 'dot', cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2.5 }));
    drawn++;
  }
  svg.dataset.points = String(drawn);
}
