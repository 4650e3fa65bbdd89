// The audit chain's verification, event search, and usage by tenant, project, queue, kind, model
// or user, with exports (downloaded with the token, as the CLI's `carve export` reads them).
import { useState } from 'preact/hooks';
import { get, getText, query } from '../api.js';
import { useEvents } from '../events.js';
import { ErrorLine, html, nowUs, usePoll, when } from '../util.js';

const RANGES = { '24h': 86400, '7d': 7 * 86400, '30d': 30 * 86400, all: 0 };
const BY = ['tenant', 'project', 'queue', 'kind', 'model', 'user'];

function Chain() {
  const { data, error } = usePoll(() => get('/api/v1/audit/verify'), [], 30000);
  if (error && error.status === 403) return null;
  return html`<section data-testid="chain"><h2>Audit chain</h2><${ErrorLine} error=${error} />
    ${data && html`<p class=${data.ok ? 'ok' : 'error'}>${data.ok
      ? `verified: ${data.events} events, head #${data.head_seq} ${data.head_hash.slice(0, 16)}…`
      : `broken: ${data.message || JSON.stringify(data)}`}</p>`}</section>`;
}

function EventSearch() {
  const [draft, setDraft] = useState({ type: '', job: '' });
  const [params, setParams] = useState({});
  const { events, error, done } = useEvents(params, 5000, 300);
  return html`<section><h2>Events</h2>
    <form class="filters" onSubmit=${(e) => {
      e.preventDefault();
      setParams({ ...draft });
    }}>
      <input name="type" placeholder="type prefix (job., node.quarantined)" value=${draft.type}
        onInput=${(e) => setDraft({ ...draft, type: e.target.value })} />
      <input name="job" placeholder="job id" value=${draft.job}
        onInput=${(e) => setDraft({ ...draft, job: e.target.value })} />
      <button type="submit">Search</button>
    </form>
    <${ErrorLine} error=${error} />
    <table class="grid" data-testid="event-search"><thead><tr><th>#</th><th>time</th><th>type</th><th>subject</th>
      <th>by</th><th>reason</th></tr></thead>
    <tbody>${[...events].reverse().map((e) => html`<tr><td>${e.seq}</td><td>${when(e.time_us)}</td><td>${e.type}</td>
      <td>${e.subject}</td><td>${e.actor}</td><td class="reason">${e.reason}</td></tr>`)}</tbody></table>
    ${done && events.length === 0 && html`<p class="hint">No event matches.</p>`}
  </section>`;
}

