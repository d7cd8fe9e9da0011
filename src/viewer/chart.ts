import type { AnyStateMachine } from "xstate";
import { escapeHtml } from "./html.ts";

/**
 * An SVG diagram of an xstate machine, drawn here (no renderer shipped to the page, no CDN):
 * every state a box (compound states hold their children), laid out in columns by the longest
 * path from the initial state, transitions as arrows (their events in a tooltip; an arrow that
 * skips a column runs below the boxes). Each box carries
 * `data-state="<path>"` (`running.callingModel`), so the page marks the state the run is in by
 * toggling a class; {@link chartSvg} marks one when given.
 */

/** The parts of an xstate v5 StateNode the diagram reads. */
interface Node {
  readonly key: string;
  readonly path: readonly string[];
  readonly type: "atomic" | "compound" | "parallel" | "final" | "history";
  readonly states: Readonly<Record<string, Node>>;
  readonly parent?: Node;
  readonly initial?: { readonly target: readonly Node[] };
  readonly transitions: ReadonlyMap<
    string,
    readonly { readonly eventType: string; readonly target?: readonly Node[] }[]
  >;
  readonly always?: readonly { readonly eventType: string; readonly target?: readonly Node[] }[];
}

interface Box {
  readonly node: Node;
  x: number;
  y: number;
  w: number;
  h: number;
  readonly children: Box[];
}

const ATOM_H = 30;
const PAD = 12;
const TITLE = 20;
const GAP_X = 56;
const GAP_Y = 22;

/**
 * The machine as SVG text, with `current` (a state path, `a.b`) and its ancestors marked.
 *
 * @example
 * chartSvg(agentLoopMachine, "running.callingModel"); // "<svg …><g class=\"state current\" data-state=\"running.callingModel\">…"
 */
