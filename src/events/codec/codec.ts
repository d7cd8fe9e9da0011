import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { brotliCompressSync, brotliDecompressSync, constants, gunzipSync, gzipSync } from "node:zlib";
import { errorGuard, LoomError } from "../../core/errors.ts";

/**
 * The payload codec: what a journal stores of tool outputs, model responses and run
 * inputs can be compressed (gzip or brotli, node:zlib) and encrypted (AES-256-GCM, node:crypto)
 * before it reaches the store. Digests stay over the canonical plaintext: the codec sits below
 * the runtime, which computes them before anything is encoded.
 *
 * An encoded value is an envelope, `{ __loomCodec: 1, codec: ["gzip", "aes-256-gcm"], keyId, data }`:
 * `codec` lists the steps applied in order, `keyId` names the key it was encrypted with (so keys
 * rotate: a provider keeps old keys to read what they wrote), `data` is base64 of the bytes
 * (for AES-256-GCM: 12-byte IV, 16-byte tag, ciphertext; the step list and key id are its
 * associated data, so neither can be changed unseen).
 */

/** The compressions node:zlib offers on every supported Node (zstd is not in Node 20's zlib). */
export type Compression = "gzip" | "brotli";

/** The encoded form of one payload. */
export interface CodecEnvelope {
  readonly __loomCodec: 1;
  /** The steps applied, in order: `"gzip"` or `"brotli"`, then `"aes-256-gcm"`. */
  readonly codec: readonly string[];
  /** The key the payload was encrypted with (absent when it was only compressed). */
  readonly keyId?: string;
  /** base64 of the encoded bytes. */
  readonly data: string;
}

/**
 * Where encryption keys come from. `currentKeyId` names the key new payloads are encrypted with;
 * `key` returns a 32-byte key by id (undefined when the provider does not hold it). Keep retired
 * keys in the provider for as long as entries written under them are to be read.
 */
export interface KeyProvider {
  /** The id of the key new payloads are encrypted with. */
  currentKeyId(): string;
  /** The key of id `keyId` (32 bytes), or undefined when the provider has none of that id. */
  key(keyId: string): Uint8Array | undefined | Promise<Uint8Array | undefined>;
}

/** Why a payload could not be encoded or decoded. */
export type PayloadCodecErrorCode = "keyMissing" | "keyRejected" | "keyInvalid" | "codecRequired" | "malformed";

/**
 * A payload the codec cannot encode or decode: the key is missing (`keyMissing`), is not the one
 * it was encrypted with or the bytes were altered (`keyRejected`), is not 32 bytes (`keyInvalid`),
 * the journal holds encoded entries but was opened without a codec (`codecRequired`), or the
 * envelope is damaged (`malformed`). `keyId` names the key involved. Nothing is written when
 * encoding fails.
 */
export class PayloadCodecError extends LoomError {
  declare readonly code: PayloadCodecErrorCode;
  readonly keyId: string | undefined;
  constructor(code: PayloadCodecErrorCode, message: string, keyId?: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.keyId = keyId;
  }
}

/**
 * True when `e` is a {@link PayloadCodecError}.
 *
 * @example
 * try {
 *   await readJournal(journal, runId);
 * } catch (e) {
 *   if (isPayloadCodecError(e) && e.code === "keyMissing") console.error(`restore key ${e.keyId}`);
 * }
 */
export const isPayloadCodecError = errorGuard(PayloadCodecError);

/** What `payloadCodec` is asked for. */
export interface PayloadCodecOptions {
  /**
   * Compress payloads of at least `minBytes` (default 1024) JSON bytes, when the stored envelope
   * (base64 and all) comes out smaller than the plain text; other payloads are left as they are.
   */
  readonly compress?: Compression;
  /** Below this many bytes a payload is not compressed (default 1024; see `DEFAULT_MIN_BYTES` in codec.ts for why). */
  readonly minBytes?: number;
  /** Encrypt every payload with AES-256-GCM under the provider's current key. */
  readonly encrypt?: { readonly keys: KeyProvider };
}

/** A configured codec: `codecStore`, `codecBlobStore` and `codecArchive` encode through it. */
export interface PayloadCodec {
  readonly options: PayloadCodecOptions;
  /** The envelope of `value`'s JSON text, or undefined when the codec leaves it as it is. */
  encode(value: unknown): Promise<CodecEnvelope | undefined>;
  /** The value an envelope holds; `where` names it in errors ("run r1 seq 4 (output)"). */
  decode(envelope: CodecEnvelope, where: string): Promise<unknown>;
  /** Bytes (a blob) encoded, with a header saying how. */
  encodeBytes(bytes: Uint8Array): Promise<Uint8Array>;
  /** Bytes as `encodeBytes` wrote them, decoded; bytes without the header are returned as they are. */
  decodeBytes(bytes: Uint8Array, where: string): Promise<Uint8Array>;
}

