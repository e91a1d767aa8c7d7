// The operator console: one page over the scheduler's admin API (ADMIN-API.md). No framework and
// no build step. Everything the API returns is shown through textContent, never as HTML, so a
// tenant or bucket name cannot inject markup. The key lives in sessionStorage only (this tab),
// and travels only in the Authorization header of same-origin requests.

const REFRESH_MS = 2000;
const PAGE = 50;
const COLORS = ['#2457c5', '#2e7d32', '#ad1457', '#00838f', '#6d4c41', '#f9a825'];

const $ = (id) => document.getElementById(id);
const state = {
  key: sessionStorage.getItem('sluice.key'),
  role: null,
  offset: 0,
  q: '',
  total: 0,
  refreshes: 0,
  session: 0, // a new one at each sign-in and sign-out: answers for an older one are dropped
  busy: -1,   // the session whose refresh is under way, or -1
  again: false, // a refresh was asked for while one was under way: run another after it
  timer: null,
};

// ---- the API ----

// Throws with .stale set when the session ended while the request was out: what it answered
// belongs to the key before, and must not reach the page.
async function api(method, path, body) {
  const session = state.session;
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {
    method, headers, cache: 'no-store',
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  if (session !== state.session) {
    const e = new Error('signed out');
    e.stale = true;
    throw e;
  }
  let doc = null;
  try { doc = JSON.parse(text); } catch { /* not JSON: reported below */ }
  if (!r.ok) {
    const e = new Error(doc?.error?.message ?? `${method} ${path}: HTTP ${r.status}`);
    e.status = r.status;
    throw e;
  }
  return doc;
}

// ---- small DOM helpers ----

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const fmt = (n, digits = 0) => (n === null || n === undefined || Number.isNaN(n))
  ? '–' : Number(n).toLocaleString('en-US', { maximumFractionDigits: digits });
const ms = (v) => (v === null || v === undefined) ? '–'
  : v < 1000 ? `${fmt(v)} ms` : v < 120000 ? `${fmt(v / 1000, 1)} s` : `${fmt(v / 60000, 1)} min`;
const pct = (v) => `${fmt(v * 100, 1)} %`;

function showError(msg) {
  $('error').hidden = !msg;
  $('error').textContent = msg || '';
}

// A colour key for a chart line (set through the CSSOM: the page's policy allows no inline style).
function swatch(color) {
  const s = el('span', {}, '■ ');
  s.style.color = color;
  return s;
}

function card(label, value, field) {
  return el('div', { class: 'card', 'data-field': field }, el('b', {}, value), label);
}

// A confirmation of our own (a <dialog>): resolves to null when cancelled, else the input's text.
// The answer is taken when the button is pressed, not from the dialog's close event: that event
// comes a task later and would reach the next confirmation's handler.
let pendingConfirm = null;

function confirmAction(text, label, value) {
  return new Promise((resolve) => {
    const d = $('confirm');
    $('confirm-text').textContent = text;
    $('confirm-field').hidden = label === undefined;
    $('confirm-label').textContent = label ?? '';
    $('confirm-input').value = value ?? '';
    pendingConfirm?.(null);
    pendingConfirm = resolve;
    d.showModal();
  });
}

function finishConfirm(answer) {
  const resolve = pendingConfirm;
  pendingConfirm = null;
  $('confirm').close();
  resolve?.(answer);
}

async function act(what, fn) {
  try {
    await fn();
    showError('');
    await refresh();
  } catch (e) {
    if (!e.stale) showError(`${what}: ${e.message}`);
  }
}

// ---- pools: the buckets' use over time ----

// Use of a bucket over its own period at each sample: what was charged between the sample a
// period ago (or the first) and this one, per period, over the limit.
function useSeries(t, charged, periodMs, limit) {
  const out = [];
  for (let i = 0; i < t.length; i++) {
    let j = i;
    while (j > 0 && t[i] - t[j - 1] <= periodMs) j--;
    const span = t[i] - t[j];
    out.push(span > 0 && limit > 0 ? ((charged[i] - charged[j]) / span) * periodMs / limit : null);
  }
  return out;
}

function drawChart(canvas, t, lines, dep) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600, h = canvas.clientHeight || 180;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const left = 40, top = 14, bottom = h - 18, right = w - 8;
  const yMax = 1.2;
  const x = (i) => left + (t.length > 1 ? (i / (t.length - 1)) * (right - left) : 0);
  const y = (v) => bottom - (Math.min(v, yMax) / yMax) * (bottom - top);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#667085';
  g.strokeStyle = '#e3e7ee';
  for (const v of [0, 0.5, 1]) {
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(right, y(v)); g.stroke();
    g.fillText(`${v * 100}%`, 4, y(v) + 4);
  }
  if (t.length > 1) g.fillText(`last ${Math.round((t[t.length - 1] - t[0]) / 1000)} s`, left, h - 4);
  // paused spans, then 429 and 5xx marks at the top
  if (dep) {
    g.fillStyle = 'rgba(158,158,158,0.35)';
    dep.paused.forEach((p, i) => { if (p) g.fillRect(x(i) - 2, top, 4, bottom - top); });
    const marks = (series, color) => {
      g.fillStyle = color;
      for (let i = 1; i < series.length; i++) {
        if (series[i] > series[i - 1]) {
          g.beginPath(); g.moveTo(x(i), top - 10); g.lineTo(x(i) - 4, top - 2);
          g.lineTo(x(i) + 4, top - 2); g.fill();
        }
      }
    };
    marks(dep.rate_limited, '#c62828');
    marks(dep.unavailable, '#ef6c00');
  }
  lines.forEach((line, n) => {
    g.strokeStyle = COLORS[n % COLORS.length];
    g.lineWidth = 1.5;
    g.beginPath();
    let started = false;
    line.use.forEach((v, i) => {
      if (v === null) return;
      if (started) g.lineTo(x(i), y(v)); else { g.moveTo(x(i), y(v)); started = true; }
    });
    g.stroke();
    g.fillStyle = '#7b1fa2';
    line.clamped.forEach((c, i) => {
      if (c && line.use[i] !== null) { g.beginPath(); g.arc(x(i), y(line.use[i]), 2, 0, 7); g.fill(); }
    });
  });
}

