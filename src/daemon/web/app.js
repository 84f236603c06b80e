// trainq dashboard: one page served by trainqd. No build step and no dependency but uPlot.
// All data comes from the daemon's API with the bearer token the user gave this tab.
(() => {
'use strict';

const TOKEN_KEY = 'trainq.token';
const SEC = 1e3, MIN = 60e3, HOUR = 3600e3, DAY = 86400e3;
const LOG_KEEP = 2 << 20;       // bytes of log kept in the page
const REFRESH_GAP = 5e3;        // the job list is fetched at most this often
const FINISHED_SHOWN = 50;
const FINISHED_SCAN = 500;      // ended jobs are looked for among the newest ids only
const WAITING_SHOWN = 500;      // rows drawn before "show all"
const IDLE_AFTER = 10 * MIN;
const WAIT = new Set(['queued', 'blocked']);
const RUN = new Set(['starting', 'running']);

const $ = (s) => document.querySelector(s);
const S = {
  token: null, gen: 0, status: null, role: null,
  jobs: new Map(), hiId: 0, evSeq: 0, acctEnd: new Map(),
  // GPU history: each node keeps its own hour; hists maps a node's name to it, histNotes to
  // why it could not be read (shown on the node's section, asked again at the next poll).
  users: new Set(), nodes: [], hists: new Map(), histNotes: new Map(), histBusy: new Set(),
  here: '', histMissing: false, histNoProxy: false,
  acct: null,
  charts: new Map(), waitChart: null, showAll: false, timers: [], ctl: null, streamed: false,
  job: null,
  listed: false,   // the job list was read once: before, a partial queue would look like the queue
};

// ---------- formatting ----------
const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
const pad = (n) => String(n).padStart(2, '0');
// Times come as Unix ms or RFC 3339 text depending on the route; 0 and null mean "none".
const ms = (v) => (v == null || v === 0 || v === '') ? null : typeof v === 'number' ? v : (Date.parse(v) || null);

function fmtBytes(b) {
  if (b == null || !isFinite(b)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(b), i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (b < 0 ? '-' : '') + (i === 0 ? v : v.toFixed(v >= 100 ? 0 : 1)) + ' ' + u[i];
}
function fmtDur(d) {
  if (d == null || !isFinite(d)) return '–';
  const s = Math.max(0, Math.floor(d / SEC));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60), h = Math.floor(m / 60), dd = Math.floor(h / 24);
  if (m < 60) return `${m}m ${pad(s % 60)}s`;
  if (h < 24) return `${h}h ${pad(m % 60)}m`;
  return `${dd}d ${h % 24}h`;
}
function fmtTime(t) {
  if (t == null) return '–';
  const d = new Date(t), now = new Date();
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (d.toDateString() === now.toDateString()) return `${hm}:${pad(d.getSeconds())}`;
  if (now - d < 300 * DAY) return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
  return dayKey(t);
}
const fmtFull = (t) => t ? `${esc(new Date(t).toLocaleString())} <span class="meta">(${fmtDur(Date.now() - t)} ago)</span>` : '';
const timeCell = (t) => `<td class="num" title="${t ? esc(new Date(t).toLocaleString()) : ''}">${fmtTime(t)}</td>`;
const dayKey = (t) => { const d = new Date(t); return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`; };
const pct = (u) => u == null ? '–' : Math.round(u * 100) + ' %';
const gpuh = (h) => h == null ? '–' : h < 10 ? h.toFixed(2) : h.toFixed(1);
// A table head from 'a|>b|c' ('>' marks a right-aligned number column), and a number cell.
const thead = (cols, extra = '') => '<thead><tr>' + cols.split('|').map((c) => c[0] === '>' ? `<th class="num">${c.slice(1)}</th>` : `<th>${c}</th>`).join('') + extra + '</tr></thead><tbody>';
const N = (v) => `<td class="num">${v}</td>`;
const jobLink = (id) => `<a href="#job=${+id}">${+id}</a>`;
const stateTag = (s) => `<span class="st st-${esc(s)}">${esc(s)}</span>`;
const shellWord = (w) => /^[\w@%+=:,./-]+$/.test(w) ? w : `'${String(w).replace(/'/g, `'\\''`)}'`;

// ---------- job fields (read defensively: a listing and a single job may differ) ----------
const req = (j) => j.request || j;
const lastAttempt = (j) => (j.attempts && j.attempts.length) ? j.attempts[j.attempts.length - 1] : null;
function asks(j) {
  const r = req(j), g = r.gpus ?? 0;
  const mem = r.mem_bytes ?? r.mem ?? null;
  let each = typeof mem === 'number' ? fmtBytes(mem) : mem ? String(mem) : r.mem_percent ? r.mem_percent + ' %' : g ? 'whole' : '';
  // An elastic job (--gpus MIN:MAX) shows its range.
  let s = g ? `${r.max_gpus ? g + '–' + r.max_gpus : g}× ${each}` : 'no GPU';
  if (r.max_gpus) s += ' (elastic)';
  if ((r.num_nodes || 1) > 1) s = `${r.num_nodes} nodes × ${s}`;
  return s;
}
function peak(j) {
  let p = j.peak_bytes_per_gpu ?? null;
  for (const a of j.attempts || []) if (a.peak_mem_bytes != null) p = Math.max(p ?? 0, a.peak_mem_bytes);
  return p;
}
const oomRetries = (j) => (j.attempts || []).filter((a, i, all) => a.oom && i < all.length - 1).length;
const resizes = (j) => (j.attempts || []).filter((a) => /^resized: /.test(a.end_reason || '')).length;
const nodeLosses = (j) => (j.attempts || []).filter((a) => /node\b.*\blost/i.test(a.end_reason || '')).length;
// A job cancelled before it started has no attempt: its end comes from an event or from acct.
const endedAt = (j) => ms(lastAttempt(j)?.ended_at) ?? ms(j.ended_at) ?? S.acctEnd.get(j.id) ?? null;
const endKey = (j) => endedAt(j) ?? ms(j.submitted_at) ?? 0;
function exitText(a) {
  if (!a) return '–';
  if (a.exit_code != null) return String(a.exit_code);
  return a.signal != null ? 'sig ' + a.signal : '–';
}
const canAct = () => S.role === 'submit' || S.role === 'admin';
const actButton = (j) => !canAct() ? '' : WAIT.has(j.state) || RUN.has(j.state)
  ? `<button type="button" class="cancel" data-id="${j.id}" title="cancel job ${j.id}">cancel</button>`
  : `<button type="button" class="retry" data-id="${j.id}" title="queue job ${j.id} again">retry</button>`;
const actCell = (j) => canAct() ? `<td>${actButton(j)}</td>` : '';

// ---------- API ----------
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
async function api(path, opt = {}) {
  if (!S.token) throw new ApiError(401, 'unauthenticated', 'no token');
  const gen = S.gen;
  let r;
  try {
    r = await fetch(path, { method: opt.method || 'GET', cache: 'no-store',
      headers: { Authorization: 'Bearer ' + S.token } });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'cannot reach the daemon: ' + e.message);
  }
  if (!r.ok) {
    let e = {};
    try { e = (await r.json()).error || {}; } catch (_) { /* not JSON */ }
    const err = new ApiError(r.status, e.code || '', e.message || `${path}: HTTP ${r.status}`);
    if (r.status === 401 && gen === S.gen) signOut(err.message);
    throw err;
  }
  return opt.raw ? r : r.json();
}
// Runs a loader; a failure shows its message instead of stopping the page, and in its panel
// if that panel has had no answer yet.
async function guard(fn, panel) {
  try { return await fn(); } catch (e) {
    if (e.status === 401 || e.name === 'AbortError') return;
    showError(e.message);
    if (panel) notLoaded(panel, e.message);
  }
}
// Until its first answer a panel says it is loading: an empty panel would read as "no jobs".
const PANELS = ['#gpu-nodes', '#queue-tables', '#history-body'];
function showLoading() {
  for (const id of PANELS) $(id).innerHTML = '<p class="note loading">loading…</p>';
  $('#queue-count').textContent = '';
}
function notLoaded(panel, msg) {
  const p = $(panel).querySelector('.loading');
  if (p) { p.textContent = 'not loaded: ' + msg + '; asking again'; p.classList.add('err'); }
}
function showError(msg) { $('#error-text').textContent = msg; $('#error').hidden = false; }
let toastTimer = 0;
function toast(msg) {
  const t = $('#toast'); t.textContent = msg; t.hidden = false;
  clearTimeout(toastTimer); toastTimer = setTimeout(() => { t.hidden = true; }, 6000);
}