async function download(path, name) {
  const { text, headers } = await getText(path);
  const blob = new Blob([text], { type: headers.get('Content-Type') || 'text/plain' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  URL.revokeObjectURL(a.href);
}

function Usage({ me }) {
  const [by, setBy] = useState('tenant');
  const [range, setRange] = useState('7d');
  const [error, setError] = useState(null);
  const since = RANGES[range] ? nowUs() - RANGES[range] * 1e6 : 0;
  const usage = usePoll(() => get(`/api/v1/usage${query({ by, since_us: Math.floor(since / 6e7) * 6e7 })}`), [by, range], 15000);
  const rows = (usage.data && usage.data.rows) || [];
  const num = (v) => (typeof v === 'number' ? v.toFixed(3) : v);
  const exportAs = (format) => download(`/api/v1/usage/records${query({ format, since_us: since })}`,
    `carve-usage.${format === 'csv' ? 'csv' : 'jsonl'}`).catch(setError);
  return html`<section><h2>Usage</h2>
    <div class="tabs">${BY.map((b) => html`<button class=${b === by ? 'on' : ''} onClick=${() => setBy(b)}>by ${b}</button>`)}
      <span class="gap"></span>
      ${Object.keys(RANGES).map((r) => html`<button class=${r === range ? 'on' : ''} onClick=${() => setRange(r)}>${r}</button>`)}</div>
    <${ErrorLine} error=${usage.error || error} />
    <table class="grid" data-testid="usage"><thead><tr><th>${by}</th><th>jobs</th><th>GPU-hours</th>
      <th>productive GPU-hours</th><th>CPU core-hours</th><th>memory GiB-hours</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr><td>${r[by]}</td><td class="num">${r.jobs}</td>
        <td class="num">${num(r.gpu_hours)}</td><td class="num">${num(r.productive_gpu_hours)}</td>
        <td class="num">${num(r.cpu_core_hours)}</td><td class="num">${num(r.memory_gib_hours)}</td></tr>`)}</tbody></table>
    <div class="actions"><button onClick=${() => exportAs('csv')}>Export usage CSV</button>
      <button onClick=${() => exportAs('jsonl')}>Export usage JSONL</button>
      ${(me.role === 'admin' || me.role === 'tenant-admin') && html`<button onClick=${() => download(
        `/api/v1/audit${query({ format: 'csv', since_us: since })}`, 'carve-audit.csv').catch(setError)}>Export audit CSV</button>`}
    </div></section>`;
}

// Acceptance reports `carve poc run` kept on the server, newest first: verdict counts, how many
// of the server's checks and of the kit's re-check hold, each test's verdict, and the report
// page rendered again from the kept records.
function PocReports() {
  const { data, error } = usePoll(() => get('/api/v1/poc/reports?limit=20'), [], 15000);
  const [open, setOpen] = useState(null);
  const [failed, setFailed] = useState(null);
  const reports = data || [];
  const counts = (c) => ['pass', 'fail', 'inconclusive', 'not-run']
    .map((v) => `${c[v] || 0} ${v}`).join(', ');
  return html`<section data-testid="poc-reports"><h2>Acceptance reports</h2>
    <${ErrorLine} error=${error || failed} />
    <table class="grid"><thead><tr><th>#</th><th>kept</th><th>by</th><th>suite</th><th>tests</th>
      <th>server checks</th><th>kit's re-check</th><th></th></tr></thead>
    <tbody>${reports.map((r) => html`<tr data-report=${r.id}>
      <td><button class="link" onClick=${() => setOpen(open === r.id ? null : r.id)}>${r.id}</button></td>
      <td>${when(r.kept_us)}</td><td>${r.kept_by}</td><td>${r.suite}</td>
      <td class=${(r.counts.fail || 0) > 0 ? 'error' : ''}>${counts(r.counts)}</td>
      <td class=${r.server_checks.held === r.server_checks.of ? 'ok' : 'error'}>${r.server_checks.held} of ${r.server_checks.of} hold</td>
      <td>${r.claims.of ? `${r.claims.held} of ${r.claims.of} hold` : 'not sent'}</td>
      <td><button onClick=${() => download(`/api/v1/poc/reports/${r.id}/report.html`,
        `carve-poc-${r.id}.html`).catch(setFailed)}>report.html</button></td></tr>`)}</tbody></table>
    ${data && reports.length === 0 && html`<p class="hint">No report kept yet: <code>carve poc run</code> keeps its report here.</p>`}
    ${reports.filter((r) => r.id === open).map((r) => html`<table class="grid" data-testid="poc-tests">
      <thead><tr><th>test</th><th>verdict</th><th>why</th></tr></thead>
      <tbody>${r.tests.map((t) => html`<tr><td title=${t.title}>${t.id}</td>
        <td class=${t.verdict === 'pass' ? 'ok' : t.verdict === 'fail' ? 'error' : ''}>${t.verdict}</td>
        <td class="reason">${t.reason}</td></tr>`)}</tbody></table>
      <p class="hint">SHA-256 of the records: <code>${r.sha256}</code></p>`)}
  </section>`;
}

export function Audit({ me }) {
  return html`<div class="page"><h1>Audit & usage</h1>
    ${me.role === 'admin' && html`<${Chain} />`}
    ${me.role === 'admin' && html`<${PocReports} />`}
    <${Usage} me=${me} />
    <${EventSearch} />
  </div>`;
}
