// The board in Chromium: sign in with the HF stand-in, post, see the message, sign out; the same
// inside an iframe of another origin (sign-in in a new tab, handed back to the frame); new
// messages appearing without a reload; the "Add your agent" prompts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { BASE, launch, hydrated, token } from './support.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function signInOnHub(page, user) {
  await page.getByRole('button', { name: `Sign in as ${user}` }).click();
}

test('sign in, post, see the message, sign out', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/`);
  await hydrated(page);
  await page.getByRole('link', { name: 'Sign in with Hugging Face' }).click();
  await page.waitForURL(/\/oauth\/authorize/);
  await signInOnHub(page, 'carol');
  await page.waitForURL(`${BASE}/`);
  await page.locator('.viewer', { hasText: 'carol' }).waitFor({ timeout: 15_000 });
  await hydrated(page);

  const text = `Hello from the browser ${Date.now()}`;
  await page.locator('#post-body').fill(text);
  await page.getByRole('button', { name: 'Post' }).click();
  const mine = page.locator('article.message', { hasText: text });
  await mine.waitFor({ timeout: 15_000 });
  assert.match(await mine.innerText(), /carol/);

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('link', { name: 'Sign in with Hugging Face' }).waitFor({ timeout: 15_000 });
  assert.equal(await page.locator('.viewer').count(), 0);
  await context.close();
});

test('inside an iframe of another origin: sign-in opens a tab and the frame picks it up', async () => {
  const parent = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><title>huggingface.co stand-in page</title><iframe id="space" src="${BASE}/" width="1000" height="1200"></iframe>`);
  });
  await new Promise((resolve) => parent.listen(0, 'localhost', resolve));
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(`http://localhost:${parent.address().port}/`);
    const frame = page.frameLocator('#space');
    await frame.locator('body[data-hydrated="true"]').waitFor({ timeout: 30_000 });
    const [popup] = await Promise.all([
      context.waitForEvent('page'),
      frame.getByRole('link', { name: 'Sign in with Hugging Face' }).click(),
    ]);
    await popup.waitForURL(/\/oauth\/authorize/);
    await signInOnHub(popup, 'dave');
    // The frame reloads itself once the tab hands the sign-in over.
    await frame.locator('.viewer', { hasText: 'dave' }).waitFor({ timeout: 20_000 });
    await frame.locator('body[data-hydrated="true"]').waitFor({ timeout: 30_000 });
    const text = `Framed hello ${Date.now()}`;
    await frame.locator('#post-body').fill(text);
    await frame.getByRole('button', { name: 'Post' }).click();
    await frame.locator('article.message', { hasText: text }).waitFor({ timeout: 15_000 });
    await frame.getByRole('button', { name: 'Sign out' }).click();
    await frame.getByRole('link', { name: 'Sign in with Hugging Face' }).waitFor({ timeout: 15_000 });
  } finally {
    await context.close();
    parent.close();
  }
});

test('new messages appear without a reload', async () => {
  const page = await browser.newPage();
  await page.goto(`${BASE}/`);
  await hydrated(page);
  const body = `Posted by an agent meanwhile ${Date.now()}`;
  const resp = await fetch(`${BASE}/api/board/messages`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token('eve')}` },
    body: JSON.stringify({ request_id: `eve-live-${Date.now()}`, body, refs: [], broadcast: false }),
  });
  assert.equal(resp.status, 201);
  await page.locator('article.message', { hasText: body }).waitFor({ timeout: 15_000 });
  await page.close();
});

test('"Add your agent" fills the agent id into both prompts', async () => {
  const page = await browser.newPage();
  await page.goto(`${BASE}/`);
  await hydrated(page);
  const build = page.locator('pre[data-prompt="build"]');
  assert.match(await build.innerText(), /Choose your agent id from my authenticated Hugging Face username/);
  await page.getByPlaceholder('e.g. alice-agent').fill('zed-agent');
  await page.locator('pre[data-prompt="try"]', { hasText: 'Use zed-agent as your agent id.' }).waitFor();
  assert.match(await build.innerText(), /Use zed-agent as your agent id\./);
  assert.equal((await page.getByRole('button', { name: 'Copy prompt' }).all()).length, 2);
  await page.close();
});

test('an editor hides a message from the jobs page', async () => {
  const body = `Spam to hide ${Date.now()}`;
  const resp = await fetch(`${BASE}/api/board/messages`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token('frank')}` },
    body: JSON.stringify({ request_id: `frank-spam-${Date.now()}`, body, refs: [], broadcast: false }),
  });
  assert.equal(resp.status, 201);
  const { id } = (await resp.json()).message;
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/auth/login?return_to=/arena/jobs`);
  await signInOnHub(page, 'eve');
  await page.waitForURL(`${BASE}/arena/jobs`);
  const item = page.locator('ul.board-messages li', { hasText: body });
  await item.getByLabel('Reason').fill('spam');
  await item.getByRole('button', { name: 'Hide message' }).click();
  await page.waitForURL(/\/arena\/jobs\?hide=done/);
  await page.locator('ul.hidden-messages li', { hasText: body }).waitFor();
  assert.equal(await page.locator('ul.board-messages li', { hasText: body }).count(), 0);
  const listed = await (await fetch(`${BASE}/api/board/messages`)).json();
  assert.ok(!listed.messages.some((m) => m.id === id), 'hidden from the board');
  await context.close();
});
