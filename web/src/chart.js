// Time-series charts drawn with uPlot on a canvas.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { html } from './util.js';

const COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2'];

// `x`: seconds since the epoch; `lines`: [{label, values (null: no data)}]; `percent`: values are
// fractions shown as percentages.
export function TimeChart({ x, lines, percent = false, height = 220, title }) {
  const box = useRef(null);
  useEffect(() => {
    if (!box.current || !x || x.length === 0) return undefined;
    const opts = {
      title,
      width: Math.max(box.current.clientWidth, 320),
      height,
      scales: percent ? { y: { range: [0, 1] } } : {},
      series: [
        {},
        ...lines.map((l, i) => ({
          label: l.label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          points: { show: true, size: 4 },
          value: (u, v) => (v === null || v === undefined ? '–' : percent ? `${(v * 100).toFixed(1)}%` : v),
        })),
      ],
      axes: [{}, percent ? { values: (u, ticks) => ticks.map((t) => `${Math.round(t * 100)}%`) } : {}],
    };
    const chart = new uPlot(opts, [x, ...lines.map((l) => l.values)], box.current);
    const resize = () => chart.setSize({ width: Math.max(box.current.clientWidth, 320), height });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      chart.destroy();
    };
  }, [x, lines, percent, height, title]);
  const points = lines.reduce((n, l) => n + l.values.filter((v) => v !== null && v !== undefined).length, 0);
  return html`<div class="chart" ref=${box} data-points=${points}></div>`;
}
