// weir ui: pages reload themselves every data-refresh-ms (unless the box in the header is
// unticked, or the user is filling in a form or has ticked a job), and the dead tab's
// "select all" box. No other script, nothing fetched from elsewhere.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refreshMs || 0);
  // The message an action left (?did=...) is shown once: reloads drop it from the URL.
  var url = new URL(window.location.href);
  if (url.searchParams.has("did")) {
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
  function busy() {
    if (document.querySelector("input[name=id]:checked")) return true;
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
  document.querySelectorAll("[data-select-all]").forEach(function (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input[name=id]").forEach(function (c) { c.checked = all.checked; });
    });
  });
})();
