// Queues: quota, used, borrowed and lent per resource now and over time, cohorts, and the pending
// jobs in the order the scheduler takes them within the queue (aged priority, then submission).
import { useMemo, useState } from 'preact/hooks';
import { get, query } from '../api.js';
import { TimeChart } from '../chart.js';
import { ErrorLine, StateBadge, html, nowUs, requestText, span, usePoll } from '../util.js';

const RANGES = { '1h': 3600, '6h': 6 * 3600, '24h': 86400 };

// GPUs each queue held over time: every usage record (one per attempt, with the GPUs its devices
// count and when it held them) spread over the steps it overlaps; a step's value is its
// GPU-seconds over its length, the average number of GPUs in use. Records are the caller's own
// (the API filters them), so a tenant sees its queues' use by its own jobs.
function useSeries(records, from, to, step) {
  return useMemo(() => {
    if (!records) return null;
    const n = Math.max(1, Math.ceil((to - from) / step));
    const byQueue = new Map();
    for (const r of records) {
      const gpus = (r.devices || []).reduce((sum, d) => sum + (d.gpus || 0), 0);
      if (!gpus) continue;
      if (!byQueue.has(r.queue)) byQueue.set(r.queue, new Array(n).fill(0));
      const line = byQueue.get(r.queue);
      const held = [Math.max(r.held_from_us, from), Math.min(r.held_to_us, to)];
      for (let i = Math.max(0, Math.floor((held[0] - from) / step)); i < n && from + i * step < held[1]; i += 1) {
        const s = from + i * step;
        const overlap = Math.min(held[1], s + step) - Math.max(held[0], s);
        if (overlap > 0) line[i] += (gpus * overlap) / Math.min(step, to - s); // the last step so far
      }
    }
    const x = Array.from({ length: n }, (_, i) => (from + i * step) / 1e6);
    return { x, lines: [...byQueue.entries()].map(([label, values]) => ({ label, values })) };
  }, [records, from, to, step]);
}

function UseOverTime({ queues, range, setRange }) {
  const seconds = RANGES[range];
  const step = Math.max(60, seconds / 60) * 1e6;
  const [to, setTo] = useState(nowUs());
  const from = to - seconds * 1e6;
  const { data, error } = usePoll(async () => {
    setTo(nowUs());
    return get(`/api/v1/usage/records${query({ since_us: Math.floor(nowUs() - seconds * 1e6) })}`);
  }, [range], 15000);
  const series = useSeries(data, from, to, step);
  const quotas = queues
    .map((q) => [q.name, q.resources && q.resources.gpus && q.resources.gpus.quota])
    .filter(([, quota]) => quota !== undefined);
  return html`<section><h2>GPUs in use per queue <span class="sub">(average per step, from usage records)</span></h2>
    <div class="tabs">${Object.keys(RANGES).map((r) => html`<button class=${r === range ? 'on' : ''}
      onClick=${() => setRange(r)}>${r}</button>`)}</div>
    <${ErrorLine} error=${error} />
    ${series && series.lines.length > 0 && html`<${TimeChart} x=${series.x} lines=${series.lines} />`}
    ${series && series.lines.length === 0 && html`<p class="hint">No GPU was held in this range.</p>`}
    ${quotas.length > 0 && html`<p class="hint">GPU quotas now: ${quotas.map(([n, q]) => `${n} ${q}`).join(', ')};
      each queue below charts its quota, use, borrowing and lending over the same range.</p>`}
  </section>`;
}

const COLUMNS = ['quota', 'used', 'borrowed', 'lent', 'borrowable'];

