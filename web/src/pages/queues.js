// Queues: quota, used, borrowed and lent per resource, cohorts, and the pending jobs in the order
// the scheduler takes them within the queue (aged priority, then submission).
import { get, query } from '../api.js';
import { ErrorLine, StateBadge, html, nowUs, requestText, span, usePoll } from '../util.js';

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
  if (jobs.length === 0) return html`<p class="hint">Nothing pending.</p>`;
  return html`<table class="grid small-table"><thead><tr><th>#</th><th>job</th><th>priority</th><th>request</th>
    <th>waiting</th><th>why</th></tr></thead>
    <tbody>${jobs.slice(0, 50).map((j, i) => html`<tr><td>${i + 1}</td>
      <td><a href=${`#/jobs/${j.id}`}>${j.id} ${j.name}</a></td><td class="num">${j.spec.priority}</td>
      <td>${requestText(j.spec)}</td><td class="num">${span(nowUs() - j.created_us)}</td>
      <td class="reason">${j.reason}</td></tr>`)}</tbody></table>
    ${jobs.length > 50 && html`<p class="hint">${jobs.length - 50} more (of the first 500 by submission) in
      <a href=${`#/jobs?queue=${encodeURIComponent(queue)}&state=queued`}>the job list</a>.</p>`}`;
}

function Queue({ q }) {
  const resources = Object.entries(q.resources || {});
  return html`<div class="queue" data-queue=${q.name}>
    <h2>${q.name} <span class="sub">${q.cohort ? `cohort ${q.cohort}` : 'no cohort'}${q.pool ? `, pool ${q.pool}` : ''}, weight ${q.weight}</span>
      <${StateBadge} state=${`${q.pending} pending`} /> <${StateBadge} state=${`${q.running} running`} /></h2>
    <table class="grid"><thead><tr><th>resource</th>${COLUMNS.map((c) => html`<th>${c}</th>`)}</tr></thead>
      <tbody>${resources.map(([name, r]) => html`<tr><td>${name}</td>
        ${COLUMNS.map((c) => html`<td class="num">${r[c] ?? ''}</td>`)}</tr>`)}</tbody></table>
    <${Pending} queue=${q.name} />
  </div>`;
}

export function Queues() {
  const { data, error } = usePoll(() => get('/api/v1/queues/status'), [], 5000);
  return html`<div class="page"><h1>Queues</h1><${ErrorLine} error=${error} />
    <div data-testid="queues">${(data || []).map((q) => html`<${Queue} q=${q} />`)}</div></div>`;
}
