import { describe, expect, it } from "vitest";
import {
  type DefinitionChange,
  definitionPin,
  describeChange,
  unacceptedChanges,
} from "../../src/policies/definition.ts";

const schema = (field: string) => ({ type: "object", properties: { [field]: { type: "string" } } });
const base = {
  id: "support",
  system: "Be brief.",
  tools: { lookup: { inputSchema: schema("order") }, refund: { inputSchema: schema("amount") } },
};

describe("definitionPin", () => {
  it("is the same for the same definition, whatever the key order of tools and schemas", () => {
    const reordered = {
      id: "support",
      system: "Be brief.",
      tools: {
        refund: { inputSchema: { properties: { amount: { type: "string" } }, type: "object" } },
        lookup: { inputSchema: schema("order") },
      },
    };
    expect(definitionPin(reordered)).toEqual(definitionPin(base));
  });

  it("records a short digest per tool and for the system prompt, null where there is none", () => {
    const pin = definitionPin({ id: "l", tools: { bare: {} } });
    expect(pin).toEqual({ digest: expect.stringMatching(/^[0-9a-f]{64}$/), system: null, tools: { bare: null } });
    expect(definitionPin(base).tools.lookup).toMatch(/^[0-9a-f]{16}$/);
  });

  it("differs when the loop id, the system prompt, a tool or a schema differs", () => {
    const digests = new Set(
      [
        base,
        { ...base, id: "other" },
        { ...base, system: "Be long." },
        { ...base, system: undefined },
        { ...base, tools: { lookup: base.tools.lookup } },
        { ...base, tools: { ...base.tools, lookup: { inputSchema: schema("id") } } },
      ].map((d) => definitionPin(d).digest),
    );
    expect(digests.size).toBe(6);
  });

  it("is JSON: what run.started records reads back equal", () => {
    const pin = definitionPin(base);
    expect(JSON.parse(JSON.stringify(pin))).toEqual(pin);
  });
});

describe("unacceptedChanges: given the recorded pin, when resuming with another definition, then", () => {
  const recorded = definitionPin(base);
  const changed = definitionPin({
    id: "support",
    system: "Be kind.",
    tools: { lookup: { inputSchema: schema("id") }, search: {} },
  });
  const all: DefinitionChange[] = [
    { kind: "system-changed" },
    { kind: "tool-schema-changed", tool: "lookup" },
    { kind: "tool-removed", tool: "refund" },
    { kind: "tool-added", tool: "search" },
  ];

  it("nothing changed: no changes", () => {
    expect(unacceptedChanges(recorded, definitionPin(base))).toEqual([]);
  });

  it("names every change, system first, then tools by name", () => {
    expect(unacceptedChanges(recorded, changed)).toEqual(all);
  });

  it("leaves out the kinds the loop accepts, never a changed system prompt", () => {
    expect(unacceptedChanges(recorded, changed, ["tool-added", "tool-removed"])).toEqual([all[0], all[1]]);
    expect(unacceptedChanges(recorded, changed, () => true)).toEqual([all[0]]);
  });

  it("asks a predicate about each change", () => {
    const onlySearch = (c: DefinitionChange) => c.kind === "tool-added" && c.tool === "search";
    expect(unacceptedChanges(recorded, changed, onlySearch)).toEqual(all.slice(0, 3));
  });

  it("treats tool names as data: a tool named constructor or __proto__ is compared like any other", () => {
    const withOdd = definitionPin({ id: "l", tools: JSON.parse('{"constructor": {}, "__proto__": {}}') });
    expect(unacceptedChanges(definitionPin({ id: "l" }), withOdd).map(describeChange)).toEqual([
      'tool "__proto__" added',
      'tool "constructor" added',
    ]);
  });

  it("says each change in words", () => {
    expect(all.map(describeChange)).toEqual([
      "the system prompt changed",
      'the input schema of tool "lookup" changed',
      'tool "refund" removed',
      'tool "search" added',
    ]);
  });
});
