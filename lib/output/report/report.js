/* tracekit report: draws the page from the JSON in #tk-data. Plain JS, no libraries.
 * window.tkReport exposes what the page shows, for tests. */
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('tk-data').textContent);
  const $ = (id) => document.getElementById(id);
  const R = { data: D };
  window.tkReport = R;

  const fmt = (n) => (n === undefined || n === null) ? '' : Number(n).toLocaleString('en-US');
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  /* ticks as a time: seconds from the clock when known, else ticks */
  const timeText = (ticks, tps) => {
    if (!tps) return fmt(ticks) + ' ticks';
    const s = ticks / tps;
    if (s >= 1) return s.toFixed(3) + ' s';
    if (s >= 1e-3) return (s * 1e3).toFixed(3) + ' ms';
    if (s >= 1e-6) return (s * 1e6).toFixed(3) + ' us';
    return (s * 1e9).toFixed(0) + ' ns';
  };
  const heat = (f) => 'hsl(' + (50 - 50 * f).toFixed(0) + ',90%,' + (88 - 30 * f).toFixed(0) + '%)';
  /* a canvas drawn at the screen's pixel density, CSS width of its box */
  const setupCanvas = (c, w, h) => {
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.floor(w * dpr));
    c.height = Math.max(1, Math.floor(h * dpr));
    c.style.height = h + 'px';
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return g;
  };

  function show(id, label) {
    $(id).hidden = false;
    const a = el('a', '', label);
    a.href = '#' + id;
    $('nav').appendChild(a);
  }

  /* ---- summary ---- */
  function summary() {
    $('title').textContent = D.title + (D.format ? ' (' + D.format + ')' : '');
    document.title = 'tracekit report: ' + D.title;
    const rows = [['file', D.title], ['format', D.format], ['size', fmt(D.size) + ' bytes']];
    const s = D.summary;
    if (s) {
      rows.push([D.track_label + 's', fmt(s.tracks)]);
      if (s.insns) rows.push(['instructions', fmt(s.insns)]);
      rows.push(['calls', fmt(s.calls)]);
      if (s.timed) rows.push(['time', timeText(s.time, s.tps)]);
      rows.push(['events', fmt(s.events)]);
      rows.push(['gaps', fmt(s.gaps)]);
      const lost = [['calls cut by gaps', s.truncated], ['exits without enter', s.orphans],
        ['lost exits', s.unmatched], ['open at end', s.open_at_end], ['unwound', s.unwound]];
      for (const [k, v] of lost) if (v) rows.push([k, fmt(v)]);
    }
    const p = D.pipeline;
    if (p) {
      rows.push(['instructions', fmt(p.insns)], ['retired', fmt(p.retired)],
        ['flushed', fmt(p.flushed)], ['cycles', fmt(p.cycles)],
        ['IPC', p.cycles ? (p.retired / p.cycles).toFixed(3) : '-'], ['skipped lines', fmt(p.gaps)]);
    }
    const t = $('summary-table');
    for (const [k, v] of rows) {
      const tr = el('tr');
      tr.appendChild(el('td', '', k));
      tr.appendChild(el('td', '', String(v)));
      t.appendChild(tr);
    }
    const ul = $('notes');
    for (const n of D.notes) ul.appendChild(el('li', '', n));
    if (D.more_notes) ul.appendChild(el('li', '', D.more_notes + ' more messages'));
    show('summary', 'summary');
  }

  /* ---- flame graph (an icicle: the root on top) ---- */
  const W = { insns: 1, ticks: 2, calls: 3 };
  function flame() {
    if (!D.flame) return;
    show('flame', 'flame graph');
    const names = D.names;
    /* nodes: {name, v: [insns, ticks, calls], self, kids, parent, depth} */
    const build = (a, parent, depth) => {
      const n = { name: names[a[0]], v: [0, a[1], a[2], a[3]], parent: parent, depth: depth, kids: [] };
      if (a[6]) for (const k of a[6]) n.kids.push(build(k, n, depth + 1));
      return n;
    };
    const root = build(D.flame, null, 0);
    const s = D.summary;
    let weight = s.insns ? 'insns' : s.timed && root.v[W.ticks] ? 'ticks' : 'calls';
    let view = root;
    let search = '';
    const graph = $('flame-graph');
    const rowH = 18;
    for (const r of document.querySelectorAll('input[name=weight]')) {
      r.checked = r.value === weight;
      r.disabled = !root.v[W[r.value]];
      r.addEventListener('change', () => { weight = r.value; draw(); });
    }
    const color = (name) => {
      let h = 0;
      for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
      return 'hsl(' + (10 + h % 40) + ',' + (70 + h % 20) + '%,' + (60 + (h >> 8) % 15) + '%)';
    };
    const info = (n) => {
      const v = n.v[W[weight]], tot = root.v[W[weight]];
      // (sparse time stamps: a time of 0 was not measured, it is not 0)
      const unit = weight === 'ticks' ? (s.sparse && !v ? 'time not measured' : timeText(v, s.tps))
        : fmt(v) + (weight === 'insns' ? ' instructions' : ' calls');
      $('flame-info').textContent = n.name + ': ' + unit + ' (' +
        (tot ? (100 * v / tot).toFixed(2) : '0') + '% of all), ' + fmt(n.v[W.calls]) + ' calls';
    };
    function draw() {
      const width = graph.clientWidth || 1000;
      const wi = W[weight];
      const total = view.v[wi] || 1;
      graph.textContent = '';
      const frames = [];
      let maxDepth = 0;
      const add = (n, x, w, anc) => {
        const d = el('div', 'fr' + (anc ? ' anc' : ''), w > 30 ? n.name : '');
        d.style.left = x + 'px';
        d.style.width = Math.max(w, 1) + 'px';
        d.style.top = (n.depth * rowH) + 'px';
        d.style.background = color(n.name);
        d.title = n.name;
        d.dataset.name = n.name;
        if (search && n.name.toLowerCase().includes(search)) d.classList.add('hit');
        d.addEventListener('click', () => { view = n; draw(); info(n); });
        d.addEventListener('mouseenter', () => info(n));
        graph.appendChild(d);
        frames.push(d);
        if (n.depth > maxDepth) maxDepth = n.depth;
      };
      for (let a = view.parent; a; a = a.parent) add(a, 0, width, true);
      const rec = (n, x) => {
        const w = width * n.v[wi] / total;
        if (w < 1) return;   /* under a pixel: not drawn (thousands of them cost layout) */
        add(n, x, w, false);
        let cx = x;
        for (const k of n.kids) {
          rec(k, cx);
          cx += width * k.v[wi] / total;
        }
      };
      rec(view, 0);
      graph.style.height = ((maxDepth + 1) * rowH + 2) + 'px';
      R.flame.frames = frames;
      R.flame.view = view;
      let hits = 0, hitv = 0;
      if (search) {
        const seen = (n, under) => {
          const m = n.name.toLowerCase().includes(search);
          if (m) hits++;
          if (m && !under) hitv += n.v[wi];
          for (const k of n.kids) seen(k, under || m);
        };
        seen(root, false);
        $('flame-info').textContent = hits + ' frames match "' + search + '" (' +
          (root.v[wi] ? (100 * hitv / root.v[wi]).toFixed(2) : '0') + '% of all)';
      }
    }
    R.flame = { root: root, total: (w) => root.v[W[w || weight]], weight: () => weight,
      visibleRoot: () => view.name, highlighted: () => R.flame.frames.filter((f) => f.classList.contains('hit')).map((f) => f.dataset.name),
      frames: [] };
    $('flame-search').addEventListener('input', (e) => { search = e.target.value.trim().toLowerCase(); draw(); });
    $('flame-reset').addEventListener('click', () => { view = root; draw(); });
    window.addEventListener('resize', draw);
    $('flame-note').textContent = 'Click a frame to zoom, a frame above it to zoom out. Call paths under 1/' +
      D.flame_share + ' of the total are merged into "(other)" (' + fmt(D.flame_nodes) + ' frames kept).';
    draw();
  }

  /* ---- tables ---- */
  function parseCSV(text) {
    const rows = [];
    let row = [], f = '', q = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (q) {
        if (c === '"' && text[i + 1] === '"') { f += '"'; i++; } else if (c === '"') q = false; else f += c;
      } else if (c === '"') q = true;
      else if (c === ',') { row.push(f); f = ''; } else if (c === '\n') { row.push(f); rows.push(row); row = []; f = ''; } else f += c;
    }
    if (f !== '' || row.length) { row.push(f); rows.push(row); }
    return rows;
  }
  /* a sortable table: HEAD names, ROWS of strings (shown as they are), REST a last row */
  function table(t, head, rows, nameCol, rest) {
    let key = -1, dir = 1;
    const num = (s) => (s === '' ? -Infinity : Number(s));
    const draw = () => {
      t.textContent = '';
      const tr = el('tr');
      head.forEach((h, i) => {
        const th = el('th', i === nameCol ? 'name' : '', h);
        if (i === key) th.classList.add(dir > 0 ? 'asc' : 'desc');
        th.addEventListener('click', () => {
          dir = key === i ? -dir : (i === nameCol ? 1 : -1);
          key = i;
          const isNum = rows.every((r) => r[i] === '' || !isNaN(Number(r[i])));
          rows.sort((a, b) => {
            const x = isNum ? num(a[i]) : a[i], y = isNum ? num(b[i]) : b[i];
            return x < y ? -dir : x > y ? dir : 0;
          });
          draw();
        });
        tr.appendChild(th);
      });
      const th = el('thead');
      th.appendChild(tr);
      t.appendChild(th);
      const tb = el('tbody');
      for (const r of rows.concat(rest ? [rest] : [])) {
        const row = el('tr', r === rest ? 'rest' : '');
        // an empty field was not measured (a time of a branch trace's call without stamps)
        r.forEach((v, i) => row.appendChild(el('td', i === nameCol ? 'name' : '', v === '' && i !== nameCol ? '-' : v)));
        tb.appendChild(row);
      }
      t.appendChild(tb);
    };
    draw();
  }
  function functions() {
    if (D.functions === undefined) return;
    show('functions', 'functions');
    const rows = parseCSV(D.functions);
    const head = rows.shift();
    const fr = D.functions_rest;
    let rest = null;
    if (fr.rows) {
      rest = head.map(() => '');
      rest[head.indexOf('function')] = '(' + fmt(fr.rows) + ' more functions)';
      rest[head.indexOf('calls')] = String(fr.calls);
      rest[head.indexOf('excl_time')] = fr.excl_time.toFixed(3);
      rest[head.indexOf('excl_insns')] = String(fr.excl_insns);
    }
    R.functions = { head: head, rows: rows.map((r) => r.slice()) };
    table($('functions-table'), head, rows, head.indexOf('function'), rest);
    $('functions-note').textContent = 'As tracekit profile --to csv' +
      (D.summary.tps ? ' (times in us)' : ' (times in ticks)') + '; click a column to sort.' +
      (fr.rows ? ' The first ' + fmt(rows.length) + ' rows; the other ' + fmt(fr.rows) + ' are summed in the last.' : '');
  }
  function account() {
    if (D.account === undefined) return;
    show('account', 'latencies');
    const rows = parseCSV(D.account);
    const head = rows.shift();
    R.account = { head: head, rows: rows.map((r) => r.slice()) };
    table($('account-table'), head, rows, head.indexOf('function'), null);
  }

  /* ---- source heat: `profile --source` lines, coloured by instructions ---- */
  function source() {
    if (D.source === undefined) return;
    show('source', 'source');
    const t = $('source-table');
    const lines = D.source.split('\n');
    let max = 1;
    const parsed = lines.map((l) => {
      const m = /^\s+(\d+|\.)\s+(\d+|\.)\s+(\d+)  ?(.*)$/.exec(l);
      if (!m) return { text: l };
      const insns = m[2] === '.' ? 0 : Number(m[2]);
      if (insns > max) max = insns;
      return { execs: m[1], insns: m[2], line: m[3], text: m[4], v: insns };
    });
    const frag = document.createDocumentFragment();
    for (const p of parsed) {
      const tr = el('tr');
      if (p.line === undefined) {
        if (!p.text || /^\s+execs/.test(p.text)) continue;
        tr.className = 'file';
        const td = el('td', '', p.text.replace(/^-- file: /, ''));
        td.colSpan = 4;
        tr.appendChild(td);
      } else {
        for (const v of [p.execs, p.insns, p.line]) tr.appendChild(el('td', 'n', v));
        const td = el('td', '', p.text);
        if (p.v) td.style.background = heat(Math.sqrt(p.v / max));
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    }
    t.appendChild(frag);
    $('source-note').textContent = 'As tracekit profile --source --top 200: executions and instructions of the hottest lines.' +
      (D.source_cut ? ' ' + fmt(D.source_cut) + ' bytes left out.' : '');
  }

  /* ---- timeline: activity per lane, binned ---- */
  function timeline() {
    const T = D.timeline;
    if (!T) return;
    show('timeline', 'timeline');
    const c = $('timeline-canvas');
    const nb = T.lanes.length ? T.lanes[0].insns.length : 0;
    let a = 0, b = nb, series = T.lanes.some((l) => l.insns.some((v) => v)) ? 'insns' : 'calls';
    $('timeline-series').value = series;
    const laneH = 22, left = 120;
    /* bins sit at multiples of their width: the first event falls T.lead into bin 0 */
    const at = (i) => Math.max(0, i * T.width - T.lead);
    let drag = null;
    const draw = () => {
      const w = c.clientWidth || 1000, h = T.lanes.length * laneH + 20;
      const g = setupCanvas(c, w, h);
      g.font = '11px sans-serif';
      let max = 1;
      for (const l of T.lanes) for (let i = a; i < b; i++) max = Math.max(max, l[series][i]);
      const bw = (w - left) / (b - a);
      T.lanes.forEach((l, k) => {
        const y = k * laneH;
        g.fillStyle = '#333';
        g.fillText(l.name, 4, y + 15);
        for (let i = a; i < b; i++) {
          const v = l[series][i];
          if (!v) continue;
          g.fillStyle = heat(Math.sqrt(v / max));
          g.fillRect(left + (i - a) * bw, y + 2, Math.max(bw, 1), laneH - 4);
        }
      });
      g.fillStyle = '#333';
      g.fillText(timeText(at(a), T.tps), left, h - 4);
      const end = timeText(Math.min(at(b), T.span), T.tps);
      g.fillText(end, w - g.measureText(end).width - 4, h - 4);
      if (drag && drag.x1 !== undefined) {
        g.fillStyle = 'rgba(11,92,173,0.2)';
        g.fillRect(Math.min(drag.x0, drag.x1), 0, Math.abs(drag.x1 - drag.x0), h);
      }
    };
    const binAt = (x) => a + Math.floor((x - left) / ((c.clientWidth - left) / (b - a)));
    c.addEventListener('mousemove', (e) => {
      const x = e.offsetX, i = binAt(x), k = Math.floor(e.offsetY / laneH);
      if (drag) { drag.x1 = x; draw(); }
      if (x < left || i < a || i >= b || !T.lanes[k]) return;
      $('timeline-info').textContent = T.lanes[k].name + ', ' + timeText(at(i), T.tps) + ' .. ' +
        timeText(Math.min(at(i + 1), T.span), T.tps) + ': ' + fmt(T.lanes[k].insns[i]) + ' instructions, ' + fmt(T.lanes[k].calls[i]) + ' calls';
    });
    c.addEventListener('mousedown', (e) => { drag = { x0: e.offsetX }; });
    c.addEventListener('mouseup', (e) => {
      if (drag && Math.abs(e.offsetX - drag.x0) > 4) {
        const i = binAt(Math.min(drag.x0, e.offsetX)), j = binAt(Math.max(drag.x0, e.offsetX)) + 1;
        a = Math.max(a, i);
        b = Math.min(b, Math.max(j, a + 1));
      }
      drag = null;
      draw();
    });
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const i = Math.min(Math.max(binAt(e.offsetX), a), b - 1), span = b - a;
      const ns = Math.max(1, Math.min(nb, Math.round(span * (e.deltaY > 0 ? 1.25 : 0.8))));
      a = Math.max(0, Math.round(i - (i - a) * ns / span));
      b = Math.min(nb, a + ns);
      draw();
    }, { passive: false });
    $('timeline-reset').addEventListener('click', () => { a = 0; b = nb; draw(); });
    $('timeline-series').addEventListener('change', (e) => { series = e.target.value; draw(); });
    window.addEventListener('resize', draw);
    R.timeline = { lanes: T.lanes.map((l) => l.name), range: () => [a, b] };
    draw();
  }

  /* ---- pipeline ---- */
  function pipeline() {
    const P = D.pipeline;
    if (!P) return;
    show('pipeline', 'pipeline');
    const kv = $('pipeline-summary');
    for (const [k, v] of [['instructions', fmt(P.insns)], ['retired', fmt(P.retired)], ['flushed', fmt(P.flushed)],
      ['in flight at the end', fmt(P.in_flight)], ['cycles', fmt(P.cycles)],
      ['IPC (retired / cycles)', P.cycles ? (P.retired / P.cycles).toFixed(3) : '-']]) {
      const tr = el('tr');
      tr.appendChild(el('td', '', k));
      tr.appendChild(el('td', '', v));
      kv.appendChild(tr);
    }
    /* IPC per column of ipc.width cycles */
    const ipc = P.ipc.retired.map((r, i) => {
      const cyc = Math.min(P.ipc.width, P.cycles + 1 - i * P.ipc.width);
      return cyc > 0 ? r / cyc : 0;
    });
    const ic = $('ipc-canvas');
    const drawIpc = () => {
      const w = ic.clientWidth || 1000, h = 140;
      const g = setupCanvas(ic, w, h);
      const max = Math.max(0.001, ...ipc);
      const bw = (w - 40) / ipc.length;
      g.fillStyle = '#0b5cad';
      ipc.forEach((v, i) => {
        const bh = (h - 20) * v / max;
        g.fillRect(40 + i * bw, h - 16 - bh, Math.max(bw - 0.5, 0.5), bh);
      });
      g.fillStyle = '#333';
      g.font = '11px sans-serif';
      g.fillText(max.toFixed(2), 2, 12);
      g.fillText('0', 2, h - 16);
      g.fillText('cycle 0', 40, h - 3);
      const e = 'cycle ' + fmt(P.cycles);
      g.fillText(e, w - g.measureText(e).width - 4, h - 3);
    };
    ic.addEventListener('mousemove', (e) => {
      const i = Math.floor((e.offsetX - 40) / ((ic.clientWidth - 40) / ipc.length));
      if (i >= 0 && i < ipc.length)
        $('ipc-info').textContent = 'cycles ' + fmt(i * P.ipc.width) + ' .. ' + fmt((i + 1) * P.ipc.width) +
          ': IPC ' + ipc[i].toFixed(3) + ', ' + fmt(P.ipc.retired[i]) + ' retired, ' + fmt(P.ipc.flushed[i]) + ' flushed';
    });
    /* stage latency histograms: bin k holds [2^(k-1), 2^k) cycles (bin 0: 0) */
    const box = $('stage-hists');
    const stageName = {}, sideLane = {};
    for (const st of P.stages) {
      stageName[st.id] = st.name;
      sideLane[st.id] = st.lane !== P.stages[0].lane;   /* drawn thin, under the main lane */
      const d = el('div', 'hist');
      d.appendChild(el('div', '', st.name + ' (' + st.lane + '): ' + fmt(st.count) + ', mean ' +
        (st.count ? (st.sum / st.count).toFixed(2) : '-') + ', max ' + fmt(st.max)));
      const c = el('canvas');
      d.appendChild(c);
      box.appendChild(d);
      const g = setupCanvas(c, 180, 60);
      const max = Math.max(1, ...st.hist);
      const bw = 180 / Math.max(st.hist.length, 8);
      g.fillStyle = '#7a5195';
      st.hist.forEach((v, k) => {
        const bh = v ? Math.max(1, 48 * v / max) : 0;
        g.fillRect(k * bw, 50 - bh, bw - 1, bh);
      });
      g.fillStyle = '#333';
      g.font = '9px sans-serif';
      g.fillText('0', 0, 59);
      const hi = st.hist.length > 1 ? String(Math.pow(2, st.hist.length - 1)) : '1';
      g.fillText(hi, 180 - g.measureText(hi).width, 59);
      c.title = st.hist.map((v, k) => (k ? '[' + Math.pow(2, k - 1) + ',' + (Math.pow(2, k) - 1) + ']' : '0') + ': ' + v).join('\n');
    }
    table($('slowest-table'), ['id', 'sim id', 'thread', 'begin', 'end', 'cycles', 'label'],
      P.slowest.map((s) => [String(s[0]), String(s[1]), String(s[2]), String(s[3]), String(s[4]), String(s[4] - s[3]), s[5]]), 6, null);

    /* the diagram: one row per instruction of the window, drawn only where visible */
    const win = P.window.insns;
    const sc = $('pipe-scroll'), space = $('pipe-space'), cv = $('pipe-canvas');
    const rowH = 14, labelW = 260;
    const c0 = win.length ? Math.min(...win.map((w) => w[3])) : 0;
    const c1 = win.length ? Math.max(...win.map((w) => w[4])) + 1 : 1;
    let ppc = Number($('pipe-zoom').value);
    const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
      '#ff9da7', '#9c755f', '#bab0ac', '#1f77b4', '#8c564b', '#17becf', '#bcbd22', '#7f7f7f'];
    const drawPipe = () => {
      const vw = sc.clientWidth || 1000, vh = sc.clientHeight || 400;
      space.style.width = (labelW + (c1 - c0) * ppc + 20) + 'px';
      space.style.height = (win.length * rowH + 20) + 'px';
      const g = setupCanvas(cv, vw, vh);
      cv.style.width = vw + 'px';
      const top = sc.scrollTop, leftPx = sc.scrollLeft;
      const first = Math.floor(top / rowH), last = Math.min(win.length, first + Math.ceil(vh / rowH) + 1);
      g.font = '10px ui-monospace, monospace';
      g.textBaseline = 'middle';
      const drawn = [];
      for (let i = first; i < last; i++) {
        const w = win[i], y = (i - first) * rowH - (top % rowH);
        drawn.push(w[0]);
        for (const s of w[7]) {
          const x = labelW + (s[1] - c0) * ppc - leftPx, x2 = labelW + (s[2] - c0 + 1) * ppc - leftPx;
          if (x2 < labelW || x > vw) continue;
          const xa = Math.max(x, labelW);
          g.fillStyle = palette[s[0] % palette.length];
          if (sideLane[s[0]]) {
            g.fillRect(xa, y + rowH - 4, Math.max(x2 - xa - 1, 1), 3);
            continue;
          }
          g.fillRect(xa, y + 1, Math.max(x2 - xa - 1, 1), rowH - 5);
          if (x2 - xa > 14) {
            g.fillStyle = '#fff';
            g.fillText(String(stageName[s[0]] || s[0]).slice(0, Math.floor((x2 - xa) / 6)), xa + 2, y + rowH / 2);
          }
        }
        g.fillStyle = w[5] === 1 ? '#b00' : w[5] === 2 ? '#888' : '#222';
        g.clearRect(0, y, labelW, rowH);
        g.fillText((w[0] + ' ' + w[6]).slice(0, 40), 2, y + rowH / 2);
      }
      R.pipeline.drawn = drawn;
    };
    sc.addEventListener('scroll', drawPipe);
    $('pipe-zoom').addEventListener('input', (e) => { ppc = Number(e.target.value); drawPipe(); });
    sc.addEventListener('mousemove', (e) => {
      const r = sc.getBoundingClientRect();
      const i = Math.floor((e.clientY - r.top + sc.scrollTop) / rowH), w = win[i];
      if (!w) return;
      const cyc = c0 + Math.floor((e.clientX - r.left + sc.scrollLeft - labelW) / ppc);
      const st = w[7].find((s) => s[1] <= cyc && cyc <= s[2]);
      $('pipe-info').textContent = '#' + w[0] + ' ' + w[6] + ' [' + fmt(w[3]) + ', ' + fmt(w[4]) + '] ' +
        (w[5] === 1 ? 'flushed' : w[5] === 2 ? 'in flight' : 'retired') +
        (st ? '; cycle ' + fmt(cyc) + ': ' + (stageName[st[0]] || st[0]) : '');
    });
    const wdesc = P.window.end ? 'instructions alive in cycles [' + fmt(P.window.begin) + ', ' + fmt(P.window.end) + ')'
      : 'the first ' + fmt(P.window.first) + ' instructions';
    $('window-note').textContent = 'Window: ' + wdesc + ' (tracekit report --cycles A:B chooses another), ' +
      fmt(win.length) + ' instructions' + (P.window.left_out ? ', ' + fmt(P.window.left_out) + ' more left out' : '') +
      '. Red: flushed; grey: still in flight at the end.';
    R.pipeline = { slowest: P.slowest.map((s) => s[0]), ids: win.map((w) => w[0]), sims: win.map((w) => w[1]), labels: win.map((w) => w[6]), drawn: [], stages: P.stages.map((s) => s.name) };
    window.addEventListener('resize', () => { drawIpc(); drawPipe(); });
    drawIpc();
    drawPipe();
  }

  /* each section drawn, and how long it took (ms) */
  R.timings = {};
  for (const [name, f] of [['summary', summary], ['flame', flame], ['functions', functions], ['source', source],
    ['timeline', timeline], ['account', account], ['pipeline', pipeline]]) {
    const t0 = performance.now();
    f();
    R.timings[name] = Math.round(performance.now() - t0);
  }
  R.ready = true;
})();
