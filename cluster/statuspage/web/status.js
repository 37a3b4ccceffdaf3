// braid's status page: polls GET /v1/status on the node that served it
// and draws it. No libraries; nothing is fetched from anywhere else.
'use strict';

(() => {
  const POLL_MS = 2000;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const COLORS = ['#1f6fb4', '#c8362b', '#2a9a3e', '#8a55b8', '#e07b00', '#138f9e', '#8c564b', '#d14b97', '#6b7178', '#9a9a18'];

  // el builds an element: attrs are attributes ("text" sets its text),
  // children are nodes or strings.
  function el(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs, ...children) {
    return build(document.createElementNS(SVG_NS, tag), attrs, children);
  }

  function build(node, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') node.textContent = String(v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null) continue;
      node.append(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return node;
  }

  // cell is a table cell showing one value, named by data-field.
  function cell(field, value, cls, blank = '—') {
    return el('td', { 'data-field': field, class: cls, text: value === undefined || value === null || value === '' ? blank : value });
  }

  function fmtMs(ms) {
    if (ms === undefined || ms === null) return '—';
    if (ms === 0) return '0';
    const neg = ms < 0;
    ms = Math.abs(ms);
    let s;
    if (ms < 1000) s = `${Math.round(ms)} ms`;
    else if (ms < 60e3) s = `${(ms / 1000).toFixed(ms < 10e3 ? 1 : 0)} s`;
    else if (ms < 3600e3) s = `${Math.floor(ms / 60e3)} min ${Math.round((ms % 60e3) / 1000)} s`;
    else if (ms < 86400e3) s = `${Math.floor(ms / 3600e3)} h ${Math.round((ms % 3600e3) / 60e3)} min`;
    else s = `${Math.floor(ms / 86400e3)} d ${Math.round((ms % 86400e3) / 3600e3)} h`;
    return neg ? `-${s}` : s;
  }

  function fmtBytes(b) {
    if (b === undefined || b === null) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return `${i === 0 ? b : b.toFixed(1)} ${units[i]}`;
  }

  function fmtTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
  }

  function yesNo(v) {
    if (v === undefined || v === null) return '—';
    return v ? 'yes' : 'no';
  }

  // fmtSnapshot is a source's initial-snapshot progress on one line, as
  // braid destination show prints it; the rate and the time left only once
  // they are known.
  function fmtSnapshot(sn) {
    if (!sn) return '';
    if (sn.done) return 'done';
    const n = v => Math.round(v || 0).toLocaleString('en-US');
    let text = `${sn.tablesDone || 0}/${sn.tables || 0} tables, ${n(sn.rows)} rows`;
    if (sn.rowsPerSecond > 0) text += `, ${n(sn.rowsPerSecond)} rows/s`;
    if (sn.etaSeconds > 0) text += `, eta ${fmtMs(Math.ceil(sn.etaSeconds) * 1000)}`;
    return text;
  }

  function none(section) {
    return el('p', { class: 'none', 'data-section': section, 'data-empty': true, text: 'none' });
  }

  function table(headers, rows) {
    return el('table', {},
      el('thead', {}, el('tr', {}, ...headers.map(h => el('th', { class: h.num ? 'num' : undefined, text: h.label || h })))),
      el('tbody', {}, ...rows));
  }

  function renderNodes(st) {
    const tbody = document.querySelector('#nodes tbody');
    const rows = (st.cluster.nodes || []).map(n => el('tr', { 'data-node': n.name, class: n.name === st.cluster.node ? 'self' : undefined },
      cell('name', n.name + (n.name === st.cluster.node ? ' (this node)' : '')),
      cell('state', n.state, n.state === 'alive' ? 'ok' : 'bad'),
      cell('raft', n.raft || 'not in the configuration', n.raft ? undefined : 'warn'),
      cell('destinations', n.destinations, 'num'),
      cell('httpAddr', n.httpAddr),
      cell('canalAddr', n.canalAddr),
      cell('raftAddr', n.raftAddr)));
    tbody.replaceChildren(...rows);
  }

  function renderSources(state) {
    const sources = state.sources || [];
    if (sources.length === 0) return none('sources');
    const extra = {
      connected: sources.some(s => 'connected' in s),
      lastError: sources.some(s => 'lastError' in s),
      snapshot: sources.some(s => 'snapshot' in s),
      lost: sources.some(s => s.lost || (s.accepted && s.accepted.length)),
    };
    const headers = ['source', 'position', 'last commit', { label: 'since last commit', num: true }, { label: 'behind', num: true }, 'strict order waits for it'];
    if (extra.connected) headers.push('connected');
    if (extra.lastError) headers.push('last error');
    if (extra.snapshot) headers.push('initial snapshot');
    if (extra.lost) headers.push('lost transactions');
    const rows = sources.map(s => {
      const tr = el('tr', { 'data-source': s.name },
        cell('name', s.name),
        cell('pos', s.pos),
        cell('lastCommit', fmtTime(s.lastCommit)),
        cell('lagMs', fmtMs(s.lagMs), 'num'),
        cell('behindMs', s.idle ? 'idle' : fmtMs(s.behindMs), 'num'),
        cell('waiting', yesNo(s.waiting), s.waiting ? 'warn' : undefined));
      if (extra.connected) tr.append(cell('connected', yesNo(s.connected), s.connected === false ? 'bad' : 'ok'));
      if (extra.lastError) tr.append(cell('lastError', s.lastError, s.lastError ? 'bad' : undefined));
      if (extra.snapshot) tr.append(cell('snapshot', fmtSnapshot(s.snapshot), s.snapshot && s.snapshot.done ? 'ok' : undefined));
      if (extra.lost) {
        const n = (s.accepted || []).length;
        const text = s.lost ? 'waiting for an accept' : (n ? `${n} ${n === 1 ? 'loss' : 'losses'} accepted` : '');
        tr.append(cell('lost', text, s.lost ? 'bad' : (n ? 'warn' : undefined), ''));
      }
      return tr;
    });
    const t = table(headers, rows);
    t.setAttribute('data-section', 'sources');
    return t;
  }

  // awaitingAccept says, for each source that waits because the server
  // it reads (a promoted one) lacks transactions braid emitted, what is
  // missing and the command that lets it go on without them.
  function awaitingAccept(dest, sources) {
    return (sources || []).filter(s => s.lost).map(s => {
      const command = `braid destination accept-lost ${dest} ${s.name}`;
      return el('div', { class: 'alert', 'data-source': s.name, 'data-field': 'awaitAccept' },
        el('strong', { text: `Source ${s.name} waits for an accept. ` }),
        `The server it reads${s.server ? ` (${s.server})` : ''} is writable but lacks transactions braid already emitted: `,
        el('span', { 'data-field': 'lost', text: s.lost }),
        '. braid reads nothing more from the source until they come back or an operator accepts that they are lost; '
          + 'then a LOST marker naming them goes into the stream and the source goes on. To accept: ',
        el('code', { 'data-field': 'command', text: command }));
    });
  }

  // renderLosses lists the losses operators accepted, per source: which
  // transactions, when, and the seq of the LOST marker naming them.
  function renderLosses(sources) {
    const rows = [];
    for (const s of sources || []) {
      for (const a of s.accepted || []) {
        rows.push(el('tr', { 'data-source': s.name },
          cell('name', s.name),
          cell('lost', a.lost),
          cell('from', a.from),
          cell('server', a.server),
          build(cell('acceptedAt', a.acceptedAt ? fmtTime(a.acceptedAt) : ''), { 'data-value': a.acceptedAt || '' }, []),
          build(cell('markerSeq', a.markerSeq, 'num'), {
            title: a.markerSeq ? undefined : 'not out yet, or out before the destination last started on its owner' }, [])));
      }
    }
    if (rows.length === 0) return null;
    const t = table(['source', 'lost transactions', 'emitted up to', 'server that lacked them', 'accepted at', { label: 'LOST marker seq', num: true }], rows);
    t.setAttribute('data-section', 'losses');
    return t;
  }

  function renderConsumers(state) {
    const clients = state.clients || [];
    if (clients.length === 0) return none('consumers');
    const held = (state.store && state.store.blockedBy) || [];
    const blocked = new Set(Array.isArray(held) ? held : []);
    const seen = clients.some(c => 'lastSeen' in c);
    const rows = clients.map(c => {
      const behind = state.seq >= c.ackedSeq ? state.seq - c.ackedSeq : 0;
      const notes = [];
      if (blocked.has(c.id)) notes.push('holds the store full');
      if (c.detached) notes.push('detached');
      if (c.replaying) notes.push('replaying');
      if (c.ephemeral) notes.push('ephemeral');
      const tr = el('tr', { 'data-client': c.id },
        cell('id', c.id),
        cell('streaming', yesNo(c.streaming), c.streaming ? 'ok' : undefined),
        cell('ackedSeq', c.ackedSeq, 'num'),
        cell('behind', behind, behind > 0 ? 'num warn' : 'num'),
        cell('unacked', c.unacked, 'num'),
        cell('pendingBatches', c.pendingBatches, 'num'),
        cell('cursorSeq', c.cursor ? c.cursor.seq : '', 'num'));
      if (seen) tr.append(cell('lastSeen', c.lastSeen ? fmtTime(c.lastSeen) : ''));
      tr.append(cell('notes', notes.join(', '), blocked.has(c.id) ? 'bad' : (c.detached ? 'warn' : undefined), ''));
      return tr;
    });
    const headers = ['client id', 'streaming', { label: 'acked seq', num: true }, { label: 'behind (transactions)', num: true },
      { label: 'unacked events', num: true }, { label: 'pending batches', num: true }, { label: 'cursor seq', num: true }];
    if (seen) headers.push('last seen');
    headers.push('');
    return table(headers, rows);
  }

  // generic draws a list of objects as a table of their fields: sinks and
  // DDL locks, whatever fields their states carry.
  function generic(section, items) {
    if (!Array.isArray(items) || items.length === 0) return none(section);
    const keys = [];
    for (const it of items) for (const k of Object.keys(it || {})) if (!keys.includes(k)) keys.push(k);
    const show = v => (v === null || v === undefined) ? '' : (typeof v === 'object' ? JSON.stringify(v) : String(v));
    const rows = items.map(it => el('tr', { 'data-item': show(it.name ?? it.id ?? '') },
      ...keys.map(k => cell(k, show(it[k])))));
    const t = table(keys, rows);
    t.setAttribute('data-section', section);
    return t;
  }

  // niceCeil rounds a lag in ms up to 1, 2 or 5 times a power of ten.
  function niceCeil(ms) {
    const p = Math.pow(10, Math.floor(Math.log10(ms)));
    for (const m of [1, 2, 5, 10]) if (m * p >= ms) return m * p;
    return 10 * p;
  }

  // chart draws the sources' lag over the window ending at now.
  function chart(series, now, windowMs, everyMs) {
    const W = 720, H = 170, L = 58, R = 10, T = 10, B = 22;
    const from = now - windowMs;
    let max = 0, count = 0;
    for (const s of series) for (const p of s.samples) if (p.lagMs !== undefined && p.lagMs !== null) { max = Math.max(max, p.lagMs); count++; }
    const ymax = niceCeil(Math.max(max, 1000));
    const x = t => L + (t - from) / windowMs * (W - L - R);
    const y = v => T + (1 - Math.min(v, ymax) / ymax) * (H - T - B);
    const root = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'data-samples': count,
      'aria-label': `lag of each source over the last ${Math.round(windowMs / 60e3)} minutes` });
    for (let i = 0; i <= 4; i++) {
      const v = ymax * i / 4, yy = y(v);
      root.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: yy, y2: yy }),
        svg('text', { x: L - 6, y: yy + 3, 'text-anchor': 'end', text: fmtMs(v) }));
    }
    const minutes = Math.round(windowMs / 60e3);
    for (let m = minutes; m >= 0; m -= Math.max(1, Math.round(minutes / 5))) {
      const xx = x(now - m * 60e3);
      root.append(svg('text', { x: xx, y: H - 6, 'text-anchor': m === minutes ? 'start' : (m === 0 ? 'end' : 'middle'),
        text: m === 0 ? 'now' : `-${m} min` }));
    }
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const g = svg('g', { 'data-series': s.source, stroke: color, fill: color });
      // A sample without a lag, or a gap of over two intervals (the owner
      // did not answer), breaks the line.
      let seg = [];
      const flush = () => {
        if (seg.length === 1) g.append(svg('circle', { cx: seg[0][0], cy: seg[0][1], r: 2.5, stroke: 'none' }));
        else if (seg.length > 1) g.append(svg('polyline', { points: seg.map(p => p.join(',')).join(' '), fill: 'none', 'stroke-width': 1.5 }));
        seg = [];
      };
      let last = null;
      for (const p of s.samples) {
        const t = Date.parse(p.time);
        if (t < from) continue;
        if (p.lagMs === undefined || p.lagMs === null || (last !== null && t - last > 2.5 * everyMs)) flush();
        if (p.lagMs !== undefined && p.lagMs !== null) seg.push([x(t).toFixed(1), y(p.lagMs).toFixed(1)]);
        last = t;
      }
      flush();
      g.append(svg('title', { text: s.source }));
      root.append(g);
    });
    return root;
  }

  // legend names each series' colour with the source's lag now (from the
  // state; else its last sample).
  function legend(series, sources) {
    const now = new Map((sources || []).map(s => [s.name, s.behindMs]));
    return el('div', { class: 'legend' }, ...series.map((s, i) => {
      const lastLag = now.has(s.source) ? now.get(s.source) : (s.samples.length ? s.samples[s.samples.length - 1].lagMs : undefined);
      return el('span', { 'data-series': s.source },
        svg('svg', { class: 'swatch', width: 10, height: 10, viewBox: '0 0 10 10' }, svg('rect', { width: 10, height: 10, rx: 2, fill: COLORS[i % COLORS.length] })),
        `${s.source}: ${fmtMs(lastLag)}`);
    }));
  }

  function renderDestination(st, d, info) {
    const state = d.state;
    const box = el('section', { class: 'dest', 'data-dest': d.name }, el('h3', { 'data-field': 'name', text: d.name }));
    const meta = [`owner ${d.owner || 'none yet'}` + (info && info.epoch ? ` (epoch ${info.epoch})` : '')];
    if (state) {
      meta.push(`seq ${state.seq}`);
      meta.push(`store ${state.store.events} events, ${fmtBytes(state.store.bytes)} (peak ${fmtBytes(state.store.peakBytes)})`);
      if (state.late) meta.push(`${state.late} late transactions`);
    }
    box.append(el('p', { class: 'meta', 'data-field': 'meta', 'data-owner': d.owner, 'data-seq': state ? state.seq : undefined, text: meta.join(' · ') }));
    if (d.stateError) box.append(el('p', { class: 'error', 'data-field': 'stateError', text: `state not available: ${d.stateError}` }));
    const s = state || { sources: [], clients: [], seq: 0 };
    const lag = d.lag || [];
    const losses = renderLosses(s.sources);
    box.append(
      ...awaitingAccept(d.name, s.sources),
      el('h4', { text: 'Sources' }), renderSources(s),
      losses ? el('h4', { text: 'Accepted losses' }) : null, losses,
      el('h4', { text: `Lag, last ${Math.round(st.lagWindowMs / 60e3)} minutes` }),
      lag.length ? legend(lag, s.sources) : null,
      chart(lag, Date.parse(st.time), st.lagWindowMs, st.lagEveryMs),
      el('h4', { text: 'Consumers' }), renderConsumers(s),
      el('h4', { text: 'Sinks' }), generic('sinks', d.sinks),
      el('h4', { text: 'DDL locks' }), generic('ddlLocks', d.ddl ? d.ddl.locks : []));
    return box;
  }

  function render(st) {
    const leader = st.cluster.leader || 'none (an election, or this node is cut off)';
    document.getElementById('summary').textContent =
      `The cluster as node ${st.cluster.node} sees it at ${fmtTime(st.time)} · Raft leader ${leader}`;
    renderNodes(st);
    const infos = new Map((st.cluster.destinations || []).map(i => [i.name, i]));
    const dests = st.destinations || [];
    const box = document.getElementById('destinations');
    if (dests.length === 0) box.replaceChildren(none('destinations'));
    else box.replaceChildren(...dests.map(d => renderDestination(st, d, infos.get(d.name))));
    document.body.setAttribute('data-updated', st.time);
  }

  function setError(msg) {
    const e = document.getElementById('error');
    e.textContent = msg;
    e.hidden = !msg;
  }

  // The page's calls that change something carry this header, which a
  // form of another site cannot send (the node refuses them without it).
  const CHANGE = { 'X-Braid-Request': '1' };
  let timer = null; // the next poll
  let round = 0;    // bumped to stop a poll loop (logout, a new login)

  function showUser(session) {
    const who = document.getElementById('who');
    if (session && !session.user) session = null; // a node without users
    who.hidden = !session;
    document.getElementById('user').textContent = session ? `${session.user} (${session.role})` : '';
    // Only a session can be logged out of; a credential the browser was
    // given (a header) cannot.
    document.getElementById('logout').hidden = !(session && session.expires);
  }

  // showLogin stops polling and shows the login form, with msg under it.
  function showLogin(msg) {
    round++;
    clearTimeout(timer);
    showUser(null);
    const form = document.getElementById('login');
    form.hidden = false;
    const e = document.getElementById('login-error');
    e.textContent = msg || '';
    e.hidden = !msg;
    form.elements.username.focus();
  }

  async function login(ev) {
    ev.preventDefault();
    const form = ev.target;
    try {
      const resp = await fetch('/v1/session', {
        method: 'POST', cache: 'no-store', credentials: 'same-origin',
        headers: { ...CHANGE, 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ username: form.elements.username.value, password: form.elements.password.value }),
      });
      const body = await resp.json().catch(() => null);
      if (!resp.ok) throw new Error(body && body.error ? body.error : `${resp.status} ${resp.statusText}`);
      form.elements.password.value = '';
      form.hidden = true;
      showUser(body);
      start();
    } catch (e) {
      showLogin(`Not logged in: ${e.message}`);
    }
  }

  async function logout() {
    try {
      await fetch('/v1/session', { method: 'DELETE', cache: 'no-store', credentials: 'same-origin', headers: CHANGE });
    } finally {
      showLogin('Logged out.');
    }
  }

  async function poll(mine) {
    try {
      const resp = await fetch('/v1/status', { cache: 'no-store', credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (mine !== round) return;
      if (resp.status === 401) {
        showLogin(document.body.hasAttribute('data-updated') ? 'Your session has ended: log in again.' : '');
        return;
      }
      const body = await resp.json().catch(() => null);
      if (!resp.ok) throw new Error(`${resp.status} ${body && body.error ? body.error : resp.statusText}`);
      render(body);
      setError('');
    } catch (e) {
      setError(`GET /v1/status: ${e.message}` + (document.body.hasAttribute('data-updated') ? ' (showing the last answer)' : ''));
    }
    if (mine === round) timer = setTimeout(() => poll(mine), POLL_MS);
  }

  // start begins a poll loop, ending any other.
  function start() {
    round++;
    clearTimeout(timer);
    poll(round);
  }

  document.getElementById('login').addEventListener('submit', login);
  document.getElementById('logout').addEventListener('click', logout);
  fetch('/v1/session', { cache: 'no-store', credentials: 'same-origin', headers: { Accept: 'application/json' } })
    .then(r => (r.ok ? r.json() : null)).then(showUser, () => showUser(null));
  start();
})();
