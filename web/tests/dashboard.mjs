// The dashboard in a real browser (Debian's Chromium, driven by playwright-core), against a
// running cluster that tests/web/dashboard_test.cc starts and fills. Each check prints a line;
// the first that fails stops the run with exit code 1 and says what it saw.
//
// Environment: CARVE_URL, CARVE_ADMIN_TOKEN, CARVE_A_TOKEN and CARVE_A_USER (tenant A's member),
// CARVE_B_TOKEN (tenant B's member), CARVE_JOB_A (A's running job, submitted with the CLI),
// CARVE_JOB_UNFIT (A's job that can never fit), CARVE_JOB_B (B's job), CARVE_NODE_A (the node
// running A's job), CARVE_SCREENSHOTS (where the pages' screenshots go), CHROMIUM (the browser).
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const url = env('CARVE_URL');
const shots = env('CARVE_SCREENSHOTS');
const jobA = env('CARVE_JOB_A');
const jobUnfit = env('CARVE_JOB_UNFIT');
const jobB = env('CARVE_JOB_B');
const nodeA = env('CARVE_NODE_A');
const userA = env('CARVE_A_USER');
const TIMEOUT = 20000;

mkdirSync(shots, { recursive: true });

function check(what, ok, saw) {
  if (!ok) throw new Error(`FAILED: ${what}; saw: ${saw}`);
  console.log(`ok: ${what}`);
}

// Problems the page reports: script errors and CSP violations (a refused fetch's 401/404 is an
// answer the page handles, not a problem).
function watch(page, problems) {
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => d.accept());
}

async function signIn(browser, token, problems) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  watch(page, problems);
  await page.goto(`${url}/ui/`);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

async function rowsOf(page, selector) {
  return page.$$eval(`${selector} tbody tr[data-job]`, (rows) => rows.map((r) => r.dataset.job));
}

