// The "cite" button beside each labelled heading and glossary term copies a citation with the
// section's stable URL: <book root>/a/<label>.html, resolved against wherever this copy of the
// book is served. Sphinx 9 writes the root as <html data-content_root="../">.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.infralens-cite");
  if (!button) return;
  const root = document.documentElement.dataset.content_root ?? "";
  const url = new URL(root + button.dataset.href, document.baseURI).href;
  const text = `${button.dataset.cite}, ${url}`;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "copied";
  } catch (err) {
    window.prompt("Copy this citation:", text);
  }
  setTimeout(() => { button.textContent = "cite"; }, 1500);
});
