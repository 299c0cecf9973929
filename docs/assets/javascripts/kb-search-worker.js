/* The site's search: the ranking of `kb search`, run in Material's search worker slot.
 *
 * site_plugins/search_index.py ships what the CLI ranks with (search/kb/docs.json and
 * term shards); this worker follows kb/index/search.py, names.py, fulltext.py, steps.py
 * and textanalysis.py step by step, with every constant read from docs.json.  A query
 * loads docs.json once and only the shards its words hash to.  Records come first, in
 * the CLI's order; hand-written and rule pages whose title holds every word follow.
 * Protocol (Material for MkDocs custom worker): SETUP 0 → READY 1; QUERY 2 → RESULT 3.
 * Every table keyed by text (a query word, a name, a term) is a Map: a plain object
 * answers "constructor", "__proto__" or "toString" from its prototype.
 */
"use strict";

var ROOT = new URL("../../", self.location.href).href;
var DIR = ROOT + "search/kb/";
var head = null;       // docs.json
var shards = new Map();  // shard number → promise of its JSON
var latest = 0;

var CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff";
var TOKEN = new RegExp("[" + CJK + "]+|[A-Za-z0-9][A-Za-z0-9_.\\-]*", "g");
var CJK_RUN = new RegExp("^[" + CJK + "]+$");
var PARTS = /[_.\-]+/;
var IDENT = /^[A-Za-z_][A-Za-z0-9_.]*$/;
var INPLACE = /in[- ]?place|原地/;
var DTYPE_WORD = /[a-z]*\d[a-z0-9]*/gi;
var ALPHA = /^\p{L}+$/u;

function load(url) {
  return fetch(url).then(function (r) {
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  });
}

function shardOf(text) {
  var sum = 0;
  for (var ch of text) sum += ch.codePointAt(0);
  return sum % head.k.SHARDS;
}

function shard(text) {
  var n = shardOf(text);
  if (!shards.has(n)) shards.set(n, load(DIR + "s" + n + ".json"));
  return shards.get(n);
}

/* ---- tokens (kb/index/textanalysis.py); stems come from the shards ---- */

function stripChars(word, chars) {
  var a = 0, b = word.length;
  while (a < b && chars.indexOf(word[a]) >= 0) a++;
  while (b > a && chars.indexOf(word[b - 1]) >= 0) b--;
  return word.slice(a, b);
}

function isAlpha(word) { return ALPHA.test(word); }

/* The words whose stems a text needs, so their shards load before tokenizing. */
function stemWords(text) {
  var out = [];
  var m = text.match(TOKEN) || [];
  m.forEach(function (chunk) {
    if (CJK_RUN.test(chunk)) return;
    stripChars(chunk.toLowerCase(), "._-").split(PARTS).forEach(function (p) {
      if (p.length > 3 && /^[a-z]+$/.test(p)) out.push(p);
    });
  });
  return out;
}

function makeStemmer(stems) {
  return function (word) {
    if (word.length <= 3 || !/^[a-z]+$/.test(word)) return word;
    return stems.has(word) ? stems.get(word) : word;
  };
}

function tokens(text, query, stem) {
  var stop = head.stopSet, out = [];
  var m = text.match(TOKEN) || [];
  m.forEach(function (chunk) {
    if (CJK_RUN.test(chunk)) {
      var chars = Array.from(chunk);
      if (chars.length === 1 || !query) chars.forEach(function (c) { out.push(c); });
      for (var i = 0; i + 1 < chars.length; i++) out.push(chars[i] + chars[i + 1]);
      return;
    }
    var word = stripChars(chunk.toLowerCase(), "._-");
    if (!word) return;
    var parts = word.split(PARTS).filter(Boolean);
    if (parts.length > 1) {
      out.push(word);
      parts.forEach(function (part, i) {
        if (!stop.has(part)) out.push(stem(part));
        if (i + 1 < parts.length) out.push(part + parts[i + 1]);
      });
    } else if (!stop.has(word)) {
      out.push(stem(word));
    }
  });
  return out;
}

function unique(list) { return Array.from(new Set(list)); }

/* textanalysis.query_words: tokens grouped by the word they come from. */
function queryWords(text, stem) {
  var out = [];
  (text.match(TOKEN) || []).forEach(function (chunk) {
    var toks = unique(tokens(chunk, true, stem));
    if (toks.length) out.push(toks);
  });
  return out;
}

