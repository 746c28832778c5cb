// The dashboard in a real browser: the real evoscaled (temp database, port 0), a study driven
// through the real evoscale CLI, and Debian's Chromium driven by playwright-core.
// Run through run_dashboard_test.sh (ctest: web_dashboard), which skips when node, Chromium or
// node_modules is missing. EVOSCALE_BIN_DIR names the folder of evoscaled and evoscale.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.EVOSCALE_BIN_DIR || path.join(ROOT, 'build/bin');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.EVOSCALE_SCREENSHOT_DIR || path.join(ROOT, 'build/web-screenshots');
const WAIT_MS = 20000;  // deadline for every condition the page must reach
const ADMIN_TOKEN = 'web-test-admin-token-0123456789';

let dir;
let browser;
const servers = [];

// Starts evoscaled and resolves to {grpc, http} from its "listening" line.
async function startServer(extra = []) {
  const db = path.join(dir, `evoscale-${servers.length}.db`);
  const proc = spawn(path.join(BIN, 'evoscaled'),
    ['--db', db, '--grpc', '127.0.0.1:0', '--http', '127.0.0.1:0', ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.push(proc);
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const lines = readline.createInterface({ input: proc.stdout });
  const first = await Promise.race([
    once(lines, 'line').then(([line]) => line),
    once(proc, 'exit').then(([code]) => { throw new Error(`evoscaled exited ${code}: ${stderr}`); }),
    new Promise((_, reject) => setTimeout(() => reject(new Error(`evoscaled silent: ${stderr}`)), 30000).unref()),
  ]);
  const listening = JSON.parse(first);
  assert.equal(listening.event, 'listening');
  // What evoscaled said, for the error of a command that fails against it.
  const state = () => `evoscaled ${proc.exitCode === null && proc.signalCode === null
    ? `running (pid ${proc.pid})` : `exited (code ${proc.exitCode}, signal ${proc.signalCode})`}; `
    + `its stderr: ${stderr.slice(-4000) || '(empty)'}`;
  return { grpc: listening.grpc, http: `http://${listening.http}`, state };
}

// Runs BIN/`tool` with `args`; its stdout. On failure the error carries the tool's stderr and
// the state of the server it talked to.
async function run(server, tool, args, options = {}) {
  try {
    const { stdout } = await promisify(execFile)(path.join(BIN, tool), args, options);
    return stdout;
  } catch (e) {
    throw new Error(`${tool} ${args.join(' ')}: ${e.message}\n--- ${server.state()}`);
  }
}

async function cli(server, ...args) {
  return run(server, 'evoscale', ['--server', server.grpc, '--token', ADMIN_TOKEN, ...args], { cwd: ROOT });
}

async function suggest(server, study, count) {
  const out = await cli(server, 'suggest', study, '--count', String(count), '--client-id', 'web-test', '--json');
  return JSON.parse(out).trials;
}

// Runs web_seed (gRPC) against `server`; its JSON summary.
async function seed(server, ...args) {
  return JSON.parse(await run(server, 'web_seed', ['--server', server.grpc, '--token', ADMIN_TOKEN, ...args],
    { maxBuffer: 1 << 20 }));
}

async function getJson(server, p) {
  const res = await fetch(server.http + p);
  assert.equal(res.status, 200, `${p}: ${await res.clone().text()}`);
  return res.json();
}

// Saves a full-page screenshot as SHOTS/NAME.png.
async function shot(page, name) {
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

// What a chart container recorded, and what its uPlot holds: series (uPlot's, without x) and
// values per series that are numbers.
async function chart(page, id) {
  return page.evaluate((id) => {
    const el = document.getElementById(id) || document.querySelector(id);
    if (!el) return null;
    const u = el._uplot;
    return {
      series: Number(el.dataset.series), points: Number(el.dataset.points), empty: el.dataset.empty === '1',
      text: el.innerText, label: el.getAttribute('aria-label'), ds: { ...el.dataset },
      uplot: u ? u.data.slice(1).map((ys) => ys.filter((v) => v !== null && v !== undefined && Number.isFinite(v)).length) : null,
      x: u ? Array.from(u.data[0]) : null,
      data: u ? u.data.slice(1).map((ys) => Array.from(ys)) : null,
    };
  }, id);
}

// True when the canvas (uPlot's or our own) in `selector` has painted pixels of `min` or more
// distinct non-white colours: drawn, not just sized.
async function painted(page, selector) {
  return page.evaluate((sel) => {
    const c = document.querySelector(`${sel} canvas`);
    if (!c || !c.width || !c.height) return 0;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let inked = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 230 || d[i + 1] < 230 || d[i + 2] < 230)) inked++;
    return inked;
  }, selector);
}

async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, ...options });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors };
}

