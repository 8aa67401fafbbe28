// Formatted messages (spec v1-extensions §10), as the messenger shows them. The simulator renders a bot's
// message with entities as the platform's HTML (richtext.RenderHTML: escaped text, a fixed set of tags);
// the page rebuilds it from an inert parse, element by element, keeping only those tags and attributes —
// so even a wrong rendering could not run a script or load anything — and shows the plain brand line first.

import { el } from './dom.js';

// The platform's tags, as RenderHTML writes them.
const tags = new Set(['b', 'i', 'u', 's', 'a', 'code', 'pre', 'blockquote', 'tg-spoiler']);

// safeHref is a link the page may open: http or https (a tg: link has nowhere to go in a browser).
const safeHref = (url) => (/^https?:\/\//i.test(url || '') ? url : null);

// rebuild copies the children of an inert node, text as text, the platform's tags with their own
// attributes only; anything else keeps its text and loses its tag.
function rebuild(from) {
  const out = [];
  for (const node of from.childNodes) {
    if (node.nodeType === Node.TEXT_NODE) {
      out.push(document.createTextNode(node.textContent));
      continue;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) continue;
    const name = node.localName;
    if (!tags.has(name)) {
      out.push(...rebuild(node));
      continue;
    }
    const attrs = {};
    if (name === 'a') {
      const href = safeHref(node.getAttribute('href'));
      attrs.title = node.getAttribute('href') || '';
      if (href) Object.assign(attrs, { href, target: '_blank', rel: 'noopener noreferrer' });
    } else if (name === 'code' && /^language-[A-Za-z0-9+#_.-]+$/.test(node.getAttribute('class') || '')) {
      attrs.class = node.getAttribute('class');
    } else if (name === 'blockquote' && node.hasAttribute('expandable')) {
      attrs.expandable = true;
    } else if (name === 'tg-spoiler') {
      // A spoiler hides its text until the reader taps it, as in the messenger.
      attrs.onclick = (e) => e.currentTarget.classList.toggle('shown');
    }
    out.push(el(name, attrs, rebuild(node)));
  }
  return out;
}

// richBody renders a bot's formatted line (line.html), the brand line first as plain text, as renderChat
// shows the others.
export function richBody(line) {
  const doc = new DOMParser().parseFromString(`<body>${line.html}</body>`, 'text/html');
  const nodes = rebuild(doc.body);
  const first = nodes[0];
  // The brand line is plain text before any tag: the first text node holds it up to its newline.
  if (first && first.nodeType === Node.TEXT_NODE && first.textContent.startsWith('A message from ')) {
    const cut = first.textContent.indexOf('\n');
    if (cut >= 0) {
      return [el('span', { class: 'brand' }, first.textContent.slice(0, cut)), first.textContent.slice(cut), ...nodes.slice(1)];
    }
  }
  return nodes;
}
