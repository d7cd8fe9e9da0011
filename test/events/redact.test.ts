import { describe } from "vitest";
import { memoryArchive } from "../../src/events/archive.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { memoryDataKeys } from "../../src/events/dataKeys.ts";
import { createJournal, openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";
import { redactContract } from "./redactContract.ts";
import { tempDir } from "./tmp.ts";

redactContract("memory (json)", async () => ({
  journal: createJournal({
    store: memoryStore({ json: true }),
    blobs: memoryBlobStore(),
    archive: memoryArchive(),
    dataKeys: memoryDataKeys(),
  }),
}));

redactContract("sqlite", async () => {
  const tmp = tempDir();
  return { journal: openSqliteJournal(tmp.file("journal.db")), cleanup: async () => tmp.remove() };
});

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to hold redaction to its contract.
describe.skipIf(PG_URL === undefined)("postgres", () => {
  redactContract("postgres", async () => {
    const schema = freshSchema("redact");
    return {
      journal: openPostgresJournal(PG_URL as string, { schema }),
      cleanup: () => dropSchema(schema).then(() => {}),
    };
  });
});
