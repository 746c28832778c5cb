// The dashboard in a real browser: the real evoscaled (temp database, port 0), a study driven
// through the real evoscale CLI, and Debian's Chromium driven by playwright-core.
// Run through run_dashboard_test.sh (ctest: web_dashboard), which skips when node, Chromium or
// node_modules is missing. EVOSCALE_BIN_DIR names the folder of evoscaled and evoscale.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.EVOSCALE_BIN_DIR || path.join(ROOT, 'build/bin');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = 15000;  // deadline for every condition the page must reach
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
  return { grpc: listening.grpc, http: `http://${listening.http}` };
}

async function cli(server, ...args) {
  const { stdout } = await promisify(execFile)(path.join(BIN, 'evoscale'),
    ['--server', server.grpc, '--token', ADMIN_TOKEN, ...args], { cwd: ROOT });
  return stdout;
}

async function suggest(server, study, count) {
  const out = await cli(server, 'suggest', study, '--count', String(count), '--client-id', 'web-test', '--json');
  return JSON.parse(out).trials;
}

async function newPage() {
  const context = await browser.newContext();
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
    if (proc.exitCode === null) {
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
  await until(page, 'the study page with 3 trials, a best-so-far path and the optimal trial', (best) => {
    const path = document.querySelector('#best-curve path.best');
    return document.querySelectorAll('#trials tbody tr').length === 3 &&
      path && /^M[\d.]+,[\d.]+/.test(path.getAttribute('d')) &&
      document.querySelector('#best-curve').dataset.points === '3' &&
      document.querySelectorAll('#best-curve circle.obs').length === 3 &&
      document.querySelector(`#optimal tr[data-trial-id="${best}"]`) !== null;
  }, bestId);
  assert.equal(new URL(page.url()).hash, '#/studies/1');
  const specText = await page.locator('#spec').innerText();
  for (const s of ['logloss', 'MINIMIZE', 'lr_dense', 'optimizer_sparse', 'ftrl_l1']) assert.ok(specText.includes(s), s);
  const row = await page.locator(`#trials tr[data-trial-id="${bestId}"]`).innerText();
  assert.match(row, /SUCCEEDED/);
  assert.match(row, /logloss=0\.47/);
  assert.match(row, /lr_dense=/);

  // A fourth trial, completed through the CLI, shows up without a reload.
  const [fourth] = await suggest(server, study, 1);
  await until(page, 'the new ACTIVE trial', (id) =>
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('ACTIVE'), String(fourth.id));
  await cli(server, 'complete', fourth.name, 'logloss=0.41');
  await until(page, 'the fourth completed trial as the new optimum', (id) =>
    document.querySelector('#completed-count')?.textContent === '4' &&
    document.querySelector('#best-curve')?.dataset.points === '4' &&
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('SUCCEEDED') &&
    document.querySelector(`#optimal tr[data-trial-id="${id}"]`) !== null, String(fourth.id));

  // A trial stopped early shows as STOPPED, and its better loss does not make it optimal.
  const [fifth] = await suggest(server, study, 1);
  await cli(server, 'trial', 'stop', fifth.name);
  await cli(server, 'trial', 'complete', fifth.name, 'logloss=0.30');
  await until(page, 'the stopped trial, never optimal', (id) =>
    document.querySelector(`#trials tr[data-trial-id="${id}"]`)?.textContent.includes('STOPPED') &&
    document.querySelector('#completed-count')?.textContent === '5' &&
    document.querySelector(`#optimal tr[data-trial-id="${id}"]`) === null, String(fifth.id));

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

test('a managed study shows what each trial requested and used', async () => {
  // evoscaled runs the trials itself (/bin/sh, in cgroups where it can): the first three request
  // the template's 256 MiB, the fourth what their peaks teach.
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
        args: ['-c', 'echo "{\\"event\\":\\"final\\",\\"metrics\\":{\\"loss\\":$1}}"', 'trial', '${x}'],
        resources: { cpu_cores: 1, memory_bytes: String(256 << 20) },
        parallel_trials: 1,
      },
    },
  }));
  const study = JSON.parse(await cli(server, 'study', 'create', '-f', file, '--json')).name;
  const { page, errors } = await newPage();
  await page.goto(`${server.http}/#/${study}`);
  const size = '[\\d.]+ (B|KiB|MiB|GiB)';
  await until(page, 'four trials with requested / peak memory and cores', (size) => {
    const rows = [...document.querySelectorAll('#trials tbody tr')];
    const full = new RegExp(`^${size} / ${size}$`);
    return rows.length === 4 && rows.every((r) => r.textContent.includes('SUCCEEDED') &&
      full.test(r.querySelector('td.mem').textContent.trim()) &&
      /^[\d.]+ \/ [\d.]+$/.test(r.querySelector('td.cpu').textContent.trim()));
  }, size);
  const heads = await page.locator('#trials thead th').allInnerTexts();
  assert.ok(heads.includes('Memory requested / peak'), heads.join('|'));
  assert.ok(heads.includes('CPU requested / used'), heads.join('|'));
  const first = (await page.locator('#trials tr[data-trial-id="1"] td.mem').innerText()).trim();
  const fourth = (await page.locator('#trials tr[data-trial-id="4"] td.mem').innerText()).trim();
  assert.match(first, /^256 MiB \/ /);
  assert.doesNotMatch(fourth, /^256 MiB \/ /);  // right-sized from the first three's peaks
  assert.match(await page.locator('#trials tr[data-trial-id="1"] td.cpu').innerText(), /^1 \/ /);
  assert.match(await page.locator('#trials tr[data-trial-id="1"] td.mem').getAttribute('title'), /% unused$/);
  assert.deepEqual(errors, []);
});

test('with auth on, the page asks for a token and sends it', async () => {
  const tokens = path.join(dir, 'tokens');
  await writeFile(tokens, `${ADMIN_TOKEN} admin\n`);
  const server = await startServer(['--auth-tokens', tokens]);
  await cli(server, 'study', 'create', '-f', 'examples/study.yaml', '--name', 'with-auth');

  assert.equal((await fetch(`${server.http}/`)).status, 200);
  assert.equal((await fetch(`${server.http}/api/v1/studies`)).status, 401);

  const { page, errors } = await newPage();
  await page.goto(`${server.http}/`);
  await until(page, 'the 401 and the token form', () =>
    !document.querySelector('#token-form').hidden && document.querySelector('#error').textContent.includes('401'));
  await page.fill('#token-input', ADMIN_TOKEN);
  await page.click('#token-form button[type=submit]');
  await until(page, 'the study, once the token is sent', () =>
    document.querySelector('tr[data-study="studies/1"]')?.textContent.includes('with-auth') &&
    document.querySelector('#error').hidden);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('evoscale.token')), ADMIN_TOKEN);
  assert.deepEqual(errors, []);
});
