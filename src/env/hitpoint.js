// The first point of an element (centre, then points inside it) where the element
// (or a label naming it) is what a click would hit; null when it is covered.
function (el) {
  const r = el.getBoundingClientRect();
  const vw = window.innerWidth, vh = window.innerHeight;
  const fr = [[0.5, 0.5], [0.25, 0.5], [0.75, 0.5], [0.5, 0.25], [0.5, 0.75],
              [0.15, 0.15], [0.85, 0.15], [0.15, 0.85], [0.85, 0.85]];
  for (const [fx, fy] of fr) {
    const x = r.left + r.width * fx, y = r.top + r.height * fy;
    if (x < 0 || y < 0 || x >= vw || y >= vh) continue;
    const hit = document.elementFromPoint(x, y);
    if (!hit) continue;
    if (hit === el || el.contains(hit) || hit.contains(el)) return [x, y];
    const lab = hit.closest && hit.closest('label');
    if (lab && (lab.contains(el) || (el.id && lab.htmlFor === el.id))) return [x, y];
  }
  return null;
}
