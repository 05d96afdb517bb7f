// Collections in Chromium: /arena lists a submitted collection with its checks, its page explains
// each finding and shows the PostTrain commands, the submit form validates then submits, and the
// local checker runs the gates in the browser on a picked folder, uploading nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { BASE, ROOT, launch, hydrated, publish, submit, token } from './support.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('/arena lists a collection; its page explains each finding and gives the PostTrain commands', async () => {
  const title = `Leaky pair ${Date.now()}`;
  const id = await submit(publish('carol', 'dockerfile-copies-oracle'), title, 'carol');
  const page = await browser.newPage();
  await page.goto(`${BASE}/arena`);
  const row = page.locator('li.env', { hasText: title });
  await row.waitFor({ timeout: 15_000 });
  assert.match(await row.innerText(), /0\/2 tasks eligible/);
  await row.getByRole('link', { name: title }).click();
  await page.waitForURL(`${BASE}/arena/submissions/${id}`);
  await page.locator('li.finding', { hasText: 'L-IMAGE-COPIES-SOLUTION' }).waitFor({ timeout: 15_000 });
  assert.match(await page.locator('li.finding.reject').first().innerText(), /image/);
  assert.equal(await page.locator('table.tasks tbody tr').count(), 2);
  assert.match(await page.locator('pre.commands').innerText(), /posttrain env add/);
  assert.equal(await page.title(), `${title} · Open Env Arena`);
  assert.equal(await page.locator('meta[property="og:title"]').getAttribute('content'), title);
  // The hash form of the link opens the same page.
  await page.goto(`${BASE}/arena#/submissions/${id}`);
  await page.waitForURL(`${BASE}/arena/submissions/${id}`, { timeout: 30_000 });
  await page.close();
});

test('the submit form validates, shows the findings, then submits', async () => {
  const repoId = publish('dave', 'no-oracle');
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/arena/submit`);
  await hydrated(page);
  await page.getByRole('link', { name: 'Sign in with Hugging Face' }).click();
  await page.waitForURL(/\/oauth\/authorize/);
  await page.getByRole('button', { name: 'Sign in as dave' }).click();
  await page.waitForURL(`${BASE}/arena/submit`);
  await hydrated(page);
  await page.locator('input[name=repo_id]').fill(repoId);
  await page.locator('input[name=title]').fill('Dave no-oracle pair');
  const submitButton = page.getByRole('button', { name: 'Submit', exact: true });
  assert.equal(await submitButton.isDisabled(), true);
  await page.getByRole('button', { name: 'Validate' }).click();
  await page.locator('li.finding', { hasText: 'C-NO-ORACLE' }).waitFor({ timeout: 30_000 });
  assert.match(await page.locator('.report .verdict').innerText(), /valid/);
  await submitButton.click();
  const done = page.locator('p.submitted');
  await done.waitFor({ timeout: 30_000 });
  const link = await done.getByRole('link').getAttribute('href');
  assert.match(link, /^\/arena\/submissions\/env-[0-9a-f]{16}$/);
  await context.close();
});

test('the local checker runs the gates in the browser and uploads nothing', async () => {
  const page = await browser.newPage();
  const posted = [];
  page.on('request', (r) => { if (r.method() === 'POST') posted.push(r.url()); });
  await page.goto(`${BASE}/arena/check`);
  await hydrated(page);
  // A copy without the fixture's CASE.md, as a participant's folder would be.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'arena-check-'));
  const folder = path.join(dir, 'my-collection');
  fs.cpSync(path.join(ROOT, 'tests/fixtures/collections/dockerfile-copies-oracle'), folder, { recursive: true });
  await page.locator('input.folder-picker').setInputFiles(folder);
  await page.locator('li.finding', { hasText: 'L-IMAGE-COPIES-SOLUTION' }).waitFor({ timeout: 30_000 });
  await page.locator('li.finding', { hasText: 'L-IMAGE-COPIES-VERIFIER' }).waitFor();
  assert.match(await page.locator('.report').innerText(), /Not compared with any held-out suite/);
  assert.deepEqual(posted, []);
  fs.rmSync(dir, { recursive: true, force: true });
  await page.close();
});

test('a collection page shows the preflight, and its author launches the run from it', async () => {
  const repoId = publish('carol', 'good');
  const resp = await fetch(`${BASE}/api/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token('carol')}` },
    body: JSON.stringify({ agent_id: null, challenge_id: 'local-demo', repo_type: 'dataset', repo_id: repoId,
      revision: 'main', entry_path: '', title: 'Carol runs it', notes: '' }),
  });
  const text = await resp.text();
  assert.ok(resp.ok, text);
  const id = JSON.parse(text).environment_id;
  const context = await browser.newContext();
  const page = await context.newPage();
  // Signed out: every check is shown, and sign-in is what is missing.
  await page.goto(`${BASE}/arena/submissions/${id}`);
  const local = page.locator('section.preflight[data-challenge="local-demo"]');
  await local.waitFor();
  assert.match(await local.innerText(), /FAIL signed in/);
  assert.match(await page.locator('section.preflight[data-challenge="openenv-9b"]').innerText(), /FAIL challenge open/);
  // Signed in as its author: allowed, and the button launches it.
  await page.goto(`${BASE}/auth/login?return_to=/arena/submissions/${id}`);
  await page.getByRole('button', { name: 'Sign in as carol' }).click();
  await page.waitForURL(`${BASE}/arena/submissions/${id}`);
  await hydrated(page);
  assert.equal(await local.locator('li.check.fail').count(), 0, await local.innerText());
  await local.getByRole('button', { name: 'Launch the run' }).click();
  const launched = local.locator('p.launched');
  await launched.waitFor({ timeout: 30_000 });
  assert.match(await launched.innerText(), /Launched: run-[0-9a-f]{16}/);
  await context.close();
});
