// The OpenEnv section of the submissions app in Chromium: the form checks a submission in the
// browser before anything is sent, submits it to the arena (the stand-in serves the image as GHCR
// and a simulated cluster is connected), and the page then shows it admitted: its task passed in a
// fresh sandbox running the image's echo server, then follows its run to `completed`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, hydrated } from './support.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const submission = (rollout) => JSON.stringify({
  submission_id: `echo-${Date.now()}`,
  name: 'Echo (browser test)',
  // The quick image (a standard-library copy of the echo protocol): the real openenv-core image is
  // tested against `openenv validate` and trained by tests/cli/test_openenv.py.
  image: 'ghcr.io/test/echo-ok:v1',
  schema: { action: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'], additionalProperties: false },
    observation: { type: 'object' } },
  tasks: [{ task_id: 'echo-1', split: 'train', rollout_wall_s: rollout }],
  example_actions: [{ message: 'hello' }, { message: 'done' }],
  finish_action: { message: 'done' },
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
  await page.locator('textarea[name=submission]').fill(submission(3300));
  await page.getByRole('button', { name: 'Check' }).click();
  assert.match(await page.locator('.openenv-check').innerText(), /ghcr\.io\/test\/echo-ok:v1/);
  await submitButton.click();
  const done = page.locator('.openenv-submitted');
  await done.waitFor({ timeout: 30_000 });
  assert.match(await done.innerText(), /Accepted .*validating, slot held/);
  assert.match(await done.innerText(), /ghcr\.io\/test\/echo-ok@sha256:[0-9a-f]{64}/);
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
  // The arena starts its run; the run's page follows it (reloading itself) until it completes.
  const runLink = card.locator('p.run a');
  for (let i = 0; i < 60 && !(await runLink.count()); i++) {
    await page.waitForTimeout(1000);
    await page.reload();
    await card.waitFor({ timeout: 15_000 });
  }
  await runLink.click();
  await page.waitForURL(/\/arena\/openenv\/runs\/oe-[0-9a-f]+$/);
  const state = page.locator('p.openenv-run-state');
  await state.waitFor({ timeout: 15_000 });
  await page.locator('p.openenv-run-state.state-completed').waitFor({ timeout: 300_000 });
  // 3,600 s of walls and a 300 s update a step, after 120 s of loading: three fit in 14,400 s.
  assert.match(await state.innerText(), /completed.* · 3 optimizer step\(s\) taken/);
  // The shared curves: loss, reward and grad norm, a dot per trained step in each, and their table.
  assert.equal(await page.locator('figure.curve.reward svg circle').count(), 3);
  assert.equal(await page.locator('table.training-steps tbody tr').count(), 3);
  const states = await page.locator('table.openenv-events tbody tr td:nth-child(2)').allInnerTexts();
  assert.deepEqual(states, ['starting', 'loading', 'rolling', 'updating', 'rolling', 'updating',
    'rolling', 'updating', 'cleanup', 'completed']);
  await context.close();
});
