// One state per GPU, as the overview counts them and the nodes page colours them, from
// GET /api/v1/nodes. `allocated` needs the per-GPU holdings, which the API gives admins only: for
// others a GPU that takes work is `in service`.

export const STATES = [
  'allocated',
  'idle',
  'in service',
  'cordoned',
  'draining',
  'maintenance',
  'quarantined',
  'unhealthy',
  'fenced',
  'reconfiguring',
  'offline',
];

export const inMaintenance = (node) => !!node.maintenance && node.maintenance.phase === 'active';

export function gpuState(node, gpu) {
  if (node.state !== 'ready') return 'offline';
  if (gpu.health && gpu.health !== 'healthy') return 'unhealthy';
  if (gpu.state && gpu.state !== 'available') return gpu.state;
  if (inMaintenance(node)) return 'maintenance';
  if (node.cordoned_by) return node.cordoned_by.includes('(drain)') ? 'draining' : 'cordoned';
  if (!('allocated_milli' in gpu)) return 'in service';
  // A MIG instance's grant holds slices, not milli-GPU: any grant makes the GPU allocated.
  return gpu.allocated_milli > 0 || gpu.grants > 0 ? 'allocated' : 'idle';
}

export const poolOf = (node) => (node.labels && node.labels.pool) || 'default';

// {pool/model: {pool, model, total, [state]: n}}
export function countGpus(nodes) {
  const rows = new Map();
  for (const node of nodes) {
    for (const gpu of node.gpus || []) {
      const key = `${poolOf(node)}/${gpu.model}`;
      if (!rows.has(key)) rows.set(key, { pool: poolOf(node), model: gpu.model, total: 0 });
      const row = rows.get(key);
      const state = gpuState(node, gpu);
      row.total += 1;
      row[state] = (row[state] || 0) + 1;
    }
  }
  return [...rows.values()].sort((a, b) => (a.pool + a.model).localeCompare(b.pool + b.model));
}
