// Load-to-interactive time of tracekit report pages in headless Chromium: from navigation
// start to the page's script having drawn every section (window.tkReport.ready), the
// median of RUNS loads each, in one browser, the network refused.
//   node report-load.js RUNS PAGE...
'use strict';
const path = require('path');
const puppeteer = require(process.env.PUPPETEER || 'puppeteer-core');

(async () => {
  const [runs, ...pages] = process.argv.slice(2);
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true, args: ['--no-sandbox', '--disable-gpu', '--proxy-server=127.0.0.1:9'] });
  for (const p of pages) {
    const url = 'file://' + path.resolve(p);
    const times = [];
    let errors = 0;
    for (let i = 0; i < Number(runs); i++) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 900 });
      await page.setRequestInterception(true);
      page.on('request', (r) => (r.url() === url ? r.continue() : r.abort()));
      page.on('pageerror', () => errors++);
      await page.goto(url, { waitUntil: 'load' });
      await page.waitForFunction(() => window.tkReport && window.tkReport.ready, { timeout: 60000 });
      times.push(await page.evaluate(() => performance.now()));
      await page.close();
    }
    times.sort((a, b) => a - b);
    console.log(`${p}: load to interactive ${times[times.length >> 1].toFixed(0)} ms (median of ${runs}), ${errors} errors`);
  }
  await browser.close();
})().catch((e) => { console.log(String(e)); process.exit(1); });
