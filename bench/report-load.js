// Load-to-interactive time of tracekit report pages in headless Chromium: from navigation
// start to the page's script having drawn every section (window.tkReport.ready), the
// median of RUNS loads each, in one browser, the network refused; and the part of it spent
// running script (the DevTools protocol's ScriptDuration).
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
    const times = [], script = [];
    let errors = 0;
    for (let i = 0; i < Number(runs); i++) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 900 });
      await page.setRequestInterception(true);
      page.on('request', (r) => (r.url() === url ? r.continue() : r.abort()));
      page.on('pageerror', () => errors++);
      const cdp = await page.target().createCDPSession();
      await cdp.send('Performance.enable');
      await page.goto(url, { waitUntil: 'load' });
      await page.waitForFunction(() => window.tkReport && window.tkReport.ready, { timeout: 60000 });
      times.push(await page.evaluate(() => performance.now()));
      const m = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((x) => [x.name, x.value]));
      script.push(1000 * m.ScriptDuration);
      await page.close();
    }
    const med = (v) => v.sort((a, b) => a - b)[v.length >> 1].toFixed(0);
    console.log(`${path.basename(p)}: load to interactive ${med(times)} ms, of it script ${med(script)} ms (medians of ${runs}), ${errors} errors`);
  }
  await browser.close();
})().catch((e) => { console.log(String(e)); process.exit(1); });
