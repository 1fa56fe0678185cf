// End-to-end test of the telemetry live view in Debian's Chromium, driven by
// playwright-core (never downloads a browser). Started by the Go test
// TestBrowserEndToEnd (e2e_test.go), which runs the server on loopback with a
// synthetic camera, a fake controller (refusing resets) and a fake episode
// control, and passes:
//
//   EF_URL, EF_VIEW_TOKEN, EF_RESET_TOKEN, EF_WIDTH, EF_HEIGHT,
//   EF_PROBES (JSON [{name, x, y, expect: "green"|"gray"}]),
//   EF_STAMP (JSON {bs, x0, y0}: the frame-counter stamp),
//   EF_ARTIFACTS (directory for the screenshot), EF_MODE ("e2e"|"bench"),
//   EF_BENCH_MS (bench: measuring window per phase).
//
// Prints progress to stderr and one line "RESULT {json}" to stdout (bench:
// also "READY n" / "DONE n {json}" per phase). Exit status 0 on success.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Failure, check, launchChromium, poll, sleep, videoStats } from './lib.mjs';

const env = process.env;
const URL = env.EF_URL;
const W = Number(env.EF_WIDTH), H = Number(env.EF_HEIGHT);
const ARTIFACTS = env.EF_ARTIFACTS || '.';
const PROBES = JSON.parse(env.EF_PROBES || '[]');
const STAMP = JSON.parse(env.EF_STAMP || 'null');
const MODE = env.EF_MODE || 'e2e';
const BENCH_MS = Number(env.EF_BENCH_MS || 10000);

const log = (...a) => console.error('[e2e]', ...a);

// Runs in the page: draw the current video frame and read pixels.
const readPixels = ({ probes, stamp }) => {
  const v = document.getElementById('video');
  const c = document.createElement('canvas');
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext('2d', { willReadFrequently: true });
  g.drawImage(v, 0, 0);
  const px = (x, y) => Array.from(g.getImageData(x, y, 1, 1).data.slice(0, 3));
  const out = { w: c.width, h: c.height, probes: probes.map((p) => ({ ...p, rgb: px(p.x, p.y) })) };
  if (stamp) {
    let n = 0;
    for (let i = 0; i < 16; i++) {
      const [r, gg, b] = px(stamp.x0 + i * stamp.bs + (stamp.bs >> 1), stamp.y0 + (stamp.bs >> 1));
      if (r + gg + b > 3 * 128) n |= 1 << (15 - i);
    }
    out.counter = n;
  }
  return out;
};

function probeOK(p) {
  const [r, g, b] = p.rgb;
  if (p.expect === 'green') return g > 140 && r < 130 && b < 150;
  if (p.expect === 'gray') return Math.max(r, g, b) - Math.min(r, g, b) < 35 && r > 35 && r < 120;
  return false;
}

async function openViewer(browser, token) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on('pageerror', (e) => log('page error:', e.message));
  await page.goto(URL + (token ? '#token=' + encodeURIComponent(token) : ''));
  return page;
}

