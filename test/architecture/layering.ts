/**
 * The layering of DESIGN.md §1 as data and a checker: which unit of `src/` (a folder, or a
 * top-level entry file with the folder of the same name) may import which. Kept apart from the
 * test so the checker itself is tested on small fake graphs.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

/**
 * The layers, lowest first. A unit may import its own layer's units and lower layers', never a
 * higher one's; and no two units may import each other, directly or round a longer cycle.
 * Why each unit sits where it does (DESIGN.md §1 and what the code imports):
 */
export const LAYERS: readonly (readonly string[])[] = [
  /* 0 */ ["core"], // canonical JSON, digests, errors: no dependencies, no I/O
  /* 1 */ ["events"], // the journal: entry types, the id grammar (ids.ts), stores
  /* 2 */ ["projections"], // pure folds of the journal
  /* 3 */ ["machines", "policies"], // statecharts and pure decisions over the fold
  /* 4 */ ["tools"], // the Tool SPI (what a tool is and is given): implemented by models and mcp
  /* 5 */ ["models"], // the Model SPI and the scripted model: the runtime calls them
  /* 6 */ ["runtime"], // the durable driver: the only layer that awaits a store for a run (rooms: ROOMS)
  // Adapters over the runtime (MCP tools, OpenTelemetry spans, PostgreSQL workers, the AI SDK's
  // useChat stream).
  /* 7 */ ["mcp", "otel", "postgres", "ai-sdk"],
  // The public API: the front door (`loom-agent`) and the journal below it (`loom-agent/journal`),
  // named re-exports of the layers below; neither imports the other.
  /* 8 */ ["index", "journal"],
  // The one read layer of the CLI and the viewer (issue 35): it reads runs through the public API.
  /* 9 */ ["read"],
  /* 10 */ ["viewer"], // the journal viewer (`loom-agent/viewer`)
  /* 11 */ ["cli"], // the `loom` command: `loom view` starts the viewer
];

/** A unit's layer, by name. */
export const RANK: ReadonlyMap<string, number> = new Map(LAYERS.flatMap((units, rank) => units.map((u) => [u, rank])));

/**
 * The rooms of `src/runtime` (issue 35), lowest first, checked like {@link LAYERS} among
 * themselves: a room imports its own files and lower rooms', and no two rooms import each other.
 * Rooms on one rank import neither each other nor anything above them.
 */
export const ROOMS: readonly (readonly string[])[] = [
  // What every room needs and that imports no room: the loop's config (with the Tool SPI's
  // types), the run's errors, run ownership (heldLease, ownership), the appender, the telemetry
  // hook, reading a run's journal (readers, snapshots, conversation).
  /* 0 */ ["base"],
  // A run's events to its listeners (the emitter, `loop.stream`, `followRun`, nested runs' events).
  /* 1 */ ["streaming"],
  // A run and the sub-agent runs below it: RunContext, the run tree in the journal, waiting
  // children, answers and inspection handed down.
  /* 2 */ ["subruns"],
  // Operating runs through the journal (approvals, cancel, events, fork, activity), beside the
  // run's session, its durable steps and the actors its chart invokes: neither imports the other.
  /* 3 */ ["control", "steps"],
  // Everything that calls `loop.run`: agentLoop and sessions, agentTool, schedules, wakeDueRuns.
  /* 4 */ ["run"],
];

/** A room's rank, by name. */
export const ROOM_RANK: ReadonlyMap<string, number> = new Map(
  ROOMS.flatMap((rooms, rank) => rooms.map((r) => [r, rank])),
);

/**
 * The room of a file of `src/runtime` (`runtime/steps/session.ts` is in `steps`); a file right in
 * `runtime/`, outside any room, is a room of its own name (left unplaced by {@link ROOMS}).
 */
export function roomOf(file: string): string {
  const parts = file.split(/[\\/]/);
  return parts.length === 2 ? (parts[1] as string).replace(/\.ts$/, "") : (parts[1] as string);
}

/** Checks the imports between the rooms of `src/runtime` against {@link ROOMS}; other imports are not looked at. */
export function checkRooms(
  edges: readonly ImportEdge[],
  rank: ReadonlyMap<string, number> = ROOM_RANK,
): LayeringReport {
  const inRuntime = edges.filter(({ from, to }) => unitOf(from) === "runtime" && unitOf(to) === "runtime");
  return checkLayering(inRuntime, rank, roomOf);
}