/**
 * The size (JSON bytes) below which a payload is not compressed by default. gzip's fixed costs
 * (its header and trailer, 18 bytes; the envelope around the base64 text, 65 bytes with the
 * entry's `encoded` mark; base64's third on top) eat what it saves on short texts, and each call
 * costs a compressor set up and torn down: on search-result JSON, 256 bytes stored as an envelope
 * took 1.13 of their plain size and 512 bytes 0.74, against 0.55 at 1 KiB and 0.37 at 4 KiB.
 * Model responses (a tool call: about 100 bytes) and run inputs are mostly below it; tool outputs
 * mostly above.
 */
const DEFAULT_MIN_BYTES = 1024;

/**
 * What an encoded payload adds beside its base64 text: `{"__loomCodec":1,"codec":["gzip"],"data":""}`
 * and the entry's `,"encoded":["output"]` mark (65 bytes; a longer field name adds a few).
 */
const ENVELOPE_BYTES = 65;

/** The length of the base64 text of `n` bytes. */
const base64Length = (n: number) => Math.ceil(n / 3) * 4;

const AES = "aes-256-gcm";
/**
 * gzip at its fastest level: on the loop's 1.5–4 kB tool outputs it compressed in 30 µs where
 * the default level (6) took 49 µs, for 0.284 of the bytes instead of 0.253 (bench/storage.ts
 * keeps the stored size under 0.6 of the raw JSON). Any level decodes the same way.
 */
const GZIP = { level: constants.Z_BEST_SPEED };
const BLOB_MAGIC = Buffer.from("\0loom-codec-1\n");

/**
 * Whether `v` has the envelope's shape. Stores decode a field only where the entry marks it
 * encoded (`data.encoded`), so a tool output of this shape stays plain data.
 *
 * @example
 * isCodecEnvelope({ __loomCodec: 1, codec: ["gzip"], data: "H4sI…" }); // true
 */
export const isCodecEnvelope = (v: unknown): v is CodecEnvelope =>
  typeof v === "object" &&
  v !== null &&
  (v as CodecEnvelope).__loomCodec === 1 &&
  Array.isArray((v as CodecEnvelope).codec) &&
  typeof (v as CodecEnvelope).data === "string";

/**
 * A fixed set of keys, for tests and for keys read from the environment at start-up.
 *
 * @example
 * const keys = staticKeys({ current: "k2", keys: { k1: oldKey, k2: Buffer.from(process.env.LOOM_KEY_K2!, "base64") } });
 */
export function staticKeys(spec: {
  readonly current: string;
  readonly keys: Readonly<Record<string, Uint8Array>>;
}): KeyProvider {
  return {
    currentKeyId: () => spec.current,
    key: (id) => (Object.hasOwn(spec.keys, id) ? spec.keys[id] : undefined),
  };
}

/**
 * A codec: compression, encryption, or both (compressed first: ciphertext does not compress).
 *
 * @example
 * const codec = payloadCodec({ compress: "gzip", encrypt: { keys: staticKeys({ current: "k1", keys: { k1 } }) } });
 * const journal = withCodec(openSqliteJournal("./loom.db"), codec);
 */