// Waits until fn(arg) is true in the page; on timeout, says which condition and shows the page.
async function until(page, what, fn, arg) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT_MS });
  } catch (e) {
    const text = await page.evaluate(() => document.body.innerText).catch(() => '(no page)');
    throw new Error(`page never showed ${what}: ${e.message}\n--- page text ---\n${text}`);
  }
}

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'evoscale-web-'));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // playwright-core gives every launch a fresh, empty profile (--user-data-dir) of its own.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  for (const proc of servers) {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    }
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('studies list, study page, live update and API errors', async () => {
  const server = await startServer();
  const study = JSON.parse(await cli(server, 'study', 'create', '-f', 'examples/study.yaml', '--json')).name;
  assert.equal(study, 'studies/1');
  const trials = await suggest(server, study, 3);
  assert.equal(trials.length, 3);
  const losses = [0.52, 0.47, 0.49];
  for (const [i, t] of trials.entries()) await cli(server, 'complete', t.name, `logloss=${losses[i]}`);
  const bestId = String(trials[1].id);

  // Static assets: served without a token, never cached stale.
  for (const [file, type] of [['/', 'text/html'], ['/app.js', 'text/javascript'], ['/style.css', 'text/css']]) {
    const res = await fetch(server.http + file);
    assert.equal(res.status, 200, file);
    assert.match(res.headers.get('content-type'), new RegExp(`^${type}`), file);
    assert.equal(res.headers.get('cache-control'), 'no-cache', file);
  }

  const { page, errors } = await newPage();
  await page.goto(`${server.http}/`);

  // Studies list: the study with its counts and progress.
  await until(page, 'the study with 3 trials, 3 completed', () => {
    const row = document.querySelector('tr[data-study="studies/1"]');
    return row && row.querySelector('.trials').textContent === '3' &&
      row.querySelector('.completed').textContent.trim().startsWith('3') &&
      row.textContent.includes('ctr-demo') && row.textContent.includes('ACTIVE');
  });
  assert.equal(await page.locator('tr[data-study="studies/1"] progress').getAttribute('max'), '24');

  // The study page, by its link.
  await page.click('tr[data-study="studies/1"] a');
  await until(page, 'the study page with 3 trials, a history of 3 and the optimal trial', (best) =>
    document.querySelectorAll('#trials tbody tr').length === 3 &&
      document.querySelector('#chart-history')?.dataset.points === '3' &&
      document.querySelector(`#optimal tr[data-trial-id="${best}"]`) !== null, bestId);
  assert.equal(new URL(page.url()).hash, '#/studies/1');
  const history = await chart(page, '#chart-history');
  assert.deepEqual(history.uplot, [3, 3]);          // every value, and the best so far
  assert.deepEqual(history.data[0], losses);         // by trial id
  assert.deepEqual(history.data[1], [0.52, 0.47, 0.47]);
  assert.ok(await painted(page, '#chart-history') > 100, 'the history canvas is painted');
  const specText = await page.locator('#spec').textContent();  // collapsed: not visible text
  for (const s of ['logloss', 'MINIMIZE', 'lr_dense', 'optimizer_sparse', 'ftrl_l1']) assert.ok(specText.includes(s), s);
  const row = await page.locator(`#trials tr[data-trial-id="${bestId}"]`).innerText();
  assert.match(row, /SUCCEEDED/);
  assert.match(row, /0\.47/);

  // A fourth trial, completed through the CLI, shows up without a reload.
  const [fourth] = await suggest(server, study, 1);
  await until(page, 'the new ACTIVE trial', (id) =>
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('ACTIVE'), String(fourth.id));
  await cli(server, 'complete', fourth.name, 'logloss=0.41');
  await until(page, 'the fourth completed trial as the new optimum', (id) =>
    document.querySelector('#completed-count')?.textContent === '4' &&
    document.querySelector('#chart-history')?.dataset.points === '4' &&
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('SUCCEEDED') &&
    document.querySelector(`#optimal tr[data-trial-id="${id}"]`) !== null, String(fourth.id));
  assert.deepEqual((await chart(page, '#chart-history')).data[1], [0.52, 0.47, 0.47, 0.41]);

  // A trial stopped early shows as STOPPED, and its better loss does not make it optimal.
  const [fifth] = await suggest(server, study, 1);
  await cli(server, 'trial', 'stop', fifth.name);
  await cli(server, 'trial', 'complete', fifth.name, 'logloss=0.30');
  await until(page, 'the stopped trial, never optimal', (id) =>
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('STOPPED') &&
    document.querySelector('#completed-count')?.textContent === '5' &&
    document.querySelector(`#optimal tr[data-trial-id="${id}"]`) === null, String(fifth.id));
  await shot(page, 'study-small');

  // An unknown study: the API's error is on the page.
  await page.evaluate(() => { location.hash = '#/studies/999'; });
  await until(page, 'the NOT_FOUND error', () => {
    const el = document.querySelector('#error');
    return el && !el.hidden && el.textContent.includes('404') && el.textContent.includes('NOT_FOUND') &&
      el.textContent.includes('studies/999');
  });

  // Workloads with their recommendation.
  await cli(server, 'workload', 'put', 'default/ranker', '--min-replicas', '2');
  await page.click('#nav-workloads');
  // Without samples: why there is no recommendation yet, in its row.
  await until(page, 'the workload, with no recommendation yet', () => {
    const row = document.querySelector('tr[data-workload="default/ranker"]');
    return row && row.querySelector('.error-cell')?.textContent.includes('no samples yet');
  });
  await shot(page, 'workloads-list');
  // Each cell under its own header (the name used to be missing, shifting the row left).
  const heads = await page.locator('#workloads thead th').allInnerTexts();
  const cells = await page.locator('tr[data-workload="default/ranker"] td').allInnerTexts();
  const cell = (name) => cells[heads.indexOf(name)].trim();
  assert.equal(cell('Name'), 'default/ranker');
  assert.equal(cell('Kind'), 'SERVING');
  assert.equal(cell('Policy'), 'EVOSCALE');
  assert.equal(cell('Samples'), '0');

  // Back to the list: the error clears.
  await page.evaluate(() => { location.hash = '#/'; });
  await until(page, 'the list without the error', () =>
    document.querySelector('#error').hidden && document.querySelector('tr[data-study="studies/1"]') !== null);
  assert.deepEqual(errors, []);
});

