// One job: its request, placement, why it waits, preemption, attempts, reclaim evidence, events,
// and its log followed live.
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, getBytes, post, query } from '../api.js';
import { useEvents } from '../events.js';
import { ErrorLine, StateBadge, html, requestText, span, usePoll, when } from '../util.js';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost', 'preempted'];

function Explanation({ id }) {
  const { data, error } = usePoll(() => get(`/api/v1/jobs/${id}/explain`), [id], 3000);
  if (error) return html`<${ErrorLine} error=${error} />`;
  if (!data) return null;
  return html`<section data-testid="explanation">
    <h2>Why it waits</h2>
    <p class="why">${data.explanation || data.reason}</p>
    ${data.fix && html`<p class="fix"><b>Would fit if:</b> ${data.fix}</p>`}
    <table class="grid">
      <thead><tr><th>gate</th><th>nodes considered</th><th>reasons</th><th>summary</th></tr></thead>
      <tbody>${(data.gates || []).map((g) => html`<tr>
        <td>${g.gate}</td><td class="num">${g.nodes_considered ?? ''}</td>
        <td>${Object.entries(g.reasons || {}).map(([k, v]) => `${v} ${k}`).join(', ')}</td>
        <td>${g.summary}</td></tr>`)}</tbody>
    </table>
    <p class="hint">queue ${data.queue}, position ${data.position}, priority ${data.priority}
      (${data.priority_class})${data.reserved ? ', holds the backfill reservation' : ''}${data.judged
        ? `; judged by the ${data.judged.cycle} cycle at ${when(data.judged.at_us)}` : ''}</p>
  </section>`;
}

function grantText(g) {
  if (g.profile) return `GPU ${g.device} MIG ${g.profile}${g.start >= 0 ? `@${g.start}` : ''}`;
  const share = g.compute_milli && g.compute_milli < 1000 ? ` share ${g.compute_milli / 1000}` : '';
  return `GPU ${g.device}${share}${g.memory_mib ? `, ${Math.round(g.memory_mib / 1024)} GiB` : ''}`;
}

