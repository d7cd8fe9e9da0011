import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
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

describe("definitionPin with tool sources (MCP servers)", () => {
  it("leaves the pin of a loop without sources as it was before sources existed", () => {
    const pin = definitionPin(base);
    expect(pin).not.toHaveProperty("sources");
    expect(definitionPin({ ...base, toolSources: [] })).toEqual(pin);
    expect(pin.digest).toBe(sha256Hex(JSON.stringify([base.id, pin.system, pin.tools])));
  });

  it("pins the sources' names, sorted, and not what they list", () => {
    const pin = definitionPin({ ...base, toolSources: [{ name: "files" }, { name: "calendar" }] });
    expect(pin.sources).toEqual(["calendar", "files"]);
    expect(pin.digest).not.toBe(definitionPin(base).digest);
    expect(definitionPin({ ...base, toolSources: [{ name: "calendar" }, { name: "files" }] })).toEqual(pin);
  });

  it("names a source added or removed, and accepts either when told", () => {
    const recorded = definitionPin({ ...base, toolSources: [{ name: "files" }] });
    const current = definitionPin({ ...base, toolSources: [{ name: "calendar" }] });
    const changes = unacceptedChanges(recorded, current);
    expect(changes).toEqual([
      { kind: "tool-source-added", source: "calendar" },
      { kind: "tool-source-removed", source: "files" },
    ]);
    expect(changes.map(describeChange)).toEqual(['tool source "calendar" added', 'tool source "files" removed']);
    expect(unacceptedChanges(recorded, current, ["tool-source-added", "tool-source-removed"])).toEqual([]);
    expect(unacceptedChanges(definitionPin(base), recorded, ["tool-source-added"])).toEqual([]);
  });
});