test('a managed study: requested against used, usage over time, capacity, live', async () => {
  // evoscaled runs the trials itself (/bin/sh, in cgroups where it can), one at a time, each
  // for about two seconds: the first three request the template's 256 MiB, the fourth what
  // their peaks teach.
  const server = await startServer(['--capacity', 'cpu=2,memory=1Gi']);
  const file = path.join(dir, 'managed.json');
  await writeFile(file, JSON.stringify({
    display_name: 'managed-web',
    spec: {
      metrics: [{ name: 'loss', goal: 'MINIMIZE' }],
      parameters: [{ name: 'x', double_spec: { min: 0, max: 1 } }],
      algorithm: { algorithm: 'RANDOM' },
      max_trials: 4,
      trial_template: {
        command: '/bin/sh',
        args: ['-c', 'sleep 2.2; echo "{\\"event\\":\\"final\\",\\"metrics\\":{\\"loss\\":$1}}"', 'trial', '${x}'],
        resources: { cpu_cores: 1, memory_bytes: String(256 << 20) },
        parallel_trials: 1,
      },
    },
  }));
  // The page is up before the study starts (its four trials take about nine seconds, and a
  // browser starting on a loaded machine can take longer), then follows the study by hash.
  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/`);
  await until(page, 'the study list', () => document.querySelector('#error').hidden);
  const study = JSON.parse(await cli(server, 'study', 'create', '-f', file, '--json')).name;
  await page.evaluate((h) => { location.hash = h; }, `#/${study}`);
  // Live: the history grows while the study runs, without a reload.
  await until(page, 'a history of some but not all four trials', () => {
    const n = Number(document.querySelector('#chart-history')?.dataset.points || 0);
    return n >= 1 && n < 4;
  });
  await until(page, 'four trials with requested and peak memory and cores', () => {
    const rows = [...document.querySelectorAll('#trials tbody tr')];
    return rows.length === 4 && rows.every((r) => r.textContent.includes('SUCCEEDED') && !r.textContent.includes('—')) &&
      document.querySelector('#chart-history')?.dataset.points === '4';
  });
  const heads = await page.locator('#trials thead th').allInnerTexts();
  for (const h of ['Memory requested', 'Memory peak', 'CPU requested', 'CPU used']) {
    assert.ok(heads.some((t) => t.startsWith(h)), `${h} in ${heads.join('|')}`);
  }
  const cell = async (id, head) => {
    const i = heads.findIndex((t) => t.startsWith(head));
    return (await page.locator(`#trials tr[data-trial-id="${id}"] td`).nth(i).innerText()).trim();
  };
  assert.equal(await cell(1, 'Memory requested'), '256 MiB');
  assert.notEqual(await cell(4, 'Memory requested'), '256 MiB');  // right-sized from the first three's peaks
  assert.equal(await cell(1, 'CPU requested'), '1');
  assert.match(await cell(1, 'Memory peak'), /^[\d.]+ (B|KiB|MiB|GiB)$/);

  // Requested against used, per trial: 4 requests and 4 peaks; 4 requests and 4 means.
  await until(page, 'the resource charts', () => document.querySelector('#chart-memory')?.dataset.points === '8');
  const memory = await chart(page, '#chart-memory');
  assert.deepEqual(memory.uplot, [4, 4]);
  assert.deepEqual(memory.x, [1, 2, 3, 4]);
  assert.equal(memory.data[0][0], 256 * 2 ** 20);
  assert.ok(memory.data[1].every((peak, i) => peak > 0 && peak < memory.data[0][i]), 'each peak under its request');
  assert.deepEqual((await chart(page, '#chart-cpu')).uplot, [4, 4]);
  // Capacity: one trial of 1 core at a time, against the 2 cores of --capacity.
  const capacity = await chart(page, '#chart-capacity');
  assert.equal(Math.max(...capacity.data[0]), 1);
  assert.equal(Math.max(...capacity.data[1]), 1);
  assert.ok(capacity.data[2].every((c) => c === 2), 'the capacity line');
  assert.equal(capacity.data[0].at(-1), 0);  // all done: nothing held
  await shot(page, 'study-managed');

  // One trial's usage over time, from its once-a-second samples, under its request.
  await page.click('#trials tr[data-trial-id="1"] a');
  await until(page, 'the trial page with its usage over time', () =>
    Number(document.querySelector('#chart-trial-usage')?.dataset.points || 0) > 0 &&
    document.querySelector('#chart-trial-cpu')?.dataset.drawn === '1');
  const usage = await chart(page, '#chart-trial-usage');
  assert.ok(usage.uplot[0] >= 1, `usage samples: ${usage.uplot}`);
  assert.ok(usage.data[1].every((v) => v === 256 * 2 ** 20), 'the request drawn as a line');
  assert.ok(usage.x.every((t, i) => i === 0 || t > usage.x[i - 1]), 'in time order');
  assert.match(await page.locator('#trial-details').innerText(), /SUCCEEDED/);
  await shot(page, 'trial-managed');
  assert.deepEqual(errors, []);
});

