// EnergyFlow live view. Plain JS, no build step, no external resources.
'use strict';

const $ = (id) => document.getElementById(id);
const ef = { pc: null, dc: null, token: '', scope: 'none', counts: { hello: 0, sample: 0, event: 0, stats: 0, bad: 0 },
  lastSample: null, lastRaw: null, samples: [], events: [], connected: false, error: '', hasState: false };
window.__ef = ef; // for tests and debugging

// Shared hook for the page's other scripts (episode.js, …): window.ef is
// this object, with ef.api(path, opts) (the token added), ef.session and
// ef.on('session' | 'sample' | 'command', fn): fn gets each one, and the
// latest one at once. 'command' is {path, ok, status, error} of STOP/RESET.
const emit = (() => {
  const hooks = {}, latest = {};
  ef.api = api;
  ef.on = (type, fn) => { (hooks[type] = hooks[type] || []).push(fn); if (type in latest) fn(latest[type]); };
  return (type, v) => {
    latest[type] = v;
    for (const fn of hooks[type] || []) { try { fn(v); } catch (e) { console.error(e); } }
  };
})();
window.ef = ef;

const MAX_POINTS = 300;

function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem('ef-token', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem('ef-token') || '';
}

async function api(path, opts = {}) {
  const headers = Object.assign({ 'Authorization': 'Bearer ' + ef.token }, opts.headers || {});
  return fetch(path, Object.assign({}, opts, { headers, cache: 'no-store' }));
}

function showLogin(msg) {
  $('login').hidden = false;
  $('conn').textContent = 'not connected';
  if (msg) { $('auth-error').textContent = msg; $('auth-error').hidden = false; }
}

async function start() {
  ef.token = takeToken();
  $('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem('ef-token', $('token').value.trim());
    location.reload();
  });
  if (!ef.token) { ef.error = 'no token'; showLogin('A token is required to watch.'); return; }
  let res;
  try { res = await api('/api/session'); } catch (e) { ef.error = String(e); showLogin('Cannot reach the robot.'); return; }
  if (res.status === 401 || res.status === 403) {
    ef.error = 'unauthorized';
    sessionStorage.removeItem('ef-token');
    showLogin('Token refused (' + res.status + ').');
    return;
  }
  const session = await res.json();
  ef.scope = session.scope;
  ef.session = session;
  emit('session', session);
  $('stop').disabled = false;
  $('reset').disabled = !session.can_reset;
  $('stop').addEventListener('click', () => command('/api/stop', { reason: 'STOP pressed on the web page' }));
  $('reset').addEventListener('click', () => command('/api/reset', {}));
  await connect();
}

async function command(path, body) {
  $('cmd-status').textContent = path.endsWith('stop') ? 'stopping…' : 'resetting…';
  try {
    const res = await api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const j = await res.json().catch(() => ({}));
    $('cmd-status').textContent = res.ok ? (path.endsWith('stop') ? 'stop sent' : 'reset sent') : ('refused: ' + (j.error || res.status));
    emit('command', { path, ok: res.ok, status: res.status, error: j.error || '' });
  } catch (e) {
    $('cmd-status').textContent = 'failed: ' + e;
  }
}

function waitGathering(pc, ms) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
    });
  });
}

async function connect() {
  $('conn').textContent = 'connecting…';
  const pc = new RTCPeerConnection({ iceServers: [] });
  ef.pc = pc;
  pc.addTransceiver('video', { direction: 'recvonly' });
  const dc = pc.createDataChannel('telemetry', { negotiated: true, id: 0 });
  ef.dc = dc;
  dc.onmessage = (m) => onMessage(m.data);
  pc.ontrack = (e) => {
    // Operators need the newest frame, not smooth playback: ask for the
    // smallest jitter buffer the browser allows.
    try { if ('jitterBufferTarget' in e.receiver) e.receiver.jitterBufferTarget = 0; } catch (err) { /* older browsers */ }
    try { if ('playoutDelayHint' in e.receiver) e.receiver.playoutDelayHint = 0; } catch (err) { /* older browsers */ }
    $('video').srcObject = e.streams[0] || new MediaStream([e.track]);
  };
  pc.onconnectionstatechange = () => {
    $('conn').textContent = pc.connectionState;
    ef.connected = pc.connectionState === 'connected';
    if (pc.connectionState === 'failed') setTimeout(() => { pc.close(); connect(); }, 2000);
  };
  await pc.setLocalDescription(await pc.createOffer());
  await waitGathering(pc, 2000);
  const res = await api('/api/offer', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ type: 'offer', sdp: pc.localDescription.sdp }) });
  if (!res.ok) {
    const j = await res.json().catch(() => ({}));
    ef.error = 'offer refused: ' + (j.error || res.status);
    $('conn').textContent = ef.error;
    return;
  }
  await pc.setRemoteDescription(await res.json());
}