/* ---- name hits (kb/index/names.py) ---- */

/* Catalog.resolve: names and the aliases docs.json lists, exactly, then without a call
 * prefix in any case; a call path (prefix + name) resolves through the same step. */
function resolve(text) {
  if (head.spellingMap.has(text)) return head.spellingMap.get(text);
  if (head.byName.has(text)) return text;
  var stripped = text.trim();
  head.k.CALL_PREFIXES.forEach(function (p) {
    if (stripped.startsWith(p)) stripped = stripped.slice(p.length);
  });
  var low = stripped.toLowerCase();
  head.k.CALL_PREFIXES.forEach(function (p) {  // a call path in any case: its name
    if (low.startsWith(p) && !head.spellingsLower.has(low)) low = low.slice(p.length);
  });
  return head.spellingsLower.has(low) ? head.spellingsLower.get(low) : null;
}

/* difflib.SequenceMatcher(None, a, b).ratio() for short strings (no junk, no popular). */
function ratio(a, b) {
  var b2j = new Map();
  for (var j = 0; j < b.length; j++) {
    if (!b2j.has(b[j])) b2j.set(b[j], []);
    b2j.get(b[j]).push(j);
  }
  function longest(alo, ahi, blo, bhi) {
    var besti = alo, bestj = blo, bestsize = 0, j2len = new Map();
    for (var i = alo; i < ahi; i++) {
      var next = new Map(), js = b2j.get(a[i]) || [];
      for (var x = 0; x < js.length; x++) {
        var jj = js[x];
        if (jj < blo) continue;
        if (jj >= bhi) break;
        var k = (j2len.get(jj - 1) || 0) + 1;
        next.set(jj, k);
        if (k > bestsize) { besti = i - k + 1; bestj = jj - k + 1; bestsize = k; }
      }
      j2len = next;
    }
    return [besti, bestj, bestsize];
  }
  var matched = 0, queue = [[0, a.length, 0, b.length]];
  while (queue.length) {
    var q = queue.pop(), r = longest(q[0], q[1], q[2], q[3]);
    var i = r[0], jb = r[1], k = r[2];
    if (k) {
      matched += k;
      if (q[0] < i && q[2] < jb) queue.push([q[0], i, q[2], jb]);
      if (i + k < q[1] && jb + k < q[3]) queue.push([i + k, q[1], jb + k, q[3]]);
    }
  }
  var total = a.length + b.length;
  return total ? 2.0 * matched / total : 1.0;
}

function closeMatches(word, possibilities, n, cutoff) {
  var result = [];
  possibilities.forEach(function (x) {
    var r = ratio(x, word);
    if (r >= cutoff) result.push([r, x]);
  });
  result.sort(function (p, q) { return p[0] !== q[0] ? q[0] - p[0] : (p[1] < q[1] ? 1 : p[1] > q[1] ? -1 : 0); });
  return result.slice(0, n).map(function (p) { return p[1]; });
}

function nameHits(text) {
  var hits = [], seen = new Set();
  function add(name, score, why) {
    if (seen.has(name) || !head.byName.has(name)) return;
    var doc = head.byName.get(name);
    seen.add(name);
    hits.push({ doc: doc, name: name, score: score, why: why });
  }
  var exact = resolve(text);
  if (exact) add(exact, 1000.0, "exact");
  if (!IDENT.test(text)) return hits;
  var bare = text.toLowerCase();
  head.k.CALL_PREFIXES.forEach(function (p) { if (bare.startsWith(p)) bare = bare.slice(p.length); });
  var prefixed = head.names.filter(function (n) {
    var l = n.toLowerCase();
    return l.startsWith(bare) && l !== bare;
  });
  prefixed.sort(function (p, q) { return p.length - q.length; });
  prefixed.slice(0, 20).forEach(function (name, i) { add(name, 500.0 - i, "prefix"); });
  if (!exact && bare.length >= 4) {
    var lowered = new Map(), order = [];
    head.names.forEach(function (n) {
      var l = n.toLowerCase();
      if (!lowered.has(l)) order.push(l);
      lowered.set(l, n);
    });
    closeMatches(bare, order, 3, 0.85).forEach(function (low, i) { add(lowered.get(low), 300.0 - i, "spelling"); });
  }
  return hits;
}

function answeredByName(text, hits) {
  return IDENT.test(text) && text.indexOf("_") >= 0 && hits.length > 0 &&
    (hits[0].why === "exact" || hits[0].why === "spelling");
}

