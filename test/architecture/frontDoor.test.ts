import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import * as journalModule from "../../src/journal.ts";

/**
 * The front door: `loom-agent` exports the loop and its settings, the stores, operating runs,
 * reading runs and the errors, and no more than {@link ROOT_CAP} names; the journal's own
 * vocabulary is in `loom-agent/journal`. A name added to the root past the cap must move another
 * one out (to the journal, or out of the public API).
 */
const ROOT_CAP = 150;

const SRC = fileURLToPath(new URL("../../src", import.meta.url));

/** Every name an entry file exports, values and types alike, as TypeScript resolves them. */
function exportedNames(...entries: string[]): Map<string, string[]> {
  const files = entries.map((e) => `${SRC}/${e}`);
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    allowImportingTsExtensions: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  });
  const checker = program.getTypeChecker();
  return new Map(
    files.map((file, i) => {
      const source = program.getSourceFile(file);
      const symbol = source && checker.getSymbolAtLocation(source);
      if (symbol === undefined) throw new Error(`cannot read the exports of src/${entries[i]}`);
      return [entries[i] as string, checker.getExportsOfModule(symbol).map((s) => s.name)];
    }),
  );
}

describe("the front door (loom-agent) and the journal below it (loom-agent/journal)", () => {
  const exports = exportedNames("index.ts", "journal.ts");
  const root = exports.get("index.ts") ?? [];
  const journal = exports.get("journal.ts") ?? [];

  it(`exports at most ${ROOT_CAP} names from the root, types included`, () => {
    expect(root.length).toBeGreaterThan(100); // the count reads the real entry, not an empty one
    expect(root.length, `loom-agent exports ${root.length} names`).toBeLessThanOrEqual(ROOT_CAP);
  });

  it("keeps the loop, the stores, control, the read API and the errors at the root", () => {
    expect(root).toEqual(
      expect.arrayContaining([
        ...["agentLoop$", "AgentLoopConfig", "Tool", "Model", "scriptedModel", "agentTool", "sleepTool", "schedule"],
        ...["createJournal", "memoryStore", "openSqliteJournal", "Journal", "OpenJournal"],
        ...["cancelRun", "recordApproval", "listPendingApprovals", "deliverEvent", "forkRun", "runActivity"],
        ...["readJournal", "followRun", "runEventsOf", "RunEvent", "rebuildToolCallLog", "sessionHistory"],
        ...["LoomError", "isLoomError", "AgentInterruptedError", "isAgentInterruptedError", "RunBusyError"],
      ]),
    );
  });

  it("exports the journal's internals from loom-agent/journal and not from the root", () => {
    const moved = [
      ...["foldEntries", "evolveRunEvents", "initialRunEventState", "runSnapshotOf", "projectToolCallLog"], // folds
      ...["parseFrameId", "ParsedFrameId", "modelFrameId", "toolStepId", "approvalId", "idempotencyKey"], // frame ids
      ...["JournalEntry", "NewEntry", "EntryMeta", "EntryOf", "EntryType", "RunStartedData", "FrameCompletedData"], // rows
      ...["CodecEnvelope", "ClaimCheckEnvelope", "PayloadCodec", "payloadCodec", "withCodec", "withRedaction"], // codecs
      ...["canonicalJson", "digestOf", "SCHEMA_VERSION", "validateEntries"],
      ...["agentLoopMachine", "modePinMachine", "toolCallMachine", "decideRetry", "resolveModePin"],
    ];
    expect(journal).toEqual(expect.arrayContaining(moved));
    expect(root.filter((name) => moved.includes(name))).toEqual([]);
  });

  it("exports each name from one of the two entries only", () => {
    expect(root.filter((name) => journal.includes(name))).toEqual([]);
  });

  it("exports at run time what the journal's declarations name", () => {
    expect(typeof journalModule.foldEntries).toBe("function");
    expect(journalModule.parseFrameId("support#turn:0:tool:1")).toEqual({
      kind: "tool",
      loopId: "support",
      turn: 0,
      index: 1,
    });
    expect(Object.keys(journalModule).length).toBeGreaterThan(100);
  });
});
