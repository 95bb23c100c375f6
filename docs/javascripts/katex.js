// Render the pages' maths (written as \( ... \) and \[ ... \] by pymdownx.arithmatex) with KaTeX.
document$.subscribe(({ body }) => {
  if (typeof renderMathInElement === "undefined") return;  // offline: the TeX source stays readable
  renderMathInElement(body, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
  });
});