export function payloadCodec(options: PayloadCodecOptions): PayloadCodec {
  const minBytes = options.minBytes ?? DEFAULT_MIN_BYTES;
  const keys = options.encrypt?.keys;
  const keyOf = async (keyId: string, doing: string): Promise<Buffer> => {
    let key: Uint8Array | undefined;
    try {
      key = await keys?.key(keyId);
    } catch (cause) {
      throw new PayloadCodecError(
        "keyMissing",
        `${doing}: the key provider failed for key ${keyId}: ${String(cause)}`,
        keyId,
        { cause },
      );
    }
    if (key === undefined) {
      throw new PayloadCodecError(
        "keyMissing",
        `${doing}: the key provider has no key ${JSON.stringify(keyId)}; add it to the provider (keep retired keys for as long as their entries are read)`,
        keyId,
      );
    }
    if (key.byteLength !== 32) {
      throw new PayloadCodecError(
        "keyInvalid",
        `${doing}: key ${JSON.stringify(keyId)} is ${key.byteLength} bytes; AES-256-GCM needs 32 (e.g. randomBytes(32))`,
        keyId,
      );
    }
    return Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  };

  /** Applies the steps; returns the bytes and how. */
  // `convergent`: the IV is derived from the key and the bytes, so the same blob encodes to the
  // same bytes and keeps its ref (blobs are content-addressed; a frame's envelope names the ref).
  // `asText`: the bytes end up as base64 in an envelope (a payload), so compressing pays only if
  // that envelope is smaller than the plain text; a blob's bytes are stored as they are.
  const encodeRaw = async (plain: Buffer, doing: string, convergent = false, asText = false) => {
    const codec: string[] = [];
    let bytes = plain;
    if (options.compress !== undefined && plain.byteLength >= minBytes) {
      const packed =
        options.compress === "gzip"
          ? gzipSync(plain, GZIP)
          : brotliCompressSync(plain, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } });
      const stored =
        asText && keys === undefined ? base64Length(packed.byteLength) + ENVELOPE_BYTES : packed.byteLength;
      if (stored < plain.byteLength) {
        bytes = packed;
        codec.push(options.compress);
      }
    }
    let keyId: string | undefined;
    if (keys !== undefined) {
      keyId = keys.currentKeyId();
      const key = await keyOf(keyId, doing);
      const iv = convergent
        ? createHmac("sha256", createHash("sha256").update("loom-blob-iv").update(key).digest())
            .update(bytes)
            .digest()
            .subarray(0, 12)
        : randomBytes(12);
      const cipher = createCipheriv(AES, key, iv);
      cipher.setAAD(Buffer.from(JSON.stringify([codec, keyId]))); // the steps before it, and the key id
      codec.push(AES);
      const sealed = Buffer.concat([cipher.update(bytes), cipher.final()]);
      bytes = Buffer.concat([iv, cipher.getAuthTag(), sealed]);
    }
    return { codec, keyId, bytes };
  };

  const decodeRaw = async (codec: readonly string[], keyId: string | undefined, input: Buffer, where: string) => {
    let bytes = input;
    for (let i = codec.length - 1; i >= 0; i--) {
      const step = codec[i];
      if (step === AES) {
        if (keyId === undefined) throw new PayloadCodecError("malformed", `${where}: encrypted, but names no key id`);
        const key = await keyOf(keyId, `cannot decrypt ${where}`);
        try {
          const decipher = createDecipheriv(AES, key, bytes.subarray(0, 12));
          decipher.setAAD(Buffer.from(JSON.stringify([codec.slice(0, i), keyId])));
          decipher.setAuthTag(bytes.subarray(12, 28));
          bytes = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]);
        } catch (cause) {
          throw new PayloadCodecError(
            "keyRejected",
            `cannot decrypt ${where}: key ${JSON.stringify(keyId)} does not open it (a different key under the same id, or the bytes were altered); give the provider the key ${keyId} it was written with`,
            keyId,
            { cause },
          );
        }
      } else if (step === "gzip" || step === "brotli") {
        try {
          bytes = step === "gzip" ? gunzipSync(bytes) : brotliDecompressSync(bytes);
        } catch (cause) {
          throw new PayloadCodecError("malformed", `${where}: its ${step} data is damaged`, keyId, { cause });
        }
      } else {
        throw new PayloadCodecError(
          "malformed",
          `${where}: unknown codec step ${JSON.stringify(step)}; a newer Loom may have written it`,
          keyId,
        );
      }
    }
    return bytes;
  };

  return {
    options,
    async encode(value) {
      const text = JSON.stringify(value);
      if (text === undefined) return undefined;
      // Nothing to do for a short text that is not encrypted: no bytes made of it (UTF-8 takes at
      // most 3 bytes a UTF-16 unit).
      if (keys === undefined && (options.compress === undefined || text.length * 3 < minBytes)) return undefined;
      const { codec, keyId, bytes } = await encodeRaw(Buffer.from(text), "cannot encrypt a payload", false, true);
      if (codec.length === 0) return undefined;
      return { __loomCodec: 1, codec, ...(keyId === undefined ? {} : { keyId }), data: bytes.toString("base64") };
    },
    async decode(envelope, where) {
      const bytes = await decodeRaw(envelope.codec, envelope.keyId, Buffer.from(envelope.data, "base64"), where);
      try {
        return JSON.parse(bytes.toString("utf8"));
      } catch (cause) {
        throw new PayloadCodecError("malformed", `${where}: decoded to text that is not JSON`, envelope.keyId, {
          cause,
        });
      }
    },
    async encodeBytes(plain) {
      const { codec, keyId, bytes } = await encodeRaw(Buffer.from(plain), "cannot encrypt a blob", true);
      if (codec.length === 0) return plain; // left as it is: reads back as a blob written without the codec
      const header = Buffer.from(`${JSON.stringify({ codec, keyId })}\n`);
      return Buffer.concat([BLOB_MAGIC, header, bytes]);
    },
    async decodeBytes(stored, where) {
      const b = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
      if (!b.subarray(0, BLOB_MAGIC.byteLength).equals(BLOB_MAGIC)) return stored; // written without the codec
      const end = b.indexOf(10, BLOB_MAGIC.byteLength);
      let head: { codec?: unknown; keyId?: unknown };
      try {
        head = JSON.parse(b.subarray(BLOB_MAGIC.byteLength, end).toString("utf8"));
      } catch (cause) {
        throw new PayloadCodecError("malformed", `${where}: its codec header is damaged`, undefined, { cause });
      }
      if (!Array.isArray(head.codec)) throw new PayloadCodecError("malformed", `${where}: its codec header is damaged`);
      const keyId = typeof head.keyId === "string" ? head.keyId : undefined;
      return decodeRaw(head.codec as string[], keyId, b.subarray(end + 1), where);
    },
  };
}
