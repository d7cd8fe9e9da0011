import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import {
  checkLayering,
  checkPresentation,
  checkRooms,
  fileCycles,
  type ImportEdge,
  idTemplatesOf,
  importsOf,
  isIdTemplate,
  PRESENTATION,
  RANK,
  ROOM_RANK,
  roomOf,
  unitOf,
} from "./layering.ts";

const SRC = fileURLToPath(new URL("../../src", import.meta.url));

describe("the layering of src (DESIGN.md §1)", () => {
  const edges = importsOf(SRC);

  it("reads the imports of every src file, dynamic ones included", () => {
    expect(edges.length).toBeGreaterThan(500);
    expect(edges).toContainEqual({ from: "runtime/run/agentTool.ts", to: "events/ids.ts" });
    // The CLI loads the PostgreSQL journal only when asked: `await import("./postgresJournal.ts")`.
    expect(edges).toContainEqual({ from: "cli/journalSource.ts", to: "cli/postgresJournal.ts" });
  });

  it("places every unit of src in a layer", () => {
    expect(checkLayering(edges).unplaced).toEqual([]);
  });

  it("imports only downwards: core ← events ← projections ← machines/policies ← tools ← models ← runtime ← adapters ← index ← read ← viewer ← cli", () => {
    expect(checkLayering(edges).upward).toEqual([]);
  });

  it("has no import cycle between folders", () => {
    expect(checkLayering(edges).cycles).toEqual([]);
  });

  it("has no import cycle between files, inside a folder either (type-only and dynamic imports count)", () => {
    expect(fileCycles(edges)).toEqual([]);
  });
});

describe("the id grammar of src", () => {
  it("is written only in events/ids.ts: no other file builds an id with a template literal", () => {
    expect(idTemplatesOf(SRC).map((t) => `${t.file}:${t.line}: ${t.text}`)).toEqual([]);
  });
});

describe("isIdTemplate", () => {
  // Samples are written with `#{…}` for a substitution, so that they stay plain strings here.
  const template = (sample: string): ts.TemplateExpression => {
    const code = sample.replaceAll("#{", "$" + "{");
    const source = ts.createSourceFile("x.ts", `const x = ${code};`, ts.ScriptTarget.Latest, true);
    let found: ts.TemplateExpression | undefined;
    const visit = (node: ts.Node): void => {
      if (found === undefined && ts.isTemplateExpression(node)) found = node;
      ts.forEachChild(node, visit);
    };
    visit(source);
    if (found === undefined) throw new Error(`no template in ${sample}`);
    return found;
  };

  it.each([
    "`#{runId}/`",
    "`#{this.runId}/#{stepId}`",
    "`#{sessionId}/#{n}`",
    "`#{parentRunId}/#{step}`",
    "`#{loopId}#deadline`",
    "`#{config.id}#model`",
    "`#{id.loopId}#turn:#{id.turn}`",
    "`support#turn:#{turn}:model`",
    "`#{stepId}:approval`",
  ])("flags %s as an id written out", (code) => {
    expect(isIdTemplate(template(code))).toBe(true);
  });

  it.each([
    "`run #{runId}: check the step id (<loop>#turn:<i>:tool:<j>)`",
    "`#{int(a)}/#{int(b)}`",
    "`model #{provider}/#{modelId}`",
    "`#{dir}/`",
    "`run #{runId} ended`",
  ])("leaves %s alone", (code) => {
    expect(isIdTemplate(template(code))).toBe(false);
  });
});

describe("the presentation (read, viewer, cli) above the public API", () => {
  const edges = importsOf(SRC);

  it("reads runs through index.ts, not from the rooms of src/runtime (the imports still to route are listed, and only shrink)", () => {
    expect(PRESENTATION).toEqual(["read", "viewer", "cli"]);
    expect(checkPresentation(edges)).toEqual({ past: [], stale: [] });
  });

  it("fails on a new import of a runtime room, and on a listed one no file makes any more", () => {
    const made = [
      { from: "read/step.ts", to: "runtime/base/snapshots.ts" },
      { from: "viewer/travel.ts", to: "index.ts" },
      { from: "runtime/run/agentLoop.ts", to: "runtime/base/readers.ts" },
    ];
    expect(checkPresentation(made, ["cli/replay.ts -> runtime/run/agentLoop.ts"])).toEqual({
      past: ["read/step.ts -> runtime/base/snapshots.ts"],
      stale: ["cli/replay.ts -> runtime/run/agentLoop.ts"],
    });
  });
});

