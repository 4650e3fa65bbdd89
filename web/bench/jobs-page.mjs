// How long the dashboard's jobs page takes to show its first rows, in Debian's Chromium, against a
// server whose store holds a large history (bench/dashboard-jobs fills it and starts the server).
// Prints one line per view: the median and max over `CARVE_RUNS` loads (default 5), from the
// navigation to the first row on screen.
import { chromium } from 'playwright-core';

const url = process.env.CARVE_URL;
const token = process.env.CARVE_TOKEN;
const runs = Number(process.env.CARVE_RUNS || 5);
const views = [
  ['active jobs (the default view)', '#/jobs'],
  ['every job, first page (with ended jobs)', '#/jobs?all=true'],
  ['queued jobs of kind training', '#/jobs?state=queued&kind=training'],
  ['ended jobs named run-5*', '#/jobs?all=true&state=succeeded&text=run-5'],
];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
await page.goto(`${url}/ui/`);
await page.fill('#token', token);
await page.click('button[type=submit]');
await page.waitForSelector('nav');
for (const [name, hash] of views) {
  const times = [];
  for (let i = 0; i < runs; i += 1) {
    await page.goto(`${url}/ui/#/`);
    await page.waitForSelector('[data-testid=gpu-states]');
    const start = Date.now();
    await page.goto(`${url}/ui/${hash}`);
    await page.waitForSelector('[data-testid=jobs] tbody tr[data-job]', { timeout: 60000 });
    times.push(Date.now() - start);
  }
  times.sort((a, b) => a - b);
  console.log(`${name}: median ${times[Math.floor(times.length / 2)]} ms, max ${times[times.length - 1]} ms (${runs} loads)`);
}
await browser.close();
