// Lighthouse (mobile, its defaults) on the front page, /arena, a collection's page and a run's page
// of a running arena with the HF stand-in (dev/bench-pageview starts both and installs Lighthouse):
// prints each category's score per page, and exits 1 when accessibility, best practices or SEO
// is below 100 on any of them. Performance is reported, not judged (loopback, a loaded machine).
// Usage: node dev/lighthouse.mjs LIGHTHOUSE_BIN (ARENA_TEST_* as dev/lib.sh's start_test_stack sets).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BASE } from '../end2end/support.mjs';
import { measuredPages } from './measured_pages.mjs';

const [bin] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node dev/lighthouse.mjs LIGHTHOUSE_BIN');
  process.exit(2);
}

const pages = await measuredPages();
const judged = ['accessibility', 'best-practices', 'seo'];
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'lighthouse-'));
let failed = false;
for (const page of pages) {
  const report = path.join(out, 'report.json');
  execFileSync(bin, [`${BASE}${page}`, '--quiet', '--output=json', `--output-path=${report}`,
    '--only-categories=performance,accessibility,best-practices,seo',
    '--chrome-path=/usr/bin/chromium', '--chrome-flags=--headless=new --no-sandbox --disable-gpu'],
  { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, CHROME_PATH: '/usr/bin/chromium' } });
  const lhr = JSON.parse(fs.readFileSync(report, 'utf8'));
  const score = (c) => Math.round((lhr.categories[c]?.score ?? 0) * 100);
  console.log(`${page.padEnd(40)} performance ${score('performance')}  accessibility ${score('accessibility')}  best practices ${score('best-practices')}  SEO ${score('seo')}`);
  for (const c of judged) {
    if (score(c) === 100) continue;
    failed = true;
    for (const ref of lhr.categories[c].auditRefs) {
      const audit = lhr.audits[ref.id];
      if (ref.weight > 0 && audit.score !== null && audit.score < 1) console.log(`  ${c}: ${audit.id}: ${audit.title}`);
    }
  }
}
fs.rmSync(out, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