describe("the rooms of src/runtime (issue 35)", () => {
  const edges = importsOf(SRC);

  it("places every room, and every runtime file in a room", () => {
    const entries = readdirSync(`${SRC}/runtime`, { withFileTypes: true });
    expect(entries.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
    expect(entries.map((e) => e.name).sort()).toEqual([...ROOM_RANK.keys()].sort());
    expect(checkRooms(edges).unplaced).toEqual([]);
  });

  it("imports only downwards between rooms: base ← streaming ← subruns ← control, steps ← run", () => {
    expect(checkRooms(edges).upward).toEqual([]);
  });

  it("has no import cycle between rooms", () => {
    expect(checkRooms(edges).cycles).toEqual([]);
  });
});

describe("fileCycles", () => {
  const edge = (from: string, to: string): ImportEdge => ({ from, to });

  it("names a cycle between two files of one folder, and one round several files", () => {
    expect(
      fileCycles([edge("cli/program.ts", "cli/commands/runs.ts"), edge("cli/commands/runs.ts", "cli/program.ts")]),
    ).toEqual(["cli/commands/runs.ts -> cli/program.ts -> cli/commands/runs.ts"]);
    expect(
      fileCycles([
        edge("s/a.ts", "s/b.ts"),
        edge("s/b.ts", "s/c.ts"),
        edge("s/c.ts", "s/a.ts"),
        edge("s/c.ts", "core/x.ts"),
      ]),
    ).toEqual(["s/a.ts -> s/b.ts -> s/c.ts -> s/a.ts"]);
  });

  it("passes imports that never lead back, and a file's import of itself", () => {
    expect(
      fileCycles([edge("a.ts", "b.ts"), edge("b.ts", "c.ts"), edge("a.ts", "c.ts"), edge("c.ts", "c.ts")]),
    ).toEqual([]);
  });
});

describe("checkLayering", () => {
  const edge = (from: string, to: string): ImportEdge => ({ from, to });
  const downward = [
    edge("runtime/run/agentLoop.ts", "machines/agentLoop.machine.ts"),
    edge("machines/agentLoop.machine.ts", "events/ids.ts"),
    edge("events/ids.ts", "core/digest.ts"),
    edge("index.ts", "runtime/run/agentLoop.ts"),
    edge("cli/main.ts", "index.ts"),
  ];

  it("passes imports that only flow downwards, and imports inside a unit", () => {
    expect(checkLayering([...downward, edge("events/ids.ts", "events/modePin.ts")])).toEqual({
      unplaced: [],
      upward: [],
      cycles: [],
    });
  });

  it("fails on a reversed import, naming the files", () => {
    const report = checkLayering([...downward, edge("events/journal.ts", "projections/runState.ts")]);
    expect(report.upward).toEqual(["events/journal.ts -> projections/runState.ts"]);
    expect(report.cycles).toEqual([]);
    expect(checkLayering([edge("models/aiSdkTools.ts", "runtime/base/config.ts")]).upward).toHaveLength(1);
  });

  it("fails on a cycle between units of one layer, and names it", () => {
    const report = checkLayering([edge("otel.ts", "mcp/tools.ts"), edge("mcp/tools.ts", "otel.ts")]);
    expect(report.upward).toEqual([]);
    expect(report.cycles).toEqual(["mcp -> otel -> mcp"]);
  });

  it("finds a cycle round several units, whatever the layer table says", () => {
    const flat = new Map([
      ["a", 0],
      ["b", 0],
      ["c", 0],
    ]);
    const report = checkLayering([edge("a/x.ts", "b/y.ts"), edge("b/y.ts", "c/z.ts"), edge("c/z.ts", "a/w.ts")], flat);
    expect(report.cycles).toEqual(["a -> b -> c -> a"]);
  });

  it("asks for a unit the table does not place", () => {
    expect(checkLayering([edge("rooms/run.ts", "events/ids.ts")]).unplaced).toEqual(["rooms"]);
  });

  it("fails on a reversed import between rooms of runtime, naming the files", () => {
    const down = [
      edge("runtime/run/agentLoop.ts", "runtime/steps/session.ts"),
      edge("runtime/steps/session.ts", "runtime/base/appender.ts"),
    ];
    expect(checkRooms(down)).toEqual({ unplaced: [], upward: [], cycles: [] });
    const report = checkRooms([...down, edge("runtime/base/config.ts", "runtime/run/agentLoop.ts")]);
    expect(report.upward).toEqual(["runtime/base/config.ts -> runtime/run/agentLoop.ts"]);
    expect(report.cycles).toEqual(["base -> run -> steps -> base"]);
  });

  it("fails on a cycle between rooms of one rank, and asks for a room the table does not place", () => {
    const report = checkRooms([
      edge("runtime/control/cancel.ts", "runtime/steps/hooks.ts"),
      edge("runtime/steps/hooks.ts", "runtime/control/approvals.ts"),
    ]);
    expect(report.upward).toEqual([]);
    expect(report.cycles).toEqual(["control -> steps -> control"]);
    expect(checkRooms([edge("runtime/loose.ts", "runtime/base/errors.ts")]).unplaced).toEqual(["loose"]);
  });

  it("looks only at imports between rooms of runtime", () => {
    expect(
      checkRooms([edge("runtime/base/config.ts", "tools/spi.ts"), edge("index.ts", "runtime/run/agentLoop.ts")]),
    ).toEqual({
      unplaced: [],
      upward: [],
      cycles: [],
    });
    expect(roomOf("runtime/steps/session.ts")).toBe("steps");
    expect(ROOM_RANK.get("run")).toBeGreaterThan(ROOM_RANK.get("steps") as number);
  });

  it("takes a top-level entry file as the unit of the folder it names", () => {
    expect(unitOf("postgres.ts")).toBe("postgres");
    expect(unitOf("postgres/worker.ts")).toBe("postgres");
    expect(RANK.get("cli")).toBeGreaterThan(RANK.get("runtime") as number);
  });
});
