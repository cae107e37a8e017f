// The lecture's legibility audit (tests/browser/test_lecture_legible.py), run in the page with
// page.evaluate(source, minPx): every visible element that owns text (a non-blank text node of its
// own, SVG <text> included) with its computed font size and box; every element that clips its
// content (overflow other than visible) and is overfull; the document's scroll size; the smallest
// text a canvas matrix drew (data-min-font, set by frontend/js/lecture/matrix.js).
(minPx) => {
  const vw = window.innerWidth, vh = window.innerHeight;
  const small = [], outside = [], clipped = [];
  const name = (e) => {
    let s = e.tagName.toLowerCase();
    if (e.id) s += '#' + e.id;
    if (e.classList && e.classList.length) s += '.' + [...e.classList].join('.');
    return s;
  };
  const visible = (e) => {
    if (!e.getClientRects().length) return false;
    for (let a = e; a && a.nodeType === 1; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.display === 'none' || cs.visibility === 'hidden' || Number(cs.opacity) === 0) return false;
      if (a.hasAttribute('hidden') || a.getAttribute('aria-hidden') === 'true' && a.closest('.katex-mathml')) return false;
      if (cs.clip === 'rect(0px, 0px, 0px, 0px)' || a.classList.contains('sr-only')) return false;
      if (a.tagName === 'DETAILS' && !a.open && a !== e && !e.closest('summary')) return false;
    }
    return true;
  };
  const all = document.body.querySelectorAll('*');
  for (const e of all) {
    if (e.closest('.katex-mathml, script, style, noscript, template')) continue;
    // a skip link sits above the viewport by design until it is focused
    if (e.classList.contains('skip-link') && document.activeElement !== e) continue;
    const own = [...e.childNodes].some((c) => c.nodeType === 3 && c.textContent.replace(/[\s\u200b]/g, ''));
    if (own && visible(e)) {
      const px = parseFloat(getComputedStyle(e).fontSize);
      const r = e.getBoundingClientRect();
      const text = e.textContent.trim().slice(0, 40);
      if (px < minPx - 0.01 && r.width > 0 && r.height > 0) small.push(`${name(e)} "${text}" ${px.toFixed(1)}px`);
      if (r.width > 0 && (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5))
        outside.push(`${name(e)} "${text}" [${r.left|0},${r.top|0},${r.right|0},${r.bottom|0}]`);
      // inside a clipping ancestor (the figure, the panel): within its box too
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
        const cs = getComputedStyle(a);
        if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
        const b = a.getBoundingClientRect();
        if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5)
          outside.push(`${name(e)} "${text}" outside ${name(a)}`);
        break;
      }
    }
    if (!visible(e)) continue;
    const cs = getComputedStyle(e);
    if (e.closest('.katex')) continue;  // KaTeX's struts overhang by design; their text is checked above
    if (cs.overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1)
      clipped.push(`${name(e)} scrollWidth ${e.scrollWidth} > ${e.clientWidth}`);
    if (cs.overflowY !== 'visible' && e.scrollHeight > e.clientHeight + 1)
      clipped.push(`${name(e)} scrollHeight ${e.scrollHeight} > ${e.clientHeight}`);
  }
  const d = document.documentElement;
  if (d.scrollWidth > vw + 1) clipped.push(`document scrollWidth ${d.scrollWidth} > ${vw}`);
  if (d.scrollHeight > vh + 1) clipped.push(`document scrollHeight ${d.scrollHeight} > ${vh}`);
  // canvases (matrices) report the font they drew their labels with
  for (const c of document.querySelectorAll('canvas[data-min-font]')) {
    const px = Number(c.dataset.minFont);
    if (px < minPx - 0.01) small.push(`${name(c)} canvas text ${px}px`);
    const r = c.getBoundingClientRect();
    if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5)
      outside.push(`${name(c)} [${r.left|0},${r.top|0},${r.right|0},${r.bottom|0}]`);
  }
  return { small, outside, clipped };
}