async function e2e(browser) {
  const result = {};
  // 1. Without a token the page refuses to connect, and the API answers 401.
  const anon = await openViewer(browser, '');
  await anon.waitForSelector('#login:not([hidden])', { timeout: 10000 });
  const anonState = await anon.evaluate(async () => ({
    pc: window.__ef.pc !== null, error: window.__ef.error,
    offer: (await fetch('/api/offer', { method: 'POST', body: '{}' })).status,
    wrong: (await fetch('/api/session', { headers: { Authorization: 'Bearer wrong-token-wrong-token' } })).status,
  }));
  check(!anonState.pc, 'page without token created a peer connection');
  check(anonState.offer === 401 && anonState.wrong === 401, 'API without/with wrong token: ' + JSON.stringify(anonState));
  result.refused = anonState;
  await anon.close();
  log('refused without token:', JSON.stringify(anonState));

  // 2. With the view token: VP8 frames of the configured size are decoded.
  const page = await openViewer(browser, env.EF_VIEW_TOKEN);
  const vs = await poll(() => page.evaluate(videoStats), 'decoded frames', 20000);
  log('video:', JSON.stringify(vs));
  check(vs.width === W && vs.height === H, `frame size ${vs.width}x${vs.height}, want ${W}x${H}`);
  check(/video\/vp8/i.test(vs.codec), 'codec ' + vs.codec);
  result.video = vs;

  // 3. Data-channel messages parse.
  const dc = await poll(() => page.evaluate(() => {
    const e = window.__ef;
    return { ok: e.counts.hello >= 1 && e.counts.sample >= 5 && e.counts.stats >= 1, counts: e.counts, raw: e.lastRaw };
  }), 'data-channel messages', 10000);
  check(dc.counts.bad === 0, 'unparsable messages: ' + dc.counts.bad);
  const s = JSON.parse(dc.raw.startsWith('{"type":"sample"') ? dc.raw : await page.evaluate(() => JSON.stringify(window.__ef.lastSample)));
  for (const k of ['tick', 'energy', 'threshold', 'loop_hz', 'inference_ms']) check(typeof s[k] === 'number', `sample.${k} is ${typeof s[k]}`);
  check(s.state === 'RUNNING', 'state ' + s.state);
  check(Array.isArray(s.joints) && Array.isArray(s.planned), 'arm state arrays');
  result.datachannel = dc.counts;
  log('data channel:', JSON.stringify(dc.counts));

  // The Machine panel shows the stats message's stage latencies on one row.
  const stages = await poll(() => page.evaluate(() => {
    const row = [...document.querySelectorAll('#stats tr')].find((r) => r.querySelector('th')?.textContent === 'stages (ms p50/p90)');
    const text = row ? row.querySelector('td').textContent : '';
    return { ok: text === 'decode 1.2/1.9 · sample 48/61 (2.4/step)', text };
  }), 'the stages row', 5000);
  result.stages = stages.text;
  log('stages:', stages.text);

  // 4. The overlay is in the decoded video.
  const px = await poll(async () => {
    const r = await page.evaluate(readPixels, { probes: PROBES, stamp: STAMP });
    return { ...r, ok: r.probes.every(probeOK) };
  }, 'overlay pixels', 8000, 300);
  result.pixels = px;
  log('overlay probes:', JSON.stringify(px.probes), 'counter', px.counter);

  // 5. RESET needs the reset token.
  const reset = await page.evaluate(async (tok) => ({
    disabled: document.getElementById('reset').disabled,
    status: (await fetch('/api/reset', { method: 'POST', headers: { Authorization: 'Bearer ' + tok } })).status,
  }), env.EF_VIEW_TOKEN);
  check(reset.disabled && reset.status === 403, 'RESET with a view token: ' + JSON.stringify(reset));
  result.reset = reset;
  // The Episode panel is shown (the harness has episode control), its
  // buttons disabled for a view token, and its POST refused.
  await page.waitForSelector('#episode:not([hidden])', { timeout: 10000 });
  const epView = await page.evaluate(async (tok) => ({
    disabled: ['ep-new', 'ep-next', 'ep-select'].every((id) => document.getElementById(id).disabled),
    status: (await fetch('/api/episode', { method: 'POST', headers: { Authorization: 'Bearer ' + tok }, body: '{"level":"L"}' })).status,
  }), env.EF_VIEW_TOKEN);
  check(epView.disabled && epView.status === 403, 'Episode panel with a view token: ' + JSON.stringify(epView));

  // 6. STOP from the page reaches the controller; the page shows STOPPED.
  await page.click('#stop');
  await page.waitForFunction(() => document.getElementById('state').textContent.startsWith('STOPPED'), null, { timeout: 10000 });
  await page.waitForFunction(() => document.querySelector('#events .kind.stop') !== null, null, { timeout: 10000 });
  // 7. Events carry their own wall-clock time: a second stop 2.2 s later
  //    shows another time in the list (every event once read the same time).
  await sleep(2200);
  const second = await page.evaluate(async (tok) => (await fetch('/api/stop', {
    method: 'POST', headers: { Authorization: 'Bearer ' + tok }, body: '{"reason":"second stop"}' })).status, env.EF_VIEW_TOKEN);
  check(second === 200, 'second STOP: HTTP ' + second);
  await page.waitForFunction(() => document.querySelectorAll('#events .kind.stop').length >= 2, null, { timeout: 10000 });
  const times = await page.evaluate(() => [...document.querySelectorAll('#events li')]
    .filter((li) => li.querySelector('.kind.stop')).map((li) => li.querySelector('time').textContent));
  check(times.length === 2 && times[0] !== times[1], 'two stop events 2.2 s apart show times ' + JSON.stringify(times));
  result.eventTimes = times;
  log('event times:', JSON.stringify(times));
  await sleep(600); // let the overlay show the stop in the video
  mkdirSync(ARTIFACTS, { recursive: true });
  const shot = join(ARTIFACTS, 'telemetry-e2e.png');
  await page.screenshot({ path: shot });
  result.screenshot = shot;
  log('stopped; screenshot', shot);
  await page.close();

  // 8. With the reset token, the robot STOPPED and every reset refused (the
  //    harness): RESET shows the gate's reason and what to do next to the
  //    buttons; "New episode" at level L reaches the episode control,
  //    re-arms (RUNNING) and clears the notice; "Next episodes at this
  //    level" sets S for the episodes after.
  const op = await openViewer(browser, env.EF_RESET_TOKEN);
  await op.waitForSelector('#episode:not([hidden])', { timeout: 10000 });
  await op.waitForFunction(() => document.getElementById('state').textContent.startsWith('STOPPED'), null, { timeout: 15000 });
  await op.waitForFunction(() => document.getElementById('ep-level').textContent === '0', null, { timeout: 10000 });
  await op.click('#reset');
  await op.waitForSelector('#refusal:not([hidden])', { timeout: 10000 });
  const refusal = await op.evaluate(() => ({
    reason: document.getElementById('refusal-reason').textContent, hint: document.getElementById('refusal-hint').textContent }));
  check(refusal.reason.includes('still above the threshold'), 'refused reset shows ' + JSON.stringify(refusal));
  check(refusal.hint.includes('start a new episode'), 'refused energy reset hint: ' + JSON.stringify(refusal));
  result.refusal = refusal;
  log('refused reset:', JSON.stringify(refusal));
  const shot2 = join(ARTIFACTS, 'telemetry-e2e-refused.png');
  await op.screenshot({ path: shot2, fullPage: true });
  await op.selectOption('#ep-select', 'L');
  await op.click('#ep-new');
  await op.waitForFunction(() => document.getElementById('state').textContent.startsWith('RUNNING'), null, { timeout: 10000 });
  await op.waitForSelector('#refusal', { state: 'hidden', timeout: 5000 });
  await op.waitForFunction(() => document.getElementById('ep-level').textContent === 'L'
    && document.getElementById('ep-number').textContent === '2', null, { timeout: 10000 });
  await op.selectOption('#ep-select', 'S');
  await op.click('#ep-next');
  await op.waitForFunction(() => document.getElementById('ep-pending').textContent === 'level S', null, { timeout: 10000 });
  result.episode = await op.evaluate(() => ({ level: document.getElementById('ep-level').textContent,
    pending: document.getElementById('ep-pending').textContent, status: document.getElementById('ep-status').textContent }));
  log('episode:', JSON.stringify(result.episode));
  await op.close();
  return result;
}

