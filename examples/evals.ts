import { agentLoop$, type Journal, replayRun, type ScriptedResponse, scriptedModel, type Tool } from "loom-agent";

/** The order agent: it looks the order up, refunds when asked, and answers. */
export function orderAgent(options: { system?: string; script?: ScriptedResponse[]; refunds?: string[] } = {}) {
  const lookup: Tool = {
    description: "looks an order up",
    execute: async (input) => ({ order: (input as { id: string }).id, status: "shipped" }),
  };
  const refund: Tool = {
    description: "refunds an order",
    sideEffects: true, // a replay never runs it unless told to
    execute: async (input) => {
      options.refunds?.push((input as { id: string }).id);
      return { refunded: true };
    },
  };
  const script: ScriptedResponse[] = options.script ?? [
    { toolCalls: [{ id: "c1", name: "lookup", input: { id: "A-17" } }] },
    { content: "Order A-17 has shipped." },
  ];
  return agentLoop$({ id: "orders", system: options.system, model: scriptedModel(script), tools: { lookup, refund } });
}

/** One recorded run replayed against the candidate: did it keep every call the run made? */
export interface Verdict {
  readonly runId: string;
  readonly pass: boolean;
  /** Where the candidate first went another way, when it did. */
  readonly divergedAt?: string;
  /** Tools the replay executed (a recorded call is served, not run). */
  readonly executed: number;
}

/** Replays each recorded run against the candidate; a run regresses when the candidate drops a call. */
export async function evaluate(
  journal: Journal,
  runIds: readonly string[],
  candidate: ReturnType<typeof orderAgent>,
): Promise<Verdict[]> {
  const verdicts: Verdict[] = [];
  for (const runId of runIds) {
    // Every call the recorded run made must still be made ("superset"); new calls run live,
    // except a refund (sideEffects): the record cannot serve it, and the replay stops there.
    const replay = await replayRun(journal, runId, { loop: candidate, match: "superset", onNewInput: "live" });
    const d = replay.diff.firstDivergence;
    verdicts.push({
      runId,
      pass: replay.error === undefined && replay.diff.pass,
      ...(d ? { divergedAt: `turn ${d.turn}: ${d.what}` } : {}),
      executed: replay.counts.executedTools,
    });
  }
  return verdicts;
}

/** For CI: 1 when any run regressed. */
export const exitCodeOf = (verdicts: readonly Verdict[]): number => (verdicts.every((v) => v.pass) ? 0 : 1);