// ---------- token and sign-in ----------
function fragment() { return new URLSearchParams(location.hash.slice(1)); }
function takeTokenFromUrl() {
  const f = fragment();
  if (!f.has('token')) return;
  const t = f.get('token').trim();
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  f.delete('token');
  const rest = f.toString();
  // Drop the token from the address bar and history at once; other parts (job=12) stay.
  history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
}
function showLogin(msg) {
  $('#main').hidden = true; $('#login').hidden = false; $('#logout').hidden = true; $('#live').hidden = true;
  for (const id of ['#node', '#version', '#caller']) $(id).textContent = '';
  setLive('off');
  const e = $('#login-error'); e.textContent = msg || ''; e.hidden = !msg;
  $('#token-input').focus();
}
function stopAll() {
  S.gen++;
  for (const t of S.timers) clearInterval(t);
  S.timers = [];
  clearTimeout(refreshTimer); refreshTimer = 0;
  if (S.ctl) S.ctl.abort();
  S.ctl = null;
  stopJob();
}
function signOut(msg) {
  stopAll();
  sessionStorage.removeItem(TOKEN_KEY);
  S.token = null; S.status = null; S.role = null; S.jobs.clear(); S.users.clear(); S.acctEnd.clear(); S.hiId = 0; S.listed = false;
  S.nodes = []; S.hists.clear(); S.histNotes.clear(); S.here = ''; S.histNoProxy = false; S.acct = null; S.streamed = false;
  for (const c of S.charts.values()) c.u.destroy();
  S.charts.clear();
  for (const id of ['#gpu-nodes', '#idle', '#queue-tables', '#history-body', '#job-head', '#job-body', '#job-charts', '#log']) $(id).innerHTML = '';
  $('#error').hidden = true;
  showLogin(msg);
}

async function start() {
  const gen = ++S.gen;
  $('#login').hidden = true; $('#main').hidden = false; $('#logout').hidden = false; $('#live').hidden = false;
  // "disconnected" is said only once a request has failed; until then the page is connecting.
  setLive('wait');
  S.listed = false;
  showLoading();
  try {
    S.status = await api('/v1/status');
  } catch (e) {
    if (e.status === 401 || gen !== S.gen) return;
    showError(e.message);
    setLive('off');
    for (const id of PANELS) notLoaded(id, e.message);
    setTimeout(() => { if (gen === S.gen) start(); }, 5000);
    return;
  }
  const st = S.status, c = st.caller || {};
  S.role = c.role || null;
  $('#node').textContent = st.node ? 'node ' + st.node : '';
  $('#version').textContent = st.version ? 'v' + st.version : '';
  $('#caller').textContent = c.user ? `${c.user} · ${c.role}` : '';
  route();
  loadAll();
  stream();
  S.timers.push(setInterval(tick, SEC));
  S.timers.push(setInterval(() => guard(loadGpus, '#gpu-nodes'), 10 * SEC));
  S.timers.push(setInterval(scheduleRefresh, 30 * SEC));   // reasons change without events
  S.timers.push(setInterval(() => guard(loadHistoryData, '#history-body'), 60 * SEC));
  S.timers.push(setInterval(pollOthers, 30 * SEC));   // other nodes' GPU history: not on this stream
}

// ---------- loading ----------
async function loadAll() {
  await Promise.all([guard(loadHistoryData, '#history-body'), guard(loadGpus, '#gpu-nodes'), guard(loadHistory)]);
  await guard(loadJobs, '#queue-tables');
}

async function loadJobs() {
  const seq = S.evSeq;
  const active = (await api('/v1/jobs')).jobs || [];
  for (const j of active) S.hiId = Math.max(S.hiId, j.id);
  // Listings are oldest first, so the newest ended jobs are read from just below the highest id.
  const after = S.hiId - FINISHED_SCAN;
  const ended = S.hiId ? (await api('/v1/jobs?state=succeeded,failed,cancelled' + (after > 0 ? '&after=' + after : ''))).jobs || [] : [];
  const next = new Map();
  for (const j of ended) next.set(j.id, j);
  for (const j of active) next.set(j.id, j);
  for (const [id, j] of next) { const old = S.jobs.get(id); if (old && old.ended_at && !j.ended_at) j.ended_at = old.ended_at; }
  const vanished = [];
  for (const [id, j] of S.jobs) {
    if (next.has(id)) continue;
    if (!WAIT.has(j.state) && !RUN.has(j.state)) next.set(id, j);    // keep ended ones seen before
    else vanished.push(id);
  }
  S.jobs = next;
  for (const j of next.values()) { S.users.add(j.user); S.hiId = Math.max(S.hiId, j.id); }
  pruneEnded();
  S.listed = true;
  renderQueue();
  // A job that left the active list with an old id: ask for it by itself (few at a time).
  for (const id of vanished.slice(0, 20)) {
    api('/v1/jobs/' + id).then((j) => { S.jobs.set(j.id, j); renderSoon(); }).catch(() => {});
  }
  if (seq !== S.evSeq) scheduleRefresh();   // events came in while this was fetched
}
function pruneEnded() {
  const ended = [...S.jobs.values()].filter((j) => !WAIT.has(j.state) && !RUN.has(j.state));
  if (ended.length <= 4 * FINISHED_SHOWN) return;
  ended.sort((a, b) => endKey(b) - endKey(a));
  for (const j of ended.slice(4 * FINISHED_SHOWN)) S.jobs.delete(j.id);
}

let refreshTimer = 0, lastRefresh = 0, refreshing = false;
// Events update the local state at once; the list itself is fetched again at most every 5 s.
function scheduleRefresh() {
  if (refreshTimer || !S.token) return;
  const gen = S.gen;
  refreshTimer = setTimeout(async () => {
    refreshTimer = 0;
    if (gen !== S.gen) return;
    if (refreshing) { scheduleRefresh(); return; }
    refreshing = true; lastRefresh = Date.now();
    try { await guard(loadJobs, '#queue-tables'); await guard(loadGpus, '#gpu-nodes'); } finally { refreshing = false; }
  }, Math.max(300, lastRefresh + REFRESH_GAP - Date.now()));
}

async function loadGpus() {
  const st = S.status || {};
  let local = null, nodes;
  try { local = await api('/v1/gpus'); } catch (e) { if (!st.cluster || e.status === 401) throw e; }
  if (st.cluster) {
    nodes = (await api('/v1/nodes')).nodes || [];
  } else {
    nodes = [{ name: local.node || st.node || '', state: 'up', gpus: local.gpus || [] }];
  }
  S.nodes = nodes.map((n) => {
    const src = local && (n.name === (local.node || st.node)) ? local.gpus || [] : n.gpus || [];
    return { name: n.name, state: n.state || 'up', gpus: src.map(normGpu) };
  });
  if (st.cluster) {
    // A node that left takes its hour along; one that joined is read at once.
    const names = new Set(S.nodes.map((n) => n.name));
    for (const k of [...S.hists.keys()]) if (!names.has(k) && !isHere(k)) S.hists.delete(k);
    for (const k of [...S.histNotes.keys()]) if (!names.has(k)) S.histNotes.delete(k);
    for (const name of otherNodes()) if (!S.hists.has(name) && !S.histNotes.has(name)) pollNode(name);
  }
  renderGpus();
}
function normGpu(g) {
  return {
    index: g.index, name: g.name || '', total: g.memory_total,
    used: g.memory_used ?? (g.memory_total != null && g.memory_free != null ? g.memory_total - g.memory_free : null),
    reserved: g.memory_reserved ?? null, usable: g.memory_usable ?? null,
    util: g.utilization == null ? null : g.utilization / 100,   // /v1/gpus gives percent
    jobs: g.attempts ? g.attempts.map((a) => a.job) : null, closed: g.closed || null,
  };
}

// ---------- GPU history: an hour per node, each kept by its own node ----------
const HIST_FIELDS = ['used', 'reserved', 'usable', 'utilization', 'jobs'];
// Each change to a kept hour gets a new number: a chart already drawn from it is left alone.
let histRev = 0;
// The node that serves this page: its samples come on the event stream.
const hereName = () => S.here || (S.status && S.status.node) || '';
const isHere = (name) => name === hereName();
const manyNodes = () => S.nodes.length > 1 || !!(S.status && S.status.cluster);
// Every other node of a cluster: its hour is asked of this daemon with node=NAME.
function otherNodes() {
  if (!S.status || !S.status.cluster || S.histMissing || S.histNoProxy) return [];
  return S.nodes.map((n) => n.name).filter((n) => n && !isHere(n));
}