function onMessage(raw) {
  let m;
  try { m = JSON.parse(raw); } catch (e) { ef.counts.bad++; return; }
  ef.lastRaw = raw;
  switch (m.type) {
    case 'hello':
      ef.counts.hello++;
      $('reset').disabled = !m.can_reset;
      (m.events || []).forEach(addEvent);
      if (m.stats) showStats(m.stats);
      break;
    case 'sample':
      ef.counts.sample++;
      ef.lastSample = m;
      ef.samples.push(m);
      if (ef.samples.length > MAX_POINTS) ef.samples.shift();
      showSample(m);
      emit('sample', m);
      break;
    case 'event':
      ef.counts.event++;
      addEvent(m);
      break;
    case 'stats':
      ef.counts.stats++;
      showStats(m);
      break;
    default:
      ef.counts.bad++;
  }
}

// How the page names the scores the stop can watch (the sample's "watch").
const SCORE_NAMES = { energy: 'energy', centered_energy: 'centered energy', state_energy: 'state energy' };

const fmt = (v, d = 3) => (v === null || v === undefined || Number.isNaN(v)) ? '—' : Number(v).toFixed(d);
const vec = (a) => (a && a.length) ? a.map((x) => fmt(x, 2)).join(' ') : '—';

function showSample(m) {
  const st = $('state');
  st.textContent = m.state + (m.reason ? ': ' + m.reason : '');
  st.className = 'state ' + (m.state === 'RUNNING' ? 'running' : 'stopped');
  $('v-tick').textContent = m.tick;
  // The plotted value is the score the stop watches; say which.
  const watch = SCORE_NAMES[m.watch] || m.watch || 'energy';
  $('h-energy').textContent = watch;
  $('l-watch').textContent = watch;
  $('watch-note').textContent = 'the stop watches the ' + watch;
  // The state term, when the bundle has one, whether watched or not.
  // (ticks without a fresh score send null: keep the row once seen)
  ef.hasState = ef.hasState || (m.state_energy !== null && m.state_energy !== undefined);
  $('r-state').hidden = !ef.hasState || m.watch === 'state_energy';
  $('v-state').textContent = fmt(m.state_energy);
  $('v-energy').textContent = fmt(m.energy);
  $('v-threshold').textContent = fmt(m.threshold);
  $('v-loop').textContent = fmt(m.loop_hz, 1) + ' Hz';
  $('v-inf').textContent = fmt(m.inference_ms, 1) + ' ms';
  $('v-tickms').textContent = fmt(m.tick_ms, 1) + ' ms';
  // How late the recent plans land (p90, control periods) against the
  // lateness the stop's calibration was driven at.
  const late = m.plan_late, lim = m.plan_late_limit;
  const over = late !== null && late !== undefined && lim !== null && lim !== undefined && late > lim;
  $('v-late').textContent = (late === null || late === undefined) ? '—'
    : fmt(late, 2) + ' periods' + (lim === null || lim === undefined ? '' : ' (limit ' + fmt(lim, 2) + ')');
  $('r-late').className = over ? 'warn' : '';
  $('late-note').hidden = !over;
  $('v-joints').textContent = vec(m.joints);
  $('v-joints').parentElement.hidden = !(m.joints && m.joints.length); // an arm without joint readings
  $('v-ee').textContent = vec(m.ee);
  schedulePlot();
}

let plotPending = false;
function schedulePlot() {
  if (plotPending) return;
  plotPending = true;
  requestAnimationFrame(() => { plotPending = false; drawPlot(); });
}

function drawPlot() {
  const c = $('plot'), g = c.getContext('2d');
  const w = c.width, h = c.height, s = ef.samples;
  g.clearRect(0, 0, w, h);
  if (s.length < 2) return;
  let lo = Infinity, hi = -Infinity;
  for (const p of s) {
    for (const v of [p.energy, p.threshold]) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  }
  if (!(hi > lo)) { hi = lo + 1; }
  const pad = (hi - lo) * 0.1; lo -= pad; hi += pad;
  const step = (w - 44) / (MAX_POINTS - 1);
  const X = (i) => w - 4 - (s.length - 1 - i) * step; // newest on the right
  const Y = (v) => h - 14 - ((v - lo) / (hi - lo)) * (h - 24);
  g.fillStyle = '#8a93a0'; g.font = '11px sans-serif';
  g.fillText(hi.toFixed(2), 2, 12); g.fillText(lo.toFixed(2), 2, h - 14);
  // Threshold: its history, extended across the plot at the current value.
  const thr = s[s.length - 1].threshold;
  g.strokeStyle = '#ffdc00'; g.setLineDash([6, 4]); g.lineWidth = 1.5; g.beginPath();
  g.moveTo(40, Y(s[0].threshold));
  s.forEach((p, i) => g.lineTo(X(i), Y(p.threshold)));
  g.stroke(); g.setLineDash([]);
  if (thr !== null) { g.fillStyle = '#ffdc00'; g.fillText('threshold ' + thr.toFixed(2), 44, Y(thr) - 4); }
  g.strokeStyle = '#50c8ff'; g.lineWidth = 2; g.beginPath();
  s.forEach((p, i) => { const y = Y(p.energy); i ? g.lineTo(X(i), y) : g.moveTo(X(i), y); });
  g.stroke();
}