function nameParts(name) {  // [[raw, stem], …], computed at build time
  return head.docs[head.byName.get(name)][7];
}

function nameFactor(name, q, stem) {
  var K = head.k, parts = nameParts(name);
  if (!parts.length) return [1.0, false];
  var covered = new Set();
  parts.forEach(function (p, i) { if (q.has(p[1])) covered.add(i); });
  for (var i = 0; i + 1 < parts.length; i++) {
    if (q.has(parts[i][0] + parts[i + 1][0])) { covered.add(i); covered.add(i + 1); }
  }
  parts.forEach(function (p, i) {
    if (p[0].length < 2) return;
    q.forEach(function (t) {
      if (t !== p[0] && t.startsWith(p[0]) && /\d/.test(t)) covered.add(i);
    });
  });
  var coverage = covered.size / parts.length;
  if (coverage < 1.0) return [1.0 + K.NAME_COVERAGE_WEIGHT * coverage, false];
  var stems = new Set(parts.map(function (p) { return p[1]; }));
  var shared = 0;
  stems.forEach(function (s) { if (q.has(s)) shared++; });
  shared = shared || 1;
  return [1.0 + K.NAME_COVERAGE_WEIGHT + K.FULL_NAME_BONUS * shared / Math.max(q.size, 1), true];
}

/* ---- fused steps (kb/index/steps.py) ---- */

function subset(a, b) {  // a ⊆ b (arrays / sets)
  for (var x of a) if (!b.has(x)) return false;
  return true;
}

function namedSteps(q) {
  var found = [];
  head.k.STEP_WORDS.forEach(function (row) {
    var words = row[1], joined = row[2];
    if ((words.length && subset(words, q)) || (joined && q.has(joined))) found.push(row);
  });
  var out = new Set();
  found.forEach(function (row) {
    var w = new Set(row[1]);
    var inside = found.some(function (other) {
      if (other[0] === row[0]) return false;
      var o = new Set(other[1]);
      return w.size < o.size && subset(w, o);
    });
    if (!inside) out.add(row[0]);
  });
  return out;
}

/* steps._does: the same step, or one whose words hold all of the named step's. */
function does(step, fused) {
  if (step === fused) return true;
  var own = head.stepWords.get(step) || [];
  return own.length > 0 && subset(own, new Set(head.stepWords.get(fused) || []));
}

function doesAny(named, fused) {
  for (var step of named) if (does(step, fused)) return true;
  return false;
}

function stepFactor(fuses, named) {
  var K = head.k;
  if (named.size < K.MIN_NAMED || !fuses.size) return 1.0;
  var matched = 0;
  named.forEach(function (s) {
    for (var f of fuses) if (does(s, f)) { matched++; return; }
  });
  if (!matched) return 1.0;
  var extras = 0;
  fuses.forEach(function (f) { if (!doesAny(named, f)) extras++; });
  var fit = (matched - K.EXTRA_STEP_COST * extras) / named.size;
  return 1.0 + K.STEP_WEIGHT * Math.max(fit, 0.0);
}

function unaskedNamedSteps(nameStems, fuses, q, named) {
  var count = 0;
  fuses.forEach(function (step) {
    var words = head.stepWords.get(step) || [];
    if (subset(words, q) || doesAny(named, step)) return;
    if (words.some(function (w) { return !q.has(w) && nameStems.has(w); })) count++;
  });
  return count;
}

/* ---- text hits (kb/index/fulltext.py) ---- */

function askedDtypes(text) {
  var out = new Set();
  (text.match(DTYPE_WORD) || []).forEach(function (word) {
    var w = word.toLowerCase();
    if (/^\d{1,5}$/.test(w)) w = String(parseInt(w, 10));
    (head.schemeWords.get(w) || []).forEach(function (c) { out.add(c); });
  });
  return out;
}

function glossaryTokens(text) {  // the English tokens are computed at build time
  var out = [];
  head.k.GLOSSARY.forEach(function (row) {
    if (text.indexOf(row[0]) >= 0) out = out.concat(row[1]);
  });
  return out;
}

function summed(lists) {
  var total = new Map();
  lists.forEach(function (one) {
    one.forEach(function (score, d) { total.set(d, (total.get(d) || 0.0) + score); });
  });
  return total;
}