async function loadHistory() {
  const since = Date.now() - HOUR;
  let h;
  try {
    h = await api('/v1/gpus/history?since=' + since);
    S.histMissing = false;
  } catch (e) {
    if (e.status !== 404) throw e;
    S.histMissing = true; S.hists.clear(); S.histNotes.clear();
    drawCharts();
    return;
  }
  h.skew = (h.now || Date.now()) - Date.now();
  h.node = S.here = h.node ?? hereName();   // the node its own hour names
  h.rev = ++histRev;
  S.hists.set(h.node, h);
  drawCharts();
}
// Without the event stream the history is read again from the last sample on.
async function pollHistory() {
  const h = S.hists.get(hereName());
  if (!h || !h.t.length) return loadHistory();
  const more = await api('/v1/gpus/history?since=' + (h.t[h.t.length - 1] + 1));
  mergeHistory(h.node, more);
  drawCharts();
}
// Appends a later piece of a node's hour (or takes it whole where its GPUs changed).
function mergeHistory(name, more) {
  const h = S.hists.get(name);
  more.skew = (more.now || Date.now()) - Date.now();
  const same = h && h.gpus.length === (more.gpus || []).length && h.gpus.every((g, i) => g.index === more.gpus[i].index);
  more.rev = ++histRev;
  if (!same) { S.hists.set(name, more); trimHistory(more, more.now || Date.now()); return; }
  more.t.forEach((t, k) => {
    if (h.t.length && t <= h.t[h.t.length - 1]) return;   // already kept
    h.t.push(t);
    h.series.forEach((s, i) => { for (const f of HIST_FIELDS) s[f].push(more.series[i][f][k]); });
  });
  h.now = more.now; h.skew = more.skew;
  if (more.t.length) h.rev = ++histRev;
  trimHistory(h, more.now || Date.now());
}
function trimHistory(h, now) {
  let n = 0;
  while (n < h.t.length && h.t[n] < now - HOUR) n++;
  if (!n) return;
  h.rev = ++histRev;
  h.t.splice(0, n);
  for (const s of h.series) for (const f of HIST_FIELDS) if (s[f]) s[f].splice(0, n);
}
function histNote(e) {
  const why = e.status === 503 ? 'the node does not answer'
    : e.status === 404 ? 'this daemon does not know the node' : e.message;
  return { text: `GPU history unavailable: ${why}; asked again every 30 s`, detail: e.message };
}
const NO_PROXY = { text: "GPU history unavailable: this daemon serves no other node's", detail: 'it answered node= with its own hour (an older trainqd)' };
// Why a node's hour is missing or stale, or null.
function noteOf(name) {
  if (S.histMissing) return null;
  if (S.histNoProxy && !isHere(name)) return NO_PROXY;
  return S.histNotes.get(name) || null;
}
// Another node's hour, new samples only once it has one. A node that fails keeps what was
// drawn, gets a note instead of an error banner, and is asked again at the next poll, for its
// whole hour (it may have restarted since: its hour is what it keeps).
async function pollNode(name) {
  if (S.histBusy.has(name) || !S.token) return;
  const gen = S.gen, h = S.hists.get(name), whole = !h || !h.t.length || S.histNotes.has(name);
  const since = whole ? Date.now() - HOUR : h.t[h.t.length - 1] + 1;
  S.histBusy.add(name);
  try {
    const more = await api('/v1/gpus/history?since=' + since + '&node=' + encodeURIComponent(name));
    if (gen !== S.gen || S.histMissing) return;
    if (more.node !== name) {
      S.histNoProxy = true;   // a daemon that reads no node= answers with its own hour
    } else {
      if (whole) S.hists.delete(name);
      mergeHistory(name, more);
      S.histNotes.delete(name);
      gpusDirty = true;   // its cards' utilisation comes from the last sample
    }
  } catch (e) {
    if (gen !== S.gen || e.status === 401) return;
    S.histNotes.set(name, histNote(e));
    if (h) trimHistory(h, Date.now() + (h.skew || 0));   // an old hour ages out all the same
  } finally { S.histBusy.delete(name); }
  drawCharts();
}
function pollOthers() {
  for (const name of otherNodes()) pollNode(name);
}

async function loadHistoryData() {
  const since = Date.now() - 7 * DAY;
  try {
    S.acct = await api('/v1/acct?all=1&since=' + since);
  } catch (e) {
    if (e.status !== 403) throw e;
    S.acct = await api('/v1/acct?since=' + since);   // a non-admin may see only their own
  }
  for (const j of S.acct.jobs || []) {
    S.hiId = Math.max(S.hiId, j.id); S.users.add(j.user);
    if (ms(j.ended_at)) S.acctEnd.set(j.id, ms(j.ended_at));
  }
  renderHistory();
}

// ---------- live events ----------
function setLive(mode) {
  const l = $('#live');
  l.className = mode;
  l.textContent = { wait: 'connecting…', on: 'live', off: 'disconnected', poll: 'polling' }[mode];
}
async function stream() {
  const gen = S.gen, ctl = new AbortController();
  S.ctl = ctl;
  let dog = 0;
  const feed = () => { clearTimeout(dog); dog = setTimeout(() => ctl.abort(), 90 * SEC); };
  try {
    const r = await fetch('/v1/events', { headers: { Authorization: 'Bearer ' + S.token, Accept: 'text/event-stream' }, signal: ctl.signal, cache: 'no-store' });
    if (r.status === 401 || r.status === 403) {
      let m = 'events: HTTP ' + r.status;
      try { m = (await r.json()).error.message; } catch (_) { /* not JSON */ }
      if (r.status === 401) signOut(m); else { showError(m); startPolling(); }
      return;
    }
    if (r.status === 404 || r.status === 405 || r.status === 501) { startPolling(); return; }   // an older daemon
    if (!r.ok || !r.body) throw new Error('events: HTTP ' + r.status);
    setLive('on');
    // Anything may have changed while the stream was down.
    if (S.streamed) loadAll(); else scheduleRefresh();
    S.streamed = true;
    feed();
    const rd = r.body.getReader(), dec = new TextDecoder();
    let buf = '', type = '', data = [];
    for (;;) {
      const { value, done } = await rd.read();
      if (done || gen !== S.gen) break;
      feed();
      buf += dec.decode(value, { stream: true });
      let at = 0, nl;
      while ((nl = buf.indexOf('\n', at)) >= 0) {
        let line = buf.slice(at, nl);
        at = nl + 1;
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) onEvent(type || 'message', data.join('\n'));
          type = ''; data = [];
        } else if (line[0] !== ':') {
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? '' : line.slice(c + 1);
          if (v[0] === ' ') v = v.slice(1);
          if (field === 'event') type = v; else if (field === 'data') data.push(v);
        }
      }
      buf = buf.slice(at);
    }
  } catch (e) {
    if (gen !== S.gen) return;
  } finally { clearTimeout(dog); }
  if (gen !== S.gen) return;
  setLive('off');
  setTimeout(() => { if (gen === S.gen) stream(); }, 2000 + Math.random() * 3000);
}
function startPolling() {
  setLive('poll');
  S.timers.push(setInterval(() => {
    guard(loadJobs, '#queue-tables'); guard(loadGpus, '#gpu-nodes'); if (!S.histMissing) guard(pollHistory);
  }, 5 * SEC));
}
function onEvent(type, text) {
  let d;
  try { d = JSON.parse(text); } catch (_) { return; }
  if (type === 'job') applyJobEvent(d);
  else if (type === 'gpus') applySample(d);
  else if (type === 'node') {
    const n = S.nodes.find((x) => x.name === d.name);
    if (n) { n.state = d.state; renderGpus(); } else guard(loadGpus);
  } else if (type === 'dropped') loadAll();   // we fell behind: the local state is not to be trusted
}
function applyJobEvent(e) {
  S.evSeq++;
  let j = S.jobs.get(e.id);
  if (!j) {
    j = { id: e.id, name: e.name, user: e.user, state: e.state, reason: '', submitted_at: e.at, attempts: [] };
    S.jobs.set(e.id, j);
  }
  if (e.state) j.state = e.state;
  if (e.name != null) j.name = e.name;
  if (e.reason != null) j.reason = e.reason;
  if (e.user) { j.user = e.user; S.users.add(e.user); }
  S.hiId = Math.max(S.hiId, e.id);
  j.attempts = j.attempts || [];
  if (e.kind === 'started') {
    const n = e.attempt || j.attempts.length + 1;   // a late event must not add the attempt twice
    if (!j.attempts.some((x) => x.n === n)) j.attempts = j.attempts.concat([{ n, state: e.state, node: e.node, started_at: e.at, gpu_indices: e.gpus || [] }]);
  } else if (e.kind === 'ended') {
    const a = lastAttempt(j);
    if (a && !a.ended_at) Object.assign(a, { ended_at: e.at, exit_code: e.exit_code ?? null, state: e.state });
    else j.ended_at = e.at;
  }
  renderSoon();
  scheduleRefresh();
  if (S.job && S.job.id === e.id) jobSoon();
}
function applySample(d) {
  const n = S.nodes.find((x) => x.name === d.node);
  if (n) {
    for (const s of d.gpus || []) {
      const g = n.gpus.find((x) => x.index === s.index);
      if (!g) continue;
      Object.assign(g, { used: s.used ?? g.used, reserved: s.reserved ?? g.reserved, usable: s.usable ?? g.usable, util: s.utilization ?? null });
      if (s.jobs) g.jobs = s.jobs;
    }
    gpusDirty = true;
  }
  // Only this node's samples come on its stream; another node's hour is polled.
  const h = S.hists.get(d.node);
  if (h && (!h.t.length || d.t > h.t[h.t.length - 1])) {
    h.t.push(d.t);
    h.gpus.forEach((g, i) => {
      const s = (d.gpus || []).find((x) => x.index === g.index) || {}, ser = h.series[i];
      ser.used.push(s.used ?? null); ser.reserved.push(s.reserved ?? null); ser.usable.push(s.usable ?? null);
      ser.utilization.push(s.utilization ?? null); ser.jobs.push(s.jobs || []);
    });
    h.rev = ++histRev;
    trimHistory(h, d.t);
    chartsDirty = true;
  }
}

