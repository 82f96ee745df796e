// Timothy Memory — small progressive enhancements. Every page works without this file.
(function () {
  "use strict";

  document.documentElement.classList.add("js");

  // Tell the server the browser's time zone, so later pages show local times.
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var current = (document.cookie.match(/(?:^|; )timothy_tz=([^;]*)/) || [])[1];
    // IANA names only hold letters, digits, "/", "_", "-" and "+": safe in a cookie as they are.
    if (zone && /^[A-Za-z0-9_+\/-]+$/.test(zone) && current !== zone) {
      document.cookie = "timothy_tz=" + zone +
        "; path=/; max-age=31536000; samesite=lax" + (location.protocol === "https:" ? "; secure" : "");
    }
  } catch (error) { /* no Intl: the server's zone is used */ }

  // Controls that only make sense with JavaScript are rendered hidden.
  document.querySelectorAll("[data-js-only], [data-select-all], [data-select-all-label], [data-copy]")
    .forEach(function (element) { element.hidden = false; });

  // --- confirmation before destructive actions --------------------------------
  var dialog = null;

  function confirmDialog(message, confirmLabel) {
    return new Promise(function (resolve) {
      if (!dialog) {
        dialog = document.createElement("dialog");
        dialog.className = "confirm-dialog";
        dialog.setAttribute("aria-labelledby", "confirm-dialog-message");
        dialog.innerHTML =
          '<form method="dialog">' +
          '<p id="confirm-dialog-message"></p>' +
          '<div class="button-row">' +
          '<button type="submit" value="yes" class="button danger" data-dialog-confirm></button>' +
          '<button type="submit" value="no" class="button" autofocus>Cancel</button>' +
          "</div></form>";
        document.body.appendChild(dialog);
      }
      dialog.querySelector("#confirm-dialog-message").textContent = message;
      dialog.querySelector("[data-dialog-confirm]").textContent = confirmLabel || "Confirm";
      dialog.returnValue = "";
      dialog.addEventListener("close", function onClose() {
        dialog.removeEventListener("close", onClose);
        resolve(dialog.returnValue === "yes");
      });
      dialog.showModal();
    });
  }

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (form.dataset.confirmed === "yes") { return; }
      event.preventDefault();
      confirmDialog(form.dataset.confirm, form.dataset.confirmButton).then(function (ok) {
        if (!ok) { return; }
        form.dataset.confirmed = "yes";
        var flag = document.createElement("input");
        flag.type = "hidden";
        flag.name = "confirmed";
        flag.value = "yes";
        form.appendChild(flag);
        form.submit();
      });
    });
  });

  // --- copy buttons ------------------------------------------------------------
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.querySelector(button.dataset.copy);
      if (!source) { return; }
      var label = button.textContent;
      function done(ok) {
        button.textContent = ok ? "Copied ✓" : "Press Ctrl+C to copy";
        setTimeout(function () { button.textContent = label; }, 2500);
      }
      function fallback() {
        source.focus();
        source.select();
        var ok = false;
        try { ok = document.execCommand("copy"); } catch (error) { ok = false; }
        done(ok);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.value).then(function () { done(true); }, fallback);
      } else {
        fallback();
      }
    });
  });
  document.querySelectorAll("[data-copy-source]").forEach(function (input) {
    input.addEventListener("focus", function () { input.select(); });
  });

  // --- the confirmation queue: rejecting several asks first ---------------------
  // Without JavaScript the server shows a confirmation page instead.
  var bulkForm = document.getElementById("bulk");
  if (bulkForm) {
    bulkForm.addEventListener("submit", function (event) {
      var submitter = event.submitter;
      if (!submitter || submitter.value !== "reject" || bulkForm.dataset.confirmed === "yes") {
        return;
      }
      event.preventDefault();
      var count = bulkForm.ownerDocument.querySelectorAll("[data-select]:checked").length;
      var noun = count === 1 ? "proposal" : "proposals";
      confirmDialog(
        "Reject " + count + " " + noun + "? They stay on record and can be restored to the queue.",
        "Reject " + count
      ).then(function (ok) {
        if (!ok) { return; }
        bulkForm.dataset.confirmed = "yes";
        [["action", "reject"], ["confirmed", "yes"]].forEach(function (pair) {
          var input = document.createElement("input");
          input.type = "hidden";
          input.name = pair[0];
          input.value = pair[1];
          bulkForm.appendChild(input);
        });
        forgetSelection();
        bulkForm.submit();
      });
    });
  }

  // --- the confirmation queue: selection and keyboard --------------------------
  var SELECTION_KEY = "timothy-queue-selection";

  function forgetSelection() {
    try { sessionStorage.removeItem(SELECTION_KEY); } catch (error) { /* private mode */ }
  }

  var queue = document.querySelector("[data-queue]");
  if (!queue) { return; }

  var items = Array.prototype.slice.call(queue.querySelectorAll("[data-proposal]"));
  var boxes = Array.prototype.slice.call(document.querySelectorAll("[data-select]"));
  var selectAll = document.querySelector("[data-select-all]");
  var counter = document.querySelector("[data-selected-count]");
  var total = items.length;

  function updateSelection() {
    var selected = boxes.filter(function (box) { return box.checked; }).length;
    boxes.forEach(function (box) {
      box.closest("[data-proposal]").classList.toggle("is-selected", box.checked);
    });
    if (counter) {
      counter.textContent = selected ? selected + " of " + total + " selected" : total + " waiting";
    }
    if (selectAll) {
      selectAll.checked = selected === total && total > 0;
      selectAll.indeterminate = selected > 0 && selected < total;
    }
  }
  // The selection survives a reload (and an action on one proposal) in this tab.
  function saveSelection() {
    var ids = boxes.filter(function (box) { return box.checked; })
      .map(function (box) { return box.value; });
    try { sessionStorage.setItem(SELECTION_KEY, JSON.stringify(ids)); } catch (error) { /* private mode */ }
  }
  try {
    var kept = JSON.parse(sessionStorage.getItem(SELECTION_KEY) || "[]");
    boxes.forEach(function (box) { if (kept.indexOf(box.value) >= 0) { box.checked = true; } });
  } catch (error) { /* nothing kept */ }
  updateSelection();

  boxes.forEach(function (box) {
    box.addEventListener("change", function () { updateSelection(); saveSelection(); });
  });
  if (selectAll) {
    selectAll.addEventListener("change", function () {
      boxes.forEach(function (box) { box.checked = selectAll.checked; });
      updateSelection();
      saveSelection();
    });
  }
  if (bulkForm) {
    // A bulk confirm consumes the selection (a bulk reject does so after its dialog).
    bulkForm.addEventListener("submit", function (event) {
      if (event.submitter && event.submitter.value === "confirm") { forgetSelection(); }
    });
  }

  var STORAGE_KEY = "timothy-queue-position";
  var current = -1;

  function move(index) {
    if (!items.length) { return; }
    current = Math.max(0, Math.min(items.length - 1, index));
    items.forEach(function (item, i) { item.classList.toggle("is-current", i === current); });
    items[current].focus({ preventScroll: true });
    items[current].scrollIntoView({ block: "nearest" });
  }

  // After an action the page reloads; the same position now holds the next proposal.
  var saved = null;
  try {
    saved = sessionStorage.getItem(STORAGE_KEY);
    sessionStorage.removeItem(STORAGE_KEY);
  } catch (error) { saved = null; }
  if (saved !== null && items.length) { move(parseInt(saved, 10) || 0); }

  function keepPosition(i) {
    try { sessionStorage.setItem(STORAGE_KEY, String(i)); } catch (error) { /* private mode */ }
  }
  items.forEach(function (item, i) {
    item.querySelectorAll("form").forEach(function (form) {
      form.addEventListener("submit", function () { keepPosition(i); });
    });
    // Edit-then-confirm comes back to the queue, where the next proposal now waits here.
    var edit = item.querySelector('[data-action="edit"]');
    if (edit) { edit.addEventListener("click", function () { keepPosition(i); }); }
  });

  items.forEach(function (item, i) {
    item.addEventListener("click", function () {
      if (current !== i) {
        current = i;
        items.forEach(function (other, j) { other.classList.toggle("is-current", j === i); });
      }
    });
  });

  function act(name) {
    if (current < 0) { return; }
    var item = items[current];
    var target = item.querySelector('[data-action="' + name + '"]');
    if (!target) { return; }
    if (target.tagName === "A") {
      keepPosition(current);
      window.location.href = target.href;
    } else {
      target.requestSubmit ? target.requestSubmit() : target.submit();
    }
  }

  // Keys typed into a text field are text; a ticked checkbox or a pressed button
  // keeps the focus, but the shortcuts must go on working from there.
  var NOT_TYPING = ["checkbox", "radio", "button", "submit", "reset"];

  function isTyping(target) {
    var tag = (target.tagName || "").toLowerCase();
    if (tag === "input") { return NOT_TYPING.indexOf((target.type || "").toLowerCase()) < 0; }
    return tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (isTyping(event.target)) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    if (document.querySelector("dialog[open]")) { return; }
    switch (event.key) {
      case "j": move(current + 1); break;
      case "k": move(current < 0 ? 0 : current - 1); break;
      case "x":
        if (current >= 0) {
          var box = items[current].querySelector("[data-select]");
          box.checked = !box.checked;
          updateSelection();
        }
        break;
      case "c": act("confirm"); break;
      case "r": act("reject"); break;
      case "e": act("edit"); break;
      case "u": act("replace"); break;
      case "d": act("reject-duplicate"); break;
      default: return;
    }
    event.preventDefault();
  });
})();
