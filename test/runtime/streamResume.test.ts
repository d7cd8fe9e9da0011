import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, type RunEvent, readJournal, runEventsOf } from "../../src/index.ts";
import { evolveRunEvents, foldEntries, initialRunEventState } from "../../src/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker } from "../support/processes.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-stream-resume-");
});
afterAll(() => tmp.remove());

const M0 = "w#turn:0:model";
type Line = { via: string; event: Record<string, unknown> & { type: string } };
const linesOf = (lines: readonly string[]): Line[] =>
  lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Line);

/** What a client keeps of a call's deltas: those after the call's last reset (by text and by tool call). */
function kept(events: readonly Line["event"][], stepId: string) {
  const last = events.findLastIndex((e) => e.type === "reset" && e.stepId === stepId);
  const after = events.slice(last + 1).filter((e) => e.stepId === stepId);
  const text = after
    .filter((e) => e.type === "text-delta")
    .map((e) => e.delta)
    .join("");
  const inputs = new Map<unknown, string>();
  for (const e of after.filter((e) => e.type === "tool-input-delta"))
    inputs.set(e.toolCallId, (inputs.get(e.toolCallId) ?? "") + e.delta);
  return { text, inputs };
}

describe("a model call asked again after its process died mid-stream", () => {
  it("every watcher of the resume sees a journaled reset before the call's second model-started; the deltas kept make the journaled content", async () => {
    const file = tmp.file("resume.db");
    const first = startWorker("test/runtime/workers/streamResume.ts", [file, "first"]);
    // Killed once the first call streams its tool input: its text and half an input were sent.
    await first.waitFor((l) => l.includes('"tool-input-delta"'), "the first call's tool input");
    first.child.kill("SIGKILL");
    expect(await first.exited).toMatchObject({ signal: "SIGKILL" });
    const before = linesOf(first.lines).map((l) => l.event);
    expect(before.some((e) => e.type === "model-finished")).toBe(false);
    const lastCursor = before.filter((e) => typeof e.cursor === "number").at(-1)?.cursor as number;
    expect(before.some((e) => e.type === "text-delta")).toBe(true);

    const second = startWorker("test/runtime/workers/streamResume.ts", [file, "second", String(lastCursor)]);
    await second.waitFor((l) => l === "done", "the resumed run", 30_000);
    const after = linesOf(second.lines);
    const journal = openSqliteJournal(file, { readonly: true });
    const entries = await readJournal(journal, "s-1");
    await journal.close();
    const all = runEventsOf(entries);
    const finished = all.find((e) => e.type === "model-finished" && e.stepId === M0) as Extract<
      RunEvent,
      { type: "model-finished" }
    >;
    const restarts = entries.filter((e) => e.type === "frame.started" && e.data.frameId === M0);
    expect(restarts).toHaveLength(2);
    const reset = { type: "reset", runId: "s-1", cursor: restarts[1]?.seq, stepId: M0, attempt: 1 };

    for (const via of ["stream", "onEvent", "follow"]) {
      const events = after.filter((l) => l.via === via).map((l) => l.event);
      // The reset, then the call's second model-started, at the cursor of its second frame.started.
      const at = events.findIndex((e) => e.type === "reset");
      expect(events[at], via).toEqual(reset);
      expect(events[at + 1], via).toMatchObject({ type: "model-started", stepId: M0, cursor: reset.cursor });
      expect(
        events.filter((e) => e.type === "reset"),
        via,
      ).toHaveLength(1);
      // A client that saw the first process's events and then these keeps exactly the journaled call.
      const client = [...before, ...events];
      const { text, inputs } = kept(client, M0);
      expect(text, via).toBe(finished.content);
      expect(inputs, via).toEqual(new Map(finished.toolCalls.map((c) => [c.id, JSON.stringify(c.input)])));
      // Without the reset it would not: the dead attempt's deltas come first.
      expect(kept([...before, ...events.filter((e) => e.type !== "reset")], M0).text, via).not.toBe(finished.content);
      expect(events.at(-1)?.type, via).toBe("run-completed");
    }
    // followRun after the client's last cursor gives the journal's events after it, the reset among them.
    const followed = after.filter((l) => l.via === "follow" && "cursor" in l.event).map((l) => l.event);
    expect(followed).toEqual(all.filter((e) => e.cursor > lastCursor));

    // The UI stream tells the reset, and the call's text after it is the journaled content.
    const chunks = after.filter((l) => l.via === "ui").map((l) => l.event);
    const at = chunks.findIndex((c) => c.type === "data-loom-reset");
    expect(chunks[at]).toMatchObject({ data: { stepId: M0, attempt: 1 }, transient: true });
    const text = chunks
      .slice(at + 1)
      .filter((c) => c.type === "text-delta" && String(c.id).startsWith(M0))
      .map((c) => c.delta)
      .join("");
    expect(text).toBe(finished.content);
    expect(chunks.at(-1)).toMatchObject({ type: "finish", finishReason: "stop" });
  }, 60_000);

  it("the fold: a frame started again with no end between gives reset first; a failed attempt gives its reset with model-retrying", () => {
    const runId = "r";
    const meta = { at: 0 } as never;
    let seq = 0;
    const entry = (type: string, data: unknown) => ({ runId, seq: ++seq, type, data, meta }) as never;
    const started = entry("run.started", { loopId: "w", input: "x" });
    const s1 = entry("frame.started", { frameId: M0, effect: "model", inputDigest: "d" });
    const s2 = entry("frame.started", { frameId: M0, effect: "model", inputDigest: "d" });
    const failed = entry("attempt.failed", {
      frameId: M0,
      attempt: 1,
      error: { name: "E", message: "m", retryable: true },
      retryAt: null,
    });
    const s3 = entry("frame.started", { frameId: M0, effect: "model", inputDigest: "d" });
    const done = entry("frame.completed", { frameId: M0, output: { content: "hi", toolCalls: [] } });
    const types = runEventsOf([started, s1, s2, failed, s3, done]).map((e) => `${e.type}@${e.cursor}`);
    expect(types).toEqual([
      "run-started@1",
      "model-started@2",
      "reset@3",
      "model-started@3",
      "reset@4",
      "model-retrying@4",
      "model-started@5",
      "model-finished@6",
    ]);
    // Seeded from a folded journal whose call was asked and never answered (a resume): the same.
    const state = initialRunEventState({}, foldEntries([started, s1]));
    expect(evolveRunEvents(state, s2).map((e) => e.type)).toEqual(["reset", "model-started"]);
    const waiting = initialRunEventState({}, foldEntries([started, s1, failed]));
    expect(evolveRunEvents(waiting, s3).map((e) => e.type)).toEqual(["model-started"]);
  });
});