// ---------- periodic work ----------
let gpusDirty = false, chartsDirty = false, renderTimer = 0, jobTimer = 0;
function renderSoon() {
  if (!renderTimer) renderTimer = setTimeout(() => { renderTimer = 0; renderQueue(); }, 250);
}
function tick() {
  const now = Date.now();
  if (!document.hidden) {
    // Written only where the text changes: long waits change once a minute, not every second.
    for (const el of document.querySelectorAll('td.tick')) {
      const v = fmtDur(now - el.dataset.since);
      if (el.firstChild ? el.firstChild.data !== v : true) el.textContent = v;
    }
  }
  if (gpusDirty) { gpusDirty = false; renderGpus(); }
  if (chartsDirty) { chartsDirty = false; drawCharts(); }
}

// ---------- GPUs ----------
function jobsOn(node, index) {
  const out = [];
  for (const j of S.jobs.values()) {
    if (!RUN.has(j.state)) continue;
    const a = lastAttempt(j);
    if (!a) continue;
    const parts = a.parts && a.parts.length ? a.parts : [a];
    if (parts.some((p) => p.node === node && (p.gpu_indices || []).includes(index))) out.push(j.id);
  }
  return out;
}
function renderGpus() {
  if ($('#dash').hidden) { gpusDirty = true; return; }
  const root = $('#gpu-nodes'), many = manyNodes();
  const seen = new Set();
  let created = false;
  for (const n of S.nodes) {
    let box = root.querySelector(`.node[data-node="${CSS.escape(n.name)}"]`);
    if (!box) {
      box = document.createElement('div');
      box.className = 'node'; box.dataset.node = n.name;
      box.innerHTML = '<h3></h3><p class="note hist-note" hidden></p><div class="cards"></div>';
      root.append(box);
    }
    seen.add(box);
    const title = box.querySelector('h3');
    title.hidden = !many;
    title.innerHTML = `${esc(n.name)} ${n.state !== 'up' ? stateTag(n.state) : ''} <span class="meta">${n.gpus.length} GPU${n.gpus.length === 1 ? '' : 's'}</span>`;
    const cards = box.querySelector('.cards'), keep = new Set();
    for (const g of n.gpus) {
      const key = n.name + ':' + g.index;
      let card = cards.querySelector(`[data-key="${CSS.escape(key)}"]`);
      if (!card) {
        card = document.createElement('div');
        card.className = 'gpu card'; card.dataset.key = key;
        card.innerHTML = '<div class="gpu-info"></div><div class="chart"></div>';
        cards.append(card);
        created = true;
      }
      keep.add(card);
      card.firstChild.innerHTML = gpuInfo(n, g);
    }
    for (const c of [...cards.children]) if (!keep.has(c)) { dropChart(c.dataset.key); c.remove(); }
    if (!n.gpus.length) cards.innerHTML = '<p class="note">no GPUs</p>';
  }
  for (const b of [...root.children]) if (!seen.has(b)) b.remove();
  renderHistNotes();
  if (created) drawCharts();
}
// Why a node's charts are missing or stale: its hour could not be read.
function renderHistNotes() {
  for (const box of document.querySelectorAll('#gpu-nodes .node')) {
    const p = box.querySelector('.hist-note'), n = noteOf(box.dataset.node);
    if (!p) continue;
    p.hidden = !n;
    if (p.textContent !== (n ? n.text : '')) { p.textContent = n ? n.text : ''; p.title = n ? n.detail : ''; }
  }
}
// Another node's listing has no utilisation and no reservation: its polled hour's last sample
// gives them while it is recent.
function withSample(n, g) {
  const h = isHere(n.name) ? null : S.hists.get(n.name);
  if (!h || !h.t.length || (g.util != null && g.reserved != null)) return g;
  const last = h.t.length - 1, i = h.gpus.findIndex((x) => x.index === g.index);
  if (i < 0 || Date.now() + (h.skew || 0) - h.t[last] > 2 * MIN) return g;
  const s = h.series[i];
  return Object.assign({}, g, { util: g.util ?? s.utilization[last] ?? null, reserved: g.reserved ?? s.reserved[last] ?? null });
}
function gpuInfo(n, g) {
  g = withSample(n, g);
  const t = g.total || 0, w = (v) => t && v ? Math.min(100, 100 * v / t).toFixed(1) : 0;
  const ids = g.jobs || jobsOn(n.name, g.index);
  const jobs = ids.map((id) => {
    const j = S.jobs.get(id) || {};
    return `<li>${jobLink(id)} <span class="user">${esc(j.user || '')}</span> <span class="name">${esc(j.name || '')}</span></li>`;
  }).join('');
  return `<div class="gpu-head"><b>GPU ${g.index}</b> <span class="model">${esc(g.name)}</span>`
    + (g.closed ? ` <span class="st st-closed">${esc(g.closed)}</span>` : '')
    + `<span class="util num" title="utilisation">${pct(g.util)}</span></div>`
    + `<div class="membar" title="used ${fmtBytes(g.used)}, reserved ${fmtBytes(g.reserved)}, usable ${fmtBytes(g.usable)} of ${fmtBytes(t)}">`
    + `<i class="used" style="width:${w(g.used)}%"></i><i class="rsv" style="width:${w(g.reserved)}%"></i></div>`
    + `<div class="memtext num"><span><i class="dot used"></i>used ${fmtBytes(g.used)}</span>`
    + `<span><i class="dot rsv"></i>reserved ${fmtBytes(g.reserved)}</span>`
    + `<span><i class="dot usable"></i>usable ${fmtBytes(g.usable)}</span><span>total ${fmtBytes(t)}</span></div>`
    + (jobs ? `<ul class="gjobs">${jobs}</ul>` : '<div class="gjobs free">no job</div>');
}