function renderPools(status, history) {
  const box = $('pools');
  box.replaceChildren();
  const byId = new Map(history.buckets.map((b) => [b.id, b]));
  const depHist = new Map(history.deployments.map((d) => [d.name, d]));
  const seen = new Map();
  for (const pool of status.pools) {
    for (const dep of pool.deployments) {
      if (seen.has(dep.name)) { seen.get(dep.name).push(pool.route); continue; }
      seen.set(dep.name, [pool.route]);
      const routes = el('span', { class: 'muted' });
      const calls = depHist.get(dep.name)?.calls.at(-1);
      const head = el('h3', {}, dep.name, ' ', routes, ' ',
        el('span', { class: 'muted' }, `in flight ${dep.in_flight} · calls answered `),
        el('span', { 'data-calls': dep.name }, fmt(calls)),
        dep.paused_ms > 0 ? el('span', { class: 'paused' }, ` paused ${ms(dep.paused_ms)}`) : '');
      const lines = [];
      const rows = dep.buckets.map((b) => {
        const h = byId.get(b.id);
        const rate = h && b.period_ms > 0 && b.period_ms <= 3600000 && b.algorithm !== 'gauge';
        const n = lines.length;
        if (rate) lines.push({ use: useSeries(history.t, h.charged, b.period_ms, b.limit), clamped: h.clamped });
        const lastUse = rate ? lines[n].use.at(-1) : null;
        const change = el('button', { type: 'button', 'data-admin': '', 'data-change-limit': b.id,
          onclick: () => changeLimit(b) }, 'Change');
        return el('tr', { 'data-bucket': b.id },
          el('td', {}, rate ? swatch(COLORS[n % COLORS.length]) : '', b.id),
          el('td', {}, b.dimension),
          el('td', { class: 'num' }, `${fmt(b.limit)}${b.period_ms ? ` / ${ms(b.period_ms)}` : ''}${b.override ? ' (changed)' : ''}`),
          el('td', { class: 'num' }, fmt(b.capacity - b.level, 1)),
          el('td', { class: 'num' }, pct(b.used)),
          el('td', { class: 'num' }, lastUse === null ? '–' : pct(lastUse)),
          el('td', { class: 'num', 'data-field': 'reserved_total' }, fmt(b.reserved_total)),
          el('td', { class: 'num', 'data-field': 'charged_total' }, fmt(b.charged_total)),
          el('td', {}, b.clamped ? 'clamped' : ''),
          el('td', {}, change));
      });
      const canvas = el('canvas', { 'data-chart': dep.name });
      const table = el('table', {},
        el('thead', {}, el('tr', {}, ...['bucket', 'dimension', 'limit', 'in use now', 'used now',
          'over its period', 'reserved', 'charged', 'clamp', ''].map((s) => el('th', {}, s)))),
        el('tbody', {}, ...rows));
      box.append(el('div', { class: 'deployment' }, head, canvas, table));
      routes.textContent = `(routes: ${seen.get(dep.name).join(', ')})`;
      drawChart(canvas, history.t, lines, depHist.get(dep.name));
    }
  }
  applyRole();
}

