// weir ui: pages reload themselves every data-refresh-ms, unless the box in the header is
// unticked or the user is busy (filling in a form, a job ticked, text selected, the
// pointer on a button or box, a click in the last two seconds); times in local time; and
// the dead tab's "select all" box. No other script, nothing fetched from elsewhere.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refreshMs || 0);
  // The message an action left (?did=...) stays for five seconds; reloads drop it.
  var url = new URL(window.location.href);
  var quietUntil = 0;
  if (url.searchParams.has("did")) {
    quietUntil = Date.now() + 5000;
    ["did", "n", "skipped"].forEach(function (k) { url.searchParams.delete(k); });
    window.history.replaceState(null, "", url.toString());
  }
  var box = document.getElementById("auto-refresh");
  if (box) {
    box.checked = window.localStorage.getItem("weir-refresh") !== "off";
    box.addEventListener("change", function () {
      window.localStorage.setItem("weir-refresh", box.checked ? "on" : "off");
    });
  }
  document.addEventListener("pointerdown", function () { quietUntil = Math.max(quietUntil, Date.now() + 2000); });
  function busy() {
    if (Date.now() < quietUntil) return true;
    if (document.querySelector("input[name=id]:checked")) return true;
    if (document.querySelector("button:hover, label:hover, input:hover")) return true;
    var a = document.activeElement;
    if (a && a !== box && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) return true;
    var typed = Array.prototype.some.call(
      document.querySelectorAll("input[type=text]"), function (i) { return i.value !== i.defaultValue; });
    return typed || String(window.getSelection()) !== "";
  }
  if (every > 0) {
    window.setInterval(function () {
      if ((!box || box.checked) && !busy()) window.location.reload();
    }, every);
  }
  // Times: the local date and time, then the server's "3m ago" (the tooltip keeps the
  // epoch and UTC).
  function two(n) { return (n < 10 ? "0" : "") + n; }
  document.querySelectorAll("time[data-ms]").forEach(function (t) {
    var d = new Date(Number(t.dataset.ms));
    if (isNaN(d.getTime())) return;
    var local = d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
    t.textContent = local + " (" + t.textContent + ")";
  });
  document.querySelectorAll("[data-select-all]").forEach(function (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input[name=id]").forEach(function (c) { c.checked = all.checked; });
    });
  });
})();
