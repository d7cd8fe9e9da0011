import { sha256Hex } from "../core/digest.ts";
import { TYPE_CODES } from "../events/sqlite/sqliteRows.ts";
import type { EntryType } from "../events/types.ts";
import { CODE, entryArrays } from "./rows.ts";
import type { Tables } from "./schema.ts";

/**
 * Appends of many runs in one statement: group commit across runs. A process with thousands of
 * runs in hand (a worker at `concurrency` 2,000) makes two appends a turn per run; sent one by one,
 * each is a round trip, a transaction and a WAL flush, and the pool's few connections, not the
 * model, set the pace. Here the appends that come in while the store's statements in flight are
 * busy wait, and go out together in one statement when one returns: one round trip and one commit
 * for all of them. With nothing in flight an append goes out after one turn of the event loop, as
 * the single-run statement it always was, so a process with a few runs sees no difference.
 *
 * Each run's append in a batch keeps every rule of the single-run statement (store.ts): its owner
 * row read FOR SHARE and its token checked (the fence), its `loom_runs` row moved only from the
 * version it expects, its entries inserted only when the row moved, a followed run announced, and
 * a worker's last append taking the run off the queue and releasing it. One run refused (an older
 * version, a token that moved on, a cancel request) writes nothing for that run and leaves the
 * others written: the statement reports which runs moved, and the store explains the rest as it
 * does for a single append. A statement that fails as a whole on the server (a deadlock with a
 * claim taking over a run, a unique violation) wrote nothing at all, and its appends are sent
 * again one by one, so an error reaches only the run it belongs to.
 */

/** One run's append, encoded (store.ts `append`, after `encodeEntries`). */
export interface BatchedAppend {
  readonly runId: string;
  /** Above 0: a run's first append (which creates its row) always goes out alone. */
  readonly expectedVersion: number;
  /** The entries' types and texts (`encodeEntries`). */
  readonly types: readonly EntryType[];
  readonly texts: readonly string[];
  /** When it was asked for (ms since the epoch): the `at` of its entries and its run row. */
  readonly at: number;
  readonly fence: number | undefined;
  /** A worker's last append of the run: the queue row's owner, to take the row off and release the run. */
  readonly finishingFor: string | undefined;
  /** `durability: "written"`: batched only with other such appends, into a commit that does not wait for the flush. */
  readonly written: boolean;
}

/** A named statement (parsed once per connection), named by its text's hash: PostgreSQL keeps 63 characters of a name. */
const named = (text: string) => ({ name: `loom_${sha256Hex(text).slice(0, 20)}`, text });

/** Runs per statement at most: a few hundred runs' entries keep a statement's arrays in the tens of kB. */
const MOST = 400;

