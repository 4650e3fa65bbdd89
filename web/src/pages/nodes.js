// Nodes with their GPUs drawn as devices: MIG instances as slices of their GPU, shares as the
// fraction held; health, quarantines, fences, maintenance, re-layouts, versions.
import { useState } from 'preact/hooks';
import { get, post, query } from '../api.js';
import { gpuState, inMaintenance, poolOf } from '../gpus.js';
import { Def, ErrorLine, StateBadge, html, mib, usePoll, when } from '../util.js';

// Compute slices per MIG-capable model (NVIDIA's MIG user guide): A30 has 4, the others 7.
const SLICES = { A30: 4 };

function MigSlices({ gpu }) {
  const total = SLICES[gpu.model] || 7;
  const instances = gpu.mig_live && gpu.mig_live.length ? gpu.mig_live : gpu.mig_instances || [];
  const cells = instances.map((m) => {
    const size = Number((m.profile || '').split('g.')[0]) || 1;
    return html`<span class="slice" title=${`${m.profile} at slot ${m.start}${m.uuid ? ` (${m.uuid})` : ''}`}
      style=${{ left: `${(m.start / total) * 100}%`, width: `${(size / total) * 100}%` }}>${m.profile}</span>`;
  });
  return html`<div class="slices" title=${`${instances.length} MIG instances of ${total} slices`}>${cells}</div>`;
}

function Gpu({ node, gpu }) {
  const state = gpuState(node, gpu);
  const share = gpu.allocated_milli > 0 && gpu.allocated_milli < 1000 ? gpu.allocated_milli / 1000 : null;
  return html`<div class=${`gpu st-${state.replace(' ', '-')}`} data-gpu=${gpu.index}
    title=${`${gpu.model} ${gpu.uuid}\n${state}${gpu.health_reason ? `: ${gpu.health_reason}` : ''}`}>
    <div class="gpu-head"><b>${gpu.index}</b> ${gpu.model} <span class="mode">${gpu.mode}</span></div>
    <div class="gpu-state"><${Def} term=${state} /></div>
    ${gpu.mig_enabled && html`<${MigSlices} gpu=${gpu} />`}
    ${gpu.mode === 'shared' && 'allocated_milli' in gpu && html`<div class="share"
      title=${`${gpu.allocated_milli / 1000} of this GPU held by ${gpu.grants} share(s)`}>
      <span style=${{ width: `${Math.min(100, gpu.allocated_milli / 10)}%` }}></span></div>`}
    ${share !== null && gpu.mode !== 'shared' && html`<div class="small">${share} held</div>`}
    <div class="small">${mib(gpu.memory_mib)}${'utilization_pct' in gpu ? ` · ${gpu.utilization_pct}% busy` : ''}</div>
  </div>`;
}

function Reasons({ node }) {
  const rows = [];
  for (const [gpu, why] of Object.entries(node.quarantined || {})) rows.push(['quarantined', `GPU ${gpu}: ${why}`]);
  for (const [gpu, job] of Object.entries(node.fenced || {})) rows.push(['fenced', `GPU ${gpu}: job ${typeof job === 'object' ? JSON.stringify(job) : job}`]);
  for (const [gpu, who] of Object.entries(node.cordoned_gpus || {})) rows.push(['cordoned', `GPU ${gpu}: ${who}`]);
  for (const [gpu, r] of Object.entries(node.relayouts || {})) rows.push(['re-layout', `GPU ${gpu}: ${r.phase} → ${(r.layout || []).join(', ')}`]);
  for (const [gpu, r] of Object.entries(node.residue || {})) rows.push(['residue', `GPU ${gpu}: ${JSON.stringify(r)}`]);
  for (const [slot, f] of Object.entries(node.instance_faults || {})) rows.push(['instance fault', `${slot}: ${f.reason || JSON.stringify(f)}`]);
  if (node.cordoned_by) rows.push(['cordoned', `node, by ${node.cordoned_by}`]);
  const m = node.maintenance;
  if (m) rows.push(['maintenance', `${m.phase}: ${when(m.start_us)} – ${when(m.end_us)}, by ${m.by}: ${m.reason}`]);
  if (rows.length === 0) return null;
  return html`<ul class="reasons">${rows.map(([k, v]) => html`<li><b>${k}</b> ${v}</li>`)}</ul>`;
}

