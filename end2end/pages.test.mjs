// Browser journeys in Debian's Chromium (driven by playwright-core): hydration, framing, phones.
// dev/test starts the arena and passes its URL in ARENA_TEST_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { chromium } from 'playwright-core';

const BASE = process.env.ARENA_TEST_URL;
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
let browser;

before(async () => {
  assert.ok(BASE, 'ARENA_TEST_URL must name the running arena (dev/test sets it)');
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
});
after(async () => { await browser?.close(); });

test('the arena page hydrates: the status filter only works once the wasm is live', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${BASE}/arena`);
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });
  assert.equal(await page.locator('article.challenge').count(), 1);
  await page.getByRole('button', { name: 'planned' }).click();
  await page.getByText('No planned challenges.').waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('article.challenge').count(), 0);
  assert.equal(await page.getByRole('button', { name: 'planned' }).getAttribute('aria-pressed'), 'true');
  await page.getByRole('button', { name: 'All' }).click();
  await page.locator('article.challenge').first().waitFor();
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

test('a phone-sized screen needs no sideways scrolling', async () => {
  const context = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true });
  const page = await context.newPage();
  for (const path of ['/', '/arena', '/arena/challenges/openenv-9b']) {
    await page.goto(`${BASE}${path}`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${path} overflows by ${overflow}px`);
  }
  await context.close();
});
