// The page view's script: how a number arose on click or hover, moving between cells with the
// arrow keys, predict-first, the plots' readout, and the self-test behind the #selftest hash.
// Every number it shows was written into the page by ffn-trace; it computes none of its own
// but whether a guess is close enough. It is pure ASCII (\u escapes), as is the stylesheet, so
// that a page asked for with --ascii is ASCII through and through.
(function () {
  "use strict";
  var errors = document.getElementById("errors");
  window.addEventListener("error", function (e) {
    errors.textContent += "error: " + e.message + "\n";
  });

  var how = document.getElementById("how");
  var pinned = null;

  function cells(table) { return Array.prototype.slice.call(table.querySelectorAll("td[tabindex]")); }
  function hidden(td) {
    return document.body.classList.contains("predict") && td.hasAttribute("data-ask") && !td.classList.contains("revealed");
  }

  // The arithmetic behind a cell, in the panel at the foot of the page. While a number waits for
  // a guess, only the first line (what to compute) is shown.
  function show(td) {
    if (!td.hasAttribute("data-name")) return;
    var lines = (td.getAttribute("data-how") || "").split("\n");
    if (hidden(td)) lines = lines.slice(0, 1).concat(["  = ?   (type your guess into the cell, or click it again to reveal)"]);
    how.textContent = "";
    var title = document.createElement("strong");
    title.textContent = td.getAttribute("data-name");
    how.appendChild(title);
    var pre = document.createElement("pre");
    pre.textContent = lines.join("\n");
    how.appendChild(pre);
    var claim = td.getAttribute("data-claim");
    if (claim && !hidden(td)) {
      var p = document.createElement("div");
      var ok = td.getAttribute("data-claim-ok") === "1";
      p.className = "claim " + (ok ? "ok" : "bad");
      p.textContent = (ok ? "\u2713 the file's claim holds: " : "\u2717 the file's claim fails: ") + claim;
      how.appendChild(p);
    }
  }

  function select(td) {
    if (pinned) pinned.classList.remove("selected");
    pinned = td;
    td.classList.add("selected");
    show(td);
  }

  function reveal(td) {
    td.classList.add("revealed");
    show(td);
  }

  // "1/2", "-0.25", ".5", "1e-3", with a typographic minus too; null when it is not a number.
  function parse(text) {
    var s = text.trim().replace(/\u2212/g, "-");
    var m = /^([-+]?[0-9.eE+-]+)\s*\/\s*([-+]?[0-9.eE+-]+)$/.exec(s);
    if (m) return Number(m[1]) / Number(m[2]);
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return null;
    return Number(s);
  }

  function guess(td, input) {
    var g = parse(input.value);
    td.classList.remove("right", "wrong");
    if (g === null || !isFinite(g)) {
      input.setCustomValidity("a number, such as 0.25, -1/2 or 1e-3");
      input.reportValidity();
      return;
    }
    input.setCustomValidity("");
    var v = Number(td.getAttribute("data-v")), tol = Number(td.getAttribute("data-tol"));
    if (Math.abs(g - v) <= tol) {
      td.classList.add("right");
      reveal(td);
    } else {
      td.classList.add("wrong");
    }
  }

  function guessInput(td) {
    var input = td.querySelector("input.guess");
    if (input) return input;
    input = document.createElement("input");
    input.className = "guess";
    input.type = "text";
    input.inputMode = "decimal";
    input.setAttribute("aria-label", "your value of " + td.getAttribute("data-name"));
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { guess(td, input); e.preventDefault(); }
      e.stopPropagation();
    });
    td.insertBefore(input, td.firstChild);
    return input;
  }

  function setPredict(on) {
    document.body.classList.toggle("predict", on);
    var button = document.getElementById("predict");
    button.setAttribute("aria-pressed", on ? "true" : "false");
    if (on) document.querySelectorAll("td[data-ask]").forEach(guessInput);
    if (pinned) show(pinned);
  }

  document.querySelectorAll("table.grid").forEach(function (table) {
    var list = cells(table);
    list.forEach(function (td) {
      td.addEventListener("mouseenter", function () { if (!pinned) show(td); });
      td.addEventListener("click", function (e) {
        if (e.target.tagName === "INPUT") return;
        if (hidden(td) && pinned === td) reveal(td);
        select(td);
      });
      td.addEventListener("keydown", function (e) {
        var row = td.parentElement, r = row.rowIndex, c = td.cellIndex, target = null;
        if (e.key === "ArrowRight") target = row.cells[c + 1];
        else if (e.key === "ArrowLeft") target = row.cells[c - 1];
        else if (e.key === "ArrowDown" && table.rows[r + 1]) target = table.rows[r + 1].cells[c];
        else if (e.key === "ArrowUp" && r > 0) target = table.rows[r - 1].cells[c];
        else if (e.key === "Enter" || e.key === " ") {
          if (hidden(td)) guessInput(td).focus();
          select(td);
          e.preventDefault();
          return;
        } else return;
        if (target && target.hasAttribute("tabindex")) { target.focus(); select(target); }
        e.preventDefault();
      });
    });
  });

  // A page whose numbers carry no arithmetic (the backward pass, the tables of gelu-table and
  // params) does not offer to explain them; one with no number to move to (params) offers nothing.
  if (!document.querySelector("td[data-name]")) {
    how.hidden = true;
    document.querySelector(".toolbar .hint").textContent =
      document.querySelector("td[tabindex]") ? "Arrow keys move between numbers." : "";
  }

  var predict = document.getElementById("predict");
  if (!document.querySelector("td[data-ask]")) {
    predict.hidden = true;
    document.getElementById("reveal").hidden = true;
  }
  // nothing to press and nothing to say: no bar
  var bar = document.querySelector(".toolbar");
  if (predict.hidden && !bar.querySelector(".hint").textContent) bar.style.display = "none";
  predict.addEventListener("click", function () { setPredict(!document.body.classList.contains("predict")); });
  // Worked numbers (arithmetic, bars, readings, summary) wait behind a button in predict-first.
  function revealAnswer(answer) {
    answer.classList.add("revealed");
    if (answer.previousElementSibling && answer.previousElementSibling.classList.contains("show-answer"))
      answer.previousElementSibling.classList.remove("waiting");
  }
  document.querySelectorAll(".answer").forEach(function (answer) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "show-answer waiting";
    button.textContent = "Show the worked numbers";
    button.addEventListener("click", function () { revealAnswer(answer); });
    answer.parentElement.insertBefore(button, answer);
  });
  function revealAll() {
    document.querySelectorAll("td[data-ask]").forEach(function (td) { td.classList.add("revealed"); });
    document.querySelectorAll(".answer, .legend.asked").forEach(revealAnswer);
    if (pinned) show(pinned);
  }
  document.getElementById("reveal").addEventListener("click", revealAll);
  setPredict(document.body.hasAttribute("data-hide"));
  // page.html#reveal opens a predict-first page with every answer shown, as "Reveal all" does (a key to print).
  if (location.hash === "#reveal") revealAll();

  // A link to one number: page.html#cell=hidden[1][0] opens the page on it, explained.
  if (location.hash.indexOf("#cell=") === 0) {
    var wanted = decodeURIComponent(location.hash.slice(6));
    var target = Array.prototype.find.call(document.querySelectorAll("td[data-name]"), function (td) {
      return td.getAttribute("data-name") === wanted;
    });
    if (target) {
      select(target);
      target.scrollIntoView({ block: "nearest" });
    }
  }

  // A plot's readout: the sampled point nearest the pointer, as ffn-trace computed it.
  document.querySelectorAll("figure.plot").forEach(function (fig) {
    var data = JSON.parse(fig.querySelector("script.plot-data").textContent);
    var svg = fig.querySelector("svg"), readout = fig.querySelector(".readout");
    var left = Number(svg.getAttribute("data-left")), right = Number(svg.getAttribute("data-right"));
    svg.addEventListener("mousemove", function (e) {
      var box = svg.getBoundingClientRect();
      var sx = (e.clientX - box.left) * svg.viewBox.baseVal.width / box.width;
      var f = Math.min(1, Math.max(0, (sx - left) / (right - left)));
      var i = Math.round(f * (data.xs.length - 1));
      readout.textContent = "x = " + data.xs[i] + ":  " + data.curves.map(function (c) {
        return c.name + " = " + c.ys[i];
      }).join(",  ");
    });
  });

  // Cards open for printing, and stay as the reader left them after.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details.card").forEach(function (d) { d.open = true; });
  });

  // The numbers in the visible text that the page asks a learner to work out: every decimal of an
  // asked cell, unsigned, that is not also a given number (an input or a weight) in a grid.
  function visibleDerivedNumbers() {
    var numbers = function (text) { return (text.replace(/\u2212/g, "-").match(/\d+\.\d+/g) || []); };
    var given = {}, derived = {};
    document.querySelectorAll("table.grid td:not([data-ask])").forEach(function (td) {
      numbers(td.textContent).forEach(function (n) { given[n] = true; });
    });
    document.querySelectorAll("td[data-ask] .val").forEach(function (v) {
      numbers(v.textContent).forEach(function (n) { if (!given[n]) derived[n] = true; });
    });
    return numbers(document.querySelector("main").innerText).filter(function (n) { return derived[n]; });
  }

  // The self-test: the page works itself as a learner would and records what it saw, for a
  // headless browser to read.
  if (location.hash === "#selftest") {
    var out = document.getElementById("selftest"), failed = [], passed = [];
    function check(name, ok) { (ok ? passed : failed).push(name); }
    try {
      check("grids built", document.querySelectorAll("table.grid").length > 0);
      // Wide tables and worked lines scroll inside their cards; nothing widens the page itself.
      var wide = document.documentElement.scrollWidth - document.documentElement.clientWidth;
      check("the page fits the window" + (wide > 1 ? " (" + wide + " px too wide)" : ""), wide <= 1);
      // A page asked for with --hide: nothing worked out shows until guessed or revealed.
      if (document.body.hasAttribute("data-hide") && document.querySelector("td[data-ask]")) {
        var leaked = visibleDerivedNumbers();
        check("predict-first shows no worked-out number" + (leaked.length ? " (shows " + leaked.slice(0, 5).join(", ") + ")" : ""),
              leaked.length === 0);
        var asked0 = document.querySelector("td[data-ask]");
        check("predict-first hides a cell's colour", getComputedStyle(asked0).backgroundImage === "none" &&
              /rgba\(0, 0, 0, 0\)|transparent/.test(getComputedStyle(asked0).backgroundColor));
      }
      var explained = document.querySelector("td[data-how]");
      if (explained) {
        explained.click();
        check("click shows the arithmetic", how.textContent.indexOf(explained.getAttribute("data-name")) >= 0 &&
              how.querySelector("pre").textContent.length > 0);
        explained.focus();
        var before = document.activeElement;
        explained.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
        var moved = document.activeElement !== before;
        if (!moved) {
          explained.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
          moved = document.activeElement !== before;
        }
        check("arrow keys move between cells", moved || cells(explained.closest("table")).length === 1);
      }
      var asked = document.querySelectorAll("td[data-ask]");
      if (asked.length > 0) {
        setPredict(true);
        var first = asked[0];
        check("predict-first hides the value", getComputedStyle(first.querySelector(".val")).visibility === "hidden");
        var input = guessInput(first);
        input.value = first.getAttribute("data-v");
        input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
        check("a right guess turns green", first.classList.contains("right") && first.classList.contains("revealed"));
        var second = asked[asked.length > 1 ? 1 : 0];
        second.classList.remove("revealed", "right");
        var wrong = guessInput(second);
        wrong.value = String(Number(second.getAttribute("data-v")) + 10 * Number(second.getAttribute("data-tol")) + 1);
        wrong.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
        check("a wrong guess is marked", second.classList.contains("wrong") && !second.classList.contains("revealed"));
        setPredict(false);
        check("turning predict-first off shows every value",
              getComputedStyle(second.querySelector(".val")).visibility === "visible");
      }
      document.querySelectorAll("figure.plot svg").forEach(function (svg) {
        var box = svg.getBoundingClientRect();
        svg.dispatchEvent(new MouseEvent("mousemove", { clientX: box.left + box.width / 2, clientY: box.top + box.height / 2 }));
        check("the plot's readout follows the pointer", svg.parentElement.querySelector(".readout").textContent.indexOf("x = ") === 0);
      });
    } catch (e) {
      failed.push("exception: " + e.message);
    }
    out.setAttribute("data-result", failed.length === 0 && errors.textContent === "" ? "pass" : "fail");
    out.textContent = "selftest " + out.getAttribute("data-result") + "; passed: " + passed.join(", ") +
      (failed.length ? "; failed: " + failed.join(", ") : "");
  }
})();
