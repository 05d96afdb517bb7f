// The OpenEnv section of the submissions app in Chromium: the form checks a submission in the
// browser before anything is sent, submits it to the arena (the stand-in serves the image as GHCR
// and a simulated cluster is connected), and the page then shows it admitted: its task passed in a
// fresh sandbox running the image's echo server, then follows its run to `completed`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, hydrated, SCREENS, violations, squeezedWords, token } from './support.mjs';

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
  // The held-out benchmark before the first step and after the last (its start and its end each).
  assert.deepEqual(states, ['starting', 'loading', 'evaluating', 'evaluating', 'rolling', 'updating', 'rolling', 'updating',
    'rolling', 'updating', 'evaluating', 'evaluating', 'cleanup', 'completed']);
  // The run's evaluation: complete, said to be simulated, per domain, and no held-out task shown.
  const evaluation = page.locator('table.openenv-evaluation');
  assert.match(await page.locator('p.evaluation-state').innerText(), /local-bench · complete/);
  assert.match(await page.locator('p.simulated').first().innerText(), /Simulated/);
  assert.equal(await evaluation.locator('tbody tr').count(), 3, 'all domains, then each of the two');
  assert.doesNotMatch(await page.locator('main').innerText(), /reply-hello|count-2/);
  await context.close();
  // The leaderboard, to everyone signed out, at both widths: readable and accessible.
  for (const [screen, viewport] of Object.entries(SCREENS)) {
    const phone = screen === 'phone';
    const visitor = await browser.newContext({ viewport, isMobile: phone, hasTouch: phone, bypassCSP: true });
    const board = await visitor.newPage();
    await board.goto(`${BASE}/arena/openenv`);
    const rows = board.locator('table.openenv-leaderboard tbody tr');
    await rows.first().waitFor({ timeout: 15_000 });
    assert.match(await rows.first().innerText(), /Base model before training/);
    assert.ok(await board.locator('table.openenv-leaderboard tbody tr:not(.reference)').count() >= 1);
    assert.match(await board.locator('pre.agent-lines').innerText(), /curl -sS "\$BASE\/leaderboard"/);
    assert.deepEqual(await violations(board), [], `axe on a ${viewport.width} px ${screen}`);
    assert.deepEqual(await squeezedWords(board), [], `cells on a ${viewport.width} px ${screen}`);
    await visitor.close();
  }
});

// The jobs page's intake control is a plain form: an editor pauses intake with a reason, the
// OpenEnv page says so to everyone, the API refuses a new submission with it, and the editor
// resumes. (Last in this file: nothing else here submits while intake is paused.)
test('an editor pauses and resumes OpenEnv intake on the jobs page', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/auth/login?return_to=/arena/jobs`);
  await page.getByRole('button', { name: 'Sign in as eve' }).click();
  await page.waitForURL(`${BASE}/arena/jobs`);
  try {
    assert.match(await page.locator('p.intake-state').innerText(), /^Open/);
    await page.getByLabel('Reason submitters will read').fill('the cluster is being upgraded');
    await page.getByRole('button', { name: 'Pause intake' }).click();
    await page.waitForURL(/\/arena\/jobs\?intake=done/);
    assert.match(await page.locator('p.intake-state').innerText(), /Paused since .*: the cluster is being upgraded/);
    const status = await (await fetch(`${BASE}/api/openenv`)).json();
    assert.equal(status.intake.open, false);
    const visitor = await browser.newPage();
    await visitor.goto(`${BASE}/arena/openenv`);
    assert.match(await visitor.locator('p.intake.paused').innerText(), /paused new submissions .*the cluster is being upgraded/);
    await visitor.close();
    const refused = await fetch(`${BASE}/api/openenv/submissions`, {
      method: 'POST', body: submission(1800),
      headers: { authorization: `Bearer ${token('frank')}`, 'content-type': 'application/json' },
    });
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).code, 'CAPACITY_BUSY');
    await page.getByRole('button', { name: 'Resume intake' }).click();
    await page.waitForURL(/\/arena\/jobs\?intake=done/);
    assert.match(await page.locator('p.intake-state').innerText(), /^Open/);
  } finally {
    // Whatever failed above, intake is open again for the rest of the suite.
    await fetch(`${BASE}/api/openenv/intake`, {
      method: 'POST', body: '{"open": true}',
      headers: { authorization: `Bearer ${token('eve')}`, 'content-type': 'application/json' },
    });
    await context.close();
  }
});