async function changeLimit(b) {
  const v = await confirmAction(`Change the limit of ${b.id} (config: ${fmt(b.configured_limit)}). ` +
    'Empty goes back to the config.', 'New limit', String(b.limit));
  if (v === null) return;
  await act(`changing ${b.id}`, () => api('PUT', `/v1/buckets/${encodeURIComponent(b.id)}`,
    { limit: v.trim() === '' ? null : Number(v) }));
}

// ---- queues, shares, estimates ----

function renderQueues(q, status) {
  const body = $('queues').tBodies[0];
  body.replaceChildren();
  for (const r of q.routes) {
    for (const c of r.classes) {
      body.append(el('tr', { 'data-queue': `${r.route}/${c.class}` },
        el('td', {}, r.route), el('td', {}, c.class),
        el('td', { class: 'num', 'data-field': 'depth' }, fmt(c.depth)),
        el('td', { class: 'num' }, ms(c.oldest_wait_ms)),
        el('td', { class: 'num' }, ms(c.wait_p50_ms)), el('td', { class: 'num' }, ms(c.wait_p90_ms)),
        el('td', { class: 'num' }, ms(c.wait_p99_ms)),
        el('td', { class: 'num' }, fmt(q.totals.expired_by_class[c.class]))));
    }
  }
  const shares = $('shares').tBodies[0];
  shares.replaceChildren();
  for (const r of q.routes) {
    const weights = r.shares.reduce((s, x) => s + x.weight, 0);
    for (const s of r.shares) {
      shares.append(el('tr', {}, el('td', {}, r.route), el('td', {}, s.tenant),
        el('td', { class: 'num' }, pct(s.share)), el('td', { class: 'num' }, pct(s.weight / weights)),
        el('td', { class: 'num' }, fmt(s.weight)), el('td', { class: 'num' }, pct(s.guarantee))));
    }
  }
  const t = q.totals, e = q.estimates;
  $('totals').replaceChildren(
    card('queued', fmt(status.totals.queued), 'queued'), card('held', fmt(status.totals.held), 'held'),
    card('in flight', fmt(status.totals.in_flight), 'in_flight'),
    card('succeeded', fmt(t.succeeded), 'succeeded'), card('failed', fmt(t.failed), 'failed'),
    card('expired', fmt(t.expired), 'expired'), card('shed', fmt(t.shed), 'shed'),
    card('queue full', fmt(t.queue_full), 'queue_full'),
    card('provider 429', fmt(t.rate_limited), 'rate_limited'),
    card('provider 5xx', fmt(t.unavailable), 'unavailable'),
    card('active tenants', fmt(status.tenants_active), 'tenants_active'));
  $('estimates').replaceChildren(
    card('tokens reserved', fmt(e.reserved), 'est_reserved'), card('tokens used', fmt(e.used), 'est_used'),
    card('over-reserved (held back for nothing)', `${fmt(e.over_reserved)} (${e.reserved ? pct(e.over_reserved / e.reserved) : '–'})`, 'est_over'),
    card('under-reserved (became debt)', fmt(e.under_reserved), 'est_under'));
}

// ---- tenants ----

