// The job list: filtered and paged by the server (GET /api/v1/jobs), never loaded whole.
import { useState } from 'preact/hooks';
import { getPage, query } from '../api.js';
import { ErrorLine, StateBadge, html, nowUs, requestText, span, usePoll, when } from '../util.js';

const FILTERS = ['state', 'queue', 'tenant', 'project', 'user', 'kind', 'node', 'text'];
const STATES = ['', 'queued', 'scheduled', 'running', 'reclaiming', 'succeeded', 'failed', 'cancelled', 'lost', 'preempted'];
const PAGE = 50;

function setHash(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  window.location.hash = `#/jobs${q.toString() ? `?${q}` : ''}`;
}

function FilterBar({ params }) {
  const [draft, setDraft] = useState(() => Object.fromEntries(
    [...FILTERS, 'all'].map((k) => [k, params.get(k) || ''])));
  const apply = (e) => {
    e.preventDefault();
    setHash(draft);
  };
  const field = (k) => (k === 'state'
    ? html`<select name="state" value=${draft.state} onChange=${(e) => setDraft({ ...draft, state: e.target.value })}>
        ${STATES.map((s) => html`<option value=${s}>${s || 'any state'}</option>`)}</select>`
    : html`<input name=${k} placeholder=${k} value=${draft[k]}
        onInput=${(e) => setDraft({ ...draft, [k]: e.target.value })} />`);
  return html`<form class="filters" onSubmit=${apply}>
    ${FILTERS.map(field)}
    <label><input type="checkbox" name="all" checked=${draft.all === 'true'}
      onChange=${(e) => setDraft({ ...draft, all: e.target.checked ? 'true' : '' })} /> with ended jobs</label>
    <button type="submit">Filter</button>
  </form>`;
}

function nodesOf(job) {
  return [...new Set((job.replicas || []).map((r) => r.node).filter(Boolean))].join(', ');
}

function waited(job) {
  const start = job.scheduled_us || (job.state === 'queued' ? nowUs() : 0);
  return start ? span(start - job.created_us) : '';
}

export function Jobs({ params }) {
  const [after, setAfter] = useState([]); // the pages before this one, to go back
  const cursor = after.length ? after[after.length - 1] : 0;
  const filters = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) || '']));
  const all = params.get('all') === 'true';
  const key = params.toString();
  const { data, error, loading } = usePoll(
    () => getPage(`/api/v1/jobs${query({ ...filters, all: all ? 'true' : '', after: cursor || '', limit: PAGE })}`),
    [key, cursor],
    3000,
  );
  const next = data && data.next ? new URLSearchParams(data.next.split('?')[1]).get('after') : null;
  return html`<div class="page">
    <h1>Jobs</h1>
    <${FilterBar} params=${params} key=${key} />
    <${ErrorLine} error=${error} />
    <table class="grid jobs" data-testid="jobs">
      <thead><tr><th>id</th><th>name</th><th>state</th><th>user</th><th>tenant/project</th><th>queue</th>
        <th>kind</th><th>request</th><th>node</th><th>submitted</th><th>waited</th><th>reason</th></tr></thead>
      <tbody>${(data ? data.items : []).map((j) => html`<tr data-job=${j.id}>
        <td><a href=${`#/jobs/${j.id}`}>${j.id}</a></td>
        <td><a href=${`#/jobs/${j.id}`}>${j.name}</a></td>
        <td><${StateBadge} state=${j.state} /></td>
        <td>${j.submitted_by}</td>
        <td>${j.spec && `${j.spec.tenant}/${j.spec.project}`}</td>
        <td>${j.spec && j.spec.queue}</td>
        <td>${j.spec && j.spec.kind}</td>
        <td>${requestText(j.spec)}</td>
        <td>${nodesOf(j)}</td>
        <td>${when(j.created_us)}</td>
        <td class="num">${waited(j)}</td>
        <td class="reason">${j.reason}</td>
      </tr>`)}</tbody>
    </table>
    ${data && data.items.length === 0 && !loading && html`<p class="hint">No job matches.</p>`}
    <div class="pager">
      <button disabled=${after.length === 0} onClick=${() => setAfter(after.slice(0, -1))}>previous</button>
      <button disabled=${!next} onClick=${() => setAfter([...after, Number(next)])}>next</button>
    </div>
  </div>`;
}