// ---------- charts ----------
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
const DUR_INCRS = [1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((x) => x * SEC);
const BYTE_INCRS = [];
for (const p of [1, 1024, 1024 ** 2, 1024 ** 3, 1024 ** 4]) for (const m of [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]) BYTE_INCRS.push(p * m);
function axis(extra) {
  const c = css('--muted'), g = css('--grid');
  return Object.assign({ stroke: c, grid: { stroke: g, width: 1 }, ticks: { stroke: g, width: 1 }, font: '11px system-ui, sans-serif', size: 40 }, extra);
}
const hms = (t, sec) => { const d = new Date(t); return `${pad(d.getHours())}:${pad(d.getMinutes())}` + (sec ? ':' + pad(d.getSeconds()) : ''); };
const timeAxis = () => axis({ values: (u, v) => v.map((t) => hms(t, u.scales.x.max - u.scales.x.min < 15 * MIN)) });
const memAxis = () => axis({ scale: 'mem', incrs: BYTE_INCRS, size: 62, values: (u, v) => v.map(fmtBytes) });
const pctAxis = () => axis({ scale: '%', side: 1, grid: { show: false }, size: 50, incrs: [25, 50], values: (u, v) => v.map((x) => x + ' %') });
function makeChart(el, series, axes, scales, data, height) {
  if (!window.uPlot) return null;
  const width = Math.max(200, el.clientWidth || 300);
  const u = new uPlot({ width, height, ms: 1, series, axes, scales, legend: { live: true },
    cursor: { drag: { x: false, y: false } } }, data, el);
  const ro = new ResizeObserver(() => { const w = el.clientWidth; if (w && Math.abs(w - u.width) > 2) u.setSize({ width: w, height }); });
  ro.observe(el);
  return { u, ro, el };
}
function dropChart(key) {
  const c = S.charts.get(key);
  if (c) { c.ro.disconnect(); c.u.destroy(); S.charts.delete(key); }
}
const line = (label, color, scale, fmt, extra) => Object.assign({ label, stroke: color, width: 1.5, scale, value: (u, v) => v == null ? '–' : fmt(v), spanGaps: false, points: { show: false } }, extra);
function gpuSeries() {
  return [{ value: (u, v) => v == null ? '' : fmtTime(v) },
    line('used', css('--c-used'), 'mem', fmtBytes, { fill: css('--c-used-fill') }),
    line('reserved', css('--c-rsv'), 'mem', fmtBytes),
    line('usable', css('--c-usable'), 'mem', fmtBytes, { dash: [4, 3] }),
    line('util', css('--c-util'), '%', (v) => Math.round(v) + ' %', { width: 1 })];
}
const utilPct = (arr) => arr.map((v) => v == null ? null : v * 100);
// One chart per GPU of every node whose hour is kept here; rebuilt when the set changes.
function drawCharts() {
  const note = $('#gpu-note');
  note.hidden = !S.histMissing && !!window.uPlot;
  note.textContent = !window.uPlot ? 'charts unavailable: uPlot did not load' : 'this daemon keeps no GPU history: no charts';
  if ($('#dash').hidden) { chartsDirty = true; }
  else for (const h of S.hists.values()) {
    h.gpus.forEach((g, i) => {
      const key = h.node + ':' + g.index, s = h.series[i];
      const card = document.querySelector(`#gpu-nodes .card[data-key="${CSS.escape(key)}"]`);
      if (!card) return;
      let c = S.charts.get(key);
      if (c && c.el !== card.lastChild) { dropChart(key); c = null; }
      if (c && c.rev === h.rev) return;   // drawn from this very hour already (another node's changed)
      // Copies: the kept arrays grow between draws, and uPlot may read them on a hover.
      const data = [h.t.slice(), s.used.slice(), s.reserved.slice(), s.usable.slice(), utilPct(s.utilization)];
      if (!c) {
        c = makeChart(card.lastChild, gpuSeries(), [timeAxis(), memAxis(), pctAxis()],
          { x: { time: true }, mem: g.memory_total ? { range: [0, g.memory_total] } : {}, '%': { range: [0, 100] } }, data, 150);
        if (c) S.charts.set(key, c);
      } else c.u.setData(data);
      if (c) c.rev = h.rev;
    });
  }
  renderHistNotes();
  renderIdle();
  if (S.job) drawJobChart();
}
function renderIdle() {
  const ul = $('#idle'), many = manyNodes();
  const found = new Map();
  for (const h of S.hists.values()) {
    if (!h.t.length) continue;
    const n = h.t.length, end = h.t[n - 1];
    h.gpus.forEach((g, i) => {
      const s = h.series[i];
      for (const id of s.jobs[n - 1] || []) {
        const j = S.jobs.get(id);
        if (j && !RUN.has(j.state)) continue;
        // Idle: every sample while it held the GPU is exactly 0; a missing sample is not 0.
        let k = n - 1;
        while (k >= 0 && s.utilization[k] === 0 && (s.jobs[k] || []).includes(id)) k--;
        if (k === n - 1) continue;
        const dur = end - h.t[k + 1];
        if (dur < IDLE_AFTER) continue;
        // A job of several nodes is flagged once, naming each node's GPUs.
        const f = found.get(id) || { on: new Map(), dur, user: j ? j.user : '' };
        if (!f.on.has(h.node)) f.on.set(h.node, []);
        f.on.get(h.node).push(g.index); f.dur = Math.min(f.dur, dur);
        found.set(id, f);
      }
    });
  }
  const held = (gpus) => `GPU${gpus.length > 1 ? 's' : ''} ${gpus.join(', ')}`;
  ul.hidden = !found.size;
  ul.innerHTML = [...found].map(([id, f]) => `<li data-job="${id}">job ${jobLink(id)} (${esc(f.user || '?')}) holds `
    + [...f.on].map(([node, gpus]) => held(gpus) + (many ? ` on ${esc(node)}` : '')).join(' and ')
    + ` at 0 % utilisation for ${Math.round(f.dur / MIN)} min</li>`).join('');
}

// ---------- queue ----------
function byLine(a, b) {
  // The scheduler's order is priority, fair share, then submit order; fair share is not
  // known here, so the place shown is approximate (the job page asks the daemon).
  return (a.state === 'blocked') - (b.state === 'blocked') || (req(b).priority || 0) - (req(a).priority || 0) || a.id - b.id;
}
function renderQueue() {
  if ($('#dash').hidden || !S.listed) return;
  fillUsers();
  const fu = $('#filter-user').value, fs = $('#filter-state').value, now = Date.now();
  const all = [...S.jobs.values()];
  const waiting = all.filter((j) => WAIT.has(j.state)).sort(byLine);
  const running = all.filter((j) => RUN.has(j.state)).sort((a, b) => a.id - b.id);
  const ended = all.filter((j) => !WAIT.has(j.state) && !RUN.has(j.state)).sort((a, b) => endKey(b) - endKey(a) || b.id - a.id);
  let place = 0;
  const pos = new Map();
  for (const j of waiting) if (j.state === 'queued') pos.set(j.id, ++place);
  const mine = (j) => !fu || j.user === fu;
  const w = waiting.filter(mine), r = running.filter(mine), e = ended.filter(mine).slice(0, FINISHED_SHOWN);
  const act = canAct() ? '<th></th>' : '';
  let html = '';
  if (!fs || fs === 'waiting') {
    const shown = S.showAll ? w : w.slice(0, WAITING_SHOWN);
    html += `<h3>Waiting <span class="count">${w.length}</span></h3>`
      + `<table class="jobs waiting"><thead><tr><th class="num" title="place in line (priority, then submit order; the job page has the daemon's own)">#</th><th class="num">ID</th><th>user</th><th>name</th><th class="num">asks</th><th class="num">prio</th><th class="num">waiting</th><th>reason</th>${act}</tr></thead><tbody>`
      + shown.map((j) => {
        const since = ms(j.submitted_at);
        return `<tr data-job="${j.id}">${N(pos.get(j.id) ?? '–')}${N(jobLink(j.id))}<td>${esc(j.user)}</td><td class="name">${esc(j.name)}</td>`
          + `${N(esc(asks(j)))}${N(req(j).priority ?? 0)}`
          + `<td class="num tick" data-since="${since}">${since ? fmtDur(now - since) : '–'}</td>`
          + `<td class="reason">${j.state === 'blocked' ? stateTag('blocked') + ' ' : ''}${j.held ? stateTag('held') + ' ' : ''}${esc(j.reason)}</td>${actCell(j)}</tr>`;
      }).join('') + '</tbody></table>'
      + (shown.length < w.length ? `<button type="button" class="more">show all ${w.length} waiting jobs</button>` : '')
      + (w.length ? '' : '<p class="note">nothing waits</p>');
  }
  if (!fs || fs === 'running') {
    html += `<h3>Running <span class="count">${r.length}</span></h3>`
      + `<table class="jobs running">${thead('>ID|user|name|node|>GPU|>asks|>peak/GPU|>started|>runtime', act)}`
      + r.map((j) => {
        const a = lastAttempt(j) || {}, st = ms(a.started_at);
        const nodes = a.parts && a.parts.length ? a.parts.map((p) => p.node) : [a.node];
        return `<tr data-job="${j.id}">${N(jobLink(j.id))}<td>${esc(j.user)}</td><td class="name">${esc(j.name)}</td>`
          + `<td>${esc(nodes.filter(Boolean).join(', ') || '–')}</td>${N(esc((a.gpu_indices || []).join(',') || '–'))}${N(esc(asks(j)))}`
          + `${N(fmtBytes(peak(j)))}${timeCell(st)}<td class="num tick" data-since="${st}">${st ? fmtDur(now - st) : '–'}</td>${actCell(j)}</tr>`;
      }).join('') + '</tbody></table>' + (r.length ? '' : '<p class="note">nothing runs</p>');
  }
  if (!fs || fs === 'ended') {
    html += `<h3>Recently ended <span class="count">${e.length}</span></h3>`
      + `<table class="jobs ended">${thead('>ID|user|name|state|>exit|>ended|>attempts|>OOM retries|end', act)}`
      + e.map((j) => {
        const a = lastAttempt(j);
        return `<tr data-job="${j.id}">${N(jobLink(j.id))}<td>${esc(j.user)}</td><td class="name">${esc(j.name)}</td><td>${stateTag(j.state)}</td>`
          + `${N(exitText(a))}${timeCell(endedAt(j))}${N((j.attempts || []).length)}${N(oomRetries(j) || '')}`
          + `<td class="reason">${esc(j.reason || (a && a.end_reason) || '')}</td>${actCell(j)}</tr>`;
      }).join('') + '</tbody></table>' + (e.length ? '' : '<p class="note">none in view</p>');
  }
  $('#queue-tables').innerHTML = html;
  $('#queue-count').textContent = `${waiting.length} waiting · ${running.length} running`;
}
let usersShown = '';
function fillUsers() {
  const list = [...S.users].filter(Boolean).sort();
  const key = list.join('\n');
  if (key === usersShown) return;
  usersShown = key;
  const sel = $('#filter-user'), cur = sel.value;
  sel.innerHTML = '<option value="">all users</option>' + list.map((u) => `<option>${esc(u)}</option>`).join('');
  sel.value = list.includes(cur) ? cur : '';
}

async function act(kind, id, btn) {
  const j = S.jobs.get(id) || (S.job && S.job.job) || {};
  if (!confirm(`${kind === 'cancel' ? 'Cancel' : 'Retry'} job ${id}${j.name ? ` (${j.name})` : ''}?`)) return;
  btn.disabled = true;
  try {
    const r = await api(`/v1/jobs/${id}/${kind}`, { method: 'POST' });
    toast(r.message || `job ${id}: ${kind} sent`);
    if (r.job && typeof r.job === 'object' && r.job.id) { S.jobs.set(r.job.id, r.job); renderSoon(); }
  } catch (e) {
    if (e.status !== 401) showError(e.message);
  } finally { btn.disabled = false; }
  S.evSeq++;
  scheduleRefresh();
  if (S.job && S.job.id === id) jobSoon();
}

// ---------- history ----------
function quantile(sorted, q) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}
const last7 = () => { const out = []; for (let k = 6; k >= 0; k--) out.push(dayKey(Date.now() - k * DAY)); return out; };
function renderHistory() {
  const body = $('#history-body');
  if (!S.acct) return;   // its loading note stays
  const days = last7(), jobs = S.acct.jobs || [];
  // Wait: jobs that started, by the day their wait ended.
  const waits = new Map(days.map((d) => [d, []]));
  for (const j of jobs) {
    const st = ms(j.started_at);
    if (st && j.wait_ms != null && waits.has(dayKey(st))) waits.get(dayKey(st)).push(j.wait_ms);
  }
  const rows = days.map((d) => { const v = waits.get(d).sort((a, b) => a - b); return { d, n: v.length, med: quantile(v, 0.5), p90: quantile(v, 0.9) }; });
  let html = '<div class="hgrid"><div><h3>Wait before start</h3><table class="small">' + thead('day|>started|>median|>p90')
    + rows.map((r) => `<tr>${N(r.d)}${N(r.n)}${N(r.n ? fmtDur(r.med) : '–')}${N(r.n ? fmtDur(r.p90) : '–')}</tr>`).join('')
    + '</tbody></table></div><div><h3>&nbsp;</h3><div class="chart keep" id="wait-chart"></div></div></div>';
  // GPU-hours held and used per user and day: each job's spread over the time it ran. Held
  // is its GPUs x run time; used is held weighted by the GPUs' utilisation as its node
  // measured it (acct's gpu_hours_used).
  const per = new Map(), now = Date.now();
  for (const j of jobs) {
    const st = ms(j.started_at), en = ms(j.ended_at) || now;
    if (!st || !j.gpu_hours) continue;
    const span = Math.max(1, en - st);
    let t = st;
    while (t < en) {
      const d = new Date(t); d.setHours(24, 0, 0, 0);
      const cut = Math.min(en, d.getTime()), k = dayKey(t), f = (cut - t) / span;
      const m = per.get(j.user) || {};
      const x = m[k] || (m[k] = { h: 0, u: 0 });
      x.h += j.gpu_hours * f;
      x.u += (j.gpu_hours_used || 0) * f;
      per.set(j.user, m);
      t = cut;
    }
  }
  const users = [...per.keys()].sort();
  const short = (d) => d.slice(5);
  html += '<h3>GPU-hours held / used per user <span class="meta">used = held × the GPUs\' utilisation</span></h3>'
    + '<div class="hscroll"><table class="small usage"><thead><tr><th>user</th>' + days.map((d) => `<th class="num">${short(d)}</th>`).join('')
    + '<th class="num">7 days held</th><th class="num">used</th><th class="num">used/held</th></tr></thead><tbody>'
    + users.map((u) => {
      const m = per.get(u); let h = 0, us = 0;
      return `<tr><td>${esc(u)}</td>` + days.map((d) => {
        const x = m[d]; if (!x) return '<td class="num"></td>';
        h += x.h; us += x.u;
        return `<td class="num">${gpuh(x.h)}<span class="used-of"> / ${gpuh(x.u)}</span></td>`;
      }).join('') + `<td class="num"><b>${gpuh(h)}</b></td>${N(gpuh(us))}${N(h ? Math.round(100 * us / h) + ' %' : '–')}</tr>`;
    }).join('')
    + '</tbody></table></div>' + (users.length ? '' : '<p class="note">no GPU time in these days</p>');
  if (S.waitChart) { S.waitChart.ro.disconnect(); S.waitChart.u.destroy(); S.waitChart = null; }
  body.innerHTML = html;
  const el = $('#wait-chart');
  if (window.uPlot && rows.some((r) => r.n)) {
    const xs = days.map((d) => new Date(d + 'T12:00:00').getTime());
    const fmt = (v) => fmtDur(v);
    S.waitChart = makeChart(el, [{ value: (u, v) => v == null ? '' : dayKey(v) },
      line('median', css('--c-used'), 'w', fmt, { points: { show: true } }), line('p90', css('--c-rsv'), 'w', fmt, { points: { show: true } })],
    [axis({ splits: () => xs, values: (u, v) => v.map((x) => short(dayKey(x))) }), axis({ scale: 'w', size: 60, incrs: DUR_INCRS, values: (u, v) => v.map(fmt) })],
    { x: { time: false }, w: { range: (u, lo, hi) => [0, Math.max(hi, MIN)] } },
    [xs, rows.map((r) => r.med), rows.map((r) => r.p90)], 170);
  }
}

