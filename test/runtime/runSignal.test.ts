import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const oneTool = (execute: (signal: AbortSignal) => unknown) =>
  agentLoop$({
    id: "s",
    model: scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "c", name: "wait", input: {} }] } : { content: "done", toolCalls: [] },
    ),
    tools: { wait: { description: "waits", execute: (_input, { signal }) => execute(signal) } },
  });

describe("the caller's signal", () => {
  it("is let go when the run ends: a signal shared by many runs keeps no listener of theirs", async () => {
    const shared = new AbortController();
    const loop = oneTool(() => ({ ok: true }));
    const journal = jsonJournal();
    for (let i = 0; i < 5; i++) await loop.run({ runId: `r${i}`, journal, input: "go", signal: shared.signal });
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(0);
  });

  it("reaches a tool in flight with the caller's reason, and the run interrupts as aborted", async () => {
    const controller = new AbortController();
    const why = new Error("the caller gave up");
    let seen: unknown;
    const loop = oneTool(
      (signal) =>
        new Promise((_, reject) => {
          signal.addEventListener("abort", () => {
            seen = signal.reason;
            reject(signal.reason);
          });
          setTimeout(() => controller.abort(why), 5);
        }),
    );
    const e = await loop.run({ runId: "r", journal: jsonJournal(), input: "go", signal: controller.signal }).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(isAgentInterruptedError(e) && e.run.reason).toBe("aborted");
    expect(seen).toBe(why);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("already aborted, stops the run before its first step", async () => {
    let called = 0;
    const loop = oneTool(() => {
      called++;
      return {};
    });
    const e = await loop
      .run({ runId: "r", journal: jsonJournal(), input: "go", signal: AbortSignal.abort(new Error("no")) })
      .then(
        () => undefined,
        (x: unknown) => x,
      );
    expect(isAgentInterruptedError(e) && e.run.reason).toBe("aborted");
    expect(called).toBe(0);
  });
});
