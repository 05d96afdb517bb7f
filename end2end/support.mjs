// What the browser tests share: the arena under test, Chromium's flags, the stand-in's users, and
// publishing a fixture collection to the stand-in and submitting it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import axe from 'axe-core';

export const BASE = process.env.ARENA_TEST_URL;
const REPOS = process.env.ARENA_TEST_HUB_REPOS;
const USERS = JSON.parse(fs.readFileSync(process.env.ARENA_TEST_USERS, 'utf8'));
export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

export const token = (name) => USERS.find((u) => u.name === name).token;

export function launch() {
  assert.ok(BASE, 'ARENA_TEST_URL must name the running arena (dev/test sets it)');
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
}

/** Waits until the page's islands are live. */
// Hydrated, and by the page's own module: each page loads only the islands of its group
// (app/src/page_modules.rs), and an island its module lacks is named in data-missing-islands.
export async function hydrated(page) {
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });
  const missing = await page.locator('body').getAttribute('data-missing-islands');
  assert.equal(missing, null, `${page.url()} has islands its wasm module does not export: ${missing}`);
}

/** Publishes a fixture collection as a dataset repository on the stand-in; answers its id. */
/** Task ids as long as the starter kit's, given in order to a fixture's tasks by `longNames`. */
export const STARTER_TASK_IDS = ['count-log-errors', 'expense-report-totals', 'contacts-dedup-by-email', 'posttrain-csv-cleanup'];

export function publish(owner, fixture, { longNames = false } = {}) {
  assert.ok(REPOS, 'ARENA_TEST_HUB_REPOS is set by dev/test');
  const name = `${fixture}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const dest = path.join(REPOS, 'datasets', owner, name);
  fs.mkdirSync(dest, { recursive: true });
  fs.cpSync(path.join(ROOT, 'tests/fixtures/collections', fixture), dest, { recursive: true, verbatimSymlinks: true });
  if (longNames) {
    const tasks = path.join(dest, 'envs');
    fs.readdirSync(tasks).sort().forEach((task, i) => {
      fs.renameSync(path.join(tasks, task), path.join(tasks, STARTER_TASK_IDS[i % STARTER_TASK_IDS.length]));
    });
  }
  const git = (...args) => execFileSync('git', ['-C', dest, ...args], { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '-q', '-m', 'fixture');
  return `${owner}/${name}`;
}

/** Submits a published collection through the API; answers its environment id. */
export async function submit(repoId, title, who) {
  const resp = await fetch(`${BASE}/api/environments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token(who)}` },
    body: JSON.stringify({ agent_id: null, challenge_id: 'openenv-9b', repo_type: 'dataset', repo_id: repoId,
      revision: 'main', entry_path: '', title, notes: 'from the browser tests' }),
  });
  const text = await resp.text();
  assert.ok(resp.status === 201 || resp.status === 200, `submit answered ${resp.status}: ${text}`);
  return JSON.parse(text).environment_id;
}

export const SCREENS = { desktop: { width: 1366, height: 900 }, phone: { width: 360, height: 740 } };

/** axe-core's serious and critical violations on the page, each with a few of its elements. */
export async function violations(page) {
  await page.addScriptTag({ content: axe.source });
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
  });
}

/** Words in table cells wider than the cell's content box, in the font they are drawn in. */
export function squeezedWords(page) {
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

/**
 * A run's id on the local-demo challenge, for the pages that check a run page: the latest one, or
 * one launched now (the browser tests have a stack of their own, on which nothing else runs).
 */
export async function someRun() {
  const listed = await (await fetch(`${BASE}/api/challenges/local-demo/runs`)).json();
  if (listed.runs.length > 0) return listed.runs[0].run_id;
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token('judy')}` };
  const env = await fetch(`${BASE}/api/environments`, { method: 'POST', headers, body: JSON.stringify({
    agent_id: null, challenge_id: 'local-demo', repo_type: 'dataset', repo_id: publish('judy', 'good'),
    revision: 'main', entry_path: '', title: 'A run for the page checks', notes: 'from the browser tests' }) });
  const { environment_id } = await env.json();
  assert.ok(environment_id, `the collection was not stored (${env.status})`);
  for (let i = 0; i < 120; i++) {
    const resp = await fetch(`${BASE}/api/challenges/local-demo/runs`, { method: 'POST', headers,
      body: JSON.stringify({ request_id: `page-checks-${Date.now()}`, environment_id }) });
    const body = await resp.json();
    if (resp.status === 201) return body.run.run_id;
    assert.equal(body.code, 'ANOTHER_RUN_ACTIVE', JSON.stringify(body));
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.fail('no run could be launched for the page checks');
}
