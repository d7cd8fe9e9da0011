import { describe } from "vitest";
import { openPostgresJournal } from "../../src/postgres.ts";
import { eventTokenContract } from "../runtime/eventTokenContract.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

/**
 * A forged, a reused and an expired event token, refused with nothing journaled, on PostgreSQL:
 * the run's journal as it was, and no run queued for the workers (the queue rows as they were).
 */
describe.skipIf(PG_URL === undefined)("event tokens on PostgreSQL", () => {
  eventTokenContract("PostgreSQL", async () => {
    const schema = freshSchema("eventtokens");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    await journal.store.listRuns(); // the tables exist before the probe reads them
    return {
      journal,
      probe: () => sql(`SELECT run_id, owner, expires_at, woken FROM "${schema}".loom_leases ORDER BY run_id`),
      close: async () => {
        await journal.close();
        await dropSchema(schema);
      },
    };
  });
});