function textHits(text, toks, seen, post, stem, phrases) {
  var K = head.k, joined = [];
  if (toks.length > 1) {
    for (var i = 0; i + 1 < toks.length; i++) {
      if (isAlpha(toks[i]) && isAlpha(toks[i + 1])) joined.push(toks[i] + toks[i + 1]);
    }
    glossaryTokens(text).forEach(function (t) { if (toks.indexOf(t) < 0) joined.push(t); });
  }
  var perToken = toks.map(post);
  var main = summed(perToken), extra = summed(joined.map(post));
  var every = new Set();
  if (toks.length > 1) {
    perToken[0].forEach(function (_, d) {
      if (perToken.every(function (m) { return m.has(d); })) every.add(d);
    });
  }
  var held = new Map(), words = queryWords(text, stem);  // fulltext._word_shares
  words.forEach(function (word) {
    word.forEach(function (t) {
      post(t).forEach(function (_, d) { held.set(d, (held.get(d) || 0.0) + 1.0 / word.length / words.length); });
    });
  });
  var inplace = INPLACE.test(text.toLowerCase());
  var wanted = askedDtypes(text);
  var q = new Set(toks.concat(joined));
  var steps = namedSteps(q);
  var phrase = text.toLowerCase().split(/\s+/).filter(Boolean).join(" ");
  var phraseDocs = new Set(phrases.get(phrase) || []);
  var prior = new Map(Object.entries(K.KIND_PRIOR));
  Object.entries(K.KIND_WORDS).forEach(function (kv) {
    if (kv[1].some(function (w) { return q.has(w); })) prior.set(kv[0], K.KIND_ASKED);
  });
  var docs = new Set(Array.from(main.keys()).concat(Array.from(extra.keys())));
  var scored = [];
  docs.forEach(function (d) {
    var raw = (main.get(d) || 0.0) + (every.has(d) ? 0.0 : (extra.get(d) || 0.0));
    var doc = head.docs[d], name = doc[0], kind = doc[1];
    if (seen.has(name)) return;
    var nf = nameFactor(name, q, stem);
    var score = raw * nf[0] * (prior.has(kind) ? prior.get(kind) : 1.0) * doc[3];
    if (head.partialNamePrior.has(kind) && !nf[1] && prior.get(kind) !== K.KIND_ASKED) score *= head.partialNamePrior.get(kind);
    if (wanted.size && doc[4]) {
      var has = doc[4].split(" ").some(function (x) { return wanted.has(x); });
      if (!has) score *= K.DTYPE_MISS_PRIOR;
    }
    if (inplace && name.endsWith("_")) score /= K.INPLACE_TWIN_PRIOR * K.INPLACE_TWIN_PRIOR;
    if (phraseDocs.has(d)) score *= K.KEYWORD_PHRASE_BONUS;
    if (doc[5]) {
      var fused = new Set(doc[5].split(" "));
      score *= stepFactor(fused, steps);
      var stems = new Set(nameParts(name).map(function (p) { return p[1]; }));
      score *= Math.pow(K.UNASKED_NAMED_STEP_PRIOR, unaskedNamedSteps(stems, fused, q, steps));
    }
    var share = held.get(d) || 0.0;
    score *= Math.pow(Math.max(share, K.MIN_SHARE), K.COVERAGE_POWER);
    if (toks.length > 1) score += K.EVERY_TOKEN_BONUS * Math.pow(share, K.SHARE_POWER);
    scored.push({ doc: d, name: name, score: score, why: "text" });
  });
  scored.sort(function (a, b) { return a.score !== b.score ? b.score - a.score : (a.name < b.name ? -1 : a.name > b.name ? 1 : 0); });
  return scored;
}

/* ---- search (kb/index/search.py) ---- */

function prepare(h) {
  h.docs.forEach(function (doc) {  // rows ship compact (site_plugins/search_index.py)
    if (doc[2] === "") doc[2] = h.dirs[doc[1]] + doc[0] + "/";
    else if (doc[2] === "-") doc[2] = "";
    doc[7] = doc[7].map(function (p) { return typeof p === "string" ? [p, p] : p; });
  });
  h.stopSet = new Set(h.k.STOP);
  h.byName = new Map();
  h.docs.forEach(function (doc, i) { h.byName.set(doc[0], i); });
  h.names = h.docs.map(function (doc) { return doc[0]; }).sort();  // Catalog.names(): by name
  h.spellingMap = new Map(Object.entries(h.spellings));
  h.spellingsLower = new Map();
  h.names.concat(Array.from(h.spellingMap.keys())).forEach(function (s) {
    var l = s.toLowerCase();
    if (!h.spellingsLower.has(l)) h.spellingsLower.set(l, h.spellingMap.get(s) || s);
  });
  h.stepWords = new Map();
  h.k.STEP_WORDS.forEach(function (row) { h.stepWords.set(row[0], row[1]); });
  h.schemeWords = new Map(Object.entries(h.k.SCHEME_WORDS));
  h.partialNamePrior = new Map(Object.entries(h.k.PARTIAL_NAME_PRIOR));
  return h;
}

