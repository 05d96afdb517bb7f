// First page view in Chromium with a cold cache and the CPU slowed 4× (DevTools'
// Emulation.setCPUThrottlingRate): bytes transferred (all, and script and wasm alone), first
// contentful paint, and the time until the page is interactive (its islands are hydrated:
// body[data-hydrated]). Without paths: the board, /arena, a collection's page and a run's page.
// Usage: node dev/pageview.mjs BASE_URL [PATH ...] (dev/bench-pageview starts a server for it).
import { chromium } from 'playwright-core';
import { measuredPages } from './measured_pages.mjs';

const [base, ...paths] = process.argv.slice(2);
if (!base) {
  console.error('usage: node dev/pageview.mjs BASE_URL [PATH ...]');
  process.exit(2);
}
const RUNS = Number(process.env.PAGEVIEW_RUNS || 5);
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

// Records when body[data-hydrated] appears, on the page's own clock (ms since navigation start).
const WATCH = `new MutationObserver((_, obs) => {
  if (document.body && document.body.dataset.hydrated === 'true') {
    window.__interactiveAt = performance.now();
    obs.disconnect();
  }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-hydrated'] });`;

async function view(browser, url) {
  const context = await browser.newContext();
  await context.addInitScript(WATCH);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 4 });
  let bytes = 0;
  let code = 0;
  const scripts = new Set();
  cdp.on('Network.responseReceived', (e) => {
    if (/\.(js|wasm)$/.test(new URL(e.response.url).pathname)) scripts.add(e.requestId);
  });
  cdp.on('Network.loadingFinished', (e) => {
    bytes += e.encodedDataLength;
    if (scripts.has(e.requestId)) code += e.encodedDataLength;
  });
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => window.__interactiveAt !== undefined, null, { timeout: 60_000 });
  const timing = await page.evaluate(() => ({
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
    interactive: window.__interactiveAt,
  }));
  await context.close();
  return { bytes, code, ...timing };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
try {
  for (const path of paths.length ? paths : await measuredPages()) {
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await view(browser, base + path));
    const b = median(runs.map((r) => r.bytes));
    const c = median(runs.map((r) => r.code));
    const fcp = median(runs.map((r) => r.fcp));
    const tti = median(runs.map((r) => r.interactive));
    console.log(`${path}: ${b} bytes transferred (${c} of script and wasm), first contentful paint ${fcp.toFixed(0)} ms, ` +
      `interactive ${tti.toFixed(0)} ms (median of ${RUNS} cold loads, CPU 4x slower)`);
  }
} finally {
  await browser.close();
}