async function renderTenants() {
  const qs = new URLSearchParams({ offset: state.offset, limit: PAGE });
  if (state.q) qs.set('q', state.q);
  const page = await api('GET', `/v1/tenants?${qs}`);
  state.total = page.total;
  const body = $('tenants').tBodies[0];
  body.replaceChildren();
  for (const t of page.tenants) {
    const queued = Object.values(t.queued).reduce((a, b) => a + b, 0);
    const actions = el('td', { 'data-admin': '' },
      el('button', { type: 'button', 'data-action': t.paused ? 'resume' : 'pause',
        onclick: () => pauseTenant(t) }, t.paused ? 'Resume' : 'Pause'), ' ',
      el('button', { type: 'button', 'data-action': 'weight', onclick: () => editTenant(t, 'weight') }, 'Weight'), ' ',
      el('button', { type: 'button', 'data-action': 'guarantee', onclick: () => editTenant(t, 'guarantee') }, 'Guarantee'));
    for (const k of t.keys ?? []) {
      actions.append(' ', el('button', { type: 'button', 'data-key': k.id, onclick: () => pauseKey(t, k) },
        `${k.paused ? 'Resume' : 'Pause'} key ${k.id}`));
    }
    body.append(el('tr', { 'data-tenant': t.tenant },
      el('td', {}, t.tenant), el('td', { class: 'num' }, fmt(t.weight)),
      el('td', { class: 'num' }, pct(t.guarantee)),
      el('td', { class: 'num', 'data-field': 'queued' }, fmt(queued)),
      el('td', { class: 'num', 'data-field': 'held' }, fmt(t.held)),
      el('td', { class: 'num', 'data-field': 'delayed' }, fmt(t.delayed)),
      el('td', { class: 'num', 'data-field': 'in_flight' }, fmt(t.in_flight)),
      el('td', { 'data-field': 'state', class: t.paused ? 'paused' : '' }, t.paused ? 'paused' : 'running'),
      actions));
  }
  const last = Math.min(state.offset + PAGE, page.total);
  $('tenant-page').textContent = page.total === 0 ? 'no tenants'
    : `${fmt(state.offset + 1)}–${fmt(last)} of ${fmt(page.total)}`;
  $('tenant-prev').disabled = state.offset === 0;
  $('tenant-next').disabled = page.next_offset === null;
}

// Pauses or resumes a tenant or an API key (what: its name on the page; path: its API path).
async function togglePause(what, paused, path) {
  const verb = paused ? 'resume' : 'pause';
  const ok = await confirmAction(paused
    ? `Resume ${what}? Its held jobs go back in line.`
    : `Pause ${what}? Its queued jobs are held and new ones refused until it is resumed.`);
  if (ok === null) return;
  await act(`${verb} ${what}`, () => api('POST', `${path}/${verb}`));
}

const pauseTenant = (t) => togglePause(`tenant ${t.tenant}`, t.paused,
  `/v1/tenants/${encodeURIComponent(t.tenant)}`);
const pauseKey = (t, k) => togglePause(`API key ${k.id} of ${t.tenant}`, k.paused,
  `/v1/keys/${encodeURIComponent(k.id)}`);

async function editTenant(t, field) {
  const v = await confirmAction(`Change ${t.tenant}'s ${field} (config: ${t[`configured_${field}`]}). ` +
    'Empty goes back to the config.', field, String(t[field]));
  if (v === null) return;
  await act(`changing ${t.tenant}'s ${field}`, () => api('PUT', `/v1/tenants/${encodeURIComponent(t.tenant)}`,
    { [field]: v.trim() === '' ? null : Number(v) }));
}

// ---- a job ----

