import type { AnyStateMachine } from "xstate";

/** The parts of an xstate v5 StateNode this generator reads. */
interface Node {
  readonly id: string;
  readonly key: string;
  readonly type: "atomic" | "compound" | "parallel" | "final" | "history";
  readonly states: Readonly<Record<string, Node>>;
  readonly parent?: Node;
  readonly initial?: { readonly target: readonly Node[] };
  readonly transitions: ReadonlyMap<string, readonly Transition[]>;
  readonly always?: readonly Transition[];
}

interface Transition {
  readonly eventType: string;
  readonly target?: readonly Node[];
  readonly guard?: unknown;
}

/**
 * A mermaid `stateDiagram-v2` of an xstate machine: every state node (compound ones as
 * composite states), every transition with its event, `always` transitions, and the
 * `onDone`/`onError` of invoked actors (`<actor> done`/`<actor> error`), each with its guard:
 * a named guard by name, an inline one by its condition. Targetless transitions are self-loops; the transitions between two states share one edge.
 *
 * @example
 * mermaid(modePinMachine).split("\n")[0]; // "stateDiagram-v2"
 */
export function mermaid(machine: AnyStateMachine): string {
  const root = machine.root as unknown as Node;
  const lines = ["stateDiagram-v2"];
  const outer: string[] = [];
  writeChildren(root, lines, outer, "  ");
  lines.push(...outer.map((l) => `  ${l}`));
  return lines.join("\n");
}

/** The mermaid id of a state: its path, with characters mermaid takes for syntax replaced. */
export const mermaidId = (node: Pick<Node, "id">): string =>
  node.id
    .split(".")
    .slice(1)
    .join("_")
    .replace(/[^A-Za-z0-9_]/g, "_");

function writeChildren(parent: Node, lines: string[], outer: string[], indent: string): void {
  const children = Object.values(parent.states);
  for (const child of children) {
    if (child.type === "compound" || child.type === "parallel") {
      const id = mermaidId(child);
      lines.push(id === child.key ? `${indent}state ${id} {` : `${indent}state "${child.key}" as ${id} {`);
      writeChildren(child, lines, outer, `${indent}  `);
      lines.push(`${indent}}`);
    } else {
      lines.push(`${indent}state "${child.key}" as ${mermaidId(child)}`);
    }
  }
  const initial = parent.initial?.target[0];
  if (initial) lines.push(`${indent}[*] --> ${mermaidId(initial)}`);
  // Edges between the same two states become one edge, its labels one per line: mermaid draws
  // parallel self-loops on top of each other.
  const inner = new Map<string, string[]>();
  const across = new Map<string, string[]>();
  for (const child of children) {
    for (const t of transitionsOf(child)) {
      const targets = t.target && t.target.length > 0 ? t.target : [child];
      for (const target of targets) {
        // A transition inside this composite is drawn in it; one that leaves it, at the top level.
        const edges = target.parent === parent || target === child ? inner : across;
        const key = `${mermaidId(child)} --> ${mermaidId(target)}`;
        edges.set(key, [...(edges.get(key) ?? []), label(t)]);
      }
    }
  }
  for (const [key, labels] of inner) lines.push(`${indent}${key} : ${labels.join("<br>")}`);
  for (const [key, labels] of across) outer.push(`${key} : ${labels.join("<br>")}`);
  for (const child of children) if (child.type === "final") lines.push(`${indent}${mermaidId(child)} --> [*]`);
}

function transitionsOf(node: Node): Transition[] {
  return [...[...node.transitions.values()].flat(), ...(node.always ?? [])];
}

function label(t: Transition): string {
  const done = /^xstate\.(done|error)\.actor\.(.+)$/.exec(t.eventType);
  // A delayed transition (`after`): `xstate.after.<delay>.<state id>` reads as `after <delay>`.
  const after = /^xstate\.after\.([^.]+)\./.exec(t.eventType);
  const event = done
    ? `${done[2]} ${done[1]}`
    : after
      ? `after ${after[1]}`
      : t.eventType === ""
        ? "always"
        : t.eventType;
  const guard = guardText(t.guard);
  return guard === undefined ? event : `${event} [${guard}]`;
}

/** A guard as text: its name, or the condition of an inline guard function, in words. */
export function guardText(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === "string") return guard;
  if (typeof guard === "object" && typeof (guard as { type?: unknown }).type === "string") {
    return (guard as { type: string }).type;
  }
  if (typeof guard !== "function") return "guard";
  const body = String(guard)
    .replace(/^[^=]*=>/, "") // the parameters: ({ context, event }) =>
    .replace(/\s+/g, "")
    .replace(/\b(event|context)\./g, "");
  return body
    .replace(/["'`]/g, "")
    .replace(/!==|!=/g, " ≠ ")
    .replace(/===|==/g, " = ")
    .replace(/>=/g, " ≥ ")
    .replace(/<=/g, " ≤ ")
    .replace(/([^ ])([<>])([^ ])/g, "$1 $2 $3")
    .replace(/&&/g, " and ")
    .replace(/\|\|/g, " or ")
    .replace(/(^|[ (])!/g, "$1not ")
    .replace(/[;{}#]/g, "");
}
