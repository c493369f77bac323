// normsim dashboard: live updates for server-rendered pages.
//
// The server renders every page (html/template); this file only keeps it
// current. It listens to the event stream (GET /api/v1/events) and, when an
// event concerns the page, fetches the page again and swaps in each region
// marked data-live. Forms are never replaced, so nothing typed is lost.
// EventSource reconnects by itself; after any reconnect (a restart of
// normsim) the page refreshes and picks up the new CSRF token.
(function () {
  'use strict';

  var body = document.body;
  var page = body.dataset.page;
  if (!page || page === 'error') return;

  // The canonical address: a refused form is rendered at its POST address,
  // which must not be fetched again (or reloaded) with GET.
  var refreshURL = body.dataset.refresh || location.pathname + location.search;
  if (body.dataset.refresh && location.pathname + location.search !== body.dataset.refresh) {
    history.replaceState(null, '', body.dataset.refresh);
  }

  // ---------------------------------------------------------------- status

  var live = document.getElementById('live');
  function setLive(state, text) {
    if (!live) return;
    if (live.dataset.state === state) return;
    live.dataset.state = state;
    live.querySelector('.live-text').textContent = text;
  }

  // --------------------------------------------------------------- refresh

  var refreshing = false, pending = false, timer = null, gone = false;

  function schedule(delay) {
    if (timer !== null) return;
    timer = setTimeout(function () { timer = null; refresh(); }, delay === undefined ? 120 : delay);
  }

  function refresh() {
    if (refreshing) { pending = true; return; }
    refreshing = true;
    fetch(refreshURL, { headers: { 'Accept': 'text/html' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) {
        return res.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, 'text/html');
          if (res.status === 404) { markGone(doc); return; }
          if (!res.ok) return;
          swap(doc);
        });
      })
      .catch(function () { /* normsim is down: the event stream reconnects and refreshes */ })
      .then(function () {
        refreshing = false;
        if (pending) { pending = false; schedule(); }
      });
  }

  // swap replaces each live region whose content changed, keeping focus and
  // the selected timeline event.
  function swap(doc) {
    var active = document.activeElement;
    var focusKey = active && active !== body ? keyOf(active) : null;
    document.querySelectorAll('[data-live][id]').forEach(function (el) {
      var fresh = doc.getElementById(el.id);
      if (!fresh || fresh.innerHTML === el.innerHTML) return;
      el.replaceWith(document.importNode(fresh, true));
    });
    var tok = doc.querySelector('meta[name="csrf-token"]');
    if (tok) {
      document.querySelectorAll('input[name="csrf"]').forEach(function (i) { i.value = tok.content; });
      var meta = document.querySelector('meta[name="csrf-token"]');
      if (meta) meta.content = tok.content;
    }
    body.toggleAttribute('data-ended', doc.body.hasAttribute('data-ended'));
    if (doc.title) document.title = doc.title;
    if (focusKey && !document.contains(active)) {
      var again = document.querySelector(focusKey);
      if (again) again.focus({ preventScroll: true });
    }
    highlight();
    tickClock();
  }

  function keyOf(el) {
    if (el.id) return '#' + CSS.escape(el.id);
    if (el.dataset && el.dataset.seq) {
      return el.tagName.toLowerCase() + '.' + CSS.escape(el.classList[0] || '') + '[data-seq="' + CSS.escape(el.dataset.seq) + '"]';
    }
    return null;
  }

  function markGone(doc) {
    if (gone) return;
    gone = true;
    var msg = doc.getElementById('error-message');
    var div = document.createElement('div');
    div.className = 'alert bad';
    div.setAttribute('role', 'alert');
    div.textContent = (msg ? msg.textContent.trim() : 'This no longer exists.') + ' The page shows its last known state.';
    var main = document.getElementById('main');
    main.insertBefore(div, main.firstChild);
    stopLog('the instance is gone');
  }

  // ----------------------------------------------------------- event stream

  var es = null, backoff = 1000;

  function relevant(ev) {
    switch (page) {
      case 'migration': return ev.migration === body.dataset.migration;
      case 'migrations': return ev.kind.indexOf('migration.') === 0;
      case 'instance': return ev.instance === body.dataset.instance || ev.kind.indexOf('migration.') === 0;
      // A run's cases launch and migrate jobs all the time: only the run's
      // own progress refreshes its pages.
      case 'conformance': return ev.kind === 'conformance.run';
      case 'conformance-run': return ev.kind === 'conformance.run' && !!ev.data && ev.data.id === body.dataset.conformance;
      default: return true;
    }
  }

  function onEvent(e) {
    var ev;
    try { ev = JSON.parse(e.data); } catch (_) { return; }
    if (gone || !relevant(ev)) return;
    schedule();
  }

  function connect() {
    es = new EventSource('/api/v1/events');
    es.onopen = function () {
      setLive('live', 'live');
      backoff = 1000;
      // Catch up on whatever happened before (or while) the stream was
      // down, including between rendering the page and subscribing.
      schedule(0);
      if (logWanted && !logRunning) startLog();
    };
    es.onerror = function () {
      setLive('reconnecting', 'reconnecting…');
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. an error status): retry ourselves.
        es.close();
        setTimeout(connect, backoff);
        backoff = Math.min(backoff * 2, 10000);
      }
    };
    // The stream fell too far behind and is about to end: the browser
    // reconnects, and the refresh on opening catches up.
    es.addEventListener('dropped', function () { setLive('reconnecting', 'fell behind: catching up…'); });
    ['instance.state', 'instance.connected', 'instance.removed', 'instance.runtime',
      'migration.event', 'migration.ended', 'conformance.run'].forEach(function (k) { es.addEventListener(k, onEvent); });
    es.onmessage = onEvent;
  }
  connect();
  window.addEventListener('pagehide', function () { if (es) es.close(); });

  // ------------------------------------------------------------- timeline

  var selected = null;

  function select(seq) {
    selected = seq;
    var tpl = document.getElementById('payload-' + seq);
    var out = document.getElementById('frame-detail-body');
    var head = document.getElementById('fd-h');
    if (tpl && out) {
      out.replaceChildren(tpl.content.cloneNode(true));
      if (head) head.textContent = tpl.content.querySelector('pre, .empty') ? 'Frame #' + seq : 'Event #' + seq;
    }
    highlight();
  }

  function highlight() {
    document.querySelectorAll('.mark.selected, tr.selected').forEach(function (x) { x.classList.remove('selected'); });
    if (selected === null) return;
    document.querySelectorAll('.mark[data-seq="' + selected + '"], tr[data-seq="' + selected + '"]').forEach(function (x) {
      x.classList.add('selected');
    });
  }

  // The running clock of a migration in progress.
  function tickClock() {
    var el = document.getElementById('elapsed');
    if (!el || body.hasAttribute('data-ended')) return;
    var ms = Date.now() - Number(el.dataset.start);
    // As sim.FormatMs formats it on the server and in the CLI.
    el.textContent = ms < 9999.95 ? Math.max(0, ms).toFixed(1) + ' ms' : (ms / 1000).toFixed(3) + ' s';
  }
  if (page === 'migration') {
    setInterval(tickClock, 100);
    // While it runs, the axis grows with the present even between events.
    setInterval(function () {
      if (!body.hasAttribute('data-ended') && !gone && !document.hidden) schedule(0);
    }, 1000);
  }

  // ----------------------------------------------------------------- clicks

  document.addEventListener('click', function (e) {
    var t = e.target.closest('[data-seq]');
    if (t && (t.closest('#timeline') || t.closest('#events') || t.closest('#logs'))) { select(t.dataset.seq); return; }
    var c = e.target.closest('[data-copy]');
    if (c) copy(c);
  });

  function copy(btn) {
    var src = document.querySelector(btn.dataset.copy);
    if (!src) return;
    var text = src.textContent;
    var done = function () {
      var was = btn.textContent;
      btn.textContent = 'Copied';
      setTimeout(function () { btn.textContent = was; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectText(src); });
    } else {
      selectText(src);
    }
  }

  function selectText(el) {
    var r = document.createRange();
    r.selectNodeContents(el);
    var s = window.getSelection();
    s.removeAllRanges();
    s.addRange(r);
  }

  // A form is sent once: its buttons are disabled right after the click
  // (after, so the clicked button's name and value are still submitted).
  document.addEventListener('submit', function (e) {
    var form = e.target;
    form.setAttribute('aria-busy', 'true');
    setTimeout(function () {
      form.querySelectorAll('button[type="submit"]').forEach(function (b) { b.disabled = true; });
    }, 0);
  });
  // Coming back with the back button shows the page from the cache: enable
  // its buttons again.
  window.addEventListener('pageshow', function (e) {
    if (!e.persisted) return;
    document.querySelectorAll('form[aria-busy]').forEach(function (f) {
      f.removeAttribute('aria-busy');
      f.querySelectorAll('button[type="submit"]:not([data-off])').forEach(function (b) { b.disabled = false; });
    });
    schedule(0);
  });
  document.querySelectorAll('button[disabled]').forEach(function (b) { b.dataset.off = '1'; });

  // --------------------------------------------------------------- log tail

  var logEl = document.getElementById('log');
  var logStatus = document.getElementById('log-status');
  var follow = document.getElementById('log-follow');
  var logWanted = !!logEl, logRunning = false, logCtl = null, logGen = 0;
  var maxLogChars = 400000;

  function say(text) { if (logStatus) logStatus.textContent = text; }

  function stopLog(why) {
    logWanted = false;
    logGen++;
    if (logCtl) logCtl.abort();
    logRunning = false;
    say(why);
  }

  function terminal() {
    var st = document.getElementById('status');
    return st && st.dataset.terminal === 'true';
  }

  function append(text) {
    if (!text) return;
    var atBottom = logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 40;
    logEl.append(text);
    if (logEl.textContent.length > maxLogChars) {
      var keep = logEl.textContent.slice(-maxLogChars * 0.75);
      keep = keep.slice(keep.indexOf('\n') + 1);
      logEl.textContent = keep;
    }
    if (follow && follow.checked && atBottom) logEl.scrollTop = logEl.scrollHeight;
  }

  function startLog() {
    if (!logEl || !logWanted) return;
    var gen = ++logGen;
    if (logCtl) logCtl.abort();
    logCtl = new AbortController();
    logRunning = true;
    say('connecting…');
    fetch(logEl.dataset.src, { signal: logCtl.signal, cache: 'no-store', credentials: 'same-origin' })
      .then(function (res) {
        if (res.status === 404) { stopLog('no logs: the instance is gone'); return; }
        if (logEl.hasAttribute('data-once')) logWanted = false; // external: nothing to follow
        if (!res.ok || !res.body) throw new Error('status ' + res.status);
        // Each stream starts with the whole buffer again.
        logEl.textContent = '';
        say(terminal() ? 'complete' : 'following');
        var reader = res.body.getReader();
        var dec = new TextDecoder();
        var pump = function () {
          return reader.read().then(function (r) {
            if (gen !== logGen) { reader.cancel(); return; }
            if (r.done) { append(dec.decode()); return; }
            append(dec.decode(r.value, { stream: true }));
            return pump();
          });
        };
        return pump();
      })
      .then(function () {
        if (gen !== logGen) return;
        logRunning = false;
        if (!logWanted) { if (logEl.hasAttribute('data-once')) say('external instance: its log is wherever you run it'); return; }
        if (terminal()) { say('instance stopped · log complete'); return; }
        say('stream ended · reconnecting…');
        setTimeout(function () { if (gen === logGen) startLog(); }, 1500);
      })
      .catch(function () {
        if (gen !== logGen) return;
        logRunning = false;
        say('disconnected · retrying…');
        setTimeout(function () { if (gen === logGen) startLog(); }, 2000);
      });
  }
  if (logEl) {
    startLog();
    document.getElementById('log-clear').addEventListener('click', function () { logEl.textContent = ''; });
    if (follow) follow.addEventListener('change', function () {
      if (follow.checked) logEl.scrollTop = logEl.scrollHeight;
    });
  }
})();