// ---------- job page ----------
function route() {
  const id = parseInt(fragment().get('job'), 10);
  if (id > 0) openJob(id); else closeJob();
}
function closeJob() {
  stopJob();
  $('#job-view').hidden = true;
  const was = $('#dash').hidden;
  $('#dash').hidden = false;
  if (was) { renderQueue(); renderGpus(); drawCharts(); renderHistory(); }
}
function stopJob() {
  if (!S.job) return;
  clearTimeout(S.job.logTimer); clearTimeout(jobTimer); jobTimer = 0;
  if (S.job.chart) { S.job.chart.ro.disconnect(); S.job.chart.u.destroy(); }
  S.job = null;
}
function openJob(id) {
  if (S.job && S.job.id === id) return;
  stopJob();
  $('#dash').hidden = true; $('#job-view').hidden = false;
  $('#job-head').innerHTML = `<h2>Job ${id}</h2>`;
  $('#job-body').innerHTML = '<p class="note">loading…</p>';
  $('#job-charts').innerHTML = ''; $('#log').textContent = ''; $('#log-state').textContent = '';
  S.job = { id, job: null, explain: null, chart: null, log: { attempt: null, offset: 0, len: 0, dec: null }, logTimer: 0 };
  window.scrollTo(0, 0);
  const J = S.job;
  loadJob(J).then(() => logTick(J));
}
function jobSoon() {
  if (!jobTimer) jobTimer = setTimeout(() => { jobTimer = 0; if (S.job) loadJob(S.job); }, 1000);
}
async function loadJob(J) {
  try {
    const [job, ex] = await Promise.all([api('/v1/jobs/' + J.id), api(`/v1/jobs/${J.id}/explain`).catch((e) => ({ error: e.message }))]);
    if (S.job !== J) return;
    J.job = job; J.explain = ex;
    S.jobs.has(job.id) && S.jobs.set(job.id, job);
    renderJob(J);
    drawJobChart();
    // A waiting job's reason and place change without events: ask again while it waits.
    if (WAIT.has(job.state) && !jobTimer) jobTimer = setTimeout(() => { jobTimer = 0; if (S.job === J) loadJob(J); }, 5000);
  } catch (e) {
    if (S.job !== J || e.status === 401) return;
    $('#job-body').innerHTML = `<p class="err">${esc(e.message)}</p>`;
  }
}
const kv = (k, v) => v === '' || v == null ? '' : `<dt>${esc(k)}</dt><dd>${v}</dd>`;
const SHOWN = new Set(['id', 'name', 'state', 'reason', 'user', 'command', 'cwd', 'gpus', 'max_gpus', 'mem_bytes', 'mem_percent', 'num_nodes', 'priority', 'retries',
  'submitted_at', 'attempts', 'cpus', 'attempt', 'time_limit_ms', 'mem_limit_bytes', 'shm_size_bytes', 'record', 'request', 'env', 'not_before', 'held', 'after', 'after_any']);
