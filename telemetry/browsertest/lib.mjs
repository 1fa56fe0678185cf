// Helpers shared by the browser scripts: e2e.mjs (the end-to-end test) and
// screenshot.mjs (the demo's screenshots for the docs).

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Failure is a check that did not hold: the scripts report it in one line.
export class Failure extends Error {}
export function check(cond, msg) { if (!cond) throw new Failure(msg); }

// poll calls fn until it returns an object with ok set, every everyMs, for
// at most timeoutMs; then it fails naming what it waited for and the last
// answer.
export async function poll(fn, what, timeoutMs = 15000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last && last.ok) return last;
    await sleep(everyMs);
  }
  throw new Failure(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}: last ${JSON.stringify(last)}`);
}

// Runs in the page: inbound video stats from getStats(); ok once 10 frames
// are decoded.
export const videoStats = async () => {
  const pc = window.__ef && window.__ef.pc;
  if (!pc) return { ok: false, why: 'no peer connection', error: window.__ef && window.__ef.error };
  const stats = await pc.getStats();
  let inbound = null; const codecs = {};
  stats.forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'video') inbound = s;
    if (s.type === 'codec') codecs[s.id] = s;
  });
  if (!inbound) return { ok: false, why: 'no inbound-rtp video', state: pc.connectionState };
  const codec = codecs[inbound.codecId] ? codecs[inbound.codecId].mimeType : '';
  return { ok: (inbound.framesDecoded || 0) >= 10, framesDecoded: inbound.framesDecoded || 0,
    width: inbound.frameWidth, height: inbound.frameHeight, codec, state: pc.connectionState };
};

// launchChromium starts Debian's Chromium (or executablePath) headless and
// offline: every host but loopback is unresolvable.
export function launchChromium(chromium, executablePath = '/usr/bin/chromium') {
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
}
