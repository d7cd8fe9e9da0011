import { afterEach, describe, expect, it } from "vitest";
import { type DataKeyStore, memoryDataKeys } from "../../src/events/dataKeys.ts";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";
import { tempDir } from "./tmp.ts";

/** One contract for every data key store: the first key kept wins, a deleted key is gone. */
function dataKeysContract(name: string, open: () => Promise<{ keys: DataKeyStore; done: () => Promise<void> }>) {
  describe(`data keys: ${name}`, () => {
    let done: (() => Promise<void>) | undefined;
    afterEach(async () => {
      await done?.();
    });

    it("keeps a run's first key (a second put gets the first back), reads it, and deletes it for good", async () => {
      const opened = await open();
      done = opened.done;
      const { keys } = opened;
      expect(await keys.get("r-1")).toBeUndefined();
      expect(await keys.put("r-1", "first")).toBe("first");
      expect(await keys.put("r-1", "second")).toBe("first");
      expect(await keys.get("r-1")).toBe("first");
      expect(await keys.delete("r-1")).toBe(true);
      expect(await keys.get("r-1")).toBeUndefined();
      expect(await keys.delete("r-1")).toBe(false);
      expect(await keys.put("r-1", "again")).toBe("again");
    });
  });
}

dataKeysContract("memory", async () => ({ keys: memoryDataKeys(), done: async () => {} }));

dataKeysContract("sqlite", async () => {
  const tmp = tempDir();
  const journal = openSqliteJournal(tmp.file("keys.db"));
  return {
    keys: journal.dataKeys as DataKeyStore,
    done: async () => {
      await journal.close();
      tmp.remove();
    },
  };
});

describe("data keys: a SQLite journal that never kept one", () => {
  it("reads as holding none, read-only too (the table is made at the first key)", async () => {
    const tmp = tempDir();
    try {
      await openSqliteJournal(tmp.file("none.db")).close();
      const reader = openSqliteJournal(tmp.file("none.db"), { readonly: true });
      expect(await reader.dataKeys?.get("r-1")).toBeUndefined();
      expect(await reader.dataKeys?.delete("r-1")).toBe(false);
      await reader.close();
    } finally {
      tmp.remove();
    }
  });
});

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to hold the store to its contract.
describe.skipIf(PG_URL === undefined)("postgres", () => {
  dataKeysContract("postgres", async () => {
    const schema = freshSchema("keys");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    return {
      keys: journal.dataKeys as DataKeyStore,
      done: async () => {
        await journal.close();
        await dropSchema(schema);
      },
    };
  });
});
