import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/events/memory.ts";
import { frameCompleted, frameStarted } from "./entries.ts";
import { storeContract } from "./storeContract.ts";

storeContract("memory", async () => ({ store: memoryStore() }));
storeContract("memory (json)", async () => ({ store: memoryStore({ json: true }) }));

describe("memoryStore", () => {
  const entries = [frameStarted("f"), frameCompleted("f", { when: new Date(0), list: [1] })];

  it("with json, hands back a fresh parsed copy on every read", async () => {
    const store = memoryStore({ json: true });
    await store.append("r", entries, { expectedVersion: 0 });
    const [a, b] = [await store.read("r"), await store.read("r")];
    expect(a).toEqual(b);
    expect(a[1]).not.toBe(b[1]);
    (a[1]!.data as { output: { list: number[] } }).output.list.push(2);
    expect((await store.read("r"))[1]!.data).toEqual({
      frameId: "f",
      output: { when: "1970-01-01T00:00:00.000Z", list: [1] },
    });
  });

  it("by default, hands back the same deeply frozen JSON form on every read", async () => {
    const store = memoryStore();
    await store.append("r", entries, { expectedVersion: 0 });
    const [a, b] = [await store.read("r"), await store.read("r")];
    expect(a[1]).toBe(b[1]);
    expect(Object.isFrozen((a[1]!.data as { output: { list: number[] } }).output.list)).toBe(true);
    expect((a[1]!.data as { output: { when: unknown } }).output.when).toBe("1970-01-01T00:00:00.000Z");
  });
});
