import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { Budget, BudgetBreach } from "../../src/policies/budget.ts";
import type { AgentOutput, InterruptedAgentRun } from "../../src/projections/types.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { recordApproval } from "../../src/runtime/control/approvals.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { isEventDeliveryError } from "../../src/runtime/control/operations.ts";
import {
  APPROVAL_REASON,
  type BudgetOf,
  compositionLoop,
  DELIVERED_PAYLOAD,
  type Feature,
  firstBudgetAt,
  messagesOf,
  messageText,
  runIdOf,
  SESSION_ID,
  type World,
} from "./composition.ts";

/**
 * Drives the composition scenario to its end from wherever its journal is: each message's run is
 * sent (or resumed when it exists), under its first budget until that stopped it once (then under
 * the full one), and every other stop is answered as the outside world would: an
 * approval is given (by "ana", with a reason), a sleep is waited out on the fake clock, an event
 * is delivered with the token the tool handed out. Stateless beside the journal and the world, so
 * a fresh process (or loop object) picks up where a killed one stopped.
 */
export interface DriveOptions {
  readonly features: ReadonlySet<Feature>;
  readonly world: World;
  readonly journal: Journal;
  readonly budgetOf: BudgetOf;
  /** The budget each run starts under (default `firstBudgetOf(features)`). */
  readonly firstBudget?: Budget;
  /** Told each step of the drive (`send chat/0`, `approve …`), as it starts. */
  readonly onStep?: (what: string) => void;
}

/** The stops one message may make before its answer; more means the drive is stuck. */
const MAX_STOPS = 12;

/** Runs every message of the scenario to its answer; resolves to the outputs, by message. */
export async function drive(options: DriveOptions): Promise<AgentOutput[]> {
  const { features, world, journal, budgetOf, onStep } = options;
  const loop = compositionLoop(features, world, journal);
  const outputs: AgentOutput[] = [];
  for (let k = 0; k < messagesOf(features); k++) {
    const runId = runIdOf(features, k);
    for (let stops = 0; ; stops++) {
      if (stops > MAX_STOPS) throw new Error(`run ${runId}: still stopped after ${MAX_STOPS} answered stops`);
      const started = (await journal.store.listRuns({ prefix: runId })).some((r) => r.runId === runId);
      // Under the first budget until the journal says it stopped the run, then under the full one.
      const first = features.has("budget") && !(started && (await budgetStops(journal, runId)).length > 0);
      const budget = first ? (options.firstBudget ?? firstBudgetAt(features, k, budgetOf)) : budgetOf(k);
      const common = { journal, now: world.now, ...(budget === undefined ? {} : { budget }) };
      onStep?.(`${started ? "resume" : "start"} ${runId}`);
      try {
        const out = !started
          ? features.has("session")
            ? await loop.send({ ...common, sessionId: SESSION_ID, message: messageText(k) })
            : await loop.run({ ...common, runId, input: messageText(k) })
          : await loop.run({ ...common, runId });
        outputs.push(out);
        break;
      } catch (e) {
        if (!isAgentInterruptedError(e)) throw e;
        if (e.run.reason === "budget" && first) continue; // resumed under the full budget
        await answer(e.run as InterruptedAgentRun, runId, options);
      }
    }
  }
  return outputs;
}

/** The budget stops a run's journal holds: what each recorded of the usage and the limits. */
export async function budgetStops(journal: Journal, runId: string): Promise<BudgetBreach[]> {
  const stops: BudgetBreach[] = [];
  for (const e of await readJournal(journal, runId)) {
    if (e.type === "run.interrupted" && e.data.reason === "budget") stops.push(e.data.detail as BudgetBreach);
  }
  return stops;
}

/** Answers what stopped a run, as the outside world would; throws on a stop it must never see. */
async function answer(run: InterruptedAgentRun, runId: string, options: DriveOptions): Promise<void> {
  const { journal, world, onStep } = options;
  const now = world.now;
  if (run.reason === "approval-pending") {
    for (const p of run.pendingApprovals) {
      onStep?.(`approve ${p.runId ?? runId} ${p.stepId}`);
      await recordApproval(journal, p.runId ?? runId, p.stepId, {
        approved: true,
        by: "ana",
        reason: APPROVAL_REASON,
        now,
      });
    }
    return;
  }
  if (run.reason === "waiting") {
    if (run.waits.length === 0) throw new Error(`run ${runId} stopped waiting, but lists no wait`);
    for (const w of run.waits) {
      if (w.kind === "sleep" && w.until !== undefined) {
        onStep?.(`wake ${w.runId} ${w.stepId}`);
        world.advanceTo(Date.parse(w.until));
      } else if (w.kind === "event") {
        const token = world.tokenOf(w.runId, w.stepId);
        if (token === undefined)
          throw new Error(`run ${w.runId} waits for an event on ${w.stepId}, no token handed out`);
        onStep?.(`deliver ${w.runId} ${w.stepId}`);
        await deliverEvent(journal, token, DELIVERED_PAYLOAD, { now }).catch((e: unknown) => {
          // Delivered before a crash, the run not resumed since: the payload is journaled already.
          if (!(isEventDeliveryError(e) && e.code === "eventAlreadyDelivered")) throw e;
        });
      }
    }
    return;
  }
  throw new Error(
    `run ${runId} stopped (${run.reason}) where the scenario never stops: ${JSON.stringify(run.cause ?? run.waits)}`,
  );
}