function ready() {
  if (head) return Promise.resolve(head);
  return load(DIR + "docs.json").then(function (h) { head = prepare(h); return head; });
}

/* Records best first, as `kb search` ranks them: [{doc, name, score, why}]. */
function search(text, limit) {
  text = text.trim();
  if (!text) return Promise.resolve([]);  // Material asks once with "" on load: fetch nothing
  return ready().then(function () {
    if (!text || text.length > head.k.MAX_QUERY_CHARS) return [];
    var hits = nameHits(text);
    if (answeredByName(text, hits)) return hits.slice(0, limit);
    var words = stemWords(text);
    return Promise.all(words.map(shard)).then(function (loaded) {
      var stems = new Map();
      loaded.forEach(function (s) { Object.entries(s.s || {}).forEach(function (kv) { stems.set(kv[0], kv[1]); }); });
      var stem = makeStemmer(stems);
      var toks = unique(tokens(text, true, stem));
      if (!toks.length) return hits.slice(0, limit);
      var joined = [];
      for (var i = 0; i + 1 < toks.length; i++) joined.push(toks[i] + toks[i + 1]);
      var needed = unique(toks.concat(joined, glossaryTokens(text)));
      var phrase = text.toLowerCase().split(/\s+/).filter(Boolean).join(" ");
      return Promise.all(needed.concat([phrase]).map(shard)).then(function () {
        return Promise.all(needed.concat([phrase]).map(function (t) { return shards.get(shardOf(t)); }));
      }).then(function (got) {
        var byTerm = new Map(), phrases = new Map();
        got.forEach(function (s) {
          Object.entries(s.t || {}).forEach(function (kv) { byTerm.set(kv[0], kv[1]); });
          Object.entries(s.p || {}).forEach(function (kv) { phrases.set(kv[0], kv[1]); });
        });
        var cache = new Map();
        function post(t) {
          if (cache.has(t)) return cache.get(t);
          var m = new Map(), flat = byTerm.get(t) || [];
          for (var j = 0; j < flat.length; j += 2) m.set(flat[j], flat[j + 1]);
          cache.set(t, m);
          return m;
        }
        var seen = new Set(hits.map(function (h) { return h.name; }));
        return hits.concat(textHits(text, toks, seen, post, stem, phrases)).slice(0, limit);
      });
    });
  });
}

function pageHits(text) {
  var words = unique(tokens(text, true, makeStemmer(new Map()))).filter(function (w) { return /^[\w.-]+$/.test(w) || CJK_RUN.test(w); });
  if (!words.length) return [];
  return head.pages.filter(function (p) {
    var have = new Set(p[2].split(" "));
    return words.every(function (w) { return have.has(w); });
  }).slice(0, 10);
}

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function result(text, hits) {
  if (!head || !text.trim()) return { items: [] };
  var items = hits.map(function (h) {
    var doc = head.docs[h.doc];
    return [{ location: doc[2], title: doc[0], text: "<p>" + escapeHtml(doc[6] || "") + "</p>",
              score: h.score, terms: {} }];
  });
  pageHits(text).forEach(function (p) {
    items.push([{ location: p[0], title: escapeHtml(p[1]), text: "", score: 0, terms: {} }]);
  });
  return { items: items };
}

self.kbSearch = search;  // for tests run inside the worker scope

self.addEventListener("message", function (ev) {
  var msg = ev.data;
  if (msg.type === 0) {
    self.postMessage({ type: 1 });
  } else if (msg.type === 2) {
    var id = ++latest, text = String(msg.data || "");
    search(text, 20).then(function (hits) {
      if (id === latest) self.postMessage({ type: 3, data: result(text, hits) });
    }).catch(function (err) {
      console.error("kb search: " + (err && err.stack || err));
      if (id === latest) self.postMessage({ type: 3, data: { items: [] } });
    });
  }
});
