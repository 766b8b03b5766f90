// Loads tracekit report pages in headless Chromium (puppeteer-core, Debian's chromium) with
// the network refused, and checks what they show against the command's other outputs.
//   node report_browser.js CASES.json SHOTS_DIR
// CASES.json: [{ name, page, csv?, folded?, search?, sims?, hostile? }]: the page, the
// `profile --to csv` and `--to folded` outputs, a search term, the simulator ids of the
// instructions `convert --to kanata --cycles` keeps (Kanata), a name the page must show.
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require(process.env.PUPPETEER || 'puppeteer-core');

const [casesFile, shots] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesFile, 'utf8'));
let failures = 0;
const fail = (c, msg) => { failures++; console.log(`FAIL ${c.name}: ${msg}`); };
const ok = (c, msg) => console.log(`ok   ${c.name}: ${msg}`);

function parseCSV(text) {
  const rows = [];
  let row = [], f = '', q = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (q) {
      if (ch === '"' && text[i + 1] === '"') { f += '"'; i++; } else if (ch === '"') q = false; else f += ch;
    } else if (ch === '"') q = true;
    else if (ch === ',') { row.push(f); f = ''; } else if (ch === '\n') { row.push(f); rows.push(row); row = []; f = ''; } else f += ch;
  }
  if (f !== '' || row.length) { row.push(f); rows.push(row); }
  return rows;
}

// folded lines "a;b;c N": the total and the frame names
function folded(text) {
  let total = 0;
  const names = new Set();
  for (const line of text.split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (!m) continue;
    total += Number(m[2]);
    for (const n of m[1].split(';')) names.add(n);
  }
  return { total, names };
}