interface Waiting {
  /** In the order asked for, across both queues: the queue whose head waited longest goes first. */
  readonly order: number;
  readonly append: BatchedAppend;
  readonly resolve: (written: boolean) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The batching front of one store's appends. `alone` sends one append as the single-run statement
 * (true when written); `query` sends a statement. `inFlight`: statements of appends sent at once
 * at most (a few, below the pool's size, so claims and reads still find a connection).
 */
export function appendBatcher(
  t: Tables,
  schemaVersion: number,
  inFlight: number,
  query: (text: { name: string; text: string; values: unknown[] }) => Promise<{ rows: { run_id: string | null }[] }>,
  alone: (append: BatchedAppend) => Promise<boolean>,
) {
  const durable = named(batchSql(t, false));
  const relaxed = named(batchSql(t, true));
  const queues = { durable: [] as Waiting[], written: [] as Waiting[] };
  // The runs with an append waiting in a queue: a second append of the same run goes out alone.
  const queued = new Set<string>();
  let sending = 0;
  let scheduled = false;
  let asked = 0;

  function schedule() {
    if (scheduled || sending >= inFlight) return;
    if (queues.durable.length === 0 && queues.written.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  }

  function flush() {
    scheduled = false;
    while (sending < inFlight) {
      // The queue whose first append has waited longest: neither kind can hold the other back.
      const d = queues.durable[0];
      const w = queues.written[0];
      if (d === undefined && w === undefined) return;
      const written = d === undefined || (w !== undefined && w.order < d.order);
      const batch = queues[written ? "written" : "durable"].splice(0, MOST);
      for (const b of batch) queued.delete(b.append.runId);
      sending++;
      void send(batch, written).finally(() => {
        sending--;
        schedule();
      });
    }
  }

  async function send(batch: Waiting[], written: boolean): Promise<void> {
    if (batch.length === 1) {
      const [w] = batch as [Waiting];
      await alone(w.append).then(w.resolve, w.reject);
      return;
    }
    let moved: Set<string>;
    try {
      moved = await sendBatch(
        batch.map((w) => w.append),
        written,
      );
    } catch (e) {
      if (!serverRefused(e)) {
        for (const w of batch) w.reject(e);
        return;
      }
      // The statement wrote nothing: each run's append again, alone, so only its own error reaches it.
      await Promise.all(batch.map((w) => alone(w.append).then(w.resolve, w.reject)));
      return;
    }
    for (const w of batch) w.resolve(moved.has(w.append.runId));
  }

  async function sendBatch(appends: BatchedAppend[], written: boolean): Promise<Set<string>> {
    // In run id order, so two batches lock the runs' owner rows in the same order.
    appends.sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    const runs: string[] = [];
    const expected: number[] = [];
    const counts: number[] = [];
    const lastTypes: number[] = [];
    const ats: number[] = [];
    const fences: (number | null)[] = [];
    const finishing: (string | null)[] = [];
    const e = { runs: [] as string[], seqs: [] as number[], types: [] as number[] };
    const frames: (string | null)[] = [];
    const effects: (string | null)[] = [];
    const digests: (Buffer | null)[] = [];
    const datas: (string | null)[] = [];
    const refRuns: string[] = [];
    const refs: Buffer[] = [];
    for (const a of appends) {
      runs.push(a.runId);
      expected.push(a.expectedVersion);
      counts.push(a.types.length);
      lastTypes.push(TYPE_CODES[a.types[a.types.length - 1] as EntryType]);
      ats.push(a.at);
      fences.push(a.fence ?? null);
      finishing.push(a.finishingFor ?? null);
      const c = entryArrays(a.types, a.texts);
      for (let i = 0; i < c.types.length; i++) {
        e.runs.push(a.runId);
        e.seqs.push(a.expectedVersion + i + 1);
        e.types.push(c.types[i] as number);
        frames.push(c.frames[i] ?? null);
        effects.push(c.effects[i] ?? null);
        digests.push(c.digests[i] ?? null);
        datas.push(c.datas[i] ?? null);
      }
      for (const d of c.refs) {
        refRuns.push(a.runId);
        refs.push(d);
      }
    }
    const { rows } = await query({
      ...(written ? relaxed : durable),
      values: [
        runs,
        expected,
        counts,
        lastTypes,
        ats,
        fences,
        finishing,
        schemaVersion,
        e.runs,
        e.seqs,
        e.types,
        frames,
        effects,
        digests,
        datas,
        refRuns,
        refs,
      ],
    });
    const moved = new Set<string>();
    for (const row of rows) if (row.run_id !== null) moved.add(row.run_id);
    return moved;
  }

  return {
    /** Sends the append in the next batch; resolves to whether it was written (false: refused, explain it). */
    append(append: BatchedAppend): Promise<boolean> {
      if (queued.has(append.runId)) return alone(append);
      return new Promise<boolean>((resolve, reject) => {
        queued.add(append.runId);
        queues[append.written ? "written" : "durable"].push({ order: asked++, append, resolve, reject });
        schedule();
      });
    },
  };
}

/**
 * An error the server raised for the statement (it has a SQLSTATE and the statement rolled
 * back), as opposed to a connection lost mid-way, where whether it committed is unknown: those
 * reach every run in the batch, as they would each single append.
 */
function serverRefused(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith("08") && !code.startsWith("57");
}

/**
 * The batch statement: $1… one element per run (id, expected version, entry count, last type
 * code, at, fence token, queue owner when it is the worker's last append), $8 the entries' `v`,
 * $9… one element per entry (its run id, seq and columns), $16/$17 the blobs each run names.
 * Returns the ids of the runs written (and a null row per run handed back to the queue).
 */
function batchSql(t: Tables, written: boolean): string {
  return `
    WITH ${
      // As the single statement's `durability: "written"`: only this commit skips waiting for its flush.
      written ? "relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)),\n    " : ""
    }input AS (
      SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::smallint[], $5::bigint[], $6::int[], $7::text[])
          AS i(run_id, expected, n, last_type, at, fence, queue_owner)),
    fence AS (
      SELECT o.run_id, o.token FROM ${t.owners} o JOIN input i ON o.run_id = i.run_id
       WHERE i.fence IS NOT NULL AND o.owner IS NOT NULL
         AND (i.last_type = ${CODE.cancelled} OR NOT EXISTS (SELECT 1 FROM ${t.cancels} c WHERE c.run_id = i.run_id))
       ORDER BY o.run_id FOR SHARE OF o),
    owned AS (
      SELECT i.* FROM input i LEFT JOIN fence f ON f.run_id = i.run_id
       WHERE (i.fence IS NULL OR i.fence = f.token)${written ? " AND EXISTS (SELECT FROM relaxed)" : ""}),
    moved AS (
      UPDATE ${t.runs} r SET updated_at = w.at, version = w.expected + w.n, entries = r.entries + w.n,
             last_type = w.last_type
        FROM owned w WHERE r.run_id = w.run_id AND r.version = w.expected
      RETURNING r.run, r.run_id, w.at, w.fence, w.queue_owner, r.watched_until > now() AS tell),
    ins AS (
      INSERT INTO ${t.entries} (at, run, seq, type, v, frame, effect, digest, data)
      SELECT m.at, m.run, x.seq, x.type, $8::smallint, x.frame, x.effect, x.digest, x.data
        FROM unnest($9::text[], $10::int[], $11::smallint[], $12::text[], $13::text[], $14::bytea[], $15::text[])
             AS x(run_id, seq, type, frame, effect, digest, data)
        JOIN moved m ON m.run_id = x.run_id),
    refs AS (
      INSERT INTO ${t.blobRefs} (digest, run)
      SELECT x.d, m.run FROM unnest($16::text[], $17::bytea[]) AS x(run_id, d) JOIN moved m ON m.run_id = x.run_id
      ON CONFLICT DO NOTHING),
    finished AS (
      DELETE FROM ${t.leases} l USING moved m
       WHERE l.run_id = m.run_id AND l.owner = m.queue_owner AND NOT l.woken RETURNING l.run_id),
    handedBack AS (
      UPDATE ${t.leases} l SET owner = NULL, expires_at = now(), failures = 0 FROM moved m
       WHERE l.run_id = m.run_id AND l.owner = m.queue_owner AND l.woken RETURNING l.loop_id),
    released AS (
      UPDATE ${t.owners} o SET owner = NULL, host = NULL, pid = NULL, expires_at = to_timestamp(0) FROM moved m
       WHERE o.run_id = m.run_id AND m.queue_owner IS NOT NULL AND o.token = m.fence)
    SELECT m.run_id, CASE WHEN m.tell THEN pg_notify('${t.appended}', m.run_id) END AS told FROM moved m
    UNION ALL SELECT NULL, pg_notify('${t.channel}', h.loop_id) FROM handedBack h`;
}
