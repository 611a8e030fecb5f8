// Render the maths that pymdownx.arithmatex (generic mode) leaves in `.arithmatex` elements,
// with the KaTeX bundled in docs/katex/: the site needs no network. Runs on every page load,
// including mkdocs-material's instant navigation.
document$.subscribe(({ body }) => {
  for (const element of body.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
      strict: false,
      trust: false,
    });
  }
});