// Waits until the table shows the jobs it loads (the first answer), then returns their ids.
async function loadedRows(page, selector, expected) {
  await page.waitForFunction(
    ({ selector, expected }) => [...document.querySelectorAll(`${selector} tbody tr[data-job]`)]
      .some((r) => r.dataset.job === expected),
    { selector, expected }, { timeout: TIMEOUT });
  return rowsOf(page, selector);
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const problems = [];
  try {
    // A wrong token is refused, and the sign-in form says so.
    const wrong = await signIn(browser, 'not-a-token', problems);
    await wrong.waitForSelector('.signin [role=alert]', { timeout: TIMEOUT });
    const refusal = await wrong.textContent('.signin [role=alert]');
    check('a wrong token is refused', /refused/.test(refusal), refusal);
    check('nothing is shown to a wrong token', (await wrong.$('nav')) === null, 'the navigation bar');
    await shot(wrong, 'signin-refused');

    // Tenant A: its job, submitted with the CLI, is in the list and on its node's page.
    const a = await signIn(browser, env('CARVE_A_TOKEN'), problems);
    await a.waitForSelector('[data-testid=me]', { timeout: TIMEOUT });
    await a.goto(`${url}/ui/#/jobs`);
    const listA = await loadedRows(a, '[data-testid=jobs]', jobA);
    check(`tenant A sees its job ${jobA} in the list`, listA.includes(jobA), listA.join(','));
    await shot(a, 'jobs');
    await a.goto(`${url}/ui/#/nodes/${nodeA}`);
    const nodeRowsA = await loadedRows(a, '[data-testid=node-jobs]', jobA);
    check(`tenant A sees its job on node ${nodeA}`, nodeRowsA.includes(jobA), nodeRowsA.join(','));

    // The page of a job that cannot fit explains why, gate by gate, with what would make it fit.
    await a.goto(`${url}/ui/#/jobs/${jobUnfit}`);
    await a.waitForSelector('[data-testid=explanation] .fix', { timeout: TIMEOUT });
    const why = await a.textContent('[data-testid=explanation]');
    check('the unfit job\'s page shows its explanation', /placement/.test(why) && /cannot fit/.test(why), why);
    await shot(a, 'job-waiting');

    // Tenant B never sees A's job: not in the list, not by URL, not on the node's page.
    const b = await signIn(browser, env('CARVE_B_TOKEN'), problems);
    await b.waitForSelector('[data-testid=me]', { timeout: TIMEOUT });
    await b.goto(`${url}/ui/#/jobs`);
    const listB = await loadedRows(b, '[data-testid=jobs]', jobB);
    check(`tenant B's list has its own job ${jobB} and not ${jobA}`, !listB.includes(jobA), listB.join(','));
    await b.goto(`${url}/ui/#/jobs/${jobA}`);
    await b.waitForSelector('.page [role=alert]', { timeout: TIMEOUT });
    const byUrl = await b.textContent('.page');
    check(`tenant B opening job ${jobA} by URL gets "no job"`, /no job/.test(byUrl) && !byUrl.includes(userA), byUrl);
    await b.goto(`${url}/ui/#/nodes/${nodeA}`);
    await b.waitForSelector('.node', { timeout: TIMEOUT });
    await b.waitForSelector('[data-testid=node-jobs][data-loaded=yes]', { timeout: TIMEOUT });
    const nodeRowsB = await rowsOf(b, '[data-testid=node-jobs]');
    check(`tenant B does not see job ${jobA} on node ${nodeA}`, !nodeRowsB.includes(jobA), nodeRowsB.join(','));

    // The admin's overview draws the utilization chart with data points.
    const admin = await signIn(browser, env('CARVE_ADMIN_TOKEN'), problems);
    await admin.waitForSelector('[data-testid=gpu-states]', { timeout: TIMEOUT });
    await admin.waitForFunction(() => {
      const c = document.querySelector('.chart');
      return c && Number(c.dataset.points) > 0 && c.querySelector('canvas');
    }, null, { timeout: TIMEOUT });
    const blue = await admin.$eval('.chart canvas', (canvas) => {
      const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (Math.abs(data[i] - 37) < 30 && Math.abs(data[i + 1] - 99) < 30 && Math.abs(data[i + 2] - 235) < 30) n += 1;
      }
      return n;
    });
    check('the utilization chart draws its allocated/schedulable series', blue > 0, `${blue} pixels of its colour`);
    const states = await admin.textContent('[data-testid=gpu-states]');
    check('the overview counts allocated GPUs', /allocated/.test(states), states);
    await shot(admin, 'overview');
    for (const [hash, name, ...ready] of [
      ['#/nodes', 'nodes', '[data-testid=nodes] .gpu'],
      ['#/queues', 'queues', '[data-testid=queues] .queue', '.chart canvas'],
      ['#/audit', 'audit', '[data-testid=chain] .ok', '[data-testid=usage] tbody tr'],
      [`#/jobs/${jobA}`, 'job-running', '[data-testid=replicas]'],
      ['#/nodes/%25zz%', 'node-malformed', 'nav', '.page h1'],
    ]) {
      await admin.goto(`${url}/ui/${hash}`);
      for (const selector of ready) await admin.waitForSelector(selector, { timeout: TIMEOUT });
      await shot(admin, name);
    }

    // Each queue's quota and use over time: the server samples every 5 s, the page polls as often.
    await admin.goto(`${url}/ui/#/queues`);
    await admin.waitForFunction(() => [...document.querySelectorAll('[data-testid=queue-history] .chart')]
      .some((c) => Number(c.dataset.points) > 0 && c.querySelector('canvas')), null, { timeout: 30000 });
    const history = await admin.$$eval('[data-testid=queue-history] .chart', (charts) => charts.map((c) => c.dataset.points));
    check('a queue charts its use over time', history.some((p) => Number(p) > 0), history.join(' '));
    await shot(admin, 'queues-history');

    // The log counts bytes, not characters: two bytes that are not UTF-8 and an é, then a line
    // every half second; every line read while the page follows the log is whole.
    await admin.goto(`${url}/ui/#/jobs/${jobA}`);
    // The last tick the page shows is at least `n` (a function the page runs: no eval under CSP).
    const tickAtLeast = (n) => {
      const el = document.querySelector('[data-testid=log]');
      const ticks = el ? [...el.textContent.matchAll(/tick (\d+)/g)] : [];
      return ticks.length > 0 && Number(ticks[ticks.length - 1][1]) >= n;
    };
    await admin.waitForFunction(tickAtLeast, 1, { timeout: TIMEOUT });
    const seen = await admin.$eval('[data-testid=log]', (el) => {
      const ticks = [...el.textContent.matchAll(/tick (\d+)/g)];
      return Number(ticks[ticks.length - 1][1]);
    });
    await admin.waitForFunction(tickAtLeast, seen + 4, { timeout: TIMEOUT });
    const log = await admin.textContent('[data-testid=log]');
    const whole = log.split('\n').slice(0, -1); // the last piece may still be arriving
    const broken = whole.filter((l) => !/^\uFFFD\uFFFD café$|^tick \d+$/.test(l));
    check('the log shows every line whole after bytes that are not UTF-8', /café\ntick 1\n/.test(log) && broken.length === 0,
      JSON.stringify(broken.length ? broken : log.slice(0, 200)));

    // Tenant A cancels its job from its page: the job ends cancelled by A's user.
    await a.goto(`${url}/ui/#/jobs/${jobA}`);
    await a.waitForSelector('.actions button.danger', { timeout: TIMEOUT });
    await a.click('.actions button.danger');
    await a.waitForSelector('[data-testid=cancelled-by]', { timeout: TIMEOUT });
    await a.waitForFunction(() => /cancelled/.test(document.querySelector('h1 .badge').textContent),
      null, { timeout: TIMEOUT });
    const by = await a.textContent('[data-testid=cancelled-by]');
    check(`cancelling from the dashboard ends job ${jobA} cancelled by ${userA}`, by.trim() === userA, by);
    await shot(a, 'job-cancelled');

    check('no script error or refused resource on any page', problems.length === 0, problems.join('\n'));
  } finally {
    await browser.close();
  }
}

main().then(
  () => console.log('dashboard: every check passed'),
  (e) => {
    console.error(e.message);
    process.exit(1);
  },
);
