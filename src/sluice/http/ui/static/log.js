/* sluice web UI: a node's log. Every attempt's lines, each with its time and stream, read
   and then followed live through the API's server-sent events
   (/api/v1/executions/{id}/logs/follow); search with highlights, jump from error to error,
   and a bounded number of lines in the page (the download and the full view have them all).

   The panel is the script's own (data-keep): the page's live updates leave it alone, so
   following a log never fights the reader's scroll position or selection. */
(function () {
  "use strict";

  var ERROR_LINE = /(Traceback \(most recent call last\)|\b[A-Z][A-Za-z]*(Error|Exception)\b|\bFAILED\b|\bERROR\b)/;
  var AT_BOTTOM = 24; // px from the bottom that still counts as "at the end"

  function text(tag, cls, value) {
    var el = document.createElement(tag);
    if (cls) el.className = cls;
    if (value !== undefined) el.textContent = value;
    return el;
  }

  function clock(iso) {
    var at = new Date(iso);
    if (isNaN(at.getTime())) return "";
    return at.toISOString().slice(11, 23);
  }

  function LogView(panel) {
    this.panel = panel;
    this.execution = panel.getAttribute("data-execution");
    this.node = panel.getAttribute("data-node");
    this.max = parseInt(panel.getAttribute("data-max-lines") || "5000", 10);
    this.api = panel.getAttribute("data-api");
    this.lines = panel.querySelector(".log-lines");
    this.scroller = panel.querySelector(".log-scroll");
    this.status = panel.querySelector(".log-status");
    this.dropped = panel.querySelector(".log-dropped");
    this.attempt = panel.querySelector("select.log-attempt");
    this.search = panel.querySelector("input.log-search");
    this.follow = panel.querySelector("input.log-follow");
    this.download = panel.querySelector("a.log-download");
    this.full = panel.querySelector("a.log-full");
    this.source = null;
    this.count = 0;
    this.removed = 0;
    this.matches = [];
    this.at = -1;
    this.errorAt = -1;
    this.chosen = false; // the reader picked an attempt: do not move to a newer one
    this.bind();
    this.open(this.attempt ? this.attempt.value : "");
  }

  LogView.prototype.bind = function () {
    var self = this;
    if (this.attempt) {
      this.attempt.addEventListener("change", function () {
        self.chosen = true;
        self.open(self.attempt.value);
      });
    }
    if (this.search) {
      this.search.addEventListener("input", function () { self.highlight(true); });
      this.search.addEventListener("keydown", function (event) {
        if (event.key === "Enter") {
          event.preventDefault();
          self.step(event.shiftKey ? -1 : 1);
        }
      });
    }
    this.panel.querySelectorAll("[data-log-step]").forEach(function (button) {
      button.addEventListener("click", function () {
        self.step(parseInt(button.getAttribute("data-log-step"), 10));
      });
    });
    var errors = this.panel.querySelector("[data-log-errors]");
    if (errors) errors.addEventListener("click", function () { self.nextError(); });
  };

  LogView.prototype.query = function (attempt) {
    var q = "node=" + encodeURIComponent(this.node);
    return attempt ? q + "&attempt=" + encodeURIComponent(attempt) : q;
  };

  LogView.prototype.open = function (attempt) {
    if (this.source) this.source.close();
    this.lines.textContent = "";
    this.count = 0;
    this.removed = 0;
    this.dropped.hidden = true;
    this.setLinks(attempt);
    this.say("reading the log…");
    var url = this.api + "/executions/" + encodeURIComponent(this.execution) +
      "/logs/follow?" + this.query(attempt);
    var self = this;
    var source = new EventSource(url);
    this.source = source;
    source.addEventListener("line", function (event) {
      self.add(JSON.parse(event.data));
    });
    source.addEventListener("end", function () {
      source.close();
      self.say(self.count + self.removed + " lines; the attempt has ended");
      self.newerAttempts();
    });
    source.addEventListener("error", function (event) {
      source.close();
      if (event.data) {
        var problem = JSON.parse(event.data);
        self.say("cannot read this log: " + problem.detail);
      } else if (self.source === source) {
        self.say("the connection was lost; reload to read on");
      }
    });
    source.addEventListener("open", function () {
      self.say("following live");
    });
  };

  LogView.prototype.setLinks = function (attempt) {
    var base = this.panel.getAttribute("data-page") + "?" + this.query(attempt);
    if (this.download) this.download.href = this.panel.getAttribute("data-text") + "?" + this.query(attempt);
    if (this.full) this.full.href = base;
  };

  LogView.prototype.say = function (message) {
    if (this.status) this.status.textContent = message;
  };

  LogView.prototype.atBottom = function () {
    var s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight <= AT_BOTTOM;
  };

  LogView.prototype.add = function (line) {
    var stick = this.follow && this.follow.checked && this.atBottom();
    var row = text("div", "log-line " + (line.stream === "stderr" ? "stderr" : "stdout"));
    if (line.note) row.className += " note";
    if (line.stream === "stderr" || ERROR_LINE.test(line.text)) row.className += " error-line";
    var time = text("time", "log-time", clock(line.at));
    time.setAttribute("datetime", line.at);
    time.title = line.at;
    row.appendChild(time);
    row.appendChild(text("span", "log-stream", line.stream === "stderr" ? "err" : "out"));
    var body = text("span", "log-text", line.text);
    row.appendChild(body);
    if (line.attempt) row.setAttribute("data-attempt", line.attempt);
    this.lines.appendChild(row);
    this.count += 1;
    this.mark(body);
    this.bound();
    if (stick) this.scroller.scrollTop = this.scroller.scrollHeight;
    if (!this.source || this.source.readyState !== 2) this.say(this.count + this.removed + " lines, following live");
  };

  /* Bounded memory: past `max` lines in the page, the oldest go (unless the reader is
     selecting text in them). */
  LogView.prototype.bound = function () {
    if (this.count <= this.max) return;
    var sel = window.getSelection && window.getSelection();
    if (sel && !sel.isCollapsed && this.lines.contains(sel.anchorNode)) return;
    while (this.count > this.max && this.lines.firstChild) {
      this.lines.removeChild(this.lines.firstChild);
      this.count -= 1;
      this.removed += 1;
    }
    this.dropped.hidden = false;
    this.dropped.querySelector("span").textContent = this.removed.toLocaleString();
  };

  LogView.prototype.pattern = function () {
    var wanted = this.search ? this.search.value : "";
    if (!wanted) return null;
    return new RegExp(wanted.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gi");
  };

  LogView.prototype.mark = function (body) {
    var pattern = this.pattern();
    var raw = body.textContent;
    if (!pattern || !pattern.test(raw)) {
      if (body.querySelector("mark")) body.textContent = raw;
      return false;
    }
    pattern.lastIndex = 0;
    body.textContent = "";
    var last = 0, found;
    while ((found = pattern.exec(raw)) !== null) {
      if (found[0].length === 0) { pattern.lastIndex += 1; continue; }
      body.appendChild(document.createTextNode(raw.slice(last, found.index)));
      body.appendChild(text("mark", "", found[0]));
      last = found.index + found[0].length;
    }
    body.appendChild(document.createTextNode(raw.slice(last)));
    return true;
  };

  LogView.prototype.highlight = function () {
    var self = this;
    this.matches = [];
    this.lines.querySelectorAll(".log-text").forEach(function (body) {
      if (self.mark(body)) self.matches.push(body.parentNode);
    });
    this.at = -1;
    var count = this.panel.querySelector(".log-matches");
    if (count) {
      count.textContent = this.search.value ? this.matches.length + " matching lines" : "";
    }
  };

  LogView.prototype.step = function (direction) {
    if (!this.matches.length) this.highlight();
    if (!this.matches.length) return;
    this.at = (this.at + direction + this.matches.length) % this.matches.length;
    this.show(this.matches[this.at]);
  };

  LogView.prototype.nextError = function () {
    var errors = this.lines.querySelectorAll(".error-line");
    if (!errors.length) {
      this.say("no error line in this log");
      return;
    }
    this.errorAt = (this.errorAt + 1) % errors.length;
    this.show(errors[this.errorAt]);
    this.say("error line " + (this.errorAt + 1) + " of " + errors.length);
  };

  LogView.prototype.show = function (row) {
    this.lines.querySelectorAll(".current").forEach(function (el) { el.classList.remove("current"); });
    row.classList.add("current");
    this.scroller.scrollTop = row.offsetTop - this.scroller.clientHeight / 3;
  };

  /* The attempt ended: a retry may have started. Add the attempts the node has now and, when
     the reader did not pick one, follow the newest. */
  LogView.prototype.newerAttempts = function () {
    if (!this.attempt) return;
    var self = this;
    var url = this.api + "/executions/" + encodeURIComponent(this.execution) + "/nodes/" +
      encodeURIComponent(this.node) + "/attempts";
    fetch(url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : []; })
      .then(function (attempts) {
        var known = {};
        Array.prototype.forEach.call(self.attempt.options, function (o) { known[o.value] = o; });
        var newest = null;
        attempts.forEach(function (a) {
          var label = "attempt " + a.attempt + " (" + a.phase.toLowerCase().replace(/_/g, " ") + ")";
          if (known[String(a.attempt)]) {
            known[String(a.attempt)].textContent = label;
          } else {
            var option = text("option", "", label);
            option.value = String(a.attempt);
            self.attempt.appendChild(option);
            newest = option;
          }
        });
        if (newest && !self.chosen) {
          self.attempt.value = newest.value;
          self.open(newest.value);
        }
      })
      .catch(function () { /* the list stays as it is */ });
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-log-panel]").forEach(function (panel) {
      panel.logView = new LogView(panel);
    });
  });
})();