function other(v) {
  if (v == null || v === false || v === '' || (Array.isArray(v) && !v.length) || (typeof v === 'object' && !Object.keys(v).length)) return '';
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object')) return esc(v.join(', '));
  return typeof v === 'object' ? `<code>${esc(JSON.stringify(v))}</code>` : esc(v);
}
function renderJob(J) {
  const j = J.job, r = req(j), atts = j.attempts || [];
  const tools = canAct() ? actButton(j) : '';
  $('#job-head').innerHTML = `<h2>Job ${j.id} <span class="name">${esc(j.name)}</span> ${stateTag(j.state)} ${j.held ? stateTag('held') : ''} ${tools}</h2>`
    + (j.reason ? `<p class="reason big">${esc(j.reason)}</p>` : '');
  const cmd = Array.isArray(r.command) ? r.command.map(shellWord).join(' ') : r.command;
  let spec = kv('user', esc(j.user)) + kv('command', `<code class="cmd">${esc(cmd)}</code>`) + kv('cwd', `<code>${esc(r.cwd)}</code>`)
    + kv('asks', esc(asks(j)) + (r.cpus ? `, ${r.cpus} CPU slot${r.cpus > 1 ? 's' : ''}` : ''))
    + kv('priority', esc(r.priority ?? 0)) + kv('retries', r.retries != null ? esc(r.retries) + ' (out-of-memory retries)' : '')
    + kv('time limit', r.time_limit_ms ? fmtDur(r.time_limit_ms) : '') + kv('host memory limit', r.mem_limit_bytes ? fmtBytes(r.mem_limit_bytes) : '')
    + kv('after', (j.after || []).map(jobLink).join(', ')) + kv('after any', (j.after_any || []).map(jobLink).join(', '))
    + kv('submitted', fmtFull(ms(j.submitted_at))) + kv('not before', fmtFull(ms(j.not_before)));
  for (const src of [j, j.request || {}]) for (const [k, v] of Object.entries(src)) if (!SHOWN.has(k)) spec += kv(k.replace(/_/g, ' '), other(v));
  if (j.record) for (const [k, v] of Object.entries(j.record)) spec += kv(k.replace(/_/g, ' '), other(v));
  const counts = `<span>${atts.length} attempt${atts.length === 1 ? '' : 's'}</span><span>${oomRetries(j)} OOM retr${oomRetries(j) === 1 ? 'y' : 'ies'}</span>`
    + `<span>${nodeLosses(j)} node loss${nodeLosses(j) === 1 ? '' : 'es'}</span>`
    + (r.max_gpus ? `<span>${resizes(j)} resize${resizes(j) === 1 ? '' : 's'}</span>` : '');
  const attRows = atts.map((a) => {
    const st = ms(a.started_at), en = ms(a.ended_at);
    return `<tr>${N(a.n ?? '')}<td>${stateTag(a.state || '')}</td><td>${esc(a.parts && a.parts.length ? a.parts.map((p) => p.node).join(', ') : a.node || '–')}</td>`
      + `${N(esc((a.gpu_indices || []).join(',')))}${N(fmtBytes(a.reserved_bytes))}${N(fmtBytes(a.peak_mem_bytes))}`
      + `${N(a.usage && a.usage.memory_mean_bytes != null ? fmtBytes(a.usage.memory_mean_bytes) : '–')}`
      + `${N(a.usage && a.usage.gpu_seconds_held ? gpuh(a.usage.gpu_seconds_held / 3600) + ' / ' + gpuh(a.usage.gpu_seconds_used / 3600) : '–')}`
      + `${N(a.usage && a.usage.utilization_mean != null ? Math.round(100 * a.usage.utilization_mean) + ' %' : '–')}`
      + `${timeCell(st)}${timeCell(en)}<td class="num ${!en && st ? 'tick' : ''}" data-since="${st}">${st ? fmtDur((en || Date.now()) - st) : '–'}</td>`
      + `${N(a.exit_code ?? '–')}${N(a.signal ?? '–')}<td>${a.oom ? '<b class="bad">yes</b>' : 'no'}</td><td class="reason">${esc(a.end_reason || '')}</td></tr>`;
  }).join('');
  $('#job-body').innerHTML = `<div class="jgrid"><dl class="kv">${spec}</dl><div class="explain"><h3>Explain</h3>${explainHtml(J.explain)}</div></div>`
    + `<h3>Attempts <span class="counts">${counts}</span></h3>`
    + (atts.length ? `<div class="hscroll"><table class="small attempts">${thead('>#|state|node|>GPUs|>reserved/GPU|>peak/GPU|>mean/GPU|>GPU-h held / used|>util|>started|>ended|>ran|>exit|>signal|OOM|end reason')}${attRows}</tbody></table></div>` : '<p class="note">not started yet</p>');
}
function explainHtml(x) {
  if (!x) return '';
  if (x.error) return `<p class="err">${esc(x.error)}</p>`;
  let h = '<dl class="kv">' + kv('waiting', x.waiting ? 'yes' : 'no') + kv('reason', esc(x.reason));
  if (x.position != null) h += kv('place in line', `${x.position}` + (x.ahead != null ? ` <span class="meta">(${x.ahead} ahead)</span>` : ''));
  if (x.would_start != null) h += kv('would start now', x.would_start ? 'yes' : 'no');
  const f = x.fair_share;
  if (f) h += kv('fair share', `${esc(f.user)}: ${gpuh(f.gpu_hours)} decayed GPU-h, rank ${f.rank} of ${f.users_waiting} waiting user${f.users_waiting === 1 ? '' : 's'}` + (f.half_life_ms ? ` <span class="meta">(half-life ${fmtDur(f.half_life_ms)})</span>` : ''));
  if (x.holds && x.holds.length) h += kv('holds', x.holds.map((o) => `job ${jobLink(o.job)} on ${esc(o.node)}: GPUs ${esc((o.gpus || []).join(', '))}`).join('<br>'));
  for (const [k, v] of Object.entries(x)) if (!['job', 'state', 'waiting', 'reason', 'position', 'ahead', 'would_start', 'fair_share', 'holds', 'gpus'].includes(k)) h += kv(k.replace(/_/g, ' '), other(v));
  h += '</dl>';
  if (x.gpus && x.gpus.length) {
    h += '<table class="small">' + thead('node|>GPU|>usable|>total|jobs|>others|fits|closed|held for')
      + x.gpus.map((g) => `<tr><td>${esc(g.node)}</td>${N(g.index)}${N(fmtBytes(g.memory_usable))}${N(fmtBytes(g.memory_total))}`
        + `<td>${(g.jobs || []).map(jobLink).join(', ')}</td>${N(g.other_processes ?? '')}<td>${g.fits ? '<b class="good">yes</b>' : 'no'}</td><td>${esc(g.closed || '')}</td><td>${g.held_for != null ? jobLink(g.held_for) : ''}</td></tr>`).join('')
      + '</tbody></table>';
  }
  return h;
}
// The job's GPUs over the attempts that fall in the kept hour of samples of the node each
// ran on (each node keeps its own hour): one chart, its nodes' samples side by side.
function drawJobChart() {
  const J = S.job, box = $('#job-charts');
  if (!J || !J.job) return;
  const none = (m) => { if (J.chart) { J.chart.ro.disconnect(); J.chart.u.destroy(); J.chart = null; } box.innerHTML = `<p class="note">${m}</p>`; };
  if (!req(J.job).gpus) return none('this job uses no GPU');
  if (S.histMissing) return none('this daemon keeps no GPU history');
  // Each attempt's part on each node; an attempt that names no node ran here.
  const byNode = new Map();
  for (const a of J.job.attempts || []) {
    for (const p of a.parts && a.parts.length ? a.parts : [a]) {
      const node = p.node || a.node || hereName();
      if (!byNode.has(node)) byNode.set(node, []);
      byNode.get(node).push({ gpus: p.gpu_indices || [], start: ms(a.started_at), end: ms(a.ended_at) });
    }
  }
  if (!byNode.size) byNode.set(hereName(), []);
  const many = manyNodes(), groups = [], why = new Set();
  for (const [node, parts] of byNode) {
    const h = S.hists.get(node), where = many && !isHere(node) ? 'node ' + node : 'this node';
    if (!h || !h.t.length) {
      const n = noteOf(node);
      why.add(n ? `no GPU samples of ${esc(where)}: ${esc(n.text)}` : 'no GPU samples');
      continue;
    }
    const first = h.t[0];
    const mine = parts.filter((p) => p.gpus.length && (p.end ?? Infinity) >= first);
    if (!mine.length) { why.add(`no GPU samples for this job in the last hour of ${esc(where)}`); continue; }
    const gpus = [...new Set(mine.flatMap((p) => p.gpus))].sort((x, y) => x - y);
    const during = (t) => mine.some((p) => t >= (p.start ?? Infinity) && t <= (p.end ?? Infinity));
    const idx = [];
    h.t.forEach((t, k) => { if (during(t)) idx.push(k); });
    groups.push({ node, h, gpus, idx });
  }
  if (!groups.length) return none([...why].join('; '));
  const palette = ['--c-used', '--c-rsv', '--c-usable', '--c-util', '--c-5', '--c-6'];
  const series = [{ value: (u, v) => v == null ? '' : fmtTime(v) }], tables = [];
  let n = 0;
  for (const { node, h, gpus, idx } of groups) {
    const table = [idx.map((k) => h.t[k])], name = groups.length > 1 ? node + ' ' : '';
    for (const g of gpus) {
      const i = h.gpus.findIndex((x) => x.index === g);
      if (i < 0) continue;
      const s = h.series[i], col = css(palette[n++ % palette.length]);
      table.push(idx.map((k) => s.used[k])); series.push(line(`${name}GPU ${g} used`, col, 'mem', fmtBytes));
      table.push(idx.map((k) => s.utilization[k] == null ? null : s.utilization[k] * 100));
      series.push(line(`${name}GPU ${g} util`, col, '%', (v) => Math.round(v) + ' %', { width: 1, dash: [2, 3] }));
    }
    tables.push(table);
  }
  // Nodes sample at their own times: the tables are joined on time (a gap between one node's
  // samples is bridged, not drawn as missing).
  const data = tables.length === 1 ? tables[0] : window.uPlot ? uPlot.join(tables) : tables[0];
  const key = groups.map((g) => g.node + ':' + g.gpus.join(',')).join('|') + '|' + series.length;
  if (J.chart && J.chart.key === key) { J.chart.u.setData(data); return; }
  if (J.chart) { J.chart.ro.disconnect(); J.chart.u.destroy(); }
  box.innerHTML = '<div class="chart keep"></div>';
  const total = Math.max(...groups.flatMap((g) => g.h.gpus.map((x) => x.memory_total || 0))) || null;
  J.chart = makeChart(box.firstChild, series, [timeAxis(), memAxis(), pctAxis()],
    { x: { time: true }, mem: total ? { range: [0, total] } : {}, '%': { range: [0, 100] } }, data, 200);
  if (J.chart) J.chart.key = key;
}

