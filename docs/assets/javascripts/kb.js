/* Small behaviours of the knowledge-base site (no dependencies; Material's document$).
 *
 * 1. Row filters on index and matrix pages: a text box and optional selects above a
 *    table (or groups of tables) hide the rows that do not match.
 * 2. "Did you mean" in the search box: lunr only knows exact terms and prefixes, so a
 *    mistyped operator name (npu_mla_prolog_v4) finds nothing useful.  The closest
 *    record names (from assets/kb-names.json, generated from the records) are offered
 *    above the results, linking straight to the record's page.
 * 3. Search as the text changes, not only on a key: Material starts a query on keyup,
 *    so a pasted query or one an input method composes (权重预取) would wait for another
 *    key.  Every change of the box's value is passed on as the keyup Material listens for.
 */
(function () {
  "use strict";

  function siteRoot() {
    var config = document.getElementById("__config");
    var base = ".";
    try { base = JSON.parse(config.textContent).base || "."; } catch (e) { /* keep . */ }
    return new URL(base.replace(/\/?$/, "/"), location.href).href;
  }

  /* ---- 1. filters ---------------------------------------------------------------- */

  function rowMatches(row, text, selects) {
    if (text && row.textContent.toLowerCase().indexOf(text) < 0) return false;
    for (var i = 0; i < selects.length; i++) {
      var sel = selects[i];
      if (!sel.value) continue;
      var attr = sel.getAttribute("data-kb-attr");
      var have = row.getAttribute(attr);
      if (have === null) return false;
      if (sel.getAttribute("data-kb-mode") === "bits") {
        var bit = parseInt(sel.value, 10);
        var digit = have.length - 1 - Math.floor(bit / 4);
        if (digit < 0 || !(parseInt(have.charAt(digit), 16) & (1 << (bit % 4)))) return false;
      } else if ((" " + have + " ").indexOf(" " + sel.value + " ") < 0) {
        return false;
      }
    }
    return true;
  }

  function applyFilter(box) {
    var input = box.querySelector("input[type=search]");
    var text = input ? input.value.trim().toLowerCase() : "";
    var selects = box.querySelectorAll("select[data-kb-attr]");
    var scope = document.getElementById(box.getAttribute("data-kb-filter")) || box.parentNode;
    var shown = 0;
    var groups = scope.querySelectorAll("[data-kb-group]");
    var units = groups.length ? groups : [scope];
    for (var g = 0; g < units.length; g++) {
      var rows = units[g].querySelectorAll("tbody tr");
      var visible = 0;
      for (var r = 0; r < rows.length; r++) {
        var ok = rowMatches(rows[r], text, selects);
        rows[r].hidden = !ok;
        if (ok) visible++;
      }
      if (groups.length) units[g].hidden = visible === 0;
      shown += visible;
    }
    var count = box.querySelector("[data-kb-count]");
    if (count) count.textContent = shown + " shown";
  }

  function setUpFilters() {
    var boxes = document.querySelectorAll("[data-kb-filter]");
    for (var i = 0; i < boxes.length; i++) {
      (function (box) {
        if (box.getAttribute("data-kb-ready")) return;
        box.setAttribute("data-kb-ready", "1");
        box.hidden = false;
        var controls = box.querySelectorAll("input, select");
        for (var c = 0; c < controls.length; c++) {
          controls[c].addEventListener("input", function () { applyFilter(box); });
          controls[c].addEventListener("change", function () { applyFilter(box); });
        }
        applyFilter(box);
      })(boxes[i]);
    }
  }

  /* ---- 2. did you mean ------------------------------------------------------------ */

  var names = null;      // [[name, url, current], ...] in preference order
  var namesBase = null;  // absolute URL of the site root

  function loadNames() {
    if (names !== null) return Promise.resolve(names);
    namesBase = siteRoot();
    return fetch(namesBase + "assets/kb-names.json")
      .then(function (r) { return r.ok ? r.json() : []; })
      .catch(function () { return []; })
      .then(function (got) { names = expand(got); return names; });
  }

  // [[name, url, current], ...] from kb-names.json: {"dirs", "names": [[name, current,
  // dir index or url]]} (site_plugins/names.py), or the plain list of a flat-URL site.
  function expand(got) {
    if (Array.isArray(got)) return got;
    return (got.names || []).map(function (e) {
      var url = typeof e[2] === "number" ? got.dirs[e[2]] + e[0] + "/" : e[2];
      return [e[0], url, e[1]];
    });
  }

  function fold(text) {
    return text.toLowerCase().replace(/^(torch_npu|torch\.ops\.npu|torch)\./, "").replace(/[^a-z0-9]/g, "");
  }

  // Optimal string alignment distance (a transposition counts as one edit), capped.
  function distance(a, b, cap) {
    if (Math.abs(a.length - b.length) > cap) return cap + 1;
    var prev2 = null, prev = [], cur;
    for (var j = 0; j <= b.length; j++) prev.push(j);
    for (var i = 1; i <= a.length; i++) {
      cur = [i];
      var best = i;
      for (j = 1; j <= b.length; j++) {
        var cost = a.charAt(i - 1) === b.charAt(j - 1) ? 0 : 1;
        var d = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
        if (prev2 && i > 1 && j > 1 && a.charAt(i - 1) === b.charAt(j - 2) &&
            a.charAt(i - 2) === b.charAt(j - 1)) d = Math.min(d, prev2[j - 2] + 1);
        cur.push(d);
        if (d < best) best = d;
      }
      if (best > cap) return cap + 1;
      prev2 = prev; prev = cur;
    }
    return prev[b.length];
  }

  // The closest current record names to the query (or to one of its snake_case
  // words), or [] when the query names a record exactly.
  function suggest(query) {
    var q = query.trim();
    if (q.length < 4 || !names) return [];
    var keys = [q].concat(q.split(/\s+/).filter(function (w) {
      return w.length >= 6 && w.indexOf("_") >= 0 && w !== q;
    }));
    var lower = q.toLowerCase();
    for (var n = 0; n < names.length; n++) if (names[n][0].toLowerCase() === lower) return [];
    var best = 99, found = [];
    keys.forEach(function (raw) {
      var key = fold(raw);
      if (key.length < 4) return;
      var cap = key.length >= 12 ? 2 : 1;
      for (var i = 0; i < names.length; i++) {
        var folded = fold(names[i][0]);
        var d = Math.min(distance(key, folded, cap), distance(key, folded.replace(/^npu/, ""), cap));
        if (d > cap) continue;
        if (d < best) { best = d; found = []; }
        if (d === best) found.push(names[i]);
      }
    });
    var current = found.filter(function (n) { return n[2]; });
    var seen = {};
    return (current.length ? current : found).filter(function (n) {
      if (seen[n[1]]) return false;
      seen[n[1]] = true;
      return true;
    }).slice(0, 3);
  }

  function render(box, query) {
    var picks = suggest(query);
    box.textContent = "";
    box.hidden = picks.length === 0;
    if (!picks.length) return;
    box.appendChild(document.createTextNode("Did you mean "));
    picks.forEach(function (pick, i) {
      if (i) box.appendChild(document.createTextNode(i === picks.length - 1 ? " or " : ", "));
      var a = document.createElement("a");
      a.href = new URL(pick[1], namesBase).href;
      a.className = "kb-didyoumean__link";
      a.textContent = pick[0];
      box.appendChild(a);
    });
    box.appendChild(document.createTextNode("?"));
  }

  function setUpDidYouMean() {
    var input = document.querySelector("input.md-search__input");
    var result = document.querySelector(".md-search-result");
    if (!input || !result || input.getAttribute("data-kb-ready")) return;
    input.setAttribute("data-kb-ready", "1");
    var box = document.createElement("div");
    box.className = "kb-didyoumean";
    box.hidden = true;
    var meta = result.querySelector(".md-search-result__meta");
    result.insertBefore(box, meta ? meta.nextSibling : result.firstChild);
    var update = function () {
      var query = input.value;
      loadNames().then(function () { if (input.value === query) render(box, query); });
    };
    input.addEventListener("input", update);
    input.addEventListener("keyup", update);
    input.addEventListener("focus", function () { loadNames(); });
  }

  /* ---- 3. search on input ---------------------------------------------------------- */

  function setUpSearchOnInput() {
    var input = document.querySelector("input.md-search__input");
    if (!input || input.getAttribute("data-kb-input")) return;
    input.setAttribute("data-kb-input", "1");
    var pass = function () { input.dispatchEvent(new KeyboardEvent("keyup")); };
    // mid-composition values are not queries yet; compositionend carries the result
    input.addEventListener("input", function (ev) { if (!ev.isComposing) pass(); });
    input.addEventListener("compositionend", pass);
  }

  function setUp() {
    setUpFilters();
    setUpDidYouMean();
    setUpSearchOnInput();
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(setUp);
  } else {
    document.addEventListener("DOMContentLoaded", setUp);
  }
})();
