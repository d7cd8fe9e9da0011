/**
 * The definition pin: `run.started` records digests of what shapes a run's frames —
 * the loop id, the system prompt, the tools and their input schemas, the names of its tool
 * sources (not their lists: each run journals its own) — so a resume under another
 * definition is refused before any append, naming what changed, unless the loop accepts that
 * kind of change. Pure: digests in, changes out.
 */
import { digestOf, sha256Hex } from "../core/digest.ts";
import type { DefinitionPinData } from "../events/types.ts";

/** What `run.started` records of the loop's definition. */
export type DefinitionPin = DefinitionPinData;

/**
 * The kinds of definition change a loop can accept (`acceptDefinitionChanges`). A changed system
 * prompt is not one of them: every model call's prompt digest covers it, so a run recorded under
 * another system prompt cannot be served from its journal.
 */
export const DEFINITION_CHANGE_KINDS = [
  "tool-added",
  "tool-removed",
  "tool-schema-changed",
  "tool-source-added",
  "tool-source-removed",
] as const;
/** One of {@link DEFINITION_CHANGE_KINDS}: a change `acceptDefinitionChanges` can accept. */
export type DefinitionChangeKind = (typeof DEFINITION_CHANGE_KINDS)[number];

/** One difference between the recorded definition and the loop's. */
export type DefinitionChange =
  | { readonly kind: "tool-added" | "tool-removed" | "tool-schema-changed"; readonly tool: string }
  /** A tool source (`toolSources`: an MCP server) added or removed, by its name. */
  | { readonly kind: "tool-source-added" | "tool-source-removed"; readonly source: string }
  | { readonly kind: "system-changed" };

/** Which changes a loop accepts: a list of kinds, or a predicate over each change. */
export type DefinitionChangePolicy = readonly DefinitionChangeKind[] | ((change: DefinitionChange) => boolean);

/** What the pin is computed from: the parts of a loop's configuration that shape its frames. */
export interface DefinitionSource {
  readonly id: string;
  readonly system?: string;
  readonly tools?: Readonly<Record<string, { readonly inputSchema?: unknown }>>;
  /** The loop's tool sources: their names are pinned, their lists are journaled per run. */
  readonly toolSources?: readonly { readonly name: string }[];
}

const short = (value: unknown): string | null => digestOf(value).digest?.slice(0, 16) ?? null;

/**
 * The pin of a loop's definition, as `run.started` records it.
 *
 * @example
 * definitionPin({ id: "support", system: "Be brief.", tools: { lookup: { inputSchema: { type: "object" } } } });
 * // { digest: "…64 hex…", system: "…16 hex…", tools: { lookup: "…16 hex…" } }
 */
export function definitionPin(source: DefinitionSource): DefinitionPin {
  // No prototype: a tool may be named "__proto__" or "constructor".
  const tools: Record<string, string | null> = Object.create(null);
  for (const name of Object.keys(source.tools ?? {}).sort()) {
    const schema = source.tools?.[name]?.inputSchema;
    tools[name] = schema === undefined ? null : short(schema);
  }
  const system = source.system === undefined ? null : short(source.system);
  const sources = (source.toolSources ?? []).map((s) => s.name).sort();
  // Without sources the pin (and its digest) is what it was before sources existed.
  if (sources.length === 0) return { digest: sha256Hex(JSON.stringify([source.id, system, tools])), system, tools };
  return { digest: sha256Hex(JSON.stringify([source.id, system, tools, sources])), system, tools, sources };
}

/**
 * The changes from `recorded` to `current` that `accept` does not allow, in a stable order
 * (system first, then tools by name). Empty when the pins are equal.
 *
 * @example
 * unacceptedChanges(recorded, definitionPin(config), ["tool-added"]);
 * // [{ kind: "tool-schema-changed", tool: "lookup" }]
 */
export function unacceptedChanges(
  recorded: DefinitionPin,
  current: DefinitionPin,
  accept: DefinitionChangePolicy = [],
): DefinitionChange[] {
  if (recorded.digest === current.digest) return [];
  const changes: DefinitionChange[] = [];
  if (recorded.system !== current.system) changes.push({ kind: "system-changed" });
  const names = [...new Set([...Object.keys(recorded.tools), ...Object.keys(current.tools)])].sort();
  for (const tool of names) {
    const before = Object.hasOwn(recorded.tools, tool);
    const after = Object.hasOwn(current.tools, tool);
    if (!before) changes.push({ kind: "tool-added", tool });
    else if (!after) changes.push({ kind: "tool-removed", tool });
    else if (recorded.tools[tool] !== current.tools[tool]) changes.push({ kind: "tool-schema-changed", tool });
  }
  const before = recorded.sources ?? [];
  const after = current.sources ?? [];
  for (const source of [...new Set([...before, ...after])].sort()) {
    if (!before.includes(source)) changes.push({ kind: "tool-source-added", source });
    else if (!after.includes(source)) changes.push({ kind: "tool-source-removed", source });
  }
  const accepted = typeof accept === "function" ? accept : (c: DefinitionChange) => accept.some((k) => k === c.kind);
  return changes.filter((change) => change.kind === "system-changed" || !accepted(change));
}

/** A change as a reader says it: `tool "lookup" added`, `the system prompt changed`. */
export function describeChange(change: DefinitionChange): string {
  switch (change.kind) {
    case "system-changed":
      return "the system prompt changed";
    case "tool-added":
      return `tool ${JSON.stringify(change.tool)} added`;
    case "tool-removed":
      return `tool ${JSON.stringify(change.tool)} removed`;
    case "tool-schema-changed":
      return `the input schema of tool ${JSON.stringify(change.tool)} changed`;
    case "tool-source-added":
      return `tool source ${JSON.stringify(change.source)} added`;
    case "tool-source-removed":
      return `tool source ${JSON.stringify(change.source)} removed`;
  }
}