// Reads the trial table's column `key` (e.g. "metric:logloss") as numbers, in page order.
async function column(page, key) {
  return page.evaluate((key) => [...document.querySelectorAll(`#trials tbody td[data-col="${key}"]`)]
    .map((td) => (td.textContent === '' ? null : Number(td.textContent))), key);
}

async function pagerText(page) {
  return (await page.locator('#trials-page').innerText()).trim();
}

test('a 2,000-trial study with learning curves: every chart, sorting, filtering, keyboard', async () => {
  const server = await startServer();
  const seeded = await seed(server, 'curves', '--trials', '2000', '--steps', '20');
  assert.equal(seeded.succeeded + seeded.stopped + seeded.infeasible, 2000);
  const id = seeded.study.replace('studies/', '');
  // The whole table, for the expectations below (the page itself never loads it).
  const all = [];
  for (let token = ''; ;) {
    const page = await getJson(server, `/api/v1/studies/${id}/trials?page_size=1000&page_token=${encodeURIComponent(token)}`);
    all.push(...page.trials);
    token = page.next_page_token;
    if (!token) break;
  }
  assert.equal(all.length, 2000);
  const param = (t, n) => t.parameters.find((p) => p.name === n);
  const succeeded = all.filter((t) => t.state === 'SUCCEEDED');
  assert.equal(succeeded.length, seeded.succeeded);

  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/studies/${id}`);
  await until(page, 'every chart drawn', () => document.body.dataset.chartsMs !== undefined &&
    ['history', 'curves', 'parallel', 'importance'].every((c) => document.querySelector(`#chart-${c}`)?.dataset.drawn === '1'));

  // Optimisation history: every succeeded trial (under the 2,000-point budget) and the best.
  const history = await chart(page, '#chart-history');
  assert.deepEqual(history.uplot, [seeded.succeeded, seeded.succeeded]);
  assert.equal(history.data[1].at(-1), seeded.best);
  assert.deepEqual(history.x, succeeded.map((t) => Number(t.id)));
  assert.ok(await painted(page, '#chart-history') > 1000);
  // Learning curves: 100 of the 1,960 trials that reported any, the stopped ones marked.
  const analysis = await getJson(server, `/api/v1/studies/${id}/analysis?max_points=2000`);
  assert.equal(analysis.curves.total, seeded.curves);
  const curves = await chart(page, '#chart-curves');
  assert.equal(curves.series, 100);
  assert.equal(curves.uplot.length, 100);
  const stoppedLines = analysis.curves.lines.filter((l) => l.state === 'STOPPED');
  assert.ok(stoppedLines.length > 0, 'some curves of trials stopped early are drawn');
  assert.equal(Number(curves.ds.stopped), stoppedLines.length);
  const dashed = await page.evaluate(() => document.querySelector('#chart-curves')._uplot.series.filter((s) => /stopped early/.test(s.label)).length);
  assert.equal(dashed, stoppedLines.length);
  // Each line holds its trial's values: 20 steps, 10 for a trial stopped early.
  assert.equal(curves.uplot.reduce((a, b) => a + b, 0),
    analysis.curves.lines.reduce((a, l) => a + (l.state === 'STOPPED' ? seeded.steps / 2 : seeded.steps), 0));
  // Parallel coordinates: one line per succeeded trial.
  assert.equal((await chart(page, '#chart-parallel')).ds.lines, String(seeded.succeeded));
  assert.ok(await painted(page, '#chart-parallel') > 1000);
  // Importance: lr drives the loss by construction.
  const bars = await page.locator('#chart-importance .bar-name').allInnerTexts();
  assert.equal(bars.length, 5);
  assert.equal(bars[0], 'lr');
  // Slices: one per parameter; momentum only where the optimizer is SGD.
  const slices = await page.locator('#chart-slices .slice').count();
  assert.equal(slices, 5);
  for (const name of ['lr', 'layers', 'optimizer', 'momentum', 'dropout']) {
    const c = await chart(page, `#chart-slices .slice[data-param="${name}"]`);
    assert.equal(c.points, succeeded.filter((t) => param(t, name)).length, name);
  }
  assert.ok(await page.locator('#card-pareto').isHidden(), 'one metric: no Pareto front');
  // Cost (each trial's last elapsed seconds on one core): the best so far at every ended
  // trial, and every trial with a value against what it cost.
  const costBest = await chart(page, '#chart-cost-best');
  assert.equal(costBest.x.length, 2000);
  assert.equal(costBest.points, 2000);  // trial 1 succeeded: a best from the first on
  assert.equal(costBest.data[0].at(-1), seeded.best);
  assert.equal(costBest.ds.budget, '0');  // no budget, no marker
  const costQuality = await chart(page, '#chart-cost-quality');
  assert.equal(costQuality.points, seeded.succeeded + seeded.stopped);
  assert.equal(Number(costQuality.ds.stopped), seeded.stopped);
  assert.equal(await page.locator('#study-budget').count(), 0);
  // No resources for ask/tell trials: the cards say how to get them.
  assert.match((await chart(page, '#chart-memory')).text, /trial_template/);
  await shot(page, 'study-2000');

  // Sorting, by the header's button: loss ascending starts at the best.
  await page.click('#trials th[data-key="metric:logloss"] button');
  await until(page, 'sorted by loss', () => document.querySelector('#trials th[data-key="metric:logloss"]')?.getAttribute('aria-sort') === 'ascending');
  let losses = (await column(page, 'metric:logloss'));
  assert.equal(losses.length, 50);
  assert.ok(Math.abs(losses[0] - seeded.best) < 5e-4, `${losses[0]} vs ${seeded.best}`);
  assert.ok(losses.every((v, i) => i === 0 || v >= losses[i - 1]), 'ascending');
  // Again, by keyboard: descending.
  await page.focus('#trials th[data-key="metric:logloss"] button');
  await page.keyboard.press('Enter');
  await until(page, 'sorted by loss, descending', () => document.querySelector('#trials th[data-key="metric:logloss"]')?.getAttribute('aria-sort') === 'descending');
  losses = await column(page, 'metric:logloss');
  assert.ok(losses.every((v, i) => i === 0 || v <= losses[i - 1]), 'descending');
  // Trials without a value (stopped, infeasible) come last whichever the direction.
  assert.ok(losses.every((v) => v !== null));
  // By a parameter.
  await page.click('#trials th[data-key="param:lr"] button');
  await until(page, 'sorted by lr', () => document.querySelector('#trials th[data-key="param:lr"]')?.getAttribute('aria-sort') === 'ascending');
  const lrs = await column(page, 'param:lr');
  assert.ok(lrs.every((v, i) => i === 0 || v >= lrs[i - 1]), 'lr ascending');
  assert.ok(Math.abs(lrs[0] - Math.min(...all.map((t) => param(t, 'lr').double_value))) < 1e-7);

  // Filtering: by state, by a numeric range, by categories; paged by the server.
  await page.selectOption('#trial-state', 'STOPPED');
  await until(page, 'only the stopped trials', (n) => document.querySelector('#trials-page')?.textContent.endsWith(`of ${n}`), seeded.stopped);
  assert.ok((await page.locator('#trials tbody tr').allInnerTexts()).every((r) => r.includes('STOPPED')));
  await page.selectOption('#trial-state', '');
  await page.selectOption('#filter-param', 'lr');
  await page.fill('#filter-min', '0.001');
  await page.fill('#filter-max', '0.01');
  await page.click('#filter-apply');
  const inRange = all.filter((t) => { const v = param(t, 'lr').double_value; return v >= 0.001 && v <= 0.01; }).length;
  await until(page, 'the lr range', (n) => document.querySelector('#trials-page')?.textContent.endsWith(`of ${n}`), inRange);
  assert.ok((await column(page, 'param:lr')).every((v) => v >= 0.001 && v <= 0.01));
  await page.click('#trials-next');
  await until(page, 'the second page of the range', (n) => document.querySelector('#trials-page')?.textContent === `51–100 of ${n}`, inRange);
  assert.ok((await column(page, 'param:lr')).every((v) => v >= 0.001 && v <= 0.01));
  await page.selectOption('#filter-param', 'optimizer');
  await page.fill('#filter-min', 'sgd');
  assert.ok(await page.locator('#filter-max').isDisabled(), 'a categorical parameter has no upper bound');
  await page.focus('#filter-min');
  await page.keyboard.press('Enter');  // the form submits from the keyboard
  const sgd = all.filter((t) => param(t, 'optimizer').string_value === 'sgd').length;
  await until(page, 'the SGD trials', (n) => document.querySelector('#trials-page')?.textContent === `1–50 of ${n}`, sgd);
  assert.ok((await page.locator('#trials tbody td[data-col="param:optimizer"]').allInnerTexts()).every((v) => v === 'sgd'));
  // A bad range: the server's message, naming the field, on the page.
  await page.selectOption('#filter-param', 'lr');
  await page.fill('#filter-min', '0.5');
  await page.fill('#filter-max', '0.1');
  await page.click('#filter-apply');
  await until(page, 'the bad range refused', () => /400.*param.*lr/.test(document.querySelector('#error')?.textContent || ''));
  await page.click('#filter-clear');
  await until(page, 'every trial again', () => document.querySelector('#trials-page')?.textContent === '1–50 of 2000' &&
    document.querySelector('#error').hidden);
  await shot(page, 'study-2000-table');

  // One trial's page: its learning curve; no usage for an ask/tell trial, and why.
  const first = succeeded[0];
  await page.evaluate((id) => { location.hash = `#/studies/${id}/trials/1`; }, id);
  await until(page, 'the trial page', () => document.querySelector('#chart-trial-curve')?.dataset.drawn === '1' &&
    document.querySelector('#chart-trial-usage')?.dataset.drawn === '1');
  const trialCurve = await chart(page, '#chart-trial-curve');
  assert.equal(trialCurve.points, all[0].measurements.length);
  assert.match((await chart(page, '#chart-trial-usage')).text, /no usage recorded.*only trials that evoscaled runs/s);
  assert.ok(first);
  await shot(page, 'trial-asktell');
  assert.deepEqual(errors, []);
});

