// A viewer of the simulated robot demo, as a person watches it: Debian's
// Chromium (playwright-core) opens the live view with the demo's token and
// keeps the video playing for EF_WATCH_MS, then, with EF_LEVEL_CHECK=1,
// uses the page's Episode panel as an operator would: a new episode at
// level L (the stop must trip within EF_STOP_MS), then a new episode at
// level 0 (the arm must move again within 5 s of the click). Started by
// scripts/watch_demo.sh, which runs the demo and counts its stops and
// episodes from its log.
//
//   EF_URL (the live view, without the token), EF_TOKEN (the demo's printed
//   reset-scope token), EF_WATCH_MS, EF_LEVEL_CHECK, EF_STOP_MS (default
//   60000), EF_CHROMIUM, EF_SCREENSHOT (a PNG path for the end of the watch,
//   optional).
//
// Prints one line "RESULT {json}": frames decoded, samples received, and
// the level check's times; exit 1 with "FAIL: …" on stderr when a check
// does not hold.
import { chromium } from 'playwright-core';
import { Failure, check, launchChromium, poll, sleep, videoStats } from './lib.mjs';

const env = process.env;
const URL = env.EF_URL;
const TOKEN = env.EF_TOKEN || '';
const WATCH_MS = Number(env.EF_WATCH_MS || 60000);
const STOP_MS = Number(env.EF_STOP_MS || 60000);
const log = (...a) => console.error('[watch]', ...a);

// Runs in the page: the newest sample's state, tick and commanded speed.
const now = () => {
  const s = window.__ef.lastSample || {};
  const v = (s.velocities || []).reduce((a, x) => a + Math.abs(x), 0);
  return { state: s.state, tick: s.tick, reason: s.reason || '', speed: v, samples: window.__ef.counts.sample,
    refusal: document.getElementById('refusal').hidden ? '' : document.getElementById('refusal-reason').textContent };
};

// newEpisode picks level in the Episode panel and clicks "New episode".
async function newEpisode(page, level) {
  await page.selectOption('#ep-select', level);
  await page.click('#ep-new');
}

check(URL, 'EF_URL is required');
let browser;
try {
  browser = await launchChromium(chromium, env.EF_CHROMIUM || '/usr/bin/chromium');
} catch (e) {
  console.error('FAIL: cannot start Chromium: ' + String(e.message).split('\n')[0]);
  process.exit(1);
}
let code = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on('pageerror', (e) => log('page error:', e.message));
  await page.goto(URL + (TOKEN ? '#token=' + encodeURIComponent(TOKEN) : ''));
  const vs = await poll(() => page.evaluate(videoStats), 'decoded video frames', 60000);
  log('video:', JSON.stringify(vs));
  const t0 = Date.now();
  const f0 = vs.framesDecoded;
  let last = await page.evaluate(now);
  while (Date.now() - t0 < WATCH_MS) {
    await sleep(Math.min(5000, WATCH_MS - (Date.now() - t0)));
    const s = await page.evaluate(now);
    if (s.state !== last.state) log(`tick ${s.tick}: ${last.state} -> ${s.state} ${s.reason}`);
    last = s;
  }
  const vEnd = await page.evaluate(videoStats);
  const result = { ok: true, watched_s: Math.round((Date.now() - t0) / 1000), frames_decoded: vEnd.framesDecoded - f0,
    fps: (vEnd.framesDecoded - f0) / ((Date.now() - t0) / 1000), samples: last.samples, state_at_end: last.state };
  check(result.frames_decoded > 0, `no video frames decoded while watching (${JSON.stringify(vEnd)})`);
  if (env.EF_SCREENSHOT) await page.screenshot({ path: env.EF_SCREENSHOT });
  if (env.EF_LEVEL_CHECK === '1') {
    check(!(await page.evaluate(() => document.getElementById('ep-new').disabled)), 'the Episode panel is disabled: the token has no reset scope');
    result.check_started_at = new Date().toISOString();
    if ((await page.evaluate(now)).state !== 'RUNNING') {
      // Stopped (a stop latched while watched): the operator's way on first,
      // a new level-0 episode, so that the level-L stop is one of its own.
      const t = Date.now();
      await newEpisode(page, '0');
      await poll(() => page.evaluate(now).then((s) => ({ ...s, ok: s.state === 'RUNNING' && s.speed > 0 })),
        'the arm moving after "New episode" at level 0, before the level check', 10000, 50);
      result.unlatched_after_s = (Date.now() - t) / 1000;
      await sleep(2000);
    }
    const tL = Date.now();
    await newEpisode(page, 'L');
    const stopped = await poll(() => page.evaluate(now).then((s) => ({ ...s, ok: s.state === 'STOPPED' })),
      'a stop at level L', STOP_MS, 100);
    result.level_L = { stopped_after_s: (Date.now() - tL) / 1000, reason: stopped.reason };
    log('level L:', JSON.stringify(result.level_L));
    await sleep(2000); // the operator reads the page
    const t1 = Date.now();
    await newEpisode(page, '0');
    const moving = await poll(() => page.evaluate(now).then((s) => ({ ...s, ok: s.state === 'RUNNING' && s.speed > 0 })),
      'the arm moving again after "New episode" at level 0', 5000, 50);
    result.level_0_again = { moving_after_s: (Date.now() - t1) / 1000, tick: moving.tick };
    log('level 0 again:', JSON.stringify(result.level_0_again));
  }
  console.log('RESULT ' + JSON.stringify(result));
} catch (e) {
  console.error('FAIL: ' + (e instanceof Failure ? e.message : String(e.message).split('\n')[0]));
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