/** One import of a src file: from which unit's file to which unit's file. */
export interface ImportEdge {
  readonly from: string; // the importing file, relative to src/
  readonly to: string; // the imported file, relative to src/
}

/** The unit a file of `src/` belongs to: its top folder, or a top-level file's name without `.ts`. */
export function unitOf(file: string): string {
  const parts = file.split(/[\\/]/);
  return parts.length === 1 ? (parts[0] as string).replace(/\.ts$/, "") : (parts[0] as string);
}

/**
 * Every relative import of every `.ts` file under `srcDir`: static `import`/`export … from`, side-effect
 * imports and dynamic `import()` (read by TypeScript's scanner, so comments and strings are not imports).
 */
export function importsOf(srcDir: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of tsFiles(srcDir)) {
    const text = readFileSync(file, "utf8");
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!fileName.startsWith(".")) continue; // a package
      const to = resolve(dirname(file), fileName);
      edges.push({ from: relative(srcDir, file).split(sep).join("/"), to: relative(srcDir, to).split(sep).join("/") });
    }
  }
  return edges;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** What the checker found wrong. */
export interface LayeringReport {
  /** Units not in the table: place them in {@link LAYERS}. */
  readonly unplaced: string[];
  /** Imports from a lower layer up to a higher one, as `from -> to` file pairs. */
  readonly upward: string[];
  /** Cycles between units, each as `a -> b -> … -> a`. */
  readonly cycles: string[];
}

/**
 * Checks imports against a layer table: no upward import, no unit left out, no cycle between units.
 * `unit` names the unit of a file (by default its top folder of `src/`, {@link unitOf}).
 */
export function checkLayering(
  edges: readonly ImportEdge[],
  rank: ReadonlyMap<string, number> = RANK,
  unit: (file: string) => string = unitOf,
): LayeringReport {
  const unplaced = new Set<string>();
  const upward: string[] = [];
  const graph = new Map<string, Set<string>>();
  for (const { from, to } of edges) {
    const a = unit(from);
    const b = unit(to);
    for (const u of [a, b]) if (!rank.has(u)) unplaced.add(u);
    if (a === b) continue;
    if ((rank.get(b) ?? -1) > (rank.get(a) ?? Number.POSITIVE_INFINITY)) upward.push(`${from} -> ${to}`);
    let out = graph.get(a);
    if (out === undefined) graph.set(a, (out = new Set()));
    out.add(b);
  }
  return { unplaced: [...unplaced].sort(), upward: upward.sort(), cycles: cyclesOf(graph) };
}

/** One cycle through each strongly connected group of units (Tarjan), shortest found by search. */
function cyclesOf(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const cycles: string[] = [];
  const units = [...new Set([...graph.keys(), ...[...graph.values()].flatMap((s) => [...s])])].sort();
  const done = new Set<string>();
  for (const start of units) {
    if (done.has(start)) continue;
    const path = pathBack(graph, start);
    if (path === undefined) continue;
    for (const u of path) done.add(u);
    cycles.push([...path, start].join(" -> "));
  }
  return cycles;
}

/** The shortest path start -> … -> start (without the closing start), breadth first, if any. */
function pathBack(graph: ReadonlyMap<string, ReadonlySet<string>>, start: string): string[] | undefined {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const at = queue[i] as string;
    for (const next of graph.get(at) ?? []) {
      if (next === start) {
        const path = [at];
        for (let u = at; u !== start; u = cameFrom.get(u) as string) path.unshift(cameFrom.get(u) as string);
        return path;
      }
      if (cameFrom.has(next)) continue;
      cameFrom.set(next, at);
      queue.push(next);
    }
  }
  return undefined;
}

/**
 * The presentation: the units above the public API (`index`). They read runs as a user of the
 * library does, through `index.ts` and the subpath entry files, never from a room of `src/runtime`.
 */
export const PRESENTATION: readonly string[] = LAYERS.slice((RANK.get("index") as number) + 1).flat();

/**
 * Imports from the presentation into `src/runtime` that do not go through `index.ts` yet, as
 * `from -> to` file pairs. Each is to be routed through the public API (or the read floor); the
 * list only shrinks: {@link checkPresentation} fails on any import not in it, and on an entry
 * here that no file makes any more.
 */