test('a two-metric study: the Pareto front, and switching metrics', async () => {
  const server = await startServer();
  const seeded = await seed(server, 'pareto', '--trials', '300');
  const id = seeded.study.replace('studies/', '');
  const optimal = (await getJson(server, `/api/v1/studies/${id}/optimal`)).optimal_trials;
  assert.ok(optimal.length > 3);
  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/studies/${id}`);
  await until(page, 'the Pareto front', () => document.querySelector('#chart-pareto')?.dataset.drawn === '1');
  const pareto = await chart(page, '#chart-pareto');
  assert.equal(pareto.points, 300);
  assert.equal(Number(pareto.ds.front), optimal.length);  // the same front as ListOptimalTrials
  // The front's points are those of the optimal trials: (auc, latency) pairs.
  const want = optimal.map((t) => `${t.final_measurement.metrics.auc},${t.final_measurement.metrics.latency_ms}`).sort();
  const got = pareto.x.map((x, i) => (pareto.data[1][i] === null ? null : `${x},${pareto.data[1][i]}`)).filter(Boolean).sort();
  assert.deepEqual(got, want);
  assert.ok(await painted(page, '#chart-pareto') > 500);
  assert.ok(await page.locator('#card-cost-best').isHidden(), 'two objectives: no cost charts');
  assert.ok(await page.locator('#card-cost-quality').isHidden());
  await shot(page, 'study-pareto');
  // The other metric: history and slices redraw for latency_ms.
  await page.selectOption('#metric', 'latency_ms');
  await until(page, 'the history of latency_ms', () => /latency_ms/.test(document.querySelector('#chart-history')?.getAttribute('aria-label') || ''));
  const history = await chart(page, '#chart-history');
  assert.equal(history.uplot[0], 300);
  assert.equal(history.data[1].at(-1), Math.min(...history.data[0]));  // minimised
  assert.deepEqual(errors, []);
});

test('a study with a budget: best vs core-hours, cost vs quality and the budget spent, live', async () => {
  const server = await startServer();
  const seeded = await seed(server, 'budget');
  const id = seeded.study.replace('studies/', '');
  const { trials } = await getJson(server, `/api/v1/studies/${id}/trials?page_size=100`);
  assert.equal(trials.length, 13);
  assert.equal(seeded.spent_core_seconds, 24300);  // 6.75 core-hours: 6 3/4 of 1 to 4 epochs of 900 s
  const loss = (t) => t.final_measurement?.metrics?.loss;
  const cost = (t) => Number(t.core_seconds || 0);
  assert.equal(trials.reduce((a, t) => a + cost(t), 0), seeded.spent_core_seconds);
  // What the charts should hold, worked out here the plain way. Trials were made one at a
  // time, so their end times are in id order; trial 1 is still running.
  const ended = trials.filter((t) => t.state !== 'ACTIVE');
  assert.equal(ended.length, 12);
  const hours = [];
  const best = [];
  let spent = 0;
  for (const t of ended) {
    spent += cost(t);
    hours.push(spent / 3600);
    const prev = best.length ? best.at(-1) : null;
    best.push(t.state === 'SUCCEEDED' && (prev === null || loss(t) < prev) ? loss(t) : prev);
  }
  const succeeded = trials.filter((t) => t.state === 'SUCCEEDED');
  const beaten = (t) => succeeded.some((o) => cost(o) <= cost(t) && loss(o) <= loss(t) &&
    (cost(o) < cost(t) || loss(o) < loss(t)));
  const front = succeeded.filter((t) => !beaten(t));
  assert.ok(front.length >= 2 && front.length < succeeded.length, `a front of ${front.length}`);

  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/studies/${id}`);
  await until(page, 'the cost charts', () => ['cost-best', 'cost-quality'].every((c) =>
    document.querySelector(`#chart-${c}`)?.dataset.drawn === '1'));
  // The header: what the budget has paid for, in core-hours.
  assert.equal(await page.locator('#study-budget').innerText(), 'budget: spent 6.75 of 10 core-hours');
  // Best vs core-hours: one step per ended trial, the budget marked at 10 core-hours.
  const curve = await chart(page, '#chart-cost-best');
  assert.equal(curve.points, 12);
  assert.deepEqual(curve.x, hours);
  assert.deepEqual(curve.data[0], best);
  assert.equal(curve.ds.budget, '10');
  assert.ok(await page.evaluate(() => document.querySelector('#chart-cost-best')._uplot.scales.x.max) >= 10,
    'the x axis reaches the budget');
  assert.match(curve.label, /budget 10 core-hours/);
  assert.ok(await painted(page, '#chart-cost-best') > 500);
  // Cost vs quality: the 11 trials with a loss (2 stopped early), the front among them.
  const scatter = await chart(page, '#chart-cost-quality');
  assert.equal(scatter.series, 3);
  assert.equal(scatter.points, seeded.succeeded + seeded.stopped);
  assert.deepEqual(scatter.uplot, [seeded.succeeded, seeded.stopped, front.length]);
  assert.equal(scatter.ds.front, String(front.length));
  const frontPoints = scatter.x.map((x, i) => (scatter.data[2][i] === null ? null : `${x},${scatter.data[2][i]}`))
    .filter(Boolean).sort();
  assert.deepEqual(frontPoints, front.map((t) => `${cost(t) / 3600},${loss(t)}`).sort());
  assert.ok(await painted(page, '#chart-cost-quality') > 500);
  await shot(page, 'study-budget');

  // Live: the running trial completes, the best so far; it ended last, so the curve's last step.
  await cli(server, 'complete', trials[0].name, 'loss=0.3');
  await until(page, 'the thirteenth step, at the new best', () => {
    const el = document.querySelector('#chart-cost-best');
    return el?.dataset.points === '13' && el._uplot.data[1].at(-1) === 0.3;
  });
  const after = await chart(page, '#chart-cost-best');
  assert.equal(after.x.at(-1), 6.75);
  assert.equal(await page.locator('#study-budget').innerText(), 'budget: spent 6.75 of 10 core-hours');
  await until(page, 'the completed trial among the points', () =>
    Number(document.querySelector('#chart-cost-quality')?.dataset.points) === 12);
  assert.deepEqual(errors, []);
});