function addEvent(e) {
  ef.events.push(e);
  const li = document.createElement('li');
  const t = document.createElement('time');
  t.textContent = new Date(e.t).toLocaleTimeString();
  const k = document.createElement('span');
  k.className = 'kind ' + e.kind; k.textContent = e.kind.toUpperCase();
  const r = document.createElement('span');
  r.textContent = e.reason + (e.actor ? ' — ' + e.actor : '') + (e.energy !== null && e.kind === 'trip' ? ' (' + (SCORE_NAMES[e.score] || 'energy') + ' ' + fmt(e.energy) + ')' : '');
  li.append(t, k, r);
  const list = $('events');
  list.prepend(li);
  while (list.children.length > 50) list.lastChild.remove();
}

function showStats(m) {
  const rows = [];
  const c = m.cpu || {};
  rows.push(['CPU', fmt(c.total_pct, 0) + ' % of ' + c.cores + ' cores, process ' + fmt(c.process_pct, 0) + ' %, load ' + fmt(c.load1, 2)]);
  if (c.mem_total_bytes) rows.push(['memory', gib(c.mem_used_bytes) + ' / ' + gib(c.mem_total_bytes) + ' GiB']);
  if (m.gpu && m.gpu.length) {
    for (const g of m.gpu) {
      const parts = [];
      if (g.util_pct >= 0) parts.push(fmt(g.util_pct, 0) + ' %');
      if (g.mem_total_bytes > 0) parts.push(gib(g.mem_used_bytes) + ' / ' + gib(g.mem_total_bytes) + ' GiB');
      if (g.temp_c >= 0) parts.push(fmt(g.temp_c, 0) + ' °C');
      if (g.power_w >= 0) parts.push(fmt(g.power_w, 0) + ' W');
      rows.push(['GPU ' + g.index + ' ' + g.name, parts.join(', ')]);
    }
  } else {
    rows.push(['GPU', m.gpu_error ? m.gpu_error : 'none']);
  }
  const v = m.video || {};
  rows.push(['video', v.width + '×' + v.height + ' @ ' + fmt(v.fps_measured, 1) + ' fps (limit ' + v.fps + '), encode ' + fmt(v.encode_ms_median, 1) + ' ms (CPU ' + fmt(v.encode_cpu_ms_median, 1) + ' ms), ' + v.viewers + ' viewer(s)']);
  const st = stagesLine(m.stages);
  if (st) rows.push(['stages (ms p50/p90)', st]);
  const tb = $('stats');
  tb.replaceChildren(...rows.map(([k, val]) => {
    const tr = document.createElement('tr');
    const th = document.createElement('th'); th.textContent = k;
    const td = document.createElement('td'); td.textContent = val;
    tr.append(th, td); return tr;
  }));
}

// How the stages row names the control path's stages (the stats
// message's "stages", in pipeline order); sample_step joins sample.
const STAGE_NAMES = { camera_decode: 'decode', preprocess: 'preprocess', encoder: 'encoder', sample: 'sample',
  rescore: 'rescore', state_term: 'state term', command_write: 'write', arm_read: 'arm read' };

// stagesLine is "decode 1.2/1.9 · … · sample 48/61 (2.4/step) · …", or ''
// without stages (an older server, or nothing timed yet).
function stagesLine(stages) {
  if (!stages || !stages.length) return '';
  const ms = (v) => fmt(v, v < 1 ? 2 : v < 10 ? 1 : 0);
  const step = stages.find((x) => x.stage === 'sample_step');
  return stages.filter((x) => x.stage !== 'sample_step' || !stages.some((y) => y.stage === 'sample')).map((x) => {
    let t = (STAGE_NAMES[x.stage] || x.stage) + ' ' + ms(x.p50_ms) + '/' + ms(x.p90_ms);
    if (x.stage === 'sample' && step) t += ' (' + ms(step.p50_ms) + '/step)';
    return t;
  }).join(' · ');
}

const gib = (b) => (b / (1 << 30)).toFixed(1);

start();
