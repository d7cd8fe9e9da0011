/** Loops that wait, for `loom wake --loops <this module>` (test/cli/waits.test.ts). */
import { scriptedModel } from "../../../src/models/scripted.ts";
import type { Tool } from "../../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";

/** Tokens handed out by `pay` calls in this process. */
export const tokens: string[] = [];

const pay: Tool = {
  description: "waits for a payment",
  execute: (_input, ctx) => {
    const wait = ctx.waitForEvent({ what: "payment" });
    tokens.push(wait.token);
    return wait;
  },
};
const nap: Tool = { description: "naps", execute: (_input, ctx) => ctx.sleep(60_000, { what: "a nap" }) };

const model = (name: string) =>
  scriptedModel(({ turn }) =>
    turn === 0 ? { toolCalls: [{ id: "c", name, input: {} }] } : { content: "done", toolCalls: [] },
  );

export const loops = [
  agentLoop$({ id: "payer", model: model("pay"), tools: { pay } }),
  agentLoop$({ id: "napper", model: model("nap"), tools: { nap } }),
];
