// The acceptance kit's report (`carve poc run --out DIR`) in a real browser (Debian's Chromium,
// driven by playwright-core), opened from disk with the network refused: the acceptance table has
// a row per expected test with its verdict, and every chart is drawn (a Chart.js chart on the
// canvas, with its bars, and pixels painted). tests/web/poc_report_test.cc runs the kit and this.
//
// With CARVE_URL and CARVE_ADMIN_TOKEN it then signs in to that server's dashboard and finds the
// report the kit kept there (Audit & usage, "Acceptance reports"): its verdict counts, every
// server check holding, and each expected test's verdict once the row is opened.
//
// Usage: node tests/poc-report.mjs DIR/report.html TEST=VERDICT...
// Environment: CARVE_SCREENSHOTS (where the page's screenshot goes), CHROMIUM (the browser),
// CARVE_URL and CARVE_ADMIN_TOKEN (the dashboard's part).
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
    if (process.env.CARVE_URL) await keptOnTheServer(browser);
  } finally {
    await browser.close();
  }
}

// The report as the dashboard shows it, kept by the server.
async function keptOnTheServer(browser) {
  const url = process.env.CARVE_URL;
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${url}/ui/`);
  await page.fill('#token', process.env.CARVE_ADMIN_TOKEN);
  await page.click('button[type=submit]');
  await page.goto(`${url}/ui/#/audit`);
  const row = page.locator('[data-testid=poc-reports] tr[data-report]').first();
  await row.waitFor({ timeout: 20000 });
  const cells = await row.locator('td').allTextContents();
  const passes = expected.filter((e) => e.endsWith('=pass')).length;
  const notRun = expected.filter((e) => e.endsWith('=not-run')).length;
  check('the dashboard lists the kept report with its verdict counts',
    cells[4] === `${passes} pass, 0 fail, 0 inconclusive, ${notRun} not-run`, cells.join(' | '));
  const [held, , of] = cells[5].split(' ');
  check('every server check of it holds', Number(held) > 0 && held === of, cells[5]);
  check("the kit's re-check was sent with it", /^\d+ of \d+ hold$/.test(cells[6]), cells[6]);
  await row.locator('button.link').click();
  const tests = await page.$$eval('[data-testid=poc-tests] tbody tr',
    (trs) => trs.map((tr) => `${tr.cells[0].textContent}=${tr.cells[1].textContent}`));
  for (const e of expected) check(`the dashboard reads ${e}`, tests.includes(e), tests.join(' '));
  check('no script error on the dashboard', problems.length === 0, problems.join('\n'));
  if (shots) await page.screenshot({ path: `${shots}/poc-dashboard.png`, fullPage: true });
}

main().then(
  () => console.log('poc report: every check passed'),
  (e) => {
    console.error(e.message);
    process.exit(1);
  },
);