// Installs a requestVideoFrameCallback reader that records (counter, time).
const installReader = (stamp) => {
  const v = document.getElementById('video');
  const c = document.createElement('canvas');
  const g = c.getContext('2d', { willReadFrequently: true });
  window.__readings = [];
  const onFrame = (now) => {
    if (c.width !== v.videoWidth) { c.width = v.videoWidth; c.height = v.videoHeight; }
    g.drawImage(v, 0, 0);
    const row = g.getImageData(0, stamp.y0 + (stamp.bs >> 1), stamp.x0 + 16 * stamp.bs, 1).data;
    let n = 0;
    for (let i = 0; i < 16; i++) {
      const o = (stamp.x0 + i * stamp.bs + (stamp.bs >> 1)) * 4;
      if (row[o] + row[o + 1] + row[o + 2] > 3 * 128) n |= 1 << (15 - i);
    }
    window.__readings.push([n, performance.timeOrigin + now]);
    v.requestVideoFrameCallback(onFrame);
  };
  v.requestVideoFrameCallback(onFrame);
};

async function bench(browser) {
  const pages = [];
  const phases = [];
  for (const n of [1, 4]) {
    while (pages.length < n) pages.push(await openViewer(browser, env.EF_VIEW_TOKEN));
    for (const p of pages) await poll(() => p.evaluate(videoStats), 'decoded frames', 20000);
    await pages[0].evaluate(installReader, STAMP);
    await sleep(1000);
    await pages[0].evaluate(() => { window.__readings = []; });
    const before = await Promise.all(pages.map((p) => p.evaluate(videoStats)));
    console.log(`READY ${n}`);
    await sleep(BENCH_MS);
    const readings = await pages[0].evaluate(() => window.__readings);
    const after = await Promise.all(pages.map((p) => p.evaluate(videoStats)));
    const decodedFps = after.map((a, i) => (a.framesDecoded - before[i].framesDecoded) / (BENCH_MS / 1000));
    const phase = { viewers: n, readings, decodedFps };
    console.log(`DONE ${n} ${JSON.stringify(phase)}`);
    phases.push({ viewers: n, decodedFps, readings: readings.length });
  }
  return { phases };
}

const browser = await launchChromium(chromium);
let code = 0;
try {
  const result = MODE === 'bench' ? await bench(browser) : await e2e(browser);
  console.log('RESULT ' + JSON.stringify({ ok: true, ...result }));
} catch (e) {
  console.error('FAIL: ' + (e instanceof Failure ? e.message : e.stack));
  console.log('RESULT ' + JSON.stringify({ ok: false, error: String(e.message) }));
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
