import { describe, expect, it } from "vitest";
import { isDefinitionChangedError } from "../../src/core/errors.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { definitionPin } from "../../src/policies/definition.ts";
import type { AgentLoopConfig } from "../../src/runtime/base/config.ts";
import { foldRun } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { LIVE, replayMode } from "../../src/runtime/steps/run.ts";
import { jsonJournal } from "../support/loop.ts";

const recorded: AgentLoopConfig = { id: "shop", model: scriptedModel([]), system: "Be brief." };
const changed: AgentLoopConfig = { ...recorded, system: "Be thorough." };

describe("a run's mode: live, or a replay of a recording", () => {
  it("live, a resume under another definition is refused; a replay goes on with the recording", async () => {
    const journal = jsonJournal();
    const loop = agentLoop$({ ...recorded, model: scriptedModel([{ content: "Hello.", toolCalls: [] }]) });
    await loop.run({ runId: "r", journal, input: "hi" });
    const state = await foldRun(journal, "r");
    expect(state.definition).toEqual(definitionPin(recorded));
    const refused = await LIVE.checkResumable("r", changed, state, journal).catch((e: unknown) => e);
    expect(isDefinitionChangedError(refused)).toBe(true);
    await expect(replayMode().checkResumable("r", changed, state, journal)).resolves.toBeUndefined();
  });

  it("a replay reads the journal as it is and keeps no records of its own; live judges prompts, keeps records and resumes short", () => {
    const journal = jsonJournal();
    const pace = async () => {};
    const replay = replayMode(pace);
    expect(replay.history(journal)).toBe(journal);
    expect([LIVE.judgesPrompts, LIVE.keepsRecords, LIVE.resumesShort, LIVE.pace]).toEqual([
      true,
      true,
      true,
      undefined,
    ]);
    expect([replay.judgesPrompts, replay.keepsRecords, replay.resumesShort, replay.pace]).toEqual([
      false,
      false,
      false,
      pace,
    ]);
    expect(Object.isFrozen(LIVE) && Object.isFrozen(replay)).toBe(true);
  });
});
