// A run's page in Chromium, inside a frame of another origin: the stages' timeline grows while the
// simulated run moves, without a reload, until the run is scored.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { BASE, launch, publish, token } from './support.mjs';

const HUB = process.env.ARENA_TEST_HUB_URL;
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function api(path, who, body) {
  const resp = await fetch(`${BASE}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token(who)}` },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: resp.status, json: JSON.parse(await resp.text()) };
}

/** Slows the stand-in's simulated stages for the jobs created next. */
async function stageMs(ms) {
  const resp = await fetch(`${HUB}/_standin/jobs`, {
    method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ stage_ms: ms }),
  });
  assert.equal(resp.status, 200);
}

test('the run page follows the run live inside a frame', async () => {
  const repoId = publish('dave', 'good');
  const submitted = await api('/api/environments', 'dave', { agent_id: null, challenge_id: 'local-demo',
    repo_type: 'dataset', repo_id: repoId, revision: 'main', entry_path: '', title: 'Dave runs it', notes: '' });
  assert.ok(submitted.status < 300, JSON.stringify(submitted.json));
  await stageMs(1500);
  // One run at a time across the arena: wait for an earlier test's run to end.
  let launched;
  for (let i = 0; i < 60; i++) {
    launched = await api('/api/challenges/local-demo/runs', 'dave',
      { request_id: `dave-live-${Date.now()}`, environment_id: submitted.json.environment_id });
    if (launched.status !== 409 || launched.json.code !== 'ANOTHER_RUN_ACTIVE') break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await stageMs(300);
  assert.equal(launched.status, 201, JSON.stringify(launched.json));
  const run = launched.json.run.run_id;

  const parent = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><title>host</title><iframe id="space" src="${BASE}/arena/runs/${run}" width="900" height="900"></iframe>`);
  });
  await new Promise((resolve) => parent.listen(0, 'localhost', resolve));
  const page = await browser.newPage();
  // What the frame said, to explain a failure.
  const said = [];
  page.on('console', (m) => said.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => said.push(`error: ${e}`));
  page.on('requestfailed', (r) => said.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('requestfinished', (r) => said.push(`loaded: ${r.url()} in ${Math.round(r.timing().responseEnd)} ms`));
  try {
    await page.goto(`http://localhost:${parent.address().port}/`);
    const frame = page.frameLocator('#space');
    await frame.locator('body[data-hydrated="true"]').waitFor({ timeout: 60_000 }).catch(async (e) => {
      const inFrame = await page.frames().at(-1)?.evaluate(() => ({
        imported: typeof window.__hydrateIsland, state: document.readyState, hidden: document.hidden,
      })).catch((err) => String(err));
      throw new Error(`${e.message}\nthe page said:\n${said.join('\n')}\nthe frame: ${JSON.stringify(inFrame)}`);
    });
    // Bounded by time, not by a count of looks: beside the trainer's tests a stage of the simulation
    // takes seconds longer than alone (CI saw the seventh bar after 36 s and its end after 47).
    const seen = [];
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline) {
      const done = await frame.locator('.timeline .stage.done').count();
      const bars = await frame.locator('.timeline .bar').count();
      if (seen.at(-1) !== bars) seen.push(bars);
      if (done === 7) break;
      await page.waitForTimeout(200);
    }
    assert.equal(await frame.locator('.timeline .stage.done').count(), 7, `bars seen: ${seen}`);
    assert.ok(seen.length >= 3, `the timeline grew step by step: ${seen}`);
    // The relay reports collect done as the job publishes; the run is scored once the reconciler has
    // seen the job complete with its result files (its next pass).
    await frame.locator('.run-state', { hasText: 'scored' }).waitFor({ timeout: 15_000 });
    assert.match(await frame.locator('.timeline .stage[data-stage="baseline"]').innerText(), /\d+\/\d+ passed/);
    assert.ok(await frame.locator('.events li').count() > 5);
  } finally {
    await page.close();
    parent.close();
  }
});
