// kms review: keyboard shortcuts on the queue (the pages work without this file: plain forms post and redirect).
// j/k move between items, a approves the focused item, r puts the cursor in its reason and rejects on Enter.
(function () {
  "use strict";
  function items() { return Array.prototype.slice.call(document.querySelectorAll("article.item[data-pending]")); }
  function current() {
    var focused = document.activeElement && document.activeElement.closest ? document.activeElement.closest("article.item") : null;
    return focused || document.querySelector("article.item.focused") || items()[0] || null;
  }
  function focus(el) {
    items().forEach(function (i) { i.classList.remove("focused"); });
    if (el) { el.classList.add("focused"); el.focus(); el.scrollIntoView({ block: "nearest" }); }
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable)) { return; }
    var item = current();
    if (!item) { return; }
    var all = items(), at = all.indexOf(item);
    if (ev.key === "j") { focus(all[Math.min(at + 1, all.length - 1)]); ev.preventDefault(); }
    else if (ev.key === "k") { focus(all[Math.max(at - 1, 0)]); ev.preventDefault(); }
    else if (ev.key === "a") {
      var approve = item.querySelector("form.approve");
      if (approve) { ev.preventDefault(); approve.requestSubmit ? approve.requestSubmit() : approve.submit(); }
    } else if (ev.key === "r") {
      var reason = item.querySelector("form.reject input[name=reason]");
      if (reason) { ev.preventDefault(); focus(item); reason.focus(); }
    }
  });
})();
