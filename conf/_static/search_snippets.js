// Sphinx builds each search result's snippet from the text of the page's [role="main"]. In this
// theme that element also holds the article header (the download, full-screen, theme and search
// buttons), the page's contents twice (for print and for the "On this page" panel), the cite
// button of every heading and the "Show code cell source" toggles, and a snippet could show
// those instead of the page's prose. They are dropped before Sphinx reads the text.
// Sphinx loads searchtools.js after the theme's scripts, so the wrap waits for the page to load.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") return;
  const original = Search.htmlToText;
  const chrome = [".bd-header-article", ".infralens-cite", "button", "summary", "#jb-print-toc",
                  ".prev-next-area", ".bd-footer-article", ".bd-sidebar-secondary"].join(", ");
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(chrome).forEach((el) => el.remove());
    return original(doc.documentElement.outerHTML, anchor);
  };
});
