import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
import { isIntegrityError } from "../../src/core/errors.ts";
import { dirBlobStore, memoryBlobStore, refDigest, sqliteBlobStore } from "../../src/events/blobs.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import { tempDir } from "./tmp.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

const MALFORMED = [
  "sha256:../../etc/passwd",
  `sha256:../${"a".repeat(61)}`,
  `sha256:${"A".repeat(64)}`,
  `sha256:${"a".repeat(63)}`,
  `sha256:${"a".repeat(65)}`,
  `sha256:${"a".repeat(64)}\n`,
  `sha1:${"a".repeat(64)}`,
  "a".repeat(64),
  "",
];

interface Kind {
  readonly name: string;
  open(dir: string): BlobStore;
  /** Overwrites the stored bytes of `digest` behind the store's back. */
  tamper?(dir: string, digest: string, replacement: Uint8Array): void;
}

const kinds: Kind[] = [
  { name: "memory", open: () => memoryBlobStore() },
  {
    name: "sqlite",
    open: (dir) => sqliteBlobStore(join(dir, "blobs.db")),
    tamper(dir, digest, replacement) {
      const db = new Database(join(dir, "blobs.db"));
      db.prepare("UPDATE loom_blobs SET bytes = ? WHERE digest = ?").run(Buffer.from(replacement), digest);
      db.close();
    },
  },
  {
    name: "directory",
    open: (dir) => dirBlobStore(join(dir, "blobs")),
    tamper: (dir, digest, replacement) => writeFileSync(join(dir, "blobs", digest.slice(0, 2), digest), replacement),
  },
];

describe.each(kinds)("$name blob store", (kind) => {
  let tmp: ReturnType<typeof tempDir>;
  let blobs: BlobStore;
  beforeEach(() => {
    tmp = tempDir();
    blobs = kind.open(tmp.dir);
  });
  afterEach(async () => {
    await blobs.close();
    tmp.remove();
  });

  it("addresses bytes by their sha256 and gives them back", async () => {
    const info = await blobs.put(bytes("a large tool output"));
    const digest = sha256Hex("a large tool output");
    expect(info).toEqual({ ref: `sha256:${digest}`, size: 19, digest });
    expect(text(await blobs.get(info.ref))).toBe("a large tool output");
    expect(await blobs.has(info.ref)).toBe(true);
    expect(await blobs.has(`sha256:${"0".repeat(64)}`)).toBe(false);
  });

  it("stores the same bytes once", async () => {
    const first = await blobs.put(bytes("same"));
    const second = await blobs.put(bytes("same"));
    expect(second).toEqual(first);
    if (kind.name === "directory") {
      expect(readdirSync(join(tmp.dir, "blobs", first.digest.slice(0, 2)))).toEqual([first.digest]);
    }
  });

  it("keeps its own copy of the bytes", async () => {
    const input = bytes("mutable");
    const { ref } = await blobs.put(input);
    input[0] = 0;
    const out = await blobs.get(ref);
    out[1] = 0;
    expect(text(await blobs.get(ref))).toBe("mutable");
  });

  it("refuses a malformed ref before any I/O, naming it", async () => {
    for (const ref of MALFORMED) {
      for (const call of [() => blobs.get(ref), () => blobs.has(ref)]) {
        await expect(call(), ref).rejects.toMatchObject({ name: "IntegrityError", code: "malformedRef" });
      }
    }
  });

  it("raises IntegrityError for a ref it does not hold", async () => {
    await expect(blobs.get(`sha256:${"0".repeat(64)}`)).rejects.toMatchObject({ code: "blobMissing" });
  });

  const tamper = kind.tamper;
  if (tamper !== undefined) {
    it("raises IntegrityError when the stored bytes were swapped", async () => {
      const a = await blobs.put(bytes("output A"));
      await blobs.put(bytes("output B"));
      tamper(tmp.dir, a.digest, bytes("output B"));
      const e = await blobs.get(a.ref).catch((err: unknown) => err);
      expect(isIntegrityError(e)).toBe(true);
      expect(String((e as Error).message)).toContain(a.ref);
    });
  }
});

describe("refDigest", () => {
  it("returns the hex digest of a well-formed ref", () => {
    expect(refDigest(`sha256:${"ab".repeat(32)}`)).toBe("ab".repeat(32));
  });

  it("refuses a traversal ref with an error that says what a ref looks like", () => {
    expect(() => refDigest("sha256:../../etc/passwd")).toThrow(/malformed: a ref is "sha256:" and 64 lowercase hex/);
  });
});

describe("dirBlobStore", () => {
  it("leaves no temporary file behind and writes only under its directory", async () => {
    const tmp = tempDir();
    const blobs = dirBlobStore(join(tmp.dir, "blobs"));
    const { digest } = await blobs.put(bytes("x".repeat(100_000)));
    expect(readdirSync(join(tmp.dir, "blobs"))).toEqual([digest.slice(0, 2)]);
    expect(readdirSync(tmp.dir)).toEqual(["blobs"]);
    tmp.remove();
  });
});
