import { digestOf, digestOfRecorded } from "../core/digest.ts";
import { AgentLoopConfigError, ConcurrencyError, ReplayDivergenceError } from "../core/errors.ts";
import { checkRunId, modelFrameId } from "../events/ids.ts";
import { encodeEntries } from "../events/rows.ts";
import type { Journal } from "../events/spi.ts";
import { TYPE_CODES } from "../events/sqlite/sqliteRows.ts";
import type { Message, RunStartedData } from "../events/types.ts";
import type { AgentLoop } from "../runtime/run/agentLoop.ts";
import { runStartedData } from "../runtime/steps/actors.ts";
import { type PgDatabase, pgDatabaseOf } from "./database.ts";
import { NotPostgresJournalError } from "./errors.ts";
import { notifyDue } from "./notify.ts";
import { appendEntries, type PostgresEventStore } from "./store.ts";

/** A run to hand to the workers (`submitRun`). */
export interface SubmitRequest {
  /** The run's id (a run already in the journal is only queued). */
  readonly runId: string;
  /** The loop that will run it: its id picks the workers' loop, its tool names go in `run.started`. */
  readonly loop: AgentLoop;
  /** Required for a new run; for a run already in the journal, omitted or equal to the recorded one. */
  readonly input?: string | readonly Message[];
  /**
   * Whose run it is (default `""`, one shared tenant): workers claim fairly across tenants, the
   * least recently served first, so one tenant's backlog never starves another's runs. Kept for a
   * run already queued; set again when the run is queued anew.
   */
  readonly tenant?: string;
}

/** The database a journal's store lives in, or `NotPostgresJournalError`. */
export function databaseOf(journal: Journal, what: string): PgDatabase {
  const db = (journal.store as Partial<PostgresEventStore>)[pgDatabaseOf];
  if (db === undefined) throw new NotPostgresJournalError(what);
  return db;
}

/**
 * A new run in one statement: its `run.started` appended at version 0, its queue row and the
 * NOTIFY, all only if the append was written. False when the run is already in the journal (the
 * transaction below then checks it and queues it).
 */
async function submitNew(
  db: PgDatabase,
  runId: string,
  loop: AgentLoop,
  input: string | readonly Message[],
  tenant: string,
) {
  const { types, texts } = encodeEntries(runId, [{ type: "run.started", data: runStartedData(loop.config, input) }], 0);
  return appendEntries(db.pool, db.tables, runId, 0, types, texts, undefined, undefined, loop.config.id, { tenant });
}

/**
 * Hands a run to the workers (`startWorker`). A new run gets its `run.started` entry (exactly what
 * `loop.run` writes for a new run, so a worker resumes it from the journal without its input) and
 * its queue row in one transaction. Submitting a run that is already in the journal (interrupted,
 * or started in-process) only queues it; submitting twice is harmless. Resolves to whether this
 * call started the run.
 *
 * @example
 * import { openPostgresJournal, submitRun } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * await submitRun(journal, { runId: "r-1", loop, input: "Where is my order?", tenant: "acme" });
 */
export async function submitRun(journal: Journal, request: SubmitRequest): Promise<{ started: boolean }> {
  checkRunId(request.runId, "submitRun");
  const db = databaseOf(journal, "submitRun");
  await db.ready;
  for (let attempt = 0; ; attempt++) {
    try {
      return await submitOnce(db, request);
    } catch (e) {
      // Two first submissions of one run raced: the loser finds the run started and just queues it.
      if ((e as { code?: unknown }).code !== "23505" || attempt > 0) throw e;
    }
  }
}

async function submitOnce(db: PgDatabase, request: SubmitRequest): Promise<{ started: boolean }> {
  const { runId, loop, input, tenant = "" } = request;
  if (input !== undefined && (await submitNew(db, runId, loop, input, tenant))) return { started: true };
  const loopId = loop.config.id;
  const t = db.tables;
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    const head = await client.query(`SELECT version FROM ${t.runs} WHERE run_id = $1 FOR UPDATE`, [runId]);
    const started = head.rowCount === 0;
    if (started) {
      if (input === undefined) {
        throw new AgentLoopConfigError(
          `run ${runId} has no journal yet, so it needs an input: call submitRun(journal, { runId: "${runId}", loop, input })`,
          "missingInput",
        );
      }
      const data = runStartedData(loop.config, input);
      const { types, texts } = encodeEntries(runId, [{ type: "run.started", data }], 0);
      if (!(await appendEntries(client, t, runId, 0, types, texts))) throw new ConcurrencyError(runId, 0, 1);
    } else {
      const first = await client.query<{ data: string }>(
        `SELECT e.data FROM ${t.entries} e JOIN ${t.runs} r ON r.run = e.run
          WHERE r.run_id = $1 AND e.seq = 1 AND e.type = ${TYPE_CODES["run.started"]}`,
        [runId],
      );
      const recorded = first.rows[0] && (JSON.parse(first.rows[0].data) as RunStartedData);
      if (recorded !== undefined && recorded.loopId !== loopId) {
        throw new ReplayDivergenceError(
          runId,
          modelFrameId(recorded.loopId, 0),
          `run ${runId} was recorded by loop "${recorded.loopId}" but was submitted for loop "${loopId}"; submit it with the loop that recorded it.`,
        );
      }
      if (input !== undefined && digestOf(input).digest !== digestOfRecorded(recorded?.input).digest) {
        throw new AgentLoopConfigError(
          `run ${runId} was started with another input; submit it without input (the recorded one is used) or start a new run.`,
          "inputMismatch",
        );
      }
    }
    // A run already queued keeps its row; one waiting out a backoff is due again at once.
    await client.query(
      `INSERT INTO ${t.leases} AS l (run_id, loop_id, tenant) VALUES ($1, $2, $3)
       ON CONFLICT (run_id) DO UPDATE SET expires_at = now(), failures = 0, tenant = $3 WHERE l.owner IS NULL`,
      [runId, loopId, tenant],
    );
    await client.query(notifyDue(db), [loopId]); // sent on commit: a listening worker claims it at once
    await client.query("COMMIT");
    return { started };
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}
