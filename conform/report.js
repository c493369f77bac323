// The report works without this script; it only opens the case a link or
// the address names, makes a whole table row a link, and filters the
// table by grade. The page's CSP allows this script and nothing else.
(function () {
  'use strict';
  function openId(id) {
    var el = id && document.getElementById(id);
    if (!el) return;
    if (el.tagName === 'DETAILS') el.open = true;
  }
  function openHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    openId(id);
    var el = id && document.getElementById(id);
    if (el) el.scrollIntoView({block: 'start'});
  }
  // Open before the link's own navigation scrolls, so a click on the case
  // already in the address (whose details were closed again) opens it too.
  document.addEventListener('click', function (e) {
    var a = e.target.closest('a[href^="#"]');
    if (a) { openId(decodeURIComponent(a.getAttribute('href').slice(1))); return; }
    var tr = e.target.closest('tr[data-href]');
    if (tr && !window.getSelection().toString()) tr.querySelector('a').click();
  });
  window.addEventListener('hashchange', openHash);
  openHash();

  var only = '';
  var badges = document.querySelectorAll('button[data-grade]');
  badges.forEach(function (b) {
    b.addEventListener('click', function () {
      only = only === b.dataset.grade ? '' : b.dataset.grade;
      badges.forEach(function (x) { x.setAttribute('aria-pressed', String(x.dataset.grade === only)); });
      document.querySelectorAll('#cases tbody').forEach(function (tb) {
        var shown = 0;
        tb.querySelectorAll('tr.case').forEach(function (tr) {
          tr.hidden = only !== '' && tr.dataset.grade !== only;
          if (!tr.hidden) shown++;
        });
        tb.hidden = shown === 0;
      });
    });
  });
  function openAll(open) {
    document.querySelectorAll('details.case').forEach(function (d) { d.open = open; });
  }
  document.getElementById('open-all').addEventListener('click', function () { openAll(true); });
  document.getElementById('close-all').addEventListener('click', function () { openAll(false); });
})();
