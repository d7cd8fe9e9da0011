import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { sha256Hex } from "../core/digest.ts";
import { IntegrityError } from "../core/errors.ts";
import type { BlobInfo, BlobRef, BlobStore } from "./spi.ts";
import { openSqliteFile, type SqliteDatabase, type SqliteFile, type SqliteOptions } from "./sqlite/sqliteFile.ts";
import { isJournalFileError, journalFileError } from "./sqlite/sqliteOpen.ts";

const REF = /^sha256:[0-9a-f]{64}$/;

/**
 * The digest a ref names, or an `IntegrityError` (code `malformedRef`) for anything that is not
 * `sha256:` and 64 lowercase hex digits. Every blob store calls it before any I/O, so a ref can
 * never name a path (`sha256:../../etc/passwd` is refused here).
 *
 * @example
 * refDigest("sha256:" + "ab".repeat(32)); // "abab…"
 */
export function refDigest(ref: string): string {
  if (typeof ref !== "string" || !REF.test(ref)) {
    const shown = typeof ref === "string" ? JSON.stringify(ref.slice(0, 80)) : typeof ref;
    throw new IntegrityError(
      `blob ref ${shown} is malformed: a ref is "sha256:" and 64 lowercase hex digits, as put() returns it`,
      "malformedRef",
    );
  }
  return ref.slice(7);
}

function info(bytes: Uint8Array): BlobInfo {
  const digest = sha256Hex(bytes);
  return { ref: `sha256:${digest}` as BlobRef, size: bytes.byteLength, digest };
}

/** The bytes stored under `ref`, checked against its digest (`IntegrityError` when lost or altered). */
export function verified(ref: string, digest: string, bytes: Uint8Array | undefined, where: string): Uint8Array {
  if (bytes === undefined) {
    throw new IntegrityError(
      `blob ${ref} is not in ${where}; the journal refers to bytes that were lost`,
      "blobMissing",
    );
  }
  const actual = sha256Hex(bytes);
  if (actual !== digest) {
    throw new IntegrityError(
      `blob ${ref} in ${where} does not match its digest (the bytes hash to sha256:${actual}); it was altered or swapped: restore it from a backup`,
    );
  }
  return bytes;
}

/**
 * Blobs in memory (copies in, copies out), for tests.
 *
 * @example
 * const blobs = memoryBlobStore();
 * const { ref } = await blobs.put(new TextEncoder().encode("big output"));
 * await blobs.get(ref); // the bytes, verified
 */
export function memoryBlobStore(): BlobStore {
  const kept = new Map<string, Uint8Array>();
  return {
    async put(bytes) {
      const i = info(bytes);
      if (!kept.has(i.digest)) kept.set(i.digest, Uint8Array.from(bytes));
      return i;
    },
    async get(ref) {
      const digest = refDigest(ref);
      return Uint8Array.from(verified(ref, digest, kept.get(digest), "the memory blob store"));
    },
    async has(ref) {
      return kept.has(refDigest(ref));
    },
    async close() {},
  };
}

/**
 * Blobs in the `loom_blobs` table of a SQLite file (the journal's own, with `openSqliteJournal`).
 *
 * @example
 * const blobs = sqliteBlobStore("./loom.db");
 */
export function sqliteBlobStore(target: string | SqliteDatabase, options?: SqliteOptions): BlobStore {
  return sqliteBlobStoreOn(openSqliteFile(target, options));
}

/** The blob store on an already opened file. */
export function sqliteBlobStoreOn(shared: SqliteFile): BlobStore {
  const file = shared.acquire();
  const insert = file.db.prepare("INSERT OR IGNORE INTO loom_blobs (digest, size, bytes) VALUES (?, ?, ?)");
  const select = file.db.prepare("SELECT bytes FROM loom_blobs WHERE digest = ?").pluck();
  const exists = file.db.prepare("SELECT 1 FROM loom_blobs WHERE digest = ?").pluck();
  const where = `the blobs of ${file.db.name}`;
  return {
    async put(bytes) {
      const i = info(bytes);
      try {
        insert.run(i.digest, i.size, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      } catch (e) {
        // A full disk says so (JournalFileError, code diskFull); any other failure as it came.
        const mapped = journalFileError(file.db.name, e);
        throw isJournalFileError(mapped) && mapped.code === "diskFull" ? mapped : e;
      }
      return i;
    },
    async get(ref) {
      const digest = refDigest(ref);
      const bytes = select.get(digest) as Buffer | undefined;
      return verified(ref, digest, bytes, where);
    },
    async has(ref) {
      return exists.get(refDigest(ref)) !== undefined;
    },
    async close() {
      file.release();
    },
  };
}

/**
 * Blobs as files in a directory: `<dir>/<first 2 hex>/<64 hex>`. Written to a temporary file,
 * fsynced, then renamed into place, so a blob is either absent or whole; only a well-formed ref
 * is ever turned into a path.
 *
 * @example
 * const blobs = dirBlobStore("./loom-blobs");
 */
export function dirBlobStore(dir: string): BlobStore {
  const pathOf = (digest: string) => join(dir, digest.slice(0, 2), digest);
  const exists = async (path: string) => {
    try {
      await stat(path);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw e;
    }
  };
  return {
    async put(bytes) {
      const i = info(bytes);
      const path = pathOf(i.digest);
      if (await exists(path)) return i;
      await mkdir(join(dir, i.digest.slice(0, 2)), { recursive: true });
      const temp = join(dir, `.tmp-${i.digest.slice(0, 16)}-${randomBytes(6).toString("hex")}`);
      try {
        await writeDurably(temp, bytes);
        await rename(temp, path);
      } catch (e) {
        await unlink(temp).catch(() => {});
        throw e;
      }
      return i;
    },
    async get(ref) {
      const digest = refDigest(ref);
      let bytes: Uint8Array | undefined;
      try {
        bytes = await readFile(pathOf(digest));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      }
      return verified(ref, digest, bytes, `the blob directory ${dir}`);
    },
    async has(ref) {
      return exists(pathOf(refDigest(ref)));
    },
    async close() {},
  };
}

async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, "wx");
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
