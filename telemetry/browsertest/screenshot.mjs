// Screenshots of the simulated robot demo's live view at level 0 and after
// an out-of-distribution level change, in Debian's Chromium driven by
// playwright-core (never downloads a browser), connecting as e2e.mjs does.
// Started by scripts/demo_screenshot.sh, which runs `energyflow sim` and
// passes what it printed:
//
//   EF_URL (the live view, without the token), EF_VIEW_TOKEN (the token the
//   demo printed in the URL's #token=), EF_BRIDGE (the simulator bridge,
//   http://host:port), EF_LEVEL (the level to switch to, default L),
//   EF_OUT (folder for demo-level0.png and demo-level<L>.png),
//   EF_PHASE_MS (time per phase, default 10000), EF_WARMUP_MS (how long to
//   wait for frames and scores, default 40000), EF_RESET_IF_STOPPED (1: if
//   the robot is already STOPPED before the first phase, press the page's
//   RESET once, as the demo's operator would, once the policy scores;
//   the token must have the reset scope, as the demo's printed one has).
//
// Phase 1 lets the robot run at the demo's level for EF_PHASE_MS, then
// saves demo-level0.png; phase 2 posts {"level": EF_LEVEL, "now": true} to
// the bridge's /episode/level (a new episode at once, seed+1), waits
// EF_PHASE_MS and saves demo-level<L>.png. For each phase it prints one
// line "PHASE {json}" and one plain summary line to stdout: the watched
// score and its threshold as the page shows them at the screenshot, their
// median/max over the phase, the state term, the safety state and any trip.
// Progress goes to stderr. Exit status 0 on success; on failure one line
// "FAIL: …" on stderr and status 1.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Failure, check, launchChromium, poll, sleep, videoStats } from './lib.mjs';

const env = process.env;
const URL = env.EF_URL;
const TOKEN = env.EF_VIEW_TOKEN || '';
const BRIDGE = (env.EF_BRIDGE || '').replace(/\/$/, '');
const LEVEL = env.EF_LEVEL || 'L';
const OUT = env.EF_OUT || '.';
const PHASE_MS = Number(env.EF_PHASE_MS || 10000);
const WARMUP_MS = Number(env.EF_WARMUP_MS || 40000);

const log = (...a) => console.error('[screenshot]', ...a);
// Runs in the page: the samples and events received since `since` (unix ms,
// the runtime's clock; same machine), only the fields summarized here.
const received = ({ since, eventsSince }) => {
  const e = window.__ef;
  const pick = (m) => ({ tick: m.tick, t: m.t, energy: m.energy, threshold: m.threshold, watch: m.watch,
    state_energy: m.state_energy, state: m.state, reason: m.reason });
  return {
    samples: e.samples.filter((m) => m.t >= since).map(pick),
    events: e.events.filter((m) => m.t >= eventsSince).map((m) => ({ t: m.t, tick: m.tick, kind: m.kind, reason: m.reason,
      actor: m.actor, energy: m.energy, threshold: m.threshold, score: m.score || 'energy', trace: m.trace })),
    counts: e.counts,
    // What the page shows right now.
    shown: { state: document.getElementById('state').textContent, watch: document.getElementById('h-energy').textContent,
      energy: document.getElementById('v-energy').textContent, threshold: document.getElementById('v-threshold').textContent,
      state_energy: document.getElementById('v-state').textContent },
  };
};

