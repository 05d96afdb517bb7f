// What the browser tests share: the arena under test, Chromium's flags, the stand-in's users, and
// publishing a fixture collection to the stand-in and submitting it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';

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
export const hydrated = (page) => page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });

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
