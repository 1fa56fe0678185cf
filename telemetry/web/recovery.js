// EnergyFlow live view: the Recovery panel — the safety gate's way out of
// an energy stop (docs/safety.md, "Recovery mode"). "Retrace" drives the
// arm back along the path it came, "Jog" lets the operator move it with
// the ± buttons (resent every 100 ms while held: the gate stops the arm
// when they stop coming), at a fraction of the speed; the gate re-arms by
// itself once the scores are back under the threshold. Also says, while
// stopped, what a reset would be refused for. Shown to a reset token only.
// Built on app.js's shared hook (window.ef).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const ef = window.ef;
  if (!ef || !ef.on) return;

  const JOG_EVERY_MS = 100;
  let info = null, state = '', mode = '', hasEpisodes = false;
  let jogTimer = null, jogBusy = false;

  function setStatus(text, error) {
    $('rc-status').textContent = text;
    $('rc-status').className = 'cmd-status' + (error ? ' error' : '');
  }

  function showRefused(text) {
    $('rc-refused').textContent = text || '';
    $('rc-refused').hidden = !text;
  }

  async function post(path, body) {
    const res = await ef.api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const j = await res.json().catch(() => ({}));
    return { ok: res.ok, status: res.status, error: j.error || (res.ok ? '' : 'HTTP ' + res.status) };
  }

  async function recover(m) {
    setStatus('starting ' + m + '…');
    showRefused('');
    try {
      const r = await post('/api/recover', { mode: m });
      if (r.ok) setStatus('recovering (' + m + ')');
      else { setStatus('refused', true); showRefused(r.error); }
    } catch (e) {
      setStatus('failed: ' + e, true);
    }
  }

  // --- Jog: one ± button per command axis, a dead-man while held.

  function stopJog() {
    if (jogTimer !== null) clearInterval(jogTimer);
    jogTimer = null;
    for (const b of $('rc-jogpad').querySelectorAll('button')) b.classList.remove('held');
  }

  async function sendJog(v) {
    if (jogBusy) return; // never queue: a late jog must not move the arm after release
    jogBusy = true;
    try {
      const r = await post('/api/jog', { v });
      if (!r.ok) { stopJog(); showRefused(r.error); }
    } catch (e) {
      stopJog();
      setStatus('jog failed: ' + e, true);
    }
    jogBusy = false;
  }

  function startJog(btn, axis, sign) {
    stopJog();
    const v = new Array(info.axes).fill(0);
    v[axis] = sign;
    btn.classList.add('held');
    sendJog(v);
    jogTimer = setInterval(() => sendJog(v), JOG_EVERY_MS);
  }

  const axisName = (i) => (i < 3 ? 'XYZ'[i] : 'A' + (i + 1));

  function buildJogPad(axes) {
    const pad = $('rc-jogpad');
    pad.replaceChildren();
    for (let i = 0; i < axes; i++) {
      for (const sign of [-1, 1]) {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'jog';
        b.textContent = (sign < 0 ? '−' : '+') + axisName(i);
        b.title = 'hold to move axis ' + axisName(i) + (sign < 0 ? ' back' : ' forward');
        b.addEventListener('pointerdown', (e) => { e.preventDefault(); startJog(b, i, sign); });
        for (const ev of ['pointerup', 'pointerleave', 'pointercancel']) b.addEventListener(ev, stopJog);
        pad.append(b);
      }
    }
  }
  window.addEventListener('blur', stopJog);
  document.addEventListener('visibilitychange', () => { if (document.hidden) stopJog(); });

  // --- State from the samples.

  function update(m) {
    state = m.state;
    mode = m.recovery || '';
    const recovering = state === 'RECOVERING';
    $('rc-retrace').disabled = !(state === 'STOPPED' || (recovering && mode !== 'retrace'));
    $('rc-jog').disabled = !(state === 'STOPPED' || (recovering && mode !== 'jog'));
    $('rc-jogpad').hidden = !(recovering && mode === 'jog');
    if (!recovering) stopJog();
    if (recovering) {
      const left = m.recovery_left === null || m.recovery_left === undefined ? '' : ', ' + Math.max(0, Math.ceil(m.recovery_left)) + ' s left';
      setStatus('recovering (' + mode + ')' + left);
      showRefused('');
    } else if (state === 'RUNNING' && $('rc-status').textContent.startsWith('recovering')) {
      setStatus('re-armed: the scores are back under the threshold');
    }
    const block = m.reset_block || '';
    const what = hasEpisodes ? ' — start a new episode or recover' : ' — recover, or move the scene back';
    $('rc-block').textContent = block ? (recovering ? 're-arms when clear: ' + block : 'reset will be refused: ' + block + (block.startsWith('energy:') ? what : '')) : '';
    $('rc-block').hidden = !block || state === 'RUNNING';
  }

  // Every viewer sees RECOVERING in amber, not as a stop.
  ef.on('sample', (m) => { if (m.state === 'RECOVERING') $('state').className = 'state recovering'; });

  ef.on('session', (s) => {
    const r = s.recovery || {};
    if (!r.available) return;
    info = r;
    hasEpisodes = !!s.episode_control;
    $('recovery').hidden = false;
    $('rc-note').textContent = 'at ' + Math.round(100 * r.speed_fraction) + ' % speed, for at most ' + r.time_limit_s + ' s; re-arms by itself once the scores are back under the threshold';
    buildJogPad(r.axes);
    $('rc-retrace').addEventListener('click', () => recover('retrace'));
    $('rc-jog').addEventListener('click', () => recover('jog'));
    ef.on('sample', update);
  });
})();
