// The OpenEnv section of the submissions app in Chromium: the form checks a submission in the
// browser before anything is sent, submits it to the arena (the stand-in serves the image as GHCR
// and a simulated cluster is connected), and the page then shows it admitted: its task passed in a
// fresh sandbox running the image's server (the echo environment `openenv init` generates).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { BASE, launch, hydrated } from './support.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const submission = (rollout) => JSON.stringify({
  submission_id: `echo-${Date.now()}`,
  name: 'Echo (browser test)',
  image: 'ghcr.io/arena-demo/echo-env:v1',
  // What the echo image's server answers at /schema (the demo submission's copy), so that admission passes it.
  schema: JSON.parse(readFileSync(new URL('../dev/demo/openenv/submission.json', import.meta.url))).schema,
  tasks: [{ task_id: 'echo-1', split: 'train', rollout_wall_s: rollout }],
  example_actions: [{ message: 'hello' }, { message: 'done' }],
}, null, 1);

test('the OpenEnv form checks in the browser, submits, and the page lists the pinned submission', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/arena/openenv`);
  await hydrated(page);
  await page.locator('p.cluster.connected').waitFor({ timeout: 30_000 });
  await page.getByRole('link', { name: 'Sign in with Hugging Face' }).click();
  await page.waitForURL(/\/oauth\/authorize/);
  await page.getByRole('button', { name: 'Sign in as carol' }).click();
  await page.waitForURL(`${BASE}/arena/openenv`);
  await hydrated(page);
  const submitButton = page.getByRole('button', { name: 'Submit', exact: true });
  await page.locator('textarea[name=submission]').fill(submission(9999));
  await page.getByRole('button', { name: 'Check' }).click();
  assert.match(await page.locator('.openenv-check').innerText(), /CONTRACT_INVALID.*rollout_wall_s/s);
  assert.equal(await submitButton.isDisabled(), true, 'nothing is sent before the checks pass');
  await page.locator('textarea[name=submission]').fill(submission(1800));
  await page.getByRole('button', { name: 'Check' }).click();
  assert.match(await page.locator('.openenv-check').innerText(), /ghcr\.io\/arena-demo\/echo-env:v1/);
  await submitButton.click();
  const done = page.locator('.openenv-submitted');
  await done.waitFor({ timeout: 30_000 });
  assert.match(await done.innerText(), /Accepted .*validating, slot held/);
  assert.match(await done.innerText(), /ghcr\.io\/arena-demo\/echo-env@sha256:[0-9a-f]{64}/);
  // Admission runs in the background: the page shows the task passed once its sandbox was probed.
  const card = page.locator('li.openenv-submission').first();
  let text = '';
  // The sandbox starts uvicorn and openenv-core: allow it the health limit dev/test sets.
  for (let i = 0; i < 180 && !/echo-1: passed/.test(text); i++) {
    await page.reload();
    await card.waitFor({ timeout: 15_000 });
    text = await card.innerText();
    if (!/echo-1: passed/.test(text)) await page.waitForTimeout(500);
  }
  assert.match(text, /echo-1: passed/);
  assert.match(text, /validated · slot used/);
  assert.match(await card.locator('td.resolved').innerText(), /@sha256:/);
  await context.close();
});
