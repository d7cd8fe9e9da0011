import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { longRunEntries, longRunLoop, longRunTemplate } from "../../bench/longRun.ts";
import { canonicalJson, type SnapshotError, sha256Hex } from "../../src/core/index.ts";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { JournalEntry, NewEntry, RunStartedData } from "../../src/events/types.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { readRunRow } from "../../src/read/runRow.ts";
import { foldRun, rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { readRunState, readSnapshotState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { tempDir } from "../events/tmp.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "../postgres/pg.ts";

/**
 * A snapshot row changed in the store behind Loom's back (a hand edit, a bad restore, a disk
 * that flipped bytes) is never trusted: every reader (full and compact reads, a run's row, a
 * follower, a resume) tells it to the warning hook and folds the journal instead, so what it
 * reads and what a resume journals are what they are without any snapshot.
 */

const tmp = tempDir("loom-snapshot-tamper-");
afterAll(() => tmp.remove());

const TURNS = 30;
const TAIL = 10;
const stateText = (state: unknown) => canonicalJson(JSON.parse(JSON.stringify(state)));
const facts = (entries: readonly JournalEntry[]) => JSON.stringify(entries.map((e) => [e.seq, e.type, e.data]));

let template: RunStartedData;
const templateOnce = async () => (template ??= await longRunTemplate());

/** Writes the interrupted long run "long" with a snapshot `TAIL` entries before its end; resolves to its seq. */
async function writeWithSnapshot(journal: Journal, compact: boolean): Promise<number> {
  const entries = [...longRunEntries(await templateOnce(), TURNS, "interrupted")];
  const cut = entries.length - TAIL;
  const append = (batch: NewEntry[], expectedVersion: number) =>
    journal.store.append("long", batch, { expectedVersion });
  await append(entries.slice(0, cut), 0);
  const seq = (await writeRunSnapshot(journal, "long", { compact })) as number;
  await append(entries.slice(cut), cut);
  return seq;
}

/** One way to change the stored row: the SQL that does it, and the warning it must give. */
interface Tamper {
  readonly name: string;
  /** The UPDATE, given the table and the row as written (its `?`/`$n` parameters in `values`). */
  readonly update: (row: { seq: number; digest: string; body: string }) => { set: string; values: unknown[] };
  readonly code: SnapshotError["code"];
}

const TAMPERS: readonly Tamper[] = [
  {
    name: "its body edited (the state says turn 0), the digest left",
    update: (row) => ({ set: "body = #1", values: [row.body.replace(/"turns":\d+/, '"turns":0')] }),
    code: "snapshotDigestMismatch",
  },
  {
    name: "its digest changed",
    update: (row) => ({ set: "digest = #1", values: [sha256Hex(`${row.body} `)] }),
    code: "snapshotDigestMismatch",
  },
  {
    name: "its body cut short",
    update: (row) => ({ set: "body = #1", values: [row.body.slice(0, row.body.length >> 1)] }),
    code: "snapshotDigestMismatch",
  },
  {
    name: "its seq moved back (the body and digest kept, so they agree)",
    update: (row) => ({ set: "seq = #1", values: [row.seq - 4] }),
    code: "snapshotUnreadable",
  },
  {
    name: "its body and digest replaced by another run's (a digest that checks out)",
    update: (row) => {
      const body = row.body.replace('"runId":"long"', '"runId":"other"');
      return { set: "body = #1, digest = #2", values: [body, sha256Hex(body)] };
    },
    code: "snapshotUnreadable",
  },
];

/** A store to tamper with: a journal on it, and how to run an UPDATE of the snapshot row of run "long". */
interface Backend {
  readonly open: () => Promise<{ journal: OpenJournal; tamper: (t: Tamper) => Promise<void> }>;
}

/** Every reader of the run, with the warnings each told: none may use the tampered row. */
async function expectNotTrusted(journal: Journal, seq: number, code: string) {
  const entries = await readJournal(journal, "long");
  const full = foldEntries(entries);
  const codes: string[] = [];
  const onSnapshotWarning = (e: SnapshotError) => {
    expect(e.runId).toBe("long");
    expect(e.message).toMatch(/run long snapshot at seq \d+: .*ignored and the whole journal folded instead/);
    codes.push(e.code);
  };
  const read = await readRunState(journal, "long", { onSnapshotWarning });
  expect(read.snapshotSeq).toBe(0);
  expect(stateText(read.state)).toBe(stateText(full));
  const resumeRead = await readRunState(journal, "long", { compact: true, onSnapshotWarning });
  expect(resumeRead.snapshotSeq).toBe(0);
  expect(stateText(resumeRead.state)).toBe(stateText(full));
  expect(await readSnapshotState(journal, "long", seq + TAIL, { onSnapshotWarning })).toBeUndefined();
  expect(stateText(await foldRun(journal, "long", { onSnapshotWarning }))).toBe(stateText(full));
  // The run's row (`loom runs`): counted from the journal, not from what the row says of it.
  const row = await readRunRow(journal, "long");
  expect(row.read).toBe(entries.length);
  expect(row.info.entries).toBe(entries.length);
  // A tampered row is told to every reader that looked at it, full or compact: it is checked before it is used.
  expect(codes).toEqual([code, code, code, code]);
}

function tamperSuite(name: string, backend: Backend) {
  describe(`a tampered snapshot row (${name})`, () => {
    for (const compact of [false, true]) {
      for (const tamper of TAMPERS) {
        it(`a ${compact ? "compact" : "full"} snapshot with ${tamper.name} is not trusted by any reader, and the run resumes as without snapshots`, async () => {
          const { journal, tamper: apply } = await backend.open();
          try {
            const seq = await writeWithSnapshot(journal, compact);
            expect(seq).toBeGreaterThan(0);
            // Untouched, it is used: the tamper is what turns it away.
            expect((await readRunState(journal, "long", { compact: true })).snapshotSeq).toBe(seq);
            await apply(tamper);
            await expectNotTrusted(journal, seq, tamper.code);

            // The resume: told once, completes, and journals what a clean run of the same script does.
            const seen: string[] = [];
            const out = await longRunLoop(TURNS, {
              snapshots: { every: 1000, compact, onWarning: (e) => seen.push(e.code) },
            }).run({
              runId: "long",
              journal,
            });
            expect(seen).toEqual([tamper.code]);
            expect(out.content).toBe("done");
            expect(out.toolCallLog).toHaveLength(TURNS);
            const clean = openSqliteJournal(tmp.file(`clean-${Math.random().toString(36).slice(2)}.db`));
            try {
              const entries = [...longRunEntries(await templateOnce(), TURNS, "interrupted")];
              await clean.store.append("long", entries, { expectedVersion: 0 });
              const expected = await longRunLoop(TURNS).run({ runId: "long", journal: clean });
              expect(JSON.stringify(out)).toBe(JSON.stringify(expected));
              expect(facts(await readJournal(journal, "long"))).toBe(facts(await readJournal(clean, "long")));
              expect(JSON.stringify(await rebuildToolCallLog(journal, "long", "full"))).toBe(
                JSON.stringify(await rebuildToolCallLog(clean, "long", "full")),
              );
            } finally {
              await clean.close();
            }
          } finally {
            await journal.close();
          }
        });
      }
    }
  });
}

tamperSuite("SQLite", {
  open: async () => {
    const file = tmp.file(`tamper-${Math.random().toString(36).slice(2)}.db`);
    const journal = openSqliteJournal(file);
    return {
      journal,
      tamper: async (t) => {
        // Another connection, as a hand edit or a restore would be.
        const db = new Database(file);
        try {
          const row = db.prepare("SELECT seq, digest, body FROM loom_snapshots WHERE run_id = 'long'").get() as {
            seq: number;
            digest: string;
            body: string;
          };
          const { set, values } = t.update(row);
          const changed = db
            .prepare(`UPDATE loom_snapshots SET ${set.replace(/#\d/g, "?")} WHERE run_id = 'long'`)
            .run(...values);
          expect(changed.changes).toBe(1);
        } finally {
          db.close();
        }
      },
    };
  },
});

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to keep snapshots in.
describe.skipIf(PG_URL === undefined)("on PostgreSQL", () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });
  tamperSuite("PostgreSQL", {
    open: async () => {
      const schema = freshSchema("tamper");
      schemas.push(schema);
      const journal = openPostgresJournal(PG_URL as string, { schema });
      return {
        journal,
        tamper: async (t) => {
          const [row] = await sql<{ seq: number; digest: string; body: string }>(
            `SELECT seq::int AS seq, digest, body FROM "${schema}".loom_snapshots WHERE run_id = 'long'`,
          );
          const { set, values } = t.update(row as { seq: number; digest: string; body: string });
          const changed = await sql(
            `UPDATE "${schema}".loom_snapshots SET ${set.replace(/#(\d)/g, "$$$1")} WHERE run_id = 'long' RETURNING 1`,
            values,
          );
          expect(changed).toHaveLength(1);
        },
      };
    },
  });
});
