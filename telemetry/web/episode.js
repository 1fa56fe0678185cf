// EnergyFlow live view: the Episode panel (a simulated robot's episodes:
// level, seed, number; "New episode" and "Next episodes at this level") and
// the notice of a refused reset. Built on app.js's shared hook (window.ef).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const ef = window.ef;
  if (!ef || !ef.on) return;

  // --- Refused reset: the gate's reason, next to the buttons, and what to do.

  let hasEpisodes = false;
  // An energy (state) stop: the gate's kind "energy", or its message.
  const energyStop = (text) => /out of distribution|(^|\): )energy: |still above the threshold/.test(text || '');
  const oodHint = () => 'The arm stands in a state the policy has not seen: ' +
    (hasEpisodes ? 'start a new episode, or use recovery (jog/retrace) to bring it back.' : 'use recovery (jog/retrace) to bring it back.');

  function showRefusal(reason) {
    const last = ef.lastSample || {};
    const hint = energyStop(reason) || energyStop(last.reason) ? oodHint() : '';
    $('refusal-reason').textContent = reason;
    $('refusal-hint').textContent = hint;
    $('refusal-hint').hidden = !hint;
    $('refusal').hidden = false;
    $('cmd-status').textContent = 'reset refused (below)';
  }
  const hideRefusal = () => { $('refusal').hidden = true; };

  ef.on('command', (c) => {
    if (!c.path.endsWith('/reset')) return;
    if (c.ok) hideRefusal(); else showRefusal(c.error || 'HTTP ' + c.status);
  });
  ef.on('sample', (m) => { if (m.state === 'RUNNING' && !$('refusal').hidden) hideRefusal(); });

  // --- Episode panel: only when the robot has episode control.

  let busy = false, canReset = false, chosen = false;

  function setStatus(text, error) {
    const st = $('ep-status');
    st.textContent = text;
    st.className = 'cmd-status' + (error ? ' error' : '');
  }

  function enable() {
    for (const id of ['ep-select', 'ep-new', 'ep-next']) $(id).disabled = !canReset || busy;
  }

  function show(e) {
    $('ep-level').textContent = e.level;
    $('ep-seed').textContent = e.seed;
    $('ep-number').textContent = e.episode;
    $('ep-pending').textContent = e.pending_level ? 'level ' + e.pending_level : 'same level';
    if (!chosen) $('ep-select').value = e.pending_level || e.level; // until the operator picks one
  }

  async function refresh() {
    try {
      const res = await ef.api('/api/episode');
      const j = await res.json().catch(() => ({}));
      if (res.ok) show(j); else setStatus('episode: ' + (j.error || res.status), true);
    } catch (e) { /* the connection indicator says it */ }
  }

  async function send(path, doing) {
    const level = $('ep-select').value;
    busy = true; enable();
    setStatus(doing);
    try {
      const res = await ef.api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ level }) });
      const j = await res.json().catch(() => ({}));
      if (!res.ok) setStatus('refused: ' + (j.error || res.status), true);
      else if (path === '/api/episode') { setStatus('episode ' + j.episode + ' at level ' + j.level + ' (seed ' + j.seed + ')'); show(j); }
      else setStatus('the next episodes start at level ' + level);
    } catch (e) {
      setStatus('failed: ' + e, true);
    }
    busy = false; enable();
    refresh();
  }

  ef.on('session', (s) => {
    if (!s.episode_control || hasEpisodes) return;
    hasEpisodes = true;
    canReset = !!s.can_reset;
    const sel = $('ep-select');
    sel.replaceChildren(...(s.episode_levels || []).map((l) => {
      const o = document.createElement('option');
      o.value = l; o.textContent = l;
      return o;
    }));
    sel.addEventListener('change', () => { chosen = true; });
    $('ep-new').addEventListener('click', () => send('/api/episode', 'starting a new episode…'));
    $('ep-next').addEventListener('click', () => send('/api/episode/level', 'setting the level…'));
    enable();
    $('episode').hidden = false;
    refresh();
    setInterval(refresh, 2000);
  });
})();