function Replicas({ job }) {
  const reps = job.replicas || [];
  if (reps.length === 0) return null;
  return html`<section>
    <h2>Placement</h2>
    <table class="grid" data-testid="replicas">
      <thead><tr><th>replica</th><th>node</th><th>devices</th><th>state</th><th>started</th><th>ended</th>
        <th>exit</th><th>enforced</th><th>reclaim</th></tr></thead>
      <tbody>${reps.map((r, i) => html`<tr>
        <td>${r.slot ?? i}</td>
        <td>${r.node && html`<a href=${`#/nodes/${encodeURIComponent(r.node)}`}>${r.node}</a>`}</td>
        <td>${(r.grants || []).map(grantText).join('; ')}</td>
        <td>${r.state}</td><td>${when(r.started_us)}</td><td>${when(r.ended_us)}</td>
        <td>${r.exit_code ?? (r.signal ? `signal ${r.signal}` : '')}</td>
        <td class="small">${r.enforcement}</td>
        <td class="small">${r.reclaim ? html`<details><summary>${r.reclaim.outcome || 'record'}</summary>
          <pre>${JSON.stringify(r.reclaim, null, 2)}</pre></details>` : ''}</td>
      </tr>`)}</tbody>
    </table>
  </section>`;
}

function Attempts({ job }) {
  if (!job.attempts || job.attempts.length === 0) return null;
  return html`<section><h2>Earlier attempts</h2>
    <table class="grid"><thead><tr><th>attempt</th><th>node</th><th>scheduled</th><th>ended</th><th>why it ended</th></tr></thead>
    <tbody>${job.attempts.map((a, i) => html`<tr><td>${a.attempt ?? i}</td><td>${a.node}</td><td>${when(a.scheduled_us)}</td>
      <td>${when(a.ended_us)}</td><td>${a.cause}${a.fault ? ` (${a.fault})` : ''}</td></tr>`)}</tbody></table>
  </section>`;
}

function Events({ id }) {
  const { events, error } = useEvents({ job: id });
  return html`<section><h2>Events</h2><${ErrorLine} error=${error} />
    <table class="grid" data-testid="events"><thead><tr><th>#</th><th>time</th><th>type</th><th>by</th><th>reason</th></tr></thead>
    <tbody>${events.map((e) => html`<tr><td>${e.seq}</td><td>${when(e.time_us)}</td><td>${e.type}</td>
      <td>${e.actor}</td><td>${e.reason}</td></tr>`)}</tbody></table></section>`;
}

// Follows replica `replica`'s log: reads on from the byte offset it has, every second, while
// shown, until a read comes back short. A long log starts near its end (the first read learns its
// size); `carve logs` reads all of it.
const PAGE = 262144;
const TAIL = 200000;

function Log({ id, replica, live }) {
  const [text, setText] = useState('');
  const [skipped, setSkipped] = useState(0);
  const [error, setError] = useState(null);
  const box = useRef(null);
  // Keeps the newest lines in view while following, unless the reader scrolled up.
  useEffect(() => {
    const el = box.current;
    if (el && el.dataset.pinned !== 'no') el.scrollTop = el.scrollHeight;
  }, [text]);
  useEffect(() => {
    let offset = -1; // not known yet
    const decoder = new TextDecoder(); // streaming: a character split between reads stays whole
    setText('');
    setSkipped(0);
    let stop = false;
    let timer = 0;
    const read = async () => {
      try {
        for (;;) {
          const r = await getBytes(`/api/v1/jobs/${id}/logs${query({ replica, offset: Math.max(offset, 0), limit: PAGE })}`);
          if (stop) return;
          const size = Number(r.headers.get('X-Carve-Log-Size') || 0);
          if (offset < 0 && size > TAIL + PAGE) {
            offset = size - TAIL; // start near the end
            setSkipped(offset);
            continue;
          }
          offset = Math.max(offset, 0) + r.bytes.length;
          const piece = decoder.decode(r.bytes, { stream: true });
          if (piece) setText((t) => (t + piece).slice(-4 * TAIL));
          if (r.bytes.length < PAGE) break;
        }
        setError(null);
      } catch (e) {
        setError(e);
      }
      if (!stop && live) timer = setTimeout(read, 1000);
    };
    read();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [id, replica, live]);
  return html`<section><h2>Log${live ? ' (following)' : ''}</h2><${ErrorLine} error=${error} />
    ${skipped > 0 && html`<p class="hint">The first ${skipped} bytes are not shown; <code>carve logs ${id}</code> prints all of it.</p>`}
    <pre class="log" data-testid="log" ref=${box} onScroll=${(e) => {
      const el = e.currentTarget;
      el.dataset.pinned = el.scrollTop + el.clientHeight >= el.scrollHeight - 4 ? 'yes' : 'no';
    }}>${text || '(nothing yet)'}</pre></section>`;
}

function Actions({ job, me, onDone }) {
  const [error, setError] = useState(null);
  const [replicas, setReplicas] = useState('');
  if (FINAL.includes(job.state) || me.role === 'viewer') return null;
  const act = async (f) => {
    try {
      setError(null);
      await f();
      onDone();
    } catch (e) {
      setError(e);
    }
  };
  const isService = job.spec && job.spec.recovery === 'failover';
  return html`<div class="actions">
    <button class="danger" disabled=${job.cancel_requested} onClick=${() => {
      if (window.confirm(`Cancel job ${job.id} (${job.name})?`)) act(() => post(`/api/v1/jobs/${job.id}/cancel`));
    }}>${job.cancel_requested ? 'cancelling…' : 'Cancel'}</button>
    ${job.lease_expires_us > 0 && html`<button onClick=${() => act(() => post(`/api/v1/jobs/${job.id}/renew`))}>Renew lease</button>`}
    ${isService && job.state === 'running' && html`<span>
      <input class="narrow" type="number" min="1" placeholder="replicas" value=${replicas}
        onInput=${(e) => setReplicas(e.target.value)} />
      <button onClick=${() => act(() => post(`/api/v1/jobs/${job.id}/scale`, { replicas: Number(replicas) }))}>Scale</button></span>`}
    <${ErrorLine} error=${error} />
  </div>`;
}

export function Job({ id, me }) {
  const [nonce, setNonce] = useState(0);
  const { data: job, error } = usePoll(() => get(`/api/v1/jobs/${id}`), [id, nonce], 2000);
  const [replica, setReplica] = useState(0);
  if (error && !job) {
    return html`<div class="page"><h1>Job ${id}</h1><${ErrorLine} error=${error} />
      <p><a href="#/jobs">all jobs</a></p></div>`;
  }
  if (!job) return html`<div class="page"><h1>Job ${id}</h1></div>`;
  const spec = job.spec || {};
  const live = !FINAL.includes(job.state);
  return html`<div class="page">
    <h1>Job ${job.id} <span class="sub">${job.name}</span> <${StateBadge} state=${job.state} /></h1>
    <p class="reason" data-testid="reason">${job.reason}</p>
    <${Actions} job=${job} me=${me} onDone=${() => setNonce(nonce + 1)} />
    <section class="cols">
      <div><h2>Request</h2><dl>
        <dt>asks for</dt><dd>${requestText(spec)}, CPU ${spec.resources && spec.resources.cpu}, memory ${spec.resources && spec.resources.memory}</dd>
        <dt>command</dt><dd><code>${(spec.command || []).join(' ')}</code></dd>
        <dt>kind</dt><dd>${spec.kind}</dd>
        <dt>tenant / project</dt><dd>${spec.tenant} / ${spec.project}</dd>
        <dt>queue, class</dt><dd>${spec.queue}, ${spec.priority_class} (priority ${spec.priority}${spec.preemptible ? ', preemptible' : ''})</dd>
        <dt>submitted by</dt><dd>${job.submitted_by}</dd>
        ${spec.max_runtime && html`<dt>max runtime</dt><dd>${spec.max_runtime}</dd>`}
      </dl></div>
      <div><h2>Timeline</h2><dl>
        <dt>submitted</dt><dd>${when(job.created_us)}</dd>
        <dt>scheduled</dt><dd>${when(job.scheduled_us)}${job.scheduled_us ? ` (waited ${span(job.scheduled_us - job.created_us)})` : ''}</dd>
        <dt>started</dt><dd>${when(job.started_us)}</dd>
        <dt>ended</dt><dd>${when(job.ended_us)}</dd>
        ${job.cancelled_by && html`<dt>cancelled by</dt><dd data-testid="cancelled-by">${job.cancelled_by}</dd>`}
        ${job.preempted_by > 0 && html`<dt>preempted by</dt><dd><a href=${`#/jobs/${job.preempted_by}`}>job ${job.preempted_by}</a> ${job.preemption}</dd>`}
        ${job.victims && job.victims.length > 0 && html`<dt>preempted</dt><dd>${job.victims.map((v) => {
          const vid = typeof v === 'object' ? v.job ?? v.id : v;
          return html`<a href=${`#/jobs/${vid}`}>job ${vid}</a> `;
        })}</dd>`}
        ${job.displaced && html`<dt>displaced</dt><dd>${job.displaced}</dd>`}
        <dt>attempt</dt><dd>${job.attempt}</dd>
      </dl></div>
    </section>
    ${job.state === 'queued' && html`<${Explanation} id=${id} />`}
    <${Replicas} job=${job} />
    <${Attempts} job=${job} />
    ${(job.replicas || []).length > 1 && html`<div class="tabs">${job.replicas.map((r, i) => html`<button
      class=${i === replica ? 'on' : ''} onClick=${() => setReplica(i)}>replica ${i}</button>`)}</div>`}
    <${Log} id=${id} replica=${replica} live=${live} />
    <${Events} id=${id} />
  </div>`;
}
