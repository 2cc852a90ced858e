// rmsweb observation: the visible interactive elements of the page, in document
// order, with the index the model refers to. Stores the element handles in
// window.__rmswebEls so that actions address exactly what the model saw.
(function (excludeSelector) {
  window.__rmswebHitPoint = __HIT_POINT__;
  const INTERACTIVE_TAGS = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'SUMMARY', 'DETAILS']);
  const INTERACTIVE_ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'option', 'switch', 'textbox', 'combobox', 'listbox',
    'searchbox', 'slider', 'spinbutton', 'treeitem', 'gridcell']);
  const KEY_ATTRS = ['id', 'name', 'type', 'role', 'href', 'placeholder', 'aria-label', 'title'];
  const excluded = excludeSelector ? Array.from(document.querySelectorAll(excludeSelector)) : [];
  const isExcluded = (el) => excluded.some((x) => x === el || x.contains(el));
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const hasJsHandler = (el) => {
    if (typeof el.onclick === 'function' || typeof el.onmousedown === 'function') return true;
    if (typeof el.__onclick === 'function' || typeof el.__onmousedown === 'function') return true; // d3 v3
    try {
      const jq = window.jQuery && window.jQuery._data && window.jQuery._data(el, 'events');
      if (jq && (jq.click || jq.mousedown || jq.mouseup)) return true;
    } catch (e) {}
    return false;
  };
  const interactive = (el) => {
    if (INTERACTIVE_TAGS.has(el.tagName)) {
      if (el.tagName === 'INPUT' && el.type === 'hidden') return false;
      if (el.tagName === 'A' && !el.hasAttribute('href') && !hasJsHandler(el)) {
        return window.getComputedStyle(el).cursor === 'pointer';
      }
      return true;
    }
    const role = el.getAttribute('role');
    if (role && INTERACTIVE_ROLES.has(role)) return true;
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) return true;
    if (hasJsHandler(el)) return true;
    const cur = window.getComputedStyle(el).cursor;
    if (cur === 'pointer') {
      const p = el.parentElement;
      return !(p && window.getComputedStyle(p).cursor === 'pointer');
    }
    return false;
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    const st = window.getComputedStyle(el);
    if (st.visibility === 'hidden' || st.display === 'none' || parseFloat(st.opacity) === 0) return false;
    const vw = window.innerWidth, vh = window.innerHeight;
    if (r.right <= 0 || r.bottom <= 0 || r.left >= vw || r.top >= vh) return false;
    // Visible when some point of it (centre first, then inner points) is on top.
    return window.__rmswebHitPoint(el) !== null;
  };
  const labelText = (el) => {
    const wrap = el.closest('label');
    if (wrap) return clean(wrap.innerText || wrap.textContent);
    if (el.id) {
      const l = document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
      if (l) return clean(l.innerText || l.textContent);
    }
    return '';
  };
  const textOf = (el) => {
    if (el.tagName === 'SELECT') {
      return Array.from(el.options).map((o) => clean(o.text)).join(' | ');
    }
    if (el.tagName === 'INPUT') {
      if (el.type === 'checkbox' || el.type === 'radio') return labelText(el);
      if (el.type === 'button' || el.type === 'submit' || el.type === 'reset') return clean(el.value);
      return '';
    }
    if (el.tagName === 'TEXTAREA') return '';
    return clean(el.innerText || el.textContent);
  };
  const implicitRole = (el) => {
    switch (el.tagName) {
      case 'A': return el.hasAttribute('href') ? 'link' : '';
      case 'BUTTON': return 'button';
      case 'SELECT': return 'combobox';
      case 'TEXTAREA': return 'textbox';
      case 'INPUT':
        if (el.type === 'checkbox' || el.type === 'radio') return el.type;
        if (el.type === 'button' || el.type === 'submit' || el.type === 'reset') return 'button';
        if (el.type === 'range') return 'slider';
        return 'textbox';
      default: return '';
    }
  };
  const out = [];
  const handles = [];
  const all = document.body ? document.body.querySelectorAll('*') : [];
  for (const el of all) {
    if (!interactive(el) || isExcluded(el) || !visible(el)) continue;
    // An element inside an interactive atomic element (a span in a button) is the same target.
    const atomic = el.parentElement && el.parentElement.closest('a[href], button, select, label');
    if (atomic && handles.includes(atomic) && !INTERACTIVE_TAGS.has(el.tagName)) continue;
    const r = el.getBoundingClientRect();
    const attrs = {};
    for (const k of KEY_ATTRS) {
      const v = el.getAttribute(k);
      if (v !== null && v !== '') attrs[k] = String(v).slice(0, 200);
    }
    if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') {
      if (el.type === 'checkbox' || el.type === 'radio') {
        attrs['checked'] = el.checked ? 'true' : 'false';
      } else if (el.tagName === 'SELECT') {
        const o = el.options[el.selectedIndex];
        if (o) attrs['selected'] = clean(o.text);
      } else if (el.type !== 'password' || el.value !== '') {
        if (el.value !== '') attrs['value'] = String(el.value).slice(0, 200);
      }
    }
    if (el.tagName === 'OPTION' && el.selected) attrs['selected'] = 'true';
    if (el.tagName === 'A' && attrs.href && attrs.href.length > 120) attrs.href = attrs.href.slice(0, 120);
    const role = el.getAttribute('role') || implicitRole(el);
    out.push({
      index: out.length + 1,
      tag: el.tagName.toLowerCase(),
      role: role,
      text: textOf(el).slice(0, 300),
      attrs: attrs,
      bbox: [r.left, r.top, r.width, r.height],
    });
    handles.push(el);
  }
  window.__rmswebEls = handles;
  return JSON.stringify({ url: location.href, title: document.title, elements: out });
})