function NodeCard({ node }) {
  return html`<div class="node" data-node=${node.name}>
    <div class="node-head">
      <a href=${`#/nodes/${encodeURIComponent(node.name)}`}><b>${node.name}</b></a>
      <${StateBadge} state=${node.cordoned_by ? `${node.state}, cordoned` : node.state} />
      ${inMaintenance(node) && html`<${StateBadge} state="maintenance" />`}
      <span class="small">pool ${poolOf(node)} · ${node.replicas} replicas · CPU ${node.cpu_milli / 1000} · ${mib(node.memory_mib)}</span>
    </div>
    <div class="gpus">${(node.gpus || []).map((g) => html`<${Gpu} node=${node} gpu=${g} />`)}</div>
    <${Reasons} node=${node} />
  </div>`;
}

export function Nodes() {
  const { data, error } = usePoll(() => get('/api/v1/nodes'), [], 3000);
  return html`<div class="page"><h1>Nodes</h1><${ErrorLine} error=${error} />
    <div data-testid="nodes">${(data || []).map((n) => html`<${NodeCard} node=${n} />`)}</div></div>`;
}

function NodeActions({ node, onDone }) {
  const [error, setError] = useState(null);
  const act = async (action) => {
    if (!window.confirm(`${action} ${node.name}?`)) return;
    try {
      setError(null);
      await post(`/api/v1/nodes/${encodeURIComponent(node.name)}/${action}`);
      onDone();
    } catch (e) {
      setError(e);
    }
  };
  return html`<div class="actions">
    ${!node.cordoned_by && html`<button onClick=${() => act('cordon')}>Cordon</button>
      <button class="danger" onClick=${() => act('drain')}>Drain</button>`}
    ${node.cordoned_by && html`<button onClick=${() => act('uncordon')}>Uncordon</button>`}
    <${ErrorLine} error=${error} /></div>`;
}

export function Node({ name, me }) {
  const [nonce, setNonce] = useState(0);
  const nodes = usePoll(() => get('/api/v1/nodes'), [nonce], 3000);
  // The node's jobs through the job list's own authorization: a tenant sees only its own.
  const jobs = usePoll(() => get(`/api/v1/jobs${query({ node: name, limit: 200 })}`), [name], 3000);
  const node = (nodes.data || []).find((n) => n.name === name);
  return html`<div class="page">
    <h1>Node ${name}</h1>
    <${ErrorLine} error=${nodes.error} />
    ${nodes.data && !node && html`<p>No node ${name}.</p>`}
    ${node && html`<${NodeCard} node=${node} />`}
    ${node && me.role === 'admin' && html`<${NodeActions} node=${node} onDone=${() => setNonce(nonce + 1)} />`}
    ${node && html`<section><h2>Versions</h2><dl>${Object.entries(node.versions || {})
      .filter(([, v]) => typeof v !== 'object').map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}
      <dt>registered</dt><dd>${when(node.registered_us)}</dd>
      <dt>last heartbeat</dt><dd>${when(node.last_heartbeat_us)}</dd></dl></section>`}
    <section><h2>Jobs on this node</h2><${ErrorLine} error=${jobs.error} />
      <table class="grid" data-testid="node-jobs" data-loaded=${jobs.data ? 'yes' : 'no'}><thead><tr><th>id</th><th>name</th><th>state</th><th>user</th></tr></thead>
      <tbody>${(jobs.data || []).map((j) => html`<tr data-job=${j.id}><td><a href=${`#/jobs/${j.id}`}>${j.id}</a></td>
        <td>${j.name}</td><td><${StateBadge} state=${j.state} /></td><td>${j.submitted_by}</td></tr>`)}</tbody></table>
    </section>
  </div>`;
}
