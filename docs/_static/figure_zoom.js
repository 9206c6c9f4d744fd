// Every figure of a page opens at full size: an image in the text that is not a link already
// becomes a link to its own file (the browser shows it at its natural size, and a phone can zoom it).
(function () {
  "use strict";
  function wrap() {
    document.querySelectorAll(".bd-article img").forEach((img) => {
      if (img.closest("a") || !img.getAttribute("src")) return;
      const a = document.createElement("a");
      a.href = img.getAttribute("src");
      a.className = "figure-zoom";
      a.title = "Open this figure at full size";
      a.setAttribute("aria-label", "Open the figure at full size" + (img.alt ? ": " + img.alt : ""));
      img.replaceWith(a);
      a.append(img);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wrap);
  else wrap();
})();
