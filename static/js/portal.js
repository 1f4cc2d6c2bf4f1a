/* The portal's small progressive enhancements; every page works without them.
 * - <time datetime data-format>: shown in the reader's locale and time zone (Intl).
 * - <data value data-unit>: numbers in the reader's number format.
 * - forms with data-busy-text on their submit button: the button says what is happening and
 *   cannot be pressed twice while the server works (launch, stop, save).
 * - <button class="copy" data-copy="ID" hidden>: shown, it copies the text of the element ID
 *   (a command to paste) to the clipboard and says so.
 * - what htmx swaps in while a button or link is pressed waits for the release (below).
 * Runs on load and on every piece of content htmx swaps in. */
(function () {
  "use strict";

  var STYLES = {
    datetime: { dateStyle: "medium", timeStyle: "medium" },
    minutes: { dateStyle: "medium", timeStyle: "short" },
    date: { dateStyle: "medium" },
    time: { timeStyle: "medium" },
  };
  var formats = {};

  function formatter(style) {
    if (!formats[style]) {
      formats[style] = new Intl.DateTimeFormat(undefined, STYLES[style] || STYLES.datetime);
    }
    return formats[style];
  }

  function localiseTimes(root) {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    root.querySelectorAll("time[datetime][data-format]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) { return; }
      if (!el.title) { el.title = el.textContent.trim(); }  // the server's rendering, in UTC
      el.textContent = formatter(el.getAttribute("data-format")).format(when);
      el.setAttribute("data-zone", zone);
    });
  }

  var number = new Intl.NumberFormat();
  function localiseNumbers(root) {
    root.querySelectorAll("data[value][data-unit]").forEach(function (el) {
      var value = Number(el.getAttribute("value"));
      if (!isNaN(value)) { el.textContent = number.format(value) + "\u00a0" + el.getAttribute("data-unit"); }
    });
  }

  function busyForms(root) {
    root.querySelectorAll("form button[data-busy-text]").forEach(function (button) {
      var form = button.form;
      if (!form || form.dataset.busyBound) { return; }
      form.dataset.busyBound = "1";
      form.addEventListener("submit", function (event) {
        var submitter = event.submitter;
        if (event.defaultPrevented || !submitter || !submitter.hasAttribute("data-busy-text")) { return; }
        form.setAttribute("aria-busy", "true");
        submitter.setAttribute("data-label", submitter.textContent);
        submitter.textContent = submitter.getAttribute("data-busy-text");
        submitter.classList.add("busy");
        // disabled after the browser took the form's data (a disabled button is not sent)
        setTimeout(function () { submitter.disabled = true; }, 0);
      });
    });
  }

  // a live check (the launch page's fit check) marks the field it judges invalid or valid
  function markChecked(root) {
    var check = root.closest ? root.closest("[data-marks-invalid]") : null;
    if (!check) { return; }
    var field = document.querySelector(check.getAttribute("data-marks-invalid"));
    if (!field) { return; }
    if (check.querySelector(".check-error")) {
      field.setAttribute("aria-invalid", "true");
    } else if (!field.hasAttribute("data-server-invalid")) {
      field.removeAttribute("aria-invalid");
    }
  }

  // copy buttons exist only with this script: without it the command is there to select
  function showCopyButtons(root) {
    root.querySelectorAll("button.copy[data-copy][hidden]").forEach(function (button) {
      button.hidden = false;
    });
  }

  function copied(button, ok) {
    button.textContent = ok ? "Copied" : "Select and copy it";
    button.classList.toggle("copied", ok);
  }

  function copyText(button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) { return; }
    var text = source.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { copied(button, true); },
                                                function () { copied(button, false); });
      return;
    }
    // a page served over plain HTTP has no clipboard API: select the text and copy that
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    copied(button, ok);
  }

  // one listener for the page: copy buttons swapped in by htmx (the live workload page) work too
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy[data-copy]") : null;
    if (button) { copyText(button); }
  });

  function enhance(root) {
    markChecked(root);
    localiseTimes(root);
    localiseNumbers(root);
    busyForms(root);
    showCopyButtons(root);
  }

  // A press on a button or link holds what htmx swaps in until the press ends. A live check that
  // answers between press and release (the launch page's fit check runs when the GPU count
  // loses focus, that is on the press of Launch) can grow and move the button from under the
  // pointer: the release lands beside it and the click is lost without a word. Held swaps are
  // made just after the click, in the order they came.
  var pressing = false;
  var held = [];
  var pressTimer = null;

  function releaseHeld() {
    pressing = false;
    clearTimeout(pressTimer);
    var swaps = held;
    held = [];
    swaps.forEach(function (s) {
      if (!document.body.contains(s.target)) { return; }
      window.htmx.swap(s.target, s.content, { swapStyle: s.style, swapDelay: 0, settleDelay: 0 });
    });
  }

  document.addEventListener("pointerdown", function (event) {
    if (!event.isPrimary || !event.target.closest || !event.target.closest("button, a[href], input[type=submit]")) { return; }
    pressing = true;
    // a press that never reports its end (the window lost, a menu opened) holds nothing for long
    clearTimeout(pressTimer);
    pressTimer = setTimeout(releaseHeld, 2000);
  }, true);
  ["pointerup", "pointercancel"].forEach(function (type) {
    // after the click this release brings (dispatched in the same task)
    document.addEventListener(type, function () { if (pressing) { setTimeout(releaseHeld, 0); } }, true);
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (!pressing || !detail.shouldSwap || !window.htmx || !window.htmx.swap) { return; }
    var declared = detail.elt && detail.elt.closest ? detail.elt.closest("[hx-swap]") : null;
    var style = (detail.swapOverride || (declared && declared.getAttribute("hx-swap")) ||
                 "innerHTML").split(" ")[0];
    held.push({ target: detail.target, content: detail.serverResponse, style: style });
    event.preventDefault();
  });

  // back from the browser's cache (after Back): buttons are usable again
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) { return; }
    document.querySelectorAll("button.busy").forEach(function (b) {
      b.disabled = false;
      b.classList.remove("busy");
      b.textContent = b.getAttribute("data-label");
    });
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { enhance(document); });
  } else {
    enhance(document);
  }
  document.addEventListener("htmx:load", function (event) { enhance(event.target); });
})();
