// m3 report: open the selected clip, follow in-page links into closed clips, and search memory text.
// Page text is data: it is only ever read with textContent and written with textContent.
(function () {
  "use strict";

  function openTarget(id, scroll) {
    if (!id) return;
    var target = document.getElementById(id);
    if (!target) return;
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

  function fromHash(scroll) {
    var id = decodeURIComponent(location.hash.slice(1));
    openTarget(id, scroll);
  }

  // Each video starts with its first clip open, so the page never shows an empty panel.
  document.querySelectorAll(".clip-details").forEach(function (box) {
    var first = box.querySelector(".clip-detail");
    if (first && !box.querySelector(".clip-detail.open")) openTarget(first.id, false);
  });
  window.addEventListener("hashchange", function () { fromHash(true); });
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
  var MAX = 200;

  function where(el) {
    var d = el.closest(".clip-detail");
    if (d) return "clip " + d.getAttribute("data-clip");
    var c = el.closest(".card");
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
    var hits = items.filter(function (it) {
      return terms.every(function (t) { return it.low.indexOf(t) >= 0; });
    });
    hits.slice(0, MAX).forEach(function (it) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = "#" + it.el.id;
      a.textContent = where(it.el);
      var span = document.createElement("span");
      span.textContent = " " + snippet(it.text, terms[0]);
      li.appendChild(a);
      li.appendChild(span);
      list.appendChild(li);
      var d = it.el.closest(".clip-detail");
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
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(run, 120);
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { input.value = ""; run(); }
  });
  document.body.setAttribute("data-ready", "1");
})();
