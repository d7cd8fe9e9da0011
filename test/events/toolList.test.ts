import { describe, expect, it } from "vitest";
import { isJournalFormatError } from "../../src/core/errors.ts";
import { toolListId } from "../../src/events/ids.ts";
import { readToolList, TOOL_LIST_SOURCE } from "../../src/events/toolList.ts";

const decision = (choice: unknown) => ({ decisionId: toolListId("calc", "files"), source: TOOL_LIST_SOURCE, choice });

describe("readToolList: the one reader of a journaled tool list", () => {
  it("reads the tools a source listed", () => {
    const tools = [{ name: "read", description: "reads a file", inputSchema: { type: "object" } }, { name: "write" }];
    expect(readToolList("r", decision({ source: "files", tools }))).toEqual(tools);
    expect(toolListId("calc", "files")).toBe("calc#tools:files");
  });

  it.each([
    ["no list", { source: "files" }, "data.choice.tools"],
    ["a choice that is not an object", null, "data.choice.tools"],
    ["a tool without a name", { tools: [{ description: "x" }] }, "data.choice.tools[0]"],
    ["a tool that is not an object", { tools: [{ name: "a" }, "b"] }, "data.choice.tools[1]"],
    ["a name twice", { tools: [{ name: "a" }, { name: "a" }] }, "data.choice.tools[1]"],
  ])("refuses %s with JournalFormatError naming the run, seq and decision", (_, choice, field) => {
    const e = (() => {
      try {
        readToolList("r", decision(choice), 7);
      } catch (x) {
        return x;
      }
    })();
    expect(isJournalFormatError(e)).toBe(true);
    expect(e).toMatchObject({ runId: "r", seq: 7, field });
    expect((e as Error).message).toContain("calc#tools:files");
  });
});
