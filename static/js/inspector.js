// The retrieval inspector: show the controls of the chosen pipeline only, and
// copy the block. The page works without this file (everything is shown).
(function () {
  "use strict";

  var pipeline = document.getElementById("id_pipeline");
  function showPipeline() {
    if (!pipeline) { return; }
    var fusion = pipeline.value === "fusion";
    document.querySelectorAll("[data-fusion-only]").forEach(function (element) {
      element.hidden = !fusion;
    });
    document.querySelectorAll("[data-pipeline-note]").forEach(function (note) {
      note.hidden = note.dataset.pipelineNote !== pipeline.value;
    });
  }
  if (pipeline) {
    pipeline.addEventListener("change", showPipeline);
    showPipeline();
  }

  // Copies the text of the element; without the clipboard API (a page served over
  // plain http elsewhere than localhost) the text is selected and copied the old way.
  document.querySelectorAll("[data-copy-block]").forEach(function (button) {
    var source = document.getElementById(button.dataset.copyBlock);
    if (!source) { return; }
    button.hidden = false;
    var label = button.textContent;

    function done(ok) {
      button.textContent = ok ? "Copied ✓" : "Selected: press Ctrl+C to copy";
      setTimeout(function () { button.textContent = label; }, 2500);
    }
    function bySelection() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (error) { ok = false; }
      done(ok);
    }
    button.addEventListener("click", function () {
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.textContent).then(function () { done(true); }, bySelection);
      } else {
        bySelection();
      }
    });
  });
})();