async function check(browser, c) {
  const page = await browser.newPage();
  const errors = [];
  const url = 'file://' + path.resolve(c.page);
  await page.setRequestInterception(true);
  page.on('request', (r) => (r.url() === url ? r.continue() : (errors.push('request ' + r.url()), r.abort())));
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('page error: ' + e.message));
  page.on('dialog', (d) => { errors.push('dialog: ' + d.message()); d.dismiss(); });
  await page.setViewport({ width: 1280, height: 900 });
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => window.tkReport && window.tkReport.ready, { timeout: 20000 });
  const loadMs = Date.now() - t0;
  if (errors.length) fail(c, 'errors: ' + errors.join('; ')); else ok(c, `loaded with no errors (${loadMs} ms)`);
  if ((await page.$$('script')).length !== 2) fail(c, 'the page has other than its two scripts');

  if (c.csv !== undefined) {
    // the function table as shown = profile --to csv (header and every row)
    // (a field the CSV leaves empty, not measured, shows as "-", never as 0 or nothing)
    const want = parseCSV(fs.readFileSync(c.csv, 'utf8')).map((r, i) => (i ? r.map((v, j) => (v === '' && j ? '-' : v)) : r));
    const got = await page.$$eval('#functions-table tr', (trs) => trs.filter((tr) => !tr.classList.contains('rest'))
      .map((tr) => [...tr.children].map((td) => td.textContent)));
    if (JSON.stringify(got) === JSON.stringify(want)) ok(c, `function table = profile --to csv (${want.length - 1} rows)`);
    else fail(c, 'function table differs from profile --to csv:\n' + JSON.stringify(got.slice(0, 4)) + '\n' + JSON.stringify(want.slice(0, 4)));
    if (c.hostile && !got.some((r) => r.includes(c.hostile))) fail(c, 'the hostile name is not shown as text');
  }
  if (c.folded !== undefined) {
    const f = folded(fs.readFileSync(c.folded, 'utf8'));
    const total = await page.evaluate(() => tkReport.flame.total(tkReport.flame.weight()));
    if (total === f.total) ok(c, `flame graph root total ${total} = profile --to folded's`);
    else fail(c, `flame graph root total ${total}, folded stacks ${f.total}`);
    // click the widest frame below the root: it becomes the visible root
    const before = await page.evaluate(() => tkReport.flame.visibleRoot());
    const target = await page.evaluate(() => {
      const kids = tkReport.flame.root.kids.slice().sort((a, b) => b.v[1] + b.v[2] + b.v[3] - a.v[1] - a.v[2] - a.v[3]);
      return kids.length ? kids[0].name : null;
    });
    const frames = await page.$$('#flame-graph .fr');
    let clicked = false;
    for (const fr of frames) {
      const [name, top] = await fr.evaluate((e) => [e.dataset.name, e.style.top]);
      if (name === target && top === '18px') { await fr.click(); clicked = true; break; }
    }
    const after = await page.evaluate(() => tkReport.flame.visibleRoot());
    if (clicked && before === 'all' && after === target) ok(c, `clicking "${target}" zooms (visible root ${before} -> ${after})`);
    else fail(c, `click on "${target}": visible root ${before} -> ${after}`);
    if (shots) await shot(page, c, 'flame-zoomed', '#flame');
    await page.click('#flame-reset');
    // search: the frames drawn highlighted are exactly those whose names match
    await page.type('#flame-search', c.search);
    const res = await page.$$eval('#flame-graph .fr', (fs_) => fs_.map((e) => [e.dataset.name, e.classList.contains('hit')]));
    const term = c.search.toLowerCase();
    const wrong = res.filter(([n, hit]) => hit !== n.toLowerCase().includes(term));
    const lit = new Set(res.filter(([, hit]) => hit).map(([n]) => n));
    const want = new Set([...f.names].filter((n) => n.toLowerCase().includes(term)));
    if (!wrong.length && lit.size && [...lit].every((n) => want.has(n)) && [...want].every((n) => lit.has(n)))
      ok(c, `search "${c.search}" highlights ${[...lit].join(', ')}`);
    else fail(c, `search "${c.search}": lit ${[...lit]}, expected ${[...want]}, wrong ${JSON.stringify(wrong.slice(0, 3))}`);
  }
  if (c.sims !== undefined) {
    // the pipeline diagram shows the window's instructions: those `convert --cycles` keeps
    // (their ids in the simulator, in order)
    const want = fs.readFileSync(c.sims, 'utf8').split('\n').filter((l) => l !== '').map(Number);
    const got = await page.evaluate(() => tkReport.pipeline.sims);
    const drawn = await page.evaluate(() => ({ drawn: tkReport.pipeline.drawn, ids: tkReport.pipeline.ids }));
    const ink = await page.$eval('#pipe-canvas', (cv) => {
      const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
      return n;
    });
    if (c.slowest !== undefined) {
      const ws = fs.readFileSync(c.slowest, 'utf8').split('\n').filter((l) => l !== '').map(Number);
      const gs = await page.evaluate(() => tkReport.pipeline.slowest);
      if (JSON.stringify(gs) === JSON.stringify(ws)) ok(c, `slowest instructions = stats --slowest ${ws.length}`);
      else fail(c, `slowest: ${gs.slice(0, 5)} vs stats ${ws.slice(0, 5)}`);
    }
    if (JSON.stringify(got) === JSON.stringify(want) && drawn.drawn.length && drawn.drawn[0] === drawn.ids[0] && ink > 1000)
      ok(c, `pipeline window: ${got.length} instructions as convert --cycles keeps them, ${drawn.drawn.length} rows drawn`);
    else fail(c, `pipeline window: ${got.length} labels (want ${want.length}; first ${JSON.stringify(got.slice(0, 3))} vs ${JSON.stringify(want.slice(0, 3))}), drawn ${drawn.drawn.length}, ink ${ink}`);
    await page.$eval('#pipe-scroll', (s) => { s.scrollTop = 14 * 50; s.dispatchEvent(new Event('scroll')); });
    const first = await page.evaluate(() => tkReport.pipeline.drawn[0]);
    const ids = await page.evaluate(() => tkReport.pipeline.ids);
    if (ids.length > 60 && first !== ids[50]) fail(c, `scrolled 50 rows: first drawn ${first}, want ${ids[50]}`);
    await page.$eval('#pipe-scroll', (s) => { s.scrollTop = 0; s.dispatchEvent(new Event('scroll')); });
  }
  if (shots) {
    for (const id of ['summary', 'flame', 'functions', 'source', 'timeline', 'account', 'pipeline'])
      if (await page.$eval('#' + id, (e) => !e.hidden)) await shot(page, c, id, '#' + id);
  }
  if (errors.length) fail(c, 'errors after interaction: ' + errors.join('; '));
  await page.close();
}

async function shot(page, c, what, sel) {
  const e = await page.$(sel);
  await e.screenshot({ path: path.join(shots, `${c.name}-${what}.png`) });
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--proxy-server=127.0.0.1:9', '--allow-file-access-from-files'],
  });
  try {
    for (const c of cases) await check(browser, c);
  } finally {
    await browser.close();
  }
  console.log(failures ? `${failures} failures` : 'report pages: ok');
  process.exit(failures ? 1 : 0);
})().catch((e) => { console.log('FAIL: ' + (e.stack || e)); process.exit(1); });
