/* sluice web UI: live updates that keep the reader's place, relative times, the colour
   theme, confirmations of destructive actions, selecting rows. No framework, no network
   beyond this server.

   Live updates: the page's #live region is re-read every data-poll seconds (the same URL,
   with the X-Sluice-Fragment header; 304 when nothing changed) and merged into the page node
   by node: only what changed is touched, the reader's open <details>, checked boxes, typed
   text, focus and scroll positions stay. No update is applied while the reader selects text,
   scrolls, holds a mouse button, or has paused updates with the header's switch. */
(function () {
  "use strict";

  var PAUSE_KEY = "sluice.live.paused";
  var THEME_KEY = "sluice.theme";
  var QUIET_MS = 1500; // after the last scroll, before an update may land
  var lastScroll = 0;
  var pointerDown = false;

  /* Theme: light, dark, or the system's (prefers-color-scheme). */
  function applyTheme(theme) {
    var root = document.documentElement;
    if (theme === "light" || theme === "dark") root.setAttribute("data-theme", theme);
    else root.removeAttribute("data-theme");
    var button = document.getElementById("theme-toggle");
    if (button) {
      var shown = theme || "system";
      button.textContent = "Theme: " + shown;
      button.setAttribute("aria-label", "Colour theme: " + shown + " (change)");
    }
  }

  function storedTheme() {
    try { return localStorage.getItem(THEME_KEY) || ""; } catch (e) { return ""; }
  }

  function nextTheme() {
    var order = ["", "light", "dark"];
    var next = order[(order.indexOf(storedTheme()) + 1) % order.length];
    try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* private mode */ }
    applyTheme(next);
  }

  /* Relative times: <time data-rel datetime="ISO">absolute</time> reads "3 min ago", with the
     absolute time on hover. */
  function relative(ms) {
    var s = Math.round(ms / 1000), future = s < 0;
    s = Math.abs(s);
    var text;
    if (s < 5) return "just now";
    if (s < 60) text = s + " s";
    else if (s < 3600) text = Math.floor(s / 60) + " min";
    else if (s < 86400) text = Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    else text = Math.floor(s / 86400) + " d";
    return future ? "in " + text : text + " ago";
  }

  function refreshTimes(root) {
    var now = Date.now();
    (root || document).querySelectorAll("time[data-rel]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      if (!el.title) el.title = el.getAttribute("data-abs") || el.textContent;
      el.textContent = relative(now - at);
    });
  }

  /* Merging a new fragment into the page. */
  function keyOf(node) {
    if (node.nodeType !== 1) return null;
    return node.getAttribute("data-key") || node.id || null;
  }

  function sameKind(a, b) {
    return a.nodeType === b.nodeType && a.nodeName === b.nodeName && keyOf(a) === keyOf(b);
  }

  var USER_STATE = { value: 1, checked: 1, selected: 1, open: 1 };

  function syncAttributes(old, fresh) {
    var i, name;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      name = old.attributes[i].name;
      if (!fresh.hasAttribute(name) && !USER_STATE[name]) old.removeAttribute(name);
    }
    for (i = 0; i < fresh.attributes.length; i++) {
      name = fresh.attributes[i].name;
      if (USER_STATE[name] && old.nodeName !== "OPTION") continue; // the reader's, not ours
      if (old.getAttribute(name) !== fresh.attributes[i].value) {
        old.setAttribute(name, fresh.attributes[i].value);
      }
    }
  }

  function morph(old, fresh) {
    if (old.nodeType === 3 || old.nodeType === 8) {
      if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
      return;
    }
    if (old.hasAttribute && old.hasAttribute("data-keep")) return; // owned by a script
    if (old.nodeName === "TIME" && old.hasAttribute("data-rel")) {
      if (old.getAttribute("datetime") !== fresh.getAttribute("datetime")) {
        old.setAttribute("datetime", fresh.getAttribute("datetime"));
        old.textContent = fresh.textContent;
        old.title = "";
      }
      return;
    }
    syncAttributes(old, fresh);
    if (old.nodeName === "TEXTAREA" || old.nodeName === "INPUT") return;
    morphChildren(old, fresh);
  }

  function morphChildren(old, fresh) {
    var keyed = {};
    Array.prototype.forEach.call(old.childNodes, function (child) {
      var key = keyOf(child);
      if (key) keyed[key] = child;
    });
    var wanted = Array.prototype.slice.call(fresh.childNodes);
    var cursor = old.firstChild;
    wanted.forEach(function (next) {
      var key = keyOf(next);
      var match = key && keyed[key] && sameKind(keyed[key], next) ? keyed[key] : null;
      if (!match && cursor && !keyOf(cursor) && sameKind(cursor, next)) match = cursor;
      if (match) {
        if (match !== cursor) old.insertBefore(match, cursor);
        else cursor = cursor.nextSibling;
        if (key) delete keyed[key];
        morph(match, next);
      } else {
        old.insertBefore(document.importNode(next, true), cursor);
      }
    });
    while (cursor) {
      var gone = cursor;
      cursor = cursor.nextSibling;
      old.removeChild(gone);
    }
  }

  /* When not to update. */
  function selecting() {
    var sel = window.getSelection && window.getSelection();
    return !!(sel && !sel.isCollapsed && String(sel).length > 0);
  }

  function pausedByUser() {
    try { return localStorage.getItem(PAUSE_KEY) === "1"; } catch (e) { return false; }
  }

  function holdReason() {
    if (pausedByUser()) return "paused";
    if (selecting()) return "paused while you select text";
    if (pointerDown) return "paused while you hold the mouse button";
    if (Date.now() - lastScroll < QUIET_MS) return "paused while you scroll";
    return "";
  }

  function showStatus(text) {
    var el = document.getElementById("live-status");
    if (el && el.textContent !== text) el.textContent = text;
  }

  function showSwitch() {
    var button = document.getElementById("live-toggle");
    if (!button) return;
    var paused = pausedByUser();
    button.setAttribute("aria-pressed", paused ? "false" : "true");
    button.textContent = paused ? "Live updates: paused" : "Live updates: on";
  }

  function startLive() {
    var live = document.getElementById("live");
    if (!live || !live.getAttribute("data-live-url")) return;
    var url = live.getAttribute("data-live-url");
    var every = Math.max(1, parseFloat(live.getAttribute("data-poll") || "1")) * 1000;
    var etag = null;
    var ended = live.getAttribute("data-final") === "1";
    var pending = null; // a fragment read while held back, applied when the reader lets go

    function apply(html) {
      var fresh = document.createElement("div");
      fresh.innerHTML = html;
      morphChildren(live, fresh);
      refreshTimes(live);
      document.dispatchEvent(new CustomEvent("sluice:updated"));
    }

    function tick() {
      var held = holdReason();
      if (held) {
        showStatus(held);
        schedule();
        return;
      }
      if (pending !== null) {
        apply(pending);
        pending = null;
      }
      if (ended) {
        showStatus("ended: no more updates");
        return;
      }
      var headers = { "X-Sluice-Fragment": "1" };
      if (etag) headers["If-None-Match"] = etag;
      fetch(url, { headers: headers, credentials: "same-origin" })
        .then(function (response) {
          if (response.headers.get("X-Sluice-Final") === "1") ended = true;
          if (response.status === 304) return null;
          if (!response.ok && response.status !== 422 && response.status !== 404) {
            throw new Error("HTTP " + response.status);
          }
          etag = response.headers.get("ETag");
          return response.text();
        })
        .then(function (html) {
          showStatus(ended ? "ended: no more updates" : "live");
          if (html === null) return;
          if (holdReason()) pending = html;
          else apply(html);
        })
        .catch(function () { showStatus("cannot reach the server; retrying"); })
        .then(schedule);
    }

    function schedule() {
      if (!ended || pending !== null) window.setTimeout(tick, every);
      else showStatus("ended: no more updates");
    }

    showStatus(ended ? "ended: no more updates" : "live");
    window.setTimeout(tick, every);
  }

  /* Forms: confirmation of destructive actions, select all rows. */
  function confirmSubmits() {
    document.addEventListener("submit", function (event) {
      var form = event.target;
      var question = form.getAttribute && form.getAttribute("data-confirm");
      if (!question) return;
      var name = form.getAttribute("id"); // not form.id: a control named "id" would shadow it
      var picked = name ? document.querySelectorAll('input[form="' + name + '"]:checked').length : -1;
      if (picked === 0) {
        event.preventDefault();
        window.alert("Select at least one execution first.");
        return;
      }
      if (picked > 0) question = question.replace("{n}", String(picked));
      if (!window.confirm(question)) event.preventDefault();
    }, true);
    document.addEventListener("change", function (event) {
      var all = event.target;
      if (!all.matches || !all.matches("input[data-select-all]")) return;
      document.querySelectorAll('input[form="' + all.getAttribute("data-select-all") + '"]')
        .forEach(function (box) { box.checked = all.checked; });
    });
  }

  function readerScrolled(event) {
    // A panel a script owns (a followed log) scrolls itself and is never merged into.
    var target = event.target;
    if (target && target.closest && target.closest("[data-keep]")) return;
    lastScroll = Date.now();
  }

  document.addEventListener("scroll", readerScrolled, true);
  document.addEventListener("wheel", readerScrolled, { passive: true, capture: true });
  document.addEventListener("pointerdown", function () { pointerDown = true; }, true);
  document.addEventListener("pointerup", function () { pointerDown = false; }, true);
  document.addEventListener("pointercancel", function () { pointerDown = false; }, true);

  applyTheme(storedTheme());
  document.addEventListener("DOMContentLoaded", function () {
    applyTheme(storedTheme());
    var theme = document.getElementById("theme-toggle");
    if (theme) theme.addEventListener("click", nextTheme);
    var toggle = document.getElementById("live-toggle");
    if (toggle) {
      toggle.hidden = !document.getElementById("live") ||
        !document.getElementById("live").getAttribute("data-live-url");
      toggle.addEventListener("click", function () {
        try { localStorage.setItem(PAUSE_KEY, pausedByUser() ? "0" : "1"); } catch (e) { /* */ }
        showSwitch();
      });
    }
    showSwitch();
    refreshTimes(document);
    window.setInterval(function () { refreshTimes(document); }, 15000);
    confirmSubmits();
    startLive();
  });
})();
