// pydata-sphinx-theme 0.20 binds its sidebar dialogs to the first ".primary-toggle" and
// ".secondary-toggle" in the page, which sphinx-book-theme hides; the buttons a reader sees do
// nothing (pydata-sphinx-theme issue 2451). Each visible button forwards its click to the bound
// one, so the theme's own handlers (a dialog on narrow screens, collapsing the sidebar on wide
// ones) run.
document.addEventListener("DOMContentLoaded", () => {
  for (const selector of [".primary-toggle", ".secondary-toggle"]) {
    const [bound, ...visible] = document.querySelectorAll(selector);
    for (const button of visible) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    }
  }
});