function Pending({ queue }) {
  const { data, error } = usePoll(
    () => get(`/api/v1/jobs${query({ state: 'queued', queue, limit: 500 })}`),
    [queue],
    5000,
  );
  if (error) return html`<${ErrorLine} error=${error} />`;
  const jobs = [...(data || [])].sort(
    (a, b) => (b.spec.priority - a.spec.priority) || (a.created_us - b.created_us) || (a.id - b.id));
  if (jobs.length === 0) return html`<p class="hint">Nothing pending that you may see.</p>`;
  return html`<table class="grid small-table"><thead><tr><th>#</th><th>job</th><th>priority</th><th>request</th>
    <th>waiting</th><th>why</th></tr></thead>
    <tbody>${jobs.slice(0, 50).map((j, i) => html`<tr><td>${i + 1}</td>
      <td><a href=${`#/jobs/${j.id}`}>${j.id} ${j.name}</a></td><td class="num">${j.spec.priority}</td>
      <td>${requestText(j.spec)}</td><td class="num">${span(nowUs() - j.created_us)}</td>
      <td class="reason">${j.reason}</td></tr>`)}</tbody></table>
    ${jobs.length > 50 && html`<p class="hint">${jobs.length - 50} more (of the first 500 by submission) in
      <a href=${`#/jobs?queue=${encodeURIComponent(queue)}&state=queued`}>the job list</a>.</p>`}`;
}

const LINES = ['used', 'quota', 'borrowed', 'lent'];

// One queue's quota, use, borrowing and lending over time, per resource (GET /queues/history:
// sampled every 5 s, each step's time-weighted average; polled as often).
function History({ history }) {
  const names = Object.keys(history || {});
  const [picked, setPicked] = useState(null);
  const resource = names.includes(picked) ? picked : (names.includes('gpus') ? 'gpus' : names[0]);
  const line = resource && history[resource];
  const chart = useMemo(() => {
    if (!line) return null;
    const x = line.points.map((p) => p.t_us / 1e6);
    const kept = LINES.filter((k) => k === 'used' || line.limited);
    return { x, lines: kept.map((k) => ({ label: k, values: line.points.map((p) => p[k] ?? null) })) };
  }, [line]);
  if (!line) return html`<p class="hint">Nothing sampled in this range.</p>`;
  return html`<div class="history" data-testid="queue-history">
    <div class="tabs">${names.map((n) => html`<button class=${n === resource ? 'on' : ''}
      onClick=${() => setPicked(n)}>${n}</button>`)}<span class="sub">${line.unit}, average per step</span></div>
    <${TimeChart} x=${chart.x} lines=${chart.lines} height=${160} /></div>`;
}

function Queue({ q, history }) {
  const resources = Object.entries(q.resources || {});
  return html`<div class="queue" data-queue=${q.name}>
    <h2>${q.name} <span class="sub">${q.cohort ? `cohort ${q.cohort}` : 'no cohort'}${q.pool ? `, pool ${q.pool}` : ''}, weight ${q.weight}</span>
      <${StateBadge} state=${`${q.pending} pending`} /> <${StateBadge} state=${`${q.running} running`} />
      <span class="sub">(every tenant's)</span></h2>
    <table class="grid"><thead><tr><th>resource</th>${COLUMNS.map((c) => html`<th>${c}</th>`)}</tr></thead>
      <tbody>${resources.map(([name, r]) => html`<tr><td>${name}</td>
        ${COLUMNS.map((c) => html`<td class="num">${r[c] ?? ''}</td>`)}</tr>`)}</tbody></table>
    <${History} history=${history} />
    <${Pending} queue=${q.name} />
  </div>`;
}

export function Queues() {
  const [range, setRange] = useState('6h');
  const { data, error } = usePoll(() => get('/api/v1/queues/status'), [], 5000);
  const seconds = RANGES[range];
  const history = usePoll(() => get(`/api/v1/queues/history${query({
    since_us: Math.floor(nowUs() - seconds * 1e6), step_us: Math.max(60, seconds / 60) * 1e6 })}`), [range], 5000);
  const queues = (history.data && history.data.queues) || {};
  return html`<div class="page"><h1>Queues</h1><${ErrorLine} error=${error || history.error} />
    ${data && html`<${UseOverTime} queues=${data} range=${range} setRange=${setRange} />`}
    <div data-testid="queues">${(data || []).map((q) => html`<${Queue} q=${q} history=${queues[q.name]} />`)}</div></div>`;
}
