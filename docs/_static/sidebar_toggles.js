// sphinx-book-theme 1.4 on pydata-sphinx-theme 0.20: both themes hook their sidebar toggles with
// document.querySelector(".primary-toggle"), i.e. the first such button, which is the pydata
// header's, hidden under this theme. The visible button (top left of the article, and the
// contents button top right) then does nothing: at phone width the navigation cannot be opened.
// Forward a click on any other toggle to the hooked one.
(function () {
  "use strict";
  function forward(selector) {
    const buttons = document.querySelectorAll(selector);
    for (const button of [...buttons].slice(1)) {
      // capture phase, and no other handler of this button runs: should a later theme hook every
      // toggle itself, the sidebar still opens once
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopImmediatePropagation();
        buttons[0].click();
      }, true);
    }
  }
  function hook() { forward(".primary-toggle"); forward(".secondary-toggle"); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", hook);
  else hook();
})();