test('a workload: usage under the recommendation band, replicas running and recommended', async () => {
  const server = await startServer();
  const seeded = await seed(server, 'workload', '--name', 'default/ranker', '--minutes', '120', '--instances', '3', '--policy', 'VPA');
  assert.equal(seeded.accepted, seeded.samples);
  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/workloads`);
  await until(page, 'the workload row', () => document.querySelector('tr[data-workload="default/ranker"] a') !== null);
  await page.click('tr[data-workload="default/ranker"] a');
  await until(page, 'the workload charts', () => ['cpu', 'memory', 'replicas'].every((c) =>
    document.querySelector(`#chart-workload-${c}`)?.dataset.drawn === '1'));
  assert.equal(new URL(page.url()).hash, '#/workloads/default/ranker');
  // One point a minute of samples (2 hours, under the 720-point budget) in every series.
  const cpu = await chart(page, '#chart-workload-cpu');
  assert.equal(cpu.x.length, seeded.minutes);
  assert.equal(cpu.series, 5);  // upper, lower, target; mean and busiest pod
  const [upper, lower, target, mean] = cpu.data;
  for (let i = 0; i < cpu.x.length; i++) {
    if (upper[i] === null) continue;
    assert.ok(lower[i] <= target[i] && target[i] <= upper[i], `band at ${i}`);
  }
  assert.ok(upper.at(-1) > lower.at(-1), 'a band, not a line (VPA bounds)');
  assert.ok(mean.every((v) => v > 0));
  const band = await page.evaluate(() => document.querySelector('#chart-workload-cpu')._uplot.bands.length);
  assert.equal(band, 1);
  const memory = await chart(page, '#chart-workload-memory');
  assert.equal(memory.uplot[3], seeded.minutes);
  const replicas = await chart(page, '#chart-workload-replicas');
  assert.ok(replicas.data[0].every((n) => n === 3), 'three replicas running throughout');
  assert.ok(replicas.data[1].filter((n) => n !== null).length > 0, 'recommended replicas drawn');
  assert.match(await page.locator('#workload-rec').innerText(), /replicas/);
  // A serving workload's load: requests/s of all pods (3 x 200 +- 120), the mean latency in
  // ms (4 +- 2), and each pod's versions, the one behind marked.
  await until(page, 'the load, latency and pods', () => ['load', 'latency', 'instances'].every((c) =>
    document.querySelector(`#chart-workload-${c}`)?.dataset.drawn === '1'));
  const load = await chart(page, '#chart-workload-load');
  assert.equal(load.x.length, seeded.minutes);
  assert.ok(load.data[0].every((q) => q > 3 * 60 && q < 3 * 340), `requests/s ${load.data[0].slice(0, 5)}`);
  const latency = await chart(page, '#chart-workload-latency');
  assert.equal(latency.x.length, seeded.minutes);
  assert.ok(latency.data[0].every((ms) => ms >= 1.9 && ms <= 6.1), `latency ms ${latency.data[0].slice(0, 5)}`);
  const pods = await page.locator('#chart-workload-instances tbody tr').allInnerTexts();
  assert.equal(pods.length, 3);
  const heads = await page.locator('#chart-workload-instances thead th').allInnerTexts();
  assert.deepEqual(heads, ['pod', 'last report', 'dense version', 'sparse version']);
  const behind = await page.locator('#chart-workload-instances td.behind').allInnerTexts();
  assert.equal(behind.length, 1, 'pod-2 alone is behind on sparse rows');
  const sparse = await page.locator('#chart-workload-instances tbody tr td:nth-child(4)').allInnerTexts();
  assert.equal(Math.max(...sparse.map(Number)) - Number(behind[0]), 2);
  assert.ok(await painted(page, '#chart-workload-cpu') > 1000);
  await shot(page, 'workload');
  // Requests apart from limits (evoscale, requests at the median): a limit line above the
  // target, and the limit in the text.
  const apart = await seed(server, 'workload', '--name', 'default/apart', '--minutes', '60', '--instances', '2',
    '--policy', 'EVOSCALE', '--request-percentile', '0.5');
  assert.equal(apart.accepted, apart.samples);
  await page.evaluate(() => { location.hash = '#/workloads/default/apart'; });
  await until(page, 'the limit line', () => document.querySelector('#chart-workload-cpu')?._uplot?.series.some((s) => s.label === 'limit'));
  const split = await chart(page, '#chart-workload-cpu');
  assert.equal(split.series, 6);  // upper, lower, target; mean and busiest pod; limit
  const [, , request, , , lim] = split.data;
  const last = request.length - 1;
  assert.ok(lim[last] > request[last], `limit ${lim[last]} above the request ${request[last]}`);
  assert.match(await page.locator('#workload-rec').innerText(), /limit/);
  await shot(page, 'workload-limits');
  assert.deepEqual(errors, []);
});

