// GPUs by state per pool and model, the utilization matrix over time, queue depths and waits.
import { useMemo, useState } from 'preact/hooks';
import { get, query } from '../api.js';
import { TimeChart } from '../chart.js';
import { STATES, countGpus } from '../gpus.js';
import { Def, ErrorLine, html, nowUs, pct, span, usePoll } from '../util.js';

function GpuStates({ nodes }) {
  const rows = countGpus(nodes);
  const shown = STATES.filter((s) => rows.some((r) => r[s]));
  const total = { pool: 'all', model: 'all', total: 0 };
  for (const r of rows) {
    total.total += r.total;
    for (const s of shown) total[s] = (total[s] || 0) + (r[s] || 0);
  }
  return html`<table class="grid" data-testid="gpu-states">
    <thead><tr><th>pool</th><th>model</th><th>GPUs</th>
      ${shown.map((s) => html`<th><${Def} term=${s} /></th>`)}</tr></thead>
    <tbody>
      ${[...rows, total].map((r) => html`<tr class=${r.pool === 'all' ? 'total' : ''}>
        <td>${r.pool}</td><td>${r.model}</td><td class="num">${r.total}</td>
        ${shown.map((s) => html`<td class=${`num st-${s.replace(' ', '-')}`}>${r[s] || ''}</td>`)}
      </tr>`)}
    </tbody>
  </table>`;
}

const RANGES = { '1h': 3600, '6h': 6 * 3600, '24h': 86400, '7d': 7 * 86400 };

function figure(row, name) {
  const f = (row.figures || []).find((x) => x.figure === name);
  return f ? f.value : null;
}

function Utilization() {
  const [range, setRange] = useState('1h');
  const seconds = RANGES[range];
  const step = Math.max(60, Math.ceil(seconds / 60 / 60) * 60); // at most 60 points, whole minutes
  const { data, error } = usePoll(
    () => get(`/api/v1/utilization${query({ since_us: nowUs() - seconds * 1e6, step_us: step * 1e6 })}`),
    [range],
    15000,
  );
  const lines = useMemo(() => {
    if (!data || !data.series) return null;
    const all = (b) => (b.rows || []).find((r) => r.pool === '*' && r.model === '*') || {};
    const x = data.series.map((b) => b.from_us / 1e6);
    const pick = (name) => data.series.map((b) => figure(all(b), name));
    return {
      x,
      lines: [
        { label: 'allocated/schedulable', values: pick('allocated/schedulable') },
        { label: 'busy/schedulable', values: pick('busy/schedulable') },
        { label: 'productive/schedulable', values: pick('productive/schedulable') },
        { label: 'schedulable/installed', values: data.series.map((b) => {
          const h = all(b).gpu_hours || {};
          return h.installed ? h.schedulable / h.installed : null;
        }) },
      ],
    };
  }, [data]);
  const total = (data && data.rows) || [];
  return html`<section>
    <h2>Utilization <span class="sub">(numerator/denominator, <a href="#/audit">definitions</a> on hover)</span></h2>
    <div class="tabs">${Object.keys(RANGES).map((r) => html`<button class=${r === range ? 'on' : ''}
      onClick=${() => setRange(r)}>${r}</button>`)}</div>
    <${ErrorLine} error=${error} />
    ${error && error.status === 403 && html`<p class="hint">The utilization matrix is for admins.</p>`}
    ${lines && html`<${TimeChart} x=${lines.x} lines=${lines.lines} percent=${true} />`}
    ${total.length > 0 && html`<table class="grid" data-testid="utilization">
      <thead><tr><th>pool</th><th>model</th>
        ${['installed', 'online', 'schedulable'].map((d) => html`<th colspan="3">÷ <${Def} term=${d} /></th>`)}</tr>
        <tr><th></th><th></th>${['installed', 'online', 'schedulable'].map(() => ['allocated', 'busy', 'productive'].map(
          (n) => html`<th><${Def} term=${n} /></th>`))}</tr></thead>
      <tbody>${total.map((r) => html`<tr><td>${r.pool}</td><td>${r.model}</td>
        ${['installed', 'online', 'schedulable'].map((d) => ['allocated', 'busy', 'productive'].map(
          (n) => html`<td class="num">${pct(figure(r, `${n}/${d}`))}</td>`))}</tr>`)}</tbody>
    </table>`}
  </section>`;
}

function QueueDepths() {
  const { data, error } = usePoll(async () => {
    const queues = await get('/api/v1/queues/status');
    // The first queued job of each queue by id is its longest wait (ids follow submission).
    const oldest = await Promise.all(
      queues.map((q) => (q.pending > 0
        ? get(`/api/v1/jobs${query({ state: 'queued', queue: q.name, limit: 1 })}`).catch(() => [])
        : [])),
    );
    return queues.map((q, i) => ({ ...q, oldest: oldest[i][0] }));
  }, [], 5000);
  return html`<section>
    <h2>Queues <span class="sub">(counts are every tenant's; the longest wait is of the jobs you may see)</span></h2>
    <${ErrorLine} error=${error} />
    ${data && html`<table class="grid" data-testid="queue-depths">
      <thead><tr><th>queue</th><th>cohort</th><th>pending</th><th>running</th><th>longest wait</th>
        <th><abbr title="how long the jobs that started from this queue waited (submission to first placement): the last 1,024 since the server started, every tenant's">waited p50 / p90 / p99</abbr></th>
        <th>pending GPUs</th></tr></thead>
      <tbody>${data.map((q) => html`<tr>
        <td><a href=${`#/jobs?queue=${encodeURIComponent(q.name)}&state=queued`}>${q.name}</a></td>
        <td>${q.cohort}</td><td class="num">${q.pending}</td><td class="num">${q.running}</td>
        <td class="num">${q.oldest ? span(nowUs() - q.oldest.created_us) : ''}</td>
        <td class="num">${q.waits ? `${span(q.waits.p50_us)} / ${span(q.waits.p90_us)} / ${span(q.waits.p99_us)} (${q.waits.jobs})` : ''}</td>
        <td class="num">${(q.pending_demand && q.pending_demand.gpus) || ''}</td></tr>`)}</tbody>
    </table>`}
  </section>`;
}

export function Overview({ me }) {
  const nodes = usePoll(() => get('/api/v1/nodes'), [], 3000);
  return html`<div class="page">
    <h1>Overview</h1>
    <section>
      <h2>GPUs by state</h2>
      <${ErrorLine} error=${nodes.error} />
      ${nodes.data && html`<${GpuStates} nodes=${nodes.data} />`}
      ${me.role !== 'admin' && html`<p class="hint">Which GPUs are allocated, and to whom, is shown to admins only.</p>`}
    </section>
    ${me.role === 'admin' && html`<${Utilization} />`}
    <${QueueDepths} />
  </div>`;
}
