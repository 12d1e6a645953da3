/* Search result snippets of "Attention, Step by Step".
 *
 * Sphinx's search (searchtools.js, on search.html only) shows a snippet of
 * each page it finds, cut from the text of the page's whole main area. In
 * this theme that area starts with the article's header buttons (download
 * ".ipynb" and ".pdf"), so snippets began with "....pdf", and formulas came
 * out as TeX with their \( \) delimiters. This takes the snippet from the
 * article alone, with formulas' delimiters dropped. tests/browser checks the
 * snippets. On every other page `Search` does not exist and this does nothing.
 */
(() => {
  "use strict";
  const NOT_CONTENT = [
    ".bd-header-article",
    ".header-article-items",
    ".prev-next-area",
    ".bd-sidebar-secondary",
    ".bd-footer-article",
    ".bd-footer-content",
  ].join(", ");

  const patch = () => {
    // `Search` is searchtools.js's global (a `const`, so not on `window`).
    if (typeof Search !== "object" || typeof Search.htmlToText !== "function") return;
    if (Search.htmlToText.bookArticleOnly) return;
    const original = Search.htmlToText;
    const articleOnly = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(NOT_CONTENT).forEach((element) => element.remove());
      doc.querySelectorAll(".math").forEach((element) => {
        element.textContent = element.textContent
          .trim()
          .replace(/^\\[([]/, "")
          .replace(/\\[)\]]$/, "");
      });
      return original(doc.documentElement.outerHTML, anchor);
    };
    articleOnly.bookArticleOnly = true;
    Search.htmlToText = articleOnly;
  };

  patch();
  document.addEventListener("DOMContentLoaded", patch);
})();