test('empty states, a phone screen, and the time to draw a 10,000-trial study', async () => {
  const server = await startServer();
  // An empty study: each chart says what to do.
  await cli(server, 'study', 'create', '-f', 'examples/study.yaml', '--name', 'empty');
  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/studies/1`);
  await until(page, 'the empty charts', () => document.querySelector('#chart-history')?.dataset.empty === '1');
  assert.match((await chart(page, '#chart-history')).text, /No completed trials.*evoscale trial complete/s);
  assert.match((await chart(page, '#chart-curves')).text, /No intermediate values/);
  assert.match(await page.locator('#trials').innerText(), /No trials yet/);
  await shot(page, 'study-empty');

  const seeded = await seed(server, 'curves', '--trials', '10000', '--steps', '20', '--name', 'ten-thousand');
  const id = seeded.study.replace('studies/', '');
  // Time to all charts: from navigation to the frame after every chart is drawn, in a fresh
  // page each time; 5 runs, the median reported.
  const runs = [];
  for (let i = 0; i < 5; i++) {
    const { page: p } = await newPage();
    const t0 = Date.now();
    await p.goto(`${server.http}/#/studies/${id}`);
    await p.waitForFunction(() => document.body.dataset.chartsMs !== undefined, null, { timeout: WAIT_MS });
    const wall = Date.now() - t0;
    const nav = await p.evaluate(() => performance.getEntriesByName('evoscale-charts-drawn')[0].startTime);
    runs.push({ wall_ms: wall, since_navigation_ms: Math.round(nav) });
    const h = await chart(p, '#chart-history');
    assert.ok(h.uplot[0] <= 2000 && h.uplot[0] > 1000, `history downsampled to ${h.uplot[0]}`);
    assert.equal((await chart(p, '#chart-curves')).series, 100);
    if (i === 0) await shot(p, 'study-10000');
    await p.context().close();
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const report = {
    trials: 10000, runs,
    median_wall_ms: median(runs.map((r) => r.wall_ms)),
    median_since_navigation_ms: median(runs.map((r) => r.since_navigation_ms)),
  };
  await mkdir(SHOTS, { recursive: true });
  await writeFile(path.join(SHOTS, 'time-to-charts.json'), `${JSON.stringify(report, null, 2)}\n`);
  console.log(`# time to all charts, 10,000 trials: median ${report.median_since_navigation_ms} ms since navigation ` +
    `(${report.median_wall_ms} ms wall from page.goto), runs ${JSON.stringify(runs)}`);

  // A phone: one column, nothing wider than the screen but the tables' own scrollers.
  const { page: phone } = await newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await phone.goto(`${server.http}/#/studies/${id}`);
  await phone.waitForFunction(() => document.body.dataset.chartsMs !== undefined, null, { timeout: WAIT_MS });
  // clientWidth is the screen's 390 px; a page wider than that would make a phone zoom out.
  const fit = await phone.evaluate(() => ({
    page: document.documentElement.scrollWidth, screen: document.documentElement.clientWidth,
    chart: document.querySelector('#chart-history canvas').getBoundingClientRect().width,
  }));
  assert.ok(fit.page <= fit.screen, `page ${fit.page} px wide on a ${fit.screen} px screen`);
  assert.ok(fit.chart <= fit.screen, `chart ${fit.chart} px`);
  await shot(phone, 'study-phone');

  // evoscaled goes away: the page says so, and what to do, and keeps the last charts.
  const proc = servers.at(-1);
  proc.kill('SIGTERM');
  await once(proc, 'exit');
  await until(phone, 'the unreachable error', () => /UNAVAILABLE.*\n.*still running/s.test(document.querySelector('#error')?.textContent || ''));
  assert.equal((await chart(phone, '#chart-history')).uplot[0] > 1000, true);
  await shot(phone, 'study-phone-error');
  assert.deepEqual(errors, []);
});

