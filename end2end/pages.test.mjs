// Browser journeys in Debian's Chromium (driven by playwright-core): islands hydrate, framing,
// phones. dev/test starts the arena and passes its URL in ARENA_TEST_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { BASE, launch, hydrated, publish, submit, someRun } from './support.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const cards = (scope) => scope.locator('article.challenge:visible');

test('the arena page hydrates: the status filter only works once the wasm is live', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.text()); });
  await page.goto(`${BASE}/arena`);
  await hydrated(page);
  assert.equal(await cards(page).count(), 2, 'openenv-9b and the local demo');
  await page.getByRole('button', { name: 'planned' }).click();
  await page.getByText('No planned challenges.').waitFor({ timeout: 10_000 });
  assert.equal(await cards(page).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'planned' }).getAttribute('aria-pressed'), 'true');
  await page.getByRole('button', { name: 'All' }).click();
  await cards(page).first().waitFor();
  assert.equal(await page.getByText('No planned challenges.').count(), 0);
  assert.deepEqual(errors, []);
  await page.close();
});

test('the challenge page says why runs are paused, and the footer shows the build', async () => {
  const page = await browser.newPage();
  await page.goto(`${BASE}/arena/challenges/openenv-9b`);
  await page.getByText('Why runs are paused').waitFor();
  const footer = await page.locator('footer').innerText();
  assert.match(footer, /build \S+/);
  await page.close();
});

test('pages render and hydrate inside an iframe of another origin', async () => {
  const arena = new URL(BASE);
  const parent = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><title>host</title><iframe id="space" src="${BASE}/arena" width="800" height="900"></iframe>`);
  });
  await new Promise((resolve) => parent.listen(0, 'localhost', resolve));
  const parentUrl = `http://localhost:${parent.address().port}/`;
  assert.notEqual(new URL(parentUrl).origin, arena.origin);
  const page = await browser.newPage();
  try {
    await page.goto(parentUrl);
    const frame = page.frameLocator('#space');
    await frame.locator('body[data-hydrated="true"]').waitFor({ timeout: 30_000 });
    await frame.getByRole('button', { name: 'planned' }).click();
    await frame.getByText('No planned challenges.').waitFor({ timeout: 10_000 });
  } finally {
    await page.close();
    parent.close();
  }
});

test('no page scrolls sideways on a 360 px phone, and the interactive parts work there', async () => {
  const id = await submit(publish('carol', 'dockerfile-copies-oracle'), `Phone check ${Date.now()}`, 'carol');
  const context = await browser.newContext({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  const run = await someRun();
  const paths = ['/', '/arena', '/arena/challenges/openenv-9b', `/arena/submissions/${id}`, '/arena/submit', '/arena/jobs', '/arena/openenv',
    '/arena/check', '/no/such/page', `/arena/runs/${run}`];
  for (const path of paths) {
    await page.goto(`${BASE}${path}`);
    await hydrated(page);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${path} overflows by ${overflow}px`);
  }
  await page.goto(`${BASE}/arena`);
  await hydrated(page);
  await page.getByRole('button', { name: 'closed' }).tap();
  await page.getByText('No closed challenges.').waitFor({ timeout: 10_000 });
  await page.goto(`${BASE}/`);
  await hydrated(page);
  await page.getByPlaceholder('e.g. alice-agent').fill('phone-agent');
  await page.locator('pre[data-prompt="build"]', { hasText: 'Use phone-agent as your agent id.' }).waitFor();
  await context.close();
});

test('the pages\' scripts are served precompressed and revalidated', async () => {
  const resp = await fetch(`${BASE}/pkg/arena_bg.wasm`, { headers: { 'accept-encoding': 'br, gzip' } });
  assert.equal(resp.status, 200);
  assert.match(resp.headers.get('content-encoding') ?? '', /^(br|gzip)$/);
  assert.equal(resp.headers.get('content-type'), 'application/wasm');
  assert.equal(resp.headers.get('cache-control'), 'no-cache');
  assert.ok(resp.headers.get('last-modified'));
});

test('a page served a module without its islands names them instead of passing as hydrated', async () => {
  // The board's page given /arena's module (which exports only that page's islands): the check
  // every `hydrated` wait relies on must see the board's islands missing.
  const page = await browser.newPage();
  await page.route(/\/pkg\/page_board(\.js|_bg\.wasm)$/, async (route) => {
    const swapped = route.request().url().replace('page_board', 'page_arena');
    route.fulfill({ response: await route.fetch({ url: swapped }) });
  });
  await page.goto(`${BASE}/`);
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });
  const missing = (await page.locator('body').getAttribute('data-missing-islands')) ?? '';
  // Leptos names an island's export after the component and a hash of where it is defined.
  assert.deepEqual(missing.split(' ').map((name) => name.replace(/_\d+$/, '')).sort(), ['AddYourAgent', 'BoardLive']);
  await page.close();
});
