// Every page, signed out and signed in, on a 1366 px screen and a 360 px phone: axe-core finds no
// serious or critical violation, each page describes itself to search engines and link previews,
// and no table cell is narrower than its longest word, on the desktop as on the phone (tables
// become cards there), with task ids as long as the starter kit's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import axe from 'axe-core';
import { BASE, launch, hydrated, publish, submit } from './support.mjs';

let browser;
let paths;
let collection;
before(async () => {
  browser = await launch();
  const id = collection = await submit(publish('grace', 'good', { longNames: true }), `Accessible collection ${Date.now()}`, 'grace');
  const rejected = await submit(publish('grace', 'dockerfile-copies-oracle', { longNames: true }), `Rejected tasks ${Date.now()}`, 'grace');
  const runs = await (await fetch(`${BASE}/api/challenges/local-demo/runs`)).json();
  paths = ['/', '/arena', '/arena/challenges/openenv-9b', '/arena/challenges/local-demo', `/arena/submissions/${id}`,
    `/arena/submissions/${rejected}`,
    '/arena/submit', '/arena/check', '/arena/openenv', '/arena/jobs', '/no/such/page',
    ...runs.runs.slice(0, 1).map((r) => `/arena/runs/${r.run_id}`)];
});
after(async () => { await browser?.close(); });

const SCREENS = { desktop: { width: 1366, height: 900 }, phone: { width: 360, height: 740 } };

/** axe-core's serious and critical violations on the page, each with a few of its elements. */
async function violations(page) {
  await page.addScriptTag({ content: axe.source });
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
  });
}

/** Words in table cells wider than the cell's content box, in the font they are drawn in. */
function squeezedWords(page) {
  return page.evaluate(() => {
    const ctx = document.createElement('canvas').getContext('2d');
    const out = [];
    for (const cell of document.querySelectorAll('main table td, main table th')) {
      const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 2 && r.height > 2; };
      // Hidden, or a header row kept only for screen readers (the phone's cards).
      if (!shown(cell) || (cell.closest('thead') && !shown(cell.closest('thead')))) continue;
      const style = getComputedStyle(cell);
      const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const font = getComputedStyle(node.parentElement);
        ctx.font = `${font.fontStyle} ${font.fontWeight} ${font.fontSize} ${font.fontFamily}`;
        for (const word of node.textContent.split(/\s+/).filter(Boolean)) {
          const width = ctx.measureText(word).width;
          if (width > room + 0.5) out.push(`"${word}" needs ${Math.ceil(width)} px in a ${Math.floor(room)} px cell`);
        }
      }
    }
    return out;
  });
}

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
      }
      await context.close();
      assert.deepEqual(problems, []);
    });
  }
}
