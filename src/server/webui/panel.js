// The status panel: GET /v1/internal/mtp-policy (schema_version 1,
// docs/mtp-policy-api.md) in one look. Unknown states and reasons are shown
// as their raw label without an explanation, as the compatibility promise
// asks of consumers; unknown fields are ignored.
const REASONS = {
  no_mtp_dispatch: 'No drafter is configured (-md): every request is decoded classically.',
  adaptive_disabled: 'TANDEM_MTP_ADAPTIVE=0: the static default for this hardware decides.',
  worker_not_ready: 'The model is loading.',
};

const number = (v, digits = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : null);
const percent = (v) => (typeof v === 'number' ? `${(v * 100).toFixed(0)}%` : null);
const times = (v) => (number(v) === null ? null : `${number(v)}×`);

function why(p) {
  switch (p.state) {
    case 'profiling':
      return `Measuring whether speculation pays here: ${p.samples} of ${p.samples_required} samples ` +
        `(settles by ${p.samples_max} at the latest). Requests speculate meanwhile.`;
    case 'settled': {
      const source = p.verdict_source === 'hint' ? 'read from the persisted verdict' : 'measured in this process';
      const how = p.settle_reason === 'max_samples' ? 'by the point estimate' : 'its interval cleared the threshold';
      return `Verdict ${p.verdict} (${source}; ${how}).`;
    }
    case 'forced':
      return `Pinned by TANDEM_ENABLE_MTP_B1: speculation ${p.mtp_enabled ? 'on' : 'off'}, not measured.`;
    case 'exactness_declined':
      return `Declined by the exactness probe: ${p.decline_detail ?? 'no detail recorded'}`;
    case 'unavailable':
      return REASONS[p.reason] ?? p.reason ?? '';
    default:
      return '';
  }
}

function interval(p) {
  const low = number(p.speedup_low);
  const high = number(p.speedup_high);
  if (times(p.speedup) === null) return null;
  const range = low !== null && high !== null ? ` [${low}, ${high}]` : '';
  const threshold = number(p.speedup_threshold) !== null ? ` vs threshold ${number(p.speedup_threshold)}` : '';
  return `${times(p.speedup)}${range}${threshold}`;
}

function samples(p) {
  if (p.state === 'settled') return `${p.samples} (at least ${p.samples_required})`;
  if (p.state !== 'profiling') return null;
  // samples_remaining: below the minimum, how many are still needed; past it, the most it may still take.
  let remaining = '';
  if (typeof p.samples_remaining === 'number')
    remaining = p.samples < p.samples_required ? ` (${p.samples_remaining} more needed)`
      : ` (at most ${p.samples_remaining} more)`;
  return `${p.samples} of ${p.samples_required}${remaining}`;
}

export function renderPolicy(panel, p) {
  if (p.schema_version !== 1) {
    // Another schema may change what the fields mean: show nothing rather than something wrong.
    panel.dataset.state = '';
    panel.querySelector('#policy-state').textContent = '?';
    panel.querySelector('#policy-why').textContent =
      `This page reads schema_version 1 of /v1/internal/mtp-policy; the server sent ${p.schema_version}.`;
    panel.querySelector('#policy-fields').replaceChildren();
    return;
  }
  const known = ['profiling', 'settled', 'forced', 'exactness_declined', 'unavailable'].includes(p.state);
  panel.dataset.state = p.state ?? '';
  panel.dataset.verdict = p.verdict ?? '';
  const badge = p.state === 'settled' && p.verdict ? `settled · ${p.verdict}` : (p.state ?? '?');
  panel.querySelector('#policy-state').textContent = badge;
  panel.querySelector('#policy-why').textContent = known ? why(p) : '';
  const rows = [
    ['speculation', p.mtp_enabled === null || p.mtp_enabled === undefined ? null : (p.mtp_enabled ? 'on' : 'off')],
    ['samples', samples(p)],
    ['estimated speedup', interval(p)],
    ['served speedup', times(p.served_speedup)],
    ['acceptance rate', percent(p.acceptance_rate)],
    ['K (block size)', p.block_size ?? null],
    ['drafter kind', p.draft_kind ?? null],
    ['hardware', p.hardware ?? null],
    ['re-profiled', p.reprofiles ? `${p.reprofiles}× — ${p.reprofile_reason}` : null],
  ];
  const list = panel.querySelector('#policy-fields');
  list.replaceChildren();
  for (const [name, value] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = name;
    const dd = document.createElement('dd');
    dd.textContent = value === null ? '—' : String(value);
    dd.dataset.field = name;
    list.append(dt, dd);
  }
}