test('with auth on, the page asks for a token and sends it', async () => {
  const tokens = path.join(dir, 'tokens');
  await writeFile(tokens, `${ADMIN_TOKEN} admin\n`);
  const server = await startServer(['--auth-tokens', tokens]);
  await cli(server, 'study', 'create', '-f', 'examples/study.yaml', '--name', 'with-auth');

  assert.equal((await fetch(`${server.http}/`)).status, 200);
  assert.equal((await fetch(`${server.http}/api/v1/studies`)).status, 401);
  assert.equal((await fetch(`${server.http}/api/v1/studies/1/analysis`)).status, 401);
  for (const asset of ['/uPlot.min.js', '/charts.js', '/uPlot.min.css']) {
    assert.equal((await fetch(`${server.http}${asset}`)).status, 200, asset);  // the page loads before a token
  }

  const { page, errors } = await newPage();
  await page.goto(`${server.http}/`);
  await until(page, 'the 401 and the token form', () =>
    !document.querySelector('#token-form').hidden && document.querySelector('#error').textContent.includes('401'));
  await page.fill('#token-input', ADMIN_TOKEN);
  await page.click('#token-form button[type=submit]');
  await until(page, 'the study, once the token is sent', () =>
    document.querySelector('tr[data-study="studies/1"]')?.textContent.includes('with-auth') &&
    document.querySelector('#error').hidden);
  // The study's charts load with the token too.
  await page.click('tr[data-study="studies/1"] a');
  await until(page, 'the study charts, with the token', () => document.querySelector('#chart-history')?.dataset.drawn === '1' &&
    document.querySelector('#error').hidden);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('evoscale.token')), ADMIN_TOKEN);
  assert.deepEqual(errors, []);
});