async function bridge(path, body) {
  const res = await fetch(BRIDGE + path, body === undefined ? {} : {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const j = await res.json().catch(() => ({}));
  check(res.ok, `bridge ${path}: HTTP ${res.status} ${JSON.stringify(j)}`);
  return j;
}

// Collects the phase's samples (the page keeps only its last 300) by tick.
async function collect(page, since, eventsSince, ms) {
  const byTick = new Map();
  const events = new Map();
  let r;
  const end = Date.now() + ms;
  for (;;) {
    r = await page.evaluate(received, { since, eventsSince });
    for (const s of r.samples) byTick.set(s.tick + ':' + s.t, s);
    for (const e of r.events) events.set(e.t + ':' + e.kind + ':' + e.reason, e);
    const left = end - Date.now();
    if (left <= 0) break;
    await sleep(Math.min(2000, left));
  }
  const samples = [...byTick.values()].sort((a, b) => a.t - b.t);
  return { since, samples, events: [...events.values()].sort((a, b) => a.t - b.t), shown: r.shown, counts: r.counts };
}

const finite = (v) => typeof v === 'number' && Number.isFinite(v);
function stat(values) {
  const v = values.filter(finite).sort((a, b) => a - b);
  if (!v.length) return null;
  return { n: v.length, min: v[0], median: v[Math.floor(v.length / 2)], max: v[v.length - 1] };
}
const lastFinite = (samples, key) => { for (let i = samples.length - 1; i >= 0; i--) if (finite(samples[i][key])) return samples[i][key]; return null; };
// Numbers as a caption would quote them: 3 significant digits, no exponent below 1e6.
const num = (v) => (v === null || v === undefined) ? '—' : (Math.abs(v) >= 1e6 ? v.toExponential(2) : Number(v.toPrecision(3)).toString());

function summarize(name, ep, c, frames) {
  const s = c.samples;
  const last = s[s.length - 1] || {};
  const firstStop = s.find((m) => m.state !== 'RUNNING');
  const watch = last.watch || 'energy';
  const trips = c.events.filter((e) => e.kind === 'trip' || e.kind === 'stop');
  return {
    phase: name, level: ep.level, seed: ep.seed, episode: ep.episode, step: ep.step, success: ep.success,
    bridge: { commands: ep.commands, ignored_commands: ep.ignored_commands, tick_ms: ep.tick_ms, step_ms: ep.step_ms },
    since: c.since,
    samples: s.length, frames_decoded: frames,
    watch,
    // As the page shows them in the screenshot; "last" is the newest finite value received.
    at_screenshot: { state: last.state, reason: last.reason || '', page: c.shown },
    last: { energy: lastFinite(s, 'energy'), threshold: lastFinite(s, 'threshold'), state_energy: lastFinite(s, 'state_energy') },
    energy: stat(s.map((m) => m.energy)), threshold: stat(s.map((m) => m.threshold)),
    state_energy: stat(s.map((m) => m.state_energy)),
    running_samples: s.filter((m) => m.state === 'RUNNING').length,
    first_stop: firstStop ? { tick: firstStop.tick, state: firstStop.state, reason: firstStop.reason } : null,
    trips,
  };
}

// The page's text of a number ("123.456", "—") for a caption, else the newest value received.
const shownNum = (text, fallback) => (text && text !== '—' && Number.isFinite(Number(text))) ? num(Number(text)) : num(fallback);

function line(p) {
  const a = p.at_screenshot;
  const parts = [`${p.phase} (bridge level ${p.level}, seed ${p.seed}, step ${p.step}${p.success ? ', success' : ''}):`,
    `${a.state}${a.reason ? ' (' + a.reason + ')' : ''}${a.state !== 'RUNNING' && p.samples && p.running_samples === 0 ? ' all phase long' : ''};`,
    `${p.watch} ${shownNum(a.page.energy, p.last.energy)} (threshold ${shownNum(a.page.threshold, p.last.threshold)})`];
  if (p.energy) parts.push(`[phase median ${num(p.energy.median)}, max ${num(p.energy.max)}]`);
  if (p.state_energy) parts.push(`; state_energy ${shownNum(a.page.state_energy, p.last.state_energy)} [median ${num(p.state_energy.median)}, max ${num(p.state_energy.max)}]`);
  for (const t of p.trips) {
    const what = finite(t.energy) ? `${t.score} ${num(t.energy)} vs threshold ${num(t.threshold)}` : t.reason.split(':')[0];
    parts.push(`; ${t.kind.toUpperCase()} at tick ${t.tick}${t.t < p.since ? ' (before this phase)' : ''}: ${what}${t.actor ? ' by ' + t.actor : ''}`);
  }
  parts.push(`; ${p.samples} samples, ${p.frames_decoded} frames`);
  return parts.join(' ');
}

async function phase(page, name, file, eventsSince, extra = {}) {
  const since = Date.now();
  if (eventsSince === undefined) eventsSince = since;
  const before = await page.evaluate(videoStats);
  const c = await collect(page, since, eventsSince, PHASE_MS);
  const after = await page.evaluate(videoStats);
  const frames = (after.framesDecoded || 0) - (before.framesDecoded || 0);
  check(frames > 0, `${name}: no video frames decoded in ${PHASE_MS / 1000} s (${JSON.stringify(after)})`);
  check(c.samples.length > 0, `${name}: no score samples in ${PHASE_MS / 1000} s`);
  await sleep(300); // let the page draw the newest sample
  const path = join(OUT, file);
  // What the page shows in the screenshot (the numbers a caption quotes).
  c.shown = (await page.evaluate(received, { since: Date.now(), eventsSince: Date.now() })).shown;
  await page.screenshot({ path });
  const ep = await bridge('/episode');
  const p = { ...summarize(name, ep, c, frames), ...extra, screenshot: path };
  console.log('PHASE ' + JSON.stringify(p));
  console.log(line(p));
  log('saved', path);
  return p;
}

check(URL && BRIDGE, 'EF_URL and EF_BRIDGE are required');
let browser;
try {
  browser = await launchChromium(chromium, env.EF_CHROMIUM || '/usr/bin/chromium');
} catch (e) {
  console.error('FAIL: cannot start Chromium: ' + String(e.message).split('\n')[0]);
  process.exit(1);
}
let code = 0;
try {
  mkdirSync(OUT, { recursive: true });
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on('pageerror', (e) => log('page error:', e.message));
  await page.goto(URL + (TOKEN ? '#token=' + encodeURIComponent(TOKEN) : ''));
  const t0 = Date.now();
  const vs = await poll(() => page.evaluate(videoStats), 'decoded video frames', WARMUP_MS);
  log('video:', JSON.stringify(vs));
  await poll(() => page.evaluate(() => ({ ok: window.__ef.counts.sample >= 5, counts: window.__ef.counts, error: window.__ef.error })),
    'score samples on the data channel', Math.max(5000, WARMUP_MS - (Date.now() - t0)));
  // RUNNING with a score, or STOPPED (it stays so until a RESET).
  const running = await poll(() => page.evaluate(() => {
    const s = window.__ef.lastSample;
    const stopped = !!s && s.state === 'STOPPED';
    return { ok: stopped || (!!s && s.state === 'RUNNING' && s.energy !== null), running: !stopped, state: s && s.state, reason: s && s.reason };
  }), 'a RUNNING sample with a score', Math.max(5000, WARMUP_MS - (Date.now() - t0))).catch((e) => ({ ok: false, why: e.message }));
  if (running.ok && !running.running) { running.ok = false; running.why = `${running.state}: ${running.reason}`; }
  let reset = null;
  if (!running.ok) {
    log('warning: the robot is not RUNNING before the first phase:', running.why || running.reason);
    if (env.EF_RESET_IF_STOPPED === '1') {
      // As an operator would: once the policy has scored (its first action
      // chunk exists), press RESET on the page.
      await poll(() => page.evaluate(() => ({ ok: window.__ef.samples.slice(-40).some((m) => m.energy !== null) })),
        'a finite energy score', 20000);
      check(!(await page.evaluate(() => document.getElementById('reset').disabled)), 'RESET is disabled: the token has no reset scope');
      // The safety layer may refuse a reset (e.g. a stale score): try up to 3 times.
      let r = null;
      for (let i = 0; i < 3 && !(r && r.ok); i++) {
        const before = await page.evaluate(() => window.__ef.lastSample.tick);
        await page.click('#reset');
        r = await poll(() => page.evaluate((t0) => {
          const s = window.__ef.lastSample;
          return { ok: s.tick > t0 && s.state === 'RUNNING', tick: s.tick, state: s.state, status: document.getElementById('cmd-status').textContent };
        }, before), 'RUNNING after RESET', 3000).catch((e) => ({ ok: false, why: e.message }));
        log(`RESET ${i + 1}:`, JSON.stringify(r));
      }
      reset = { ok: r.ok, tick: r.tick, was: running.why };
      console.log(r.ok ? `RESET pressed; RUNNING again at tick ${r.tick} (the robot was ${running.why})`
        : `RESET pressed 3 times; still not RUNNING (${r.why})`);
    }
  }
  const start = await bridge('/episode');
  const p0 = await phase(page, `level ${start.level}`, `demo-level${start.level}.png`, 0, { reset });
  const set = await bridge('/episode/level', { level: LEVEL, now: true });
  log(`level ${LEVEL} now: bridge episode ${set.episode}, seed ${set.seed}, level ${set.level}`);
  check(String(set.level) === LEVEL, `bridge did not switch to level ${LEVEL}: ${JSON.stringify({ level: set.level, pending: set.pending_level })}`);
  const p1 = await phase(page, `level ${LEVEL}`, `demo-level${LEVEL}.png`);
  console.log('RESULT ' + JSON.stringify({ ok: true, phases: [p0, p1].map((p) => p.phase) }));
} catch (e) {
  console.error('FAIL: ' + (e instanceof Failure ? e.message : String(e.message).split('\n')[0]));
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
