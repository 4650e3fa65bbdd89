// Shared pieces: htm bound to Preact, polling, formatting, small components.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

// Calls `load` now and every `ms` (0: once) while the component is shown and `deps` are the same.
// Keeps the last good data when a refresh fails, and says why it failed.
export function usePoll(load, deps, ms = 2000) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  useEffect(() => {
    let live = true;
    let timer = 0;
    const run = async () => {
      try {
        const data = await load();
        if (live) setState({ data, error: null, loading: false });
      } catch (error) {
        if (live) setState((s) => ({ data: s.data, error, loading: false }));
      }
      if (live && ms > 0) timer = setTimeout(run, ms);
    };
    setState((s) => ({ ...s, loading: true }));
    run();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

export function when(us) {
  if (!us) return '';
  const d = new Date(us / 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function span(us) {
  if (us === undefined || us === null || us < 0) return '';
  const s = Math.floor(us / 1e6);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

export const nowUs = () => Date.now() * 1000;

export function pct(v) {
  return v === undefined || v === null || Number.isNaN(v) ? '–' : `${(v * 100).toFixed(1)}%`;
}

export function mib(v) {
  if (!v) return '0';
  return v >= 1024 ? `${(v / 1024).toFixed(v % 1024 ? 1 : 0)} GiB` : `${v} MiB`;
}

// What a job asked for, in one phrase: "2× 1 GPU (H200)", "1 GPU shared 30% 8Gi", "MIG 3g.40gb".
export function requestText(spec) {
  const r = (spec && spec.resources) || {};
  const parts = [];
  if (r.mode === 'partition' || r.profile) parts.push(`MIG ${r.profile || ''}`.trim());
  else if (r.mode === 'shared') parts.push(['GPU share', r.gpu_compute, r.gpu_memory].filter(Boolean).join(' '));
  else if (r.gpus) parts.push(`${r.gpus} GPU${r.gpus === 1 ? '' : 's'}`);
  else parts.push('CPU only');
  const models = [].concat(r.gpu_model || []);
  if (models.length) parts.push(`(${models.join(', ')})`);
  const replicas = (spec && spec.replicas) || 1;
  return `${replicas > 1 ? `${replicas}× ` : ''}${parts.join(' ')}`;
}

export function StateBadge({ state }) {
  return html`<span class=${`badge s-${state}`}>${state}</span>`;
}

export function ErrorLine({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert">${error.message || String(error)}</div>`;
}

// A figure with its definition one hover away.
export function Def({ term, children }) {
  return html`<abbr title=${DEFINITIONS[term] || term}>${children || term}</abbr>`;
}

// docs/utilization.md's definitions, as the API names them.
export const DEFINITIONS = {
  installed: 'installed: every GPU of every registered node, whatever its state (GPU-hours)',
  online: 'online: GPUs of nodes that are ready (heartbeating); not-ready nodes are out',
  schedulable:
    'schedulable: online GPUs that can take new work: not on a cordoned or draining node, not cordoned, fenced or quarantined, and healthy',
  allocated:
    'allocated: GPU-time held by jobs from placement until their processes ended; a MIG instance counts its compute slices, a share its milli-GPU / 1000',
  busy: "busy: each heartbeat's utilization sample per GPU (0..1), counted until the next sample",
  productive: 'productive: the allocated time of jobs whose final state is succeeded',
  idle: 'idle: in service, healthy, and no replica holds any part of it',
  cordoned: 'cordoned: an operator keeps new work off it; what runs there keeps running',
  draining: 'draining: its jobs are being moved off (a drain, or a MIG re-layout waiting for the GPU to empty)',
  maintenance: 'maintenance: its node is inside a maintenance window',
  quarantined:
    'quarantined: a reclaim could not be verified or residue was found; no work until an admin clears it',
  unhealthy: 'unhealthy: the agent reports the device suspect or unhealthy',
  offline: 'offline: its node does not heartbeat (not ready or lost)',
  fenced: 'fenced: held after its node stopped heartbeating, until the node returns or is declared dead',
  reconfiguring: 'reconfiguring: its agent is applying a new MIG layout',
  'in service': 'in service: takes work; which GPUs are allocated is shown to admins only',
};
