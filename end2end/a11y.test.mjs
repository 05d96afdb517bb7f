// Every page, signed out and signed in, on a 1366 px screen and a 360 px phone: axe-core finds no
// serious or critical violation, each page describes itself to search engines and link previews,
// no page is wider than the screen, and no table cell is narrower than its longest word, on the desktop as on the phone (tables
// become cards there), with task ids as long as the starter kit's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, hydrated, publish, submit, someRun, SCREENS, violations, squeezedWords } from './support.mjs';

let browser;
let paths;
let collection;
before(async () => {
  browser = await launch();
  const id = collection = await submit(publish('grace', 'good', { longNames: true }), `Accessible collection ${Date.now()}`, 'grace');
  const rejected = await submit(publish('grace', 'dockerfile-copies-oracle', { longNames: true }), `Rejected tasks ${Date.now()}`, 'grace');
  const run = await someRun();
  paths = ['/', '/arena', '/arena/challenges/openenv-9b', '/arena/challenges/local-demo', `/arena/submissions/${id}`,
    `/arena/submissions/${rejected}`,
    '/arena/submit', '/arena/check', '/arena/openenv', '/arena/jobs', '/no/such/page',
    `/arena/runs/${run}`];
});
after(async () => { await browser?.close(); });

async function signIn(context, user) {
  const page = await context.newPage();
  await page.goto(`${BASE}/auth/login?return_to=/arena`);
  await page.getByRole('button', { name: `Sign in as ${user}` }).click();
  await page.waitForURL(`${BASE}/arena`);
  await page.close();
}

for (const signedIn of [false, true]) {
  for (const [screen, viewport] of Object.entries(SCREENS)) {
    const who = signedIn ? 'signed in as an editor' : 'signed out';
    test(`every page ${who} on a ${viewport.width} px ${screen}: accessible, described, readable`, async () => {
      const phone = screen === 'phone';
      // The arena's Content-Security-Policy allows its own scripts only; axe-core is injected.
      const context = await browser.newContext({ viewport, isMobile: phone, hasTouch: phone, bypassCSP: true });
      if (signedIn) await signIn(context, 'eve');
      const page = await context.newPage();
      const problems = [];
      for (const path of paths) {
        await page.goto(`${BASE}${path}`);
        await hydrated(page);
        for (const v of await violations(page)) problems.push(`${path}: ${v}`);
        const meta = await page.evaluate(() => ({
          description: document.querySelector('meta[name="description"]')?.content ?? '',
          title: document.querySelector('meta[property="og:title"]')?.content ?? '',
          preview: document.querySelector('meta[property="og:description"]')?.content ?? '',
        }));
        if (!meta.description || !meta.title || !meta.preview) problems.push(`${path}: no description or link preview ${JSON.stringify(meta)}`);
        if (path === `/arena/submissions/${collection}`) {
          assert.match(meta.title, /^Accessible collection/, 'a collection previews as the collection');
        }
        for (const w of await squeezedWords(page)) problems.push(`${path}: ${w}`);
        // No page is wider than the screen: code blocks and wide tables scroll inside themselves.
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        if (overflow > 0) problems.push(`${path}: ${overflow} px wider than the ${viewport.width} px screen`);
      }
      await context.close();
      assert.deepEqual(problems, []);
    });
  }
}