// ---------- log follower ----------
async function logTick(J) {
  if (S.job !== J) return;
  const L = J.log, pre = $('#log'), state = $('#log-state');
  let next = 1000;
  if (J.job && !(J.job.attempts || []).length) {
    // Nothing to read before the first attempt; loadJob keeps J.job current.
    state.textContent = 'not started yet';
    J.logTimer = setTimeout(() => logTick(J), 3000);
    return;
  }
  try {
    const info = await api(`/v1/jobs/${J.id}/log?size=1`);
    if (S.job !== J) return;
    if (info.attempt !== L.attempt || info.size < L.offset) {
      // A new attempt (or a shorter file): start over, from its last 2 MiB at most.
      L.attempt = info.attempt; L.offset = Math.max(0, info.size - LOG_KEEP); L.len = 0;
      L.dec = new TextDecoder(); pre.textContent = ''; L.cut = L.offset > 0;
    }
    if (info.size - L.offset > LOG_KEEP) { L.offset = info.size - LOG_KEEP; L.cut = true; L.dec = new TextDecoder(); }
    while (info.size > L.offset) {
      const len = Math.min(info.size - L.offset, LOG_KEEP);
      const r = await api(`/v1/jobs/${J.id}/log?attempt=${L.attempt}&offset=${L.offset}&length=${len}`, { raw: true });
      const buf = new Uint8Array(await r.arrayBuffer());
      if (S.job !== J || !buf.length) break;
      L.offset += buf.length;
      appendLog(L, pre, L.dec.decode(buf, { stream: true }));
    }
    state.textContent = `attempt ${info.attempt} · ${fmtBytes(info.size)}` + (info.active ? ' · following' : '');
    if (!info.active) next = J.job && (WAIT.has(J.job.state) || RUN.has(J.job.state)) ? 3000 : 0;
  } catch (e) {
    if (S.job !== J || e.status === 401) return;
    state.textContent = e.message;
    next = e.status === 403 || e.status === 404 ? 0 : 5000;
  }
  if (next) J.logTimer = setTimeout(() => logTick(J), next);
}
function appendLog(L, pre, text) {
  if (L.cut) {
    // Read from the middle of the file: the first line is partial, drop it.
    const nl = text.indexOf('\n');
    if (nl < 0) return;
    text = text.slice(nl + 1); L.cut = false;
  }
  if (!text) return;
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
  pre.append(text);
  L.len += text.length;
  if (L.len > LOG_KEEP) {
    // Cut to 3/4 of the cap so that the text is rebuilt now and then, not on every append.
    let all = pre.textContent.slice(-LOG_KEEP * 0.75);
    const nl = all.indexOf('\n');
    if (nl >= 0 && nl < 4096) all = all.slice(nl + 1);
    pre.textContent = all; L.len = all.length;
  }
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// ---------- wiring ----------
function init() {
  takeTokenFromUrl();
  S.token = sessionStorage.getItem(TOKEN_KEY);
  // One delegated listener serves every button in the tables and pages.
  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('button');
    if (!b) return;
    if (b.matches('button.cancel')) act('cancel', +b.dataset.id, b);
    else if (b.matches('button.retry')) act('retry', +b.dataset.id, b);
    else if (b.matches('button.more')) { S.showAll = true; renderQueue(); }
    else if (b.matches('#error .close')) $('#error').hidden = true;
    else if (b.id === 'logout') signOut('');
  });
  $('#filter-user').addEventListener('change', renderQueue);
  $('#filter-state').addEventListener('change', renderQueue);
  window.addEventListener('hashchange', () => {
    if (fragment().has('token')) { takeTokenFromUrl(); const t = sessionStorage.getItem(TOKEN_KEY); if (t !== S.token) { stopAll(); S.token = t; start(); return; } }
    if (S.token && S.status) route();
  });
  $('#login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    let t = $('#token-input').value.trim();
    const m = /token=([^&\s]+)/.exec(t);   // a pasted link works too
    if (m) t = decodeURIComponent(m[1]);
    if (!t) return;
    $('#token-input').value = '';
    sessionStorage.setItem(TOKEN_KEY, t);
    S.token = t;
    start();
  });
  // Chart colours come from CSS, which changes with the colour scheme.
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    for (const k of [...S.charts.keys()]) dropChart(k);
    if (S.job && S.job.chart) { S.job.chart.ro.disconnect(); S.job.chart.u.destroy(); S.job.chart = null; }
    drawCharts(); renderHistory();
  });
  if (S.token) start(); else showLogin('');
}
init();
})();
