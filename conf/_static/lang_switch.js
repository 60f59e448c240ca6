// The language switch: a button in every page's header that opens the same page, at the section
// being read, in the other edition. The English edition is the site's root; each translation is a
// folder under it (zh_CN/), built from the same pages, with the same labels and file names.
document.addEventListener("DOMContentLoaded", () => {
  const EDITIONS = { en: { folder: "", label: "中文", title: "阅读中文版" },
                     "zh-CN": { folder: "zh_CN/", label: "English", title: "Read in English" } };
  const html = document.documentElement;
  const here = EDITIONS[html.lang] ? html.lang : "en";
  const other = here === "en" ? "zh-CN" : "en";
  const root = new URL(html.dataset.content_root || "./", location.href);  // this edition's root
  const page = decodeURI(location.pathname).slice(decodeURI(root.pathname).length);
  const englishRoot = new URL(here === "en" ? "./" : "../", root);
  const target = new URL(EDITIONS[other].folder + page, englishRoot);

  const link = document.createElement("a");
  link.className = "btn btn-sm lang-switch";
  link.href = target.href;
  link.textContent = EDITIONS[here].label;
  link.title = EDITIONS[here].title;
  link.setAttribute("hreflang", other);
  link.addEventListener("click", () => {
    // the section at the top of the window, unless the address already names one
    let id = location.hash.slice(1);
    if (!id) {
      for (const section of document.querySelectorAll("main section[id]")) {
        if (section.getBoundingClientRect().top <= 80) id = section.id;
      }
    }
    link.href = target.href.split("#")[0] + (id ? "#" + id : "");
  });
  const buttons = document.querySelector(".article-header-buttons");
  if (buttons) buttons.prepend(link);
});
