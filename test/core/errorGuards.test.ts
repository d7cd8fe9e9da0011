import { describe, expect, it } from "vitest";
import * as aiSdk from "../../src/ai-sdk.ts";
import * as loom from "../../src/index.ts";
import { isLoomError, LoomError } from "../../src/index.ts";
import * as journal from "../../src/journal.ts";
import * as mcp from "../../src/mcp.ts";
import * as postgres from "../../src/postgres.ts";
import * as viewer from "../../src/viewer.ts";

/**
 * Every `is…Error` guard Loom exports knows its error by name and code, not by class identity:
 * an error made by another copy of Loom in the same process (a plugin that bundles its own) is
 * classified as this copy's own would be, and an error that is not Loom's is not.
 */

type Guard = (e: unknown) => boolean;
type ErrorClass = abstract new (...args: never[]) => Error;

/** Each exported guard with the class it names (`isRunBusyError` and `RunBusyError`). */
const pairs: [string, Guard][] = [];
for (const entry of [loom, journal, aiSdk, mcp, postgres, viewer] as Record<string, unknown>[])
  for (const [name, value] of Object.entries(entry)) {
    const cls = entry[name.slice(2)];
    if (!/^is\w+Error$/.test(name) || typeof value !== "function" || typeof cls !== "function") continue;
    if (!((cls as ErrorClass).prototype instanceof LoomError) || pairs.some(([n]) => n === name.slice(2))) continue;
    pairs.push([name.slice(2), value as Guard]);
  }

/** An error as another copy would make it: a plain Error given the class's name and a code. */
const plain = (name: string, code: string) => Object.assign(new Error(`from another copy: ${name}`), { name, code });

/** An error of a class of its own (another copy's class), with the same name and a code. */
function foreign(name: string, code: string): Error {
  class OtherCopy extends Error {
    readonly code = code;
  }
  const e = new OtherCopy(`from another copy: ${name}`);
  e.name = name;
  return e;
}

describe("error guards, across copies of Loom", () => {
  it("covers every exported guard of a Loom error class", () => {
    expect(pairs.length).toBeGreaterThanOrEqual(35);
    expect(pairs.map(([name]) => name)).toEqual(
      expect.arrayContaining(["ModelCapabilityError", "RunBusyError", "EventDeliveryError", "AgentInterruptedError"]),
    );
  });

  it.each(pairs)("is%s: true for another copy's error of that name with a code", (name, guard) => {
    expect(guard(plain(name, "someCode"))).toBe(true);
    expect(guard(foreign(name, "someCode"))).toBe(true);
    expect(isLoomError(plain(name, "someCode"))).toBe(true);
  });

  it.each(pairs)("is%s: false for an error that is not that one", (name, guard) => {
    expect(guard(new Error("plain"))).toBe(false);
    expect(guard(Object.assign(new Error("a file"), { code: "ENOENT" }))).toBe(false);
    expect(guard(Object.assign(new Error("no code"), { name }))).toBe(false);
    expect(guard({ name, code: "someCode" })).toBe(false); // no message: not an error
    expect(guard(undefined)).toBe(false);
    for (const [other] of pairs) if (other !== name) expect(guard(plain(other, "someCode"))).toBe(false);
  });

  it("knows an error by a code only its class uses, whatever a bundler renamed the class to", () => {
    expect(loom.isModelCapabilityError(plain("e", "modelMethodMissing"))).toBe(true);
    expect(loom.isRunBusyError(plain("t", "runBusy"))).toBe(true);
    expect(loom.isEventDeliveryError(plain("n", "eventExpired"))).toBe(true);
    expect(isLoomError(plain("r", "runCancelled"))).toBe(true);
    expect(loom.isRunBusyError(plain("t", "runCancelled"))).toBe(false);
  });

  it("isLoomError: false for errors that are not Loom's, codes and all", () => {
    for (const e of [
      new Error("x"),
      Object.assign(new Error("x"), { code: "ENOENT" }),
      Object.assign(new TypeError("x"), { code: "ERR_INVALID_ARG_TYPE" }),
      { code: "runBusy" },
      "runBusy",
      null,
    ])
      expect(isLoomError(e)).toBe(false);
  });

  it("isAgentInterruptedError with a loop: false for another copy's error without a run, not a throw", () => {
    const e = plain("AgentInterruptedError", "agentInterrupted");
    expect(loom.isAgentInterruptedError(e)).toBe(true);
    expect(loom.isAgentInterruptedError(e, { config: { toolCallLog: "lean" } })).toBe(false);
  });
});