export const PRESENTATION_PAST_INDEX: readonly string[] = [
  "cli/replay.ts -> runtime/run/agentLoop.ts",
  "cli/replay.ts -> runtime/subruns/runContext.ts",
  "read/keptRun.ts -> runtime/control/activity.ts",
  "read/runRow.ts -> runtime/control/activity.ts",
  "read/story.ts -> runtime/subruns/subRuns.ts",
  "viewer/travel.ts -> runtime/base/conversation.ts",
];

/**
 * Checks that the presentation reaches `src/runtime` only through `index.ts`: `past` lists the
 * imports that go round it (none but those in `allowed`), `stale` the allowed ones no file makes.
 */
export function checkPresentation(
  edges: readonly ImportEdge[],
  allowed: readonly string[] = PRESENTATION_PAST_INDEX,
): { readonly past: string[]; readonly stale: string[] } {
  const made = new Set(
    edges
      .filter(({ from, to }) => PRESENTATION.includes(unitOf(from)) && unitOf(to) === "runtime")
      .map(({ from, to }) => `${from} -> ${to}`),
  );
  return {
    past: [...made].filter((e) => !allowed.includes(e)).sort(),
    stale: allowed.filter((e) => !made.has(e)).sort(),
  };
}

/** One place outside `events/ids.ts` that writes an id of the journal's grammar by hand. */
export interface IdTemplate {
  readonly file: string; // relative to src/
  readonly line: number;
  readonly text: string; // the template literal, as written
}

/** A run-like id a template continues with `/`: a sub-agent's or a session's run id written out. */
const RUN_ID_NAME = /(?:^|\.)(?:[A-Za-z]*(?:run|Run|session|Session|child|Child|parent|Parent)Id|runId|sessionId)$/;
/** A step id a template continues with `:<kind>`: a decision id written out. */
const STEP_ID_NAME = /(?:^|\.)(?:[A-Za-z]*StepId|stepId)$/;
/** What follows a substitution in a frame or decision id: `#turn:`, `#deadline`, `:approval`… */
const AFTER_LOOP = /^#[A-Za-z]/;
const AFTER_STEP = /^:(?:outcome|approval|wait)\b/;
/** `#turn:` with a number after it, or a substitution (a message's `<loop>#turn:<i>` is prose). */
const TURN = /#turn:(?:\d|$)/;

/**
 * The template literals that build ids of the journal's grammar, in `.ts` files of `srcDir` other
 * than `events/ids.ts`: `${runId}/…`, `${loopId}#turn:…`, `${stepId}:approval`, any `#turn:`. The
 * grammar has one home, so a change to it cannot miss a copy.
 */
export function idTemplatesOf(srcDir: string, home = "events/ids.ts"): IdTemplate[] {
  const found: IdTemplate[] = [];
  for (const path of tsFiles(srcDir)) {
    const file = relative(srcDir, path).split(sep).join("/");
    const text = readFileSync(path, "utf8");
    if (file === home || !text.includes("${")) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isTemplateExpression(node) && isIdTemplate(node)) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        found.push({ file, line, text: node.getText(source) });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** Whether a template literal writes out a piece of id grammar (see {@link idTemplatesOf}). */
export function isIdTemplate(node: ts.TemplateExpression): boolean {
  if (TURN.test(node.head.text)) return true;
  return node.templateSpans.some((span) => {
    const after = span.literal.text;
    if (TURN.test(after)) return true;
    const name = span.expression.getText();
    if (AFTER_LOOP.test(after) && /(?:^|\.)(?:loopId|id)$/.test(name)) return true;
    if (after.startsWith("/") && RUN_ID_NAME.test(name)) return true;
    return AFTER_STEP.test(after) && STEP_ID_NAME.test(name);
  });
}

/**
 * The import cycles between files, one per strongly connected group of files, each as
 * `a.ts -> b.ts -> … -> a.ts` (the shortest found through its first file, by name). Type-only
 * imports count: a file that needs another's types to be read belongs after it.
 */
export function fileCycles(edges: readonly ImportEdge[]): string[] {
  const graph = new Map<string, Set<string>>();
  for (const { from, to } of edges) {
    if (from === to) continue;
    let out = graph.get(from);
    if (out === undefined) graph.set(from, (out = new Set()));
    out.add(to);
  }
  return cyclesOf(graph);
}
