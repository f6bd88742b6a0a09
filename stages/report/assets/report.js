// m3 report: open the selected clip, follow in-page links into closed clips, and search memory text.
// Page text is data: it is only ever read with textContent and written with textContent. The one
// exception is a lazy block (<script type="application/gzip" class="lazy">): markup the report's
// writer escaped like the rest of the page, gzipped and base64-encoded, kept as text until something
// in it is wanted, then inflated and inserted where the block stands, as written.
(function () {
  "use strict";

  var pending = {};  // block number -> the promise of its insertion

  function inflate(text) {
    var bin = atob(text.trim());
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  function materialise(block) {
    var n = block.getAttribute("data-block");
    if (!pending[n]) {
      pending[n] = inflate(block.textContent).then(function (markup) {
        if (block.parentNode) {
          block.insertAdjacentHTML("beforebegin", markup);
          block.remove();
        }
      });
    }
    return pending[n];
  }

  var index = null;  // {ids: {element id: block}, search: [[id, where, text, block], ...]}
  function lazyIndex() {
    if (index === null) {
      var data = document.getElementById("lazy-index");
      index = data ? inflate(data.textContent).then(JSON.parse) : Promise.resolve({ ids: {}, search: [] });
    }
    return index;
  }

  function block(n) {
    return document.querySelector('script.lazy[data-block="' + n + '"]');
  }

  // The element with this id, inserting the lazy block that holds it when it is not in the DOM yet.
  function find(id) {
    var found = document.getElementById(id);
    if (found) return Promise.resolve(found);
    return lazyIndex().then(function (ix) {
      var b = Object.prototype.hasOwnProperty.call(ix.ids, id) ? block(ix.ids[id]) : null;
      if (!b) return document.getElementById(id);
      return materialise(b).then(function () { return document.getElementById(id); });
    });
  }

  // A video's summary and timeline (lazy for all but the first videos) and its first clip section.
  function wake(section) {
    var parts = [];
    section.querySelectorAll(":scope > script.lazy").forEach(function (b) { parts.push(materialise(b)); });
    var box = section.querySelector(".clip-details");
    if (box && !box.querySelector(".clip-detail")) {
      var first = box.querySelector("script.lazy");
      if (first) parts.push(materialise(first));
    }
    return Promise.all(parts);
  }

  function show(target, scroll) {
    var detail = target.closest(".clip-detail");
    if (detail) {
      var box = detail.parentElement;
      box.querySelectorAll(".clip-detail.open").forEach(function (d) { d.classList.remove("open"); });
      detail.classList.add("open");
      var video = detail.getAttribute("data-video");
      var clip = detail.getAttribute("data-clip");
      document.querySelectorAll(".clip-block").forEach(function (b) {
        if (b.getAttribute("data-video") === video) {
          b.classList.toggle("selected", b.getAttribute("data-clip") === clip);
        }
      });
    }
    if (scroll) target.scrollIntoView({ block: detail === target ? "nearest" : "center" });
  }

  // What the reader asked for last: a target whose section is still being inserted (its block inflated)
  // must not, when it lands, close a clip the reader opened since.
  var latest = 0;

  function openTarget(id, scroll) {
    if (!id) return Promise.resolve();
    var turn = ++latest;
    var now = document.getElementById(id);
    if (now && !now.closest(".lazy-video") && !now.matches(".video")) {
      show(now, scroll);  // already in the page: at once
      return Promise.resolve();
    }
    return find(id).then(function (target) {
      if (!target) return;
      var section = target.closest(".video");
      if (!section) return turn === latest ? show(target, scroll) : undefined;
      return wake(section).then(function () {
        if (target === section) {
          var box = section.querySelector(".clip-details");
          var first = box && box.querySelector(".clip-detail");
          if (first && !box.querySelector(".clip-detail.open")) show(first, false);
        }
        if (turn === latest) show(target, scroll);
      });
    });
  }

  function hashId(href) {
    return decodeURIComponent(href.slice(1));
  }

  function fromHash(scroll) {
    openTarget(hashId(location.hash), scroll);
  }

  // A lazy video or card group comes in as it nears the screen (a memory of many videos is scrolled).
  if ("IntersectionObserver" in window) {
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (!e.isIntersecting) return;
        seen.unobserve(e.target);
        if (e.target.classList.contains("video")) wake(e.target);
        else e.target.querySelectorAll(":scope > script.lazy").forEach(function (b) { materialise(b); });
      });
    }, { rootMargin: "400px 0px" });
    document.querySelectorAll(".lazy-video").forEach(function (s) { seen.observe(s); });
    // a person's player borrows the voice sample of their character's card (one copy in the page)
    var heard = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (!e.isIntersecting) return;
        heard.unobserve(e.target);
        find(e.target.getAttribute("data-voice-of")).then(function (card) {
          var own = card && card.querySelector("audio.voice");
          if (own) e.target.src = own.getAttribute("src");
        });
      });
    }, { rootMargin: "400px 0px" });
    document.querySelectorAll("audio.person-voice").forEach(function (a) { heard.observe(a); });
  }

  // Each video starts with its first clip open, so the page never shows an empty panel.
  document.querySelectorAll(".clip-details").forEach(function (box) {
    var first = box.querySelector(".clip-detail");
    if (first && !box.querySelector(".clip-detail.open")) openTarget(first.id, false);
  });
  window.addEventListener("hashchange", function () { fromHash(true); });
  // A click on an in-page link opens its target at once, not only through the hashchange its navigation
  // fires: a link to the place already in the address bar fires none, and the browser drops fragment
  // navigations beyond a rate (Chromium: 200 in 10 s) when a reader goes through many clips quickly.
  document.addEventListener("click", function (e) {
    if (e.defaultPrevented || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    var a = e.target instanceof Element ? e.target.closest('a[href^="#"]') : null;
    var href = a && a.getAttribute("href");
    if (href && href.length > 1) openTarget(hashId(href), true);
  });
  if (location.hash) fromHash(true);

  // ---- search
  var input = document.getElementById("search");
  var panel = document.getElementById("search-results");
  var list = document.getElementById("results");
  var count = document.getElementById("search-count");
  var items = [];
  document.querySelectorAll("[data-s]").forEach(function (el, i) {
    if (!el.id) el.id = "s-" + i;
    items.push({ el: el, text: el.textContent.replace(/\s+/g, " ").trim(), low: null });
  });
  items.forEach(function (it) { it.low = it.text.toLowerCase(); });
  var lazyItems = null;  // the lazy blocks' searchable text, read on the first search
  var MAX = 200;

  function where(el) {
    var d = el.closest(".clip-detail");
    if (d) return "clip " + d.getAttribute("data-clip");
    var c = el.closest(".card, .person-card");
    if (c) return c.querySelector("h3").textContent;
    var a = el.closest(".answer");
    if (a) return "answer";
    return "video";
  }

  function snippet(text, term) {
    var at = text.toLowerCase().indexOf(term);
    var start = Math.max(0, at - 60);
    var out = (start > 0 ? "…" : "") + text.slice(start, start + 220);
    return out + (start + 220 < text.length ? "…" : "");
  }

  function run() {
    var q = input.value.toLowerCase().trim();
    document.querySelectorAll(".clip-block.match").forEach(function (b) { b.classList.remove("match"); });
    list.textContent = "";
    if (q.length < 2) { panel.hidden = true; count.textContent = ""; return; }
    var terms = q.split(/\s+/);
    var hits = items.concat(lazyItems || []).filter(function (it) {
      return terms.every(function (t) { return it.low.indexOf(t) >= 0; });
    });
    hits.slice(0, MAX).forEach(function (it) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = "#" + (it.el ? it.el.id : it.id);
      a.textContent = it.el ? where(it.el) : it.where;
      var span = document.createElement("span");
      span.textContent = " " + snippet(it.text, terms[0]);
      li.appendChild(a);
      li.appendChild(span);
      list.appendChild(li);
      var d = it.el && it.el.closest(".clip-detail");
      if (d) {
        var sel = '.clip-block[data-clip="' + d.getAttribute("data-clip") + '"]';
        document.querySelectorAll(sel).forEach(function (b) {
          if (b.getAttribute("data-video") === d.getAttribute("data-video")) b.classList.add("match");
        });
      }
    });
    count.textContent = hits.length + (hits.length === 1 ? " match" : " matches") +
      (hits.length > MAX ? " (first " + MAX + " listed)" : "");
    panel.hidden = false;
  }

  var timer = null;
  function later() {
    if (lazyItems !== null) return run();
    lazyIndex().then(function (ix) {
      lazyItems = ix.search.map(function (e) {
        return { id: e[0], where: e[1], text: e[2], low: e[2].toLowerCase(), el: null };
      });
      run();
    });
  }
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(later, 120);
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { input.value = ""; later(); }
  });
  document.body.setAttribute("data-ready", "1");
})();
