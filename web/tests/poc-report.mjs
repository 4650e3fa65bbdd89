// The acceptance kit's report (`carve poc run --out DIR`) in a real browser (Debian's Chromium,
// driven by playwright-core), opened from disk with the network refused: the acceptance table has
// a row per expected test with its verdict, and every chart is drawn (a Chart.js chart on the
// canvas, with its bars, and pixels painted). tests/web/poc_report_test.cc runs the kit and this.
//
// Usage: node tests/poc-report.mjs DIR/report.html TEST=VERDICT...
// Environment: CARVE_SCREENSHOTS (where the page's screenshot goes), CHROMIUM (the browser).
import { chromium } from 'playwright-core';

const [report, ...expected] = process.argv.slice(2);
if (!report || expected.length === 0) throw new Error('usage: poc-report.mjs REPORT TEST=VERDICT...');
const shots = process.env.CARVE_SCREENSHOTS;

function check(what, ok, saw) {
  if (!ok) throw new Error(`FAILED: ${what}; saw: ${saw}`);
  console.log(`ok: ${what}`);
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const fetched = [];
    // Self-contained: anything but the file itself is refused, and counted.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith('file:')) return route.continue();
      fetched.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
    await page.goto(`file://${report}`);

    const rows = await page.$$eval('#acceptance tbody tr', (trs) =>
      trs.map((tr) => ({ id: tr.cells[0].querySelector('a').textContent.trim(), verdict: tr.className })),
    );
    check(`the acceptance table has ${expected.length} rows`, rows.length === expected.length, JSON.stringify(rows));
    for (const e of expected) {
      const [id, verdict] = e.split('=');
      const row = rows.find((r) => r.id === id);
      check(`${id} reads ${verdict}`, row && row.verdict === verdict, JSON.stringify(row));
    }

    const charts = await page.$$eval('canvas.chart', (canvases) =>
      canvases.map((c) => {
        // eslint-disable-next-line no-undef
        const chart = Chart.getChart(c);
        const pixels = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let painted = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted += 1;
        const bars = chart ? chart.data.datasets.reduce((n, s) => n + s.data.length, 0) : 0;
        return { id: c.id, drawn: Boolean(chart), bars, painted, area: c.width * c.height };
      }),
    );
    check('the report has charts', charts.length > 0, charts.length);
    for (const c of charts) {
      check(`${c.id} is drawn with its bars`, c.drawn && c.bars > 0, JSON.stringify(c));
      check(`${c.id} has pixels painted`, c.painted > c.area / 100, JSON.stringify(c));
    }
    check('the workload profile is there', (await page.$$('#profile tbody tr')).length > 0, 'no rows');
    check('nothing was fetched from the network', fetched.length === 0, fetched.join(' '));
    check('no script error', problems.length === 0, problems.join('\n'));
    if (shots) await page.screenshot({ path: `${shots}/poc-report.png`, fullPage: true });
  } finally {
    await browser.close();
  }
}

main().then(
  () => console.log('poc report: every check passed'),
  (e) => {
    console.error(e.message);
    process.exit(1);
  },
);