async function lookUpJob(id) {
  const dl = $('job');
  dl.replaceChildren();
  try {
    const j = await api('GET', `/v1/jobs/${encodeURIComponent(id)}`);
    const rows = [['job', j.job_id], ['state', j.state], ['tenant', j.tenant], ['route', j.route],
      ['class', j.class], ['attempts', j.attempts]];
    if (j.waiting_for) rows.push(['waiting for', `${j.waiting_for.limiter}${j.waiting_for.wait_ms >= 0 ? ` (room in ${ms(j.waiting_for.wait_ms)})` : ''}`]);
    if (j.deployment) rows.push(['deployment', j.deployment]);
    if (j.lease_expires_ms) rows.push(['lease expires', new Date(j.lease_expires_ms).toLocaleTimeString()]);
    if (j.not_before_ms) rows.push(['retry not before', new Date(j.not_before_ms).toLocaleTimeString()]);
    if (j.result) rows.push(['result', j.result.status + (j.result.error ? `: ${j.result.error.reason}` : '')]);
    for (const [k, v] of rows) {
      if (v !== undefined && v !== null) dl.append(el('dt', {}, k), el('dd', { 'data-field': k }, v));
    }
    showError('');
  } catch (e) {
    if (!e.stale) showError(`job ${id}: ${e.message}`);
  }
}

// ---- the cycle ----

function applyRole() {
  for (const e of document.querySelectorAll('[data-admin]')) e.hidden = state.role !== 'admin';
}

async function refresh() {
  if (!state.key) return;
  if (state.busy === state.session) {
    // The one under way may have read the state before a change just made: read it again.
    state.again = true;
    return;
  }
  const mine = state.session;
  state.busy = mine;
  try {
    const status = await api('GET', '/v1/status');
    state.role = status.role;
    $('role').hidden = false;
    $('role').textContent = status.role;
    $('signin-panel').hidden = true;
    $('main').hidden = false;
    $('signout').hidden = false;
    if (status.role === 'admin') {
      const [q, h] = await Promise.all([api('GET', '/v1/queues'), api('GET', '/v1/history')]);
      renderQueues(q, status);
      renderPools(status, h);
    } else {
      $('totals').replaceChildren(card('queued', fmt(status.totals.queued), 'queued'),
        card('held', fmt(status.totals.held), 'held'),
        card('in flight', fmt(status.totals.in_flight), 'in_flight'));
    }
    await renderTenants();
    applyRole();
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
    state.refreshes++;
    document.body.dataset.refreshes = String(state.refreshes);
  } catch (e) {
    if (e.stale) return;
    if (e.status === 401) {
      signOut();
      showError(`Signed out: ${e.message}`);
    } else {
      showError(e.message);
    }
  } finally {
    if (state.busy === mine) {
      state.busy = -1;
      if (state.again) {
        state.again = false;
        refresh();
      }
    }
  }
}

// Forgets the key and everything the last key was shown, so the next key sees only its own.
function signOut() {
  sessionStorage.removeItem('sluice.key');
  state.session++;
  state.again = false;
  state.key = null;
  state.role = null;
  state.offset = 0;
  state.q = '';
  clearInterval(state.timer);
  for (const id of ['pools', 'totals', 'estimates', 'job']) $(id).replaceChildren();
  for (const id of ['queues', 'shares', 'tenants']) $(id).tBodies[0].replaceChildren();
  $('tenant-q').value = '';
  $('tenant-page').textContent = '';
  $('updated').textContent = '';
  $('main').hidden = true;
  $('signout').hidden = true;
  $('role').hidden = true;
  $('signin-panel').hidden = false;
}

function start() {
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
  refresh();
}

$('signin').addEventListener('submit', (ev) => {
  ev.preventDefault();
  state.session++;
  state.key = $('key').value.trim();
  $('key').value = '';
  showError('');
  sessionStorage.setItem('sluice.key', state.key);
  start();
});
$('confirm-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  finishConfirm($('confirm-input').value);
});
$('confirm-cancel').addEventListener('click', () => finishConfirm(null));
$('confirm').addEventListener('cancel', () => finishConfirm(null));
$('signout').addEventListener('click', () => { signOut(); showError(''); });
$('tenant-search').addEventListener('submit', (ev) => {
  ev.preventDefault();
  state.q = $('tenant-q').value.trim();
  state.offset = 0;
  act('searching tenants', renderTenants);
});
$('tenant-prev').addEventListener('click', () => { state.offset = Math.max(0, state.offset - PAGE); act('paging', renderTenants); });
$('tenant-next').addEventListener('click', () => { state.offset += PAGE; act('paging', renderTenants); });
$('job-form').addEventListener('submit', (ev) => { ev.preventDefault(); lookUpJob($('job-id').value.trim()); });

if (state.key) start();