export function chartSvg(machine: AnyStateMachine, current?: string): string {
  const root = machine.root as unknown as Node;
  const box = layout(root);
  const byPath = new Map<string, Box>();
  const all: Box[] = [];
  const collect = (b: Box, dx: number, dy: number) => {
    b.x += dx;
    b.y += dy;
    if (b.node !== root) {
      byPath.set(b.node.path.join("."), b);
      all.push(b);
    }
    for (const c of b.children) collect(c, b.x, b.y);
  };
  collect(box, 0, 0);
  const marked = (path: string) => current !== undefined && (current === path || current.startsWith(`${path}.`));
  const shapes = all.map((b) => {
    const path = b.node.path.join(".");
    const cls = ["state", b.node.type, marked(path) ? (current === path ? "current" : "active") : ""].join(" ").trim();
    const compound = b.children.length > 0;
    const text = compound
      ? `<text x="${b.x + 8}" y="${b.y + 14}" class="title">${escapeHtml(b.node.key)}</text>`
      : `<text x="${b.x + b.w / 2}" y="${b.y + b.h / 2 + 4}" text-anchor="middle">${escapeHtml(b.node.key)}</text>`;
    return `<g class="${cls}" data-state="${escapeHtml(path)}"><title>${escapeHtml(path)}</title><rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="${b.node.type === "final" ? 14 : 6}"/>${text}</g>`;
  });
  const arrows = edges(root).map(({ from, to, events }) => {
    const a = byPath.get(from.path.join("."));
    const b = byPath.get(to.path.join("."));
    return a && b ? arrow(a, b, events, box.h) : "";
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="-4 -30 ${box.w + 8} ${box.h + 50}" width="${box.w + 8}" height="${box.h + 50}" role="img" aria-label="the statechart">`,
    `<defs><marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>`,
    ...shapes.filter((_, i) => (all[i] as Box).children.length > 0),
    ...arrows,
    ...shapes.filter((_, i) => (all[i] as Box).children.length === 0),
    "</svg>",
  ].join("\n");
}

/** Lays out `node`'s children in columns (positions relative to `node`'s box) and sizes the box. */
function layout(node: Node): Box {
  const kids = Object.values(node.states);
  if (kids.length === 0)
    return { node, x: 0, y: 0, w: Math.max(84, node.key.length * 7.2 + 22), h: ATOM_H, children: [] };
  const boxes = kids.map(layout);
  const layer = layers(node, kids);
  const columns: Box[][] = [];
  kids.forEach((k, i) => {
    const col = layer.get(k) ?? 0;
    (columns[col] ??= []).push(boxes[i] as Box);
  });
  const top = node.parent ? TITLE + PAD : 0;
  const side = node.parent ? PAD : 0;
  const heights = columns.map((col) => col.reduce((h, b) => h + b.h, 0) + GAP_Y * Math.max(0, col.length - 1));
  const tallest = Math.max(0, ...heights);
  let x = side;
  columns.forEach((col, c) => {
    let y = top + (tallest - (heights[c] ?? 0)) / 2;
    const width = Math.max(...col.map((b) => b.w));
    for (const b of col) {
      b.x = x + (width - b.w) / 2;
      b.y = y;
      y += b.h + GAP_Y;
    }
    x += width + GAP_X;
  });
  return { node, x: 0, y: 0, w: x - GAP_X + side, h: top + tallest + side, children: boxes };
}

/** Each child's column: the longest path to it from the initial child, back edges left out. */
function layers(parent: Node, kids: readonly Node[]): Map<Node, number> {
  const next = new Map<Node, Node[]>(kids.map((k) => [k, []]));
  for (const { from, to } of edges(parent)) {
    const a = childOf(parent, from);
    const b = childOf(parent, to);
    if (a && b && a !== b) next.get(a)?.push(b);
  }
  // Depth-first from the initial child, then the others in order: an edge to a node on the stack closes a loop.
  const forward = new Map<Node, Node[]>(kids.map((k) => [k, []]));
  const state = new Map<Node, "open" | "done">();
  const order: Node[] = [];
  const visit = (n: Node) => {
    state.set(n, "open");
    for (const m of next.get(n) ?? []) {
      if (state.get(m) === "open") continue;
      forward.get(n)?.push(m);
      if (!state.has(m)) visit(m);
    }
    state.set(n, "done");
    order.unshift(n);
  };
  const initial = parent.initial?.target[0];
  const first = initial ? childOf(parent, initial) : undefined;
  for (const k of first ? [first, ...kids] : kids) if (!state.has(k)) visit(k);
  const layer = new Map<Node, number>(kids.map((k) => [k, 0]));
  for (const n of order)
    for (const m of forward.get(n) ?? []) layer.set(m, Math.max(layer.get(m) ?? 0, (layer.get(n) ?? 0) + 1));
  return layer;
}

/** The child of `parent` that is `node` or holds it. */
function childOf(parent: Node, node: Node): Node | undefined {
  let n: Node | undefined = node;
  while (n && n.parent !== parent) n = n.parent;
  return n;
}

/** Every transition under `node` (at any depth), one per pair of states, with its events. */
function edges(node: Node): { from: Node; to: Node; events: string[] }[] {
  const out = new Map<string, { from: Node; to: Node; events: string[] }>();
  const walk = (n: Node) => {
    for (const child of Object.values(n.states)) {
      const ts = [...[...child.transitions.values()].flat(), ...(child.always ?? [])];
      for (const t of ts) {
        for (const target of t.target && t.target.length > 0 ? t.target : [child]) {
          // Drawn between the two states' ancestors that are siblings: an edge into or out of a
          // compound state ends at its box (the tooltip names the real states).
          const [from, to] = siblings(child, target);
          const key = `${from.path.join(".")}->${to.path.join(".")}`;
          const edge = out.get(key) ?? { from, to, events: [] };
          const name = eventName(t.eventType);
          const real = from === child && to === target ? name : `${name} (${child.key} → ${target.key})`;
          if (!edge.events.includes(real)) edge.events.push(real);
          out.set(key, edge);
        }
      }
      walk(child);
    }
  };
  walk(node);
  return [...out.values()];
}

/** The ancestors of `a` and `b` (themselves included) that share a parent; `a` and `b` for a self-loop. */
function siblings(a: Node, b: Node): [Node, Node] {
  if (a === b) return [a, b];
  const chain = (n: Node) => {
    const out: Node[] = [];
    for (let m: Node | undefined = n; m; m = m.parent) out.unshift(m);
    return out;
  };
  const ca = chain(a);
  const cb = chain(b);
  let i = 0;
  while (i < ca.length && i < cb.length && ca[i] === cb[i]) i++;
  return [ca[i] ?? a, cb[i] ?? b];
}

function eventName(type: string): string {
  const done = /^xstate\.(done|error)\.actor\.(.+)$/.exec(type);
  if (done) return `${done[2]} ${done[1]}`;
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return `after ${after[1]}`;
  return type === "" ? "always" : type;
}

/** A curve from `a` to `b`: right side to left side going forward; a loop over the top otherwise. */
function arrow(a: Box, b: Box, events: readonly string[], bottom: number): string {
  const title = `<title>${escapeHtml(events.join(", "))}</title>`;
  if (a === b) {
    const x = a.x + a.w - 16;
    const d = `M${x},${a.y} C${x - 4},${a.y - 22} ${x + 22},${a.y - 22} ${x + 10},${a.y}`;
    return `<path class="edge" d="${d}" marker-end="url(#arrowhead)">${title}</path>`;
  }
  const ay = a.y + Math.min(a.h, ATOM_H) / 2;
  const by = b.y + Math.min(b.h, ATOM_H) / 2;
  if (b.x > a.x + a.w + GAP_X * 2) {
    // It skips a column: under the boxes between, not through them.
    const x1 = a.x + a.w / 2;
    const x2 = b.x + b.w / 2;
    const low = bottom + 16;
    return `<path class="edge skip" d="M${x1},${a.y + a.h} C${x1},${low} ${x2},${low} ${x2},${b.y + b.h}" marker-end="url(#arrowhead)">${title}</path>`;
  }
  if (b.x >= a.x + a.w) {
    const x1 = a.x + a.w;
    const x2 = b.x;
    const mid = (x1 + x2) / 2;
    return `<path class="edge" d="M${x1},${ay} C${mid},${ay} ${mid},${by} ${x2},${by}" marker-end="url(#arrowhead)">${title}</path>`;
  }
  // Backwards (or into a box that holds the source): over the top.
  const x1 = a.x + a.w / 2;
  const x2 = b.x + b.w / 2;
  const lift = Math.min(a.y, b.y) - 18;
  return `<path class="edge back" d="M${x1},${a.y} C${x1},${lift} ${x2},${lift} ${x2},${b.y}" marker-end="url(#arrowhead)">${title}</path>`;
}
