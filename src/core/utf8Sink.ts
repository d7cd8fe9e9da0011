/**
 * A growable byte buffer that JSON text is written into as UTF-8, for the canonical writer.
 *
 * Writing bytes instead of joining strings is what made the canonical text cheap: a tool output
 * of 3 kB built as a rope of small strings allocated about 20 kB of garbage (each `+` a string)
 * and then had to be flattened and encoded again to be hashed; here the digest hashes the bytes
 * as written and only a few small strings (numbers) are made. One sink is reused from write to
 * write (see {@link takeSink}).
 */

/** A string too long for the per-character loop: checked by a regular expression and encoded natively. */
const LONG_STRING = 256;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters must be escaped, that is the point.
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above, surrogates added (their pairing is checked apart).
const NEEDS_LOOK = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A string holds a lone UTF-16 surrogate: it has no UTF-8 form. */
export class LoneSurrogate {}

/** A sink grown past this is dropped after its write instead of being kept for the next one. */
const KEEP_AT_MOST = 1 << 20;

export class Utf8Sink {
  buf: Buffer;
  at = 0;

  constructor(size = 16_384) {
    this.buf = Buffer.allocUnsafeSlow(size);
  }

  /** Makes room for `n` more bytes. */
  room(n: number): void {
    if (this.at + n > this.buf.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.at + n));
      this.buf.copy(next, 0, 0, this.at);
      this.buf = next;
    }
  }

  byte(c: number): void {
    if (this.at >= this.buf.length) this.room(1);
    this.buf[this.at++] = c;
  }

  /** Writes text known to be ASCII (a number's digits, a literal). */
  ascii(s: string): void {
    const n = s.length;
    this.room(n);
    const b = this.buf;
    let o = this.at;
    for (let i = 0; i < n; i++) b[o++] = s.charCodeAt(i);
    this.at = o;
  }

  /** Copies bytes (a quoted member name, a kept text). */
  bytes(src: Uint8Array): void {
    const n = src.length;
    this.room(n);
    if (n > 32) {
      this.buf.set(src, this.at);
      this.at += n;
      return;
    }
    const b = this.buf;
    let o = this.at;
    for (let i = 0; i < n; i++) b[o++] = src[i] as number;
    this.at = o;
  }

  /**
   * Writes `s` as a JSON string, escaped as `JSON.stringify` escapes it. Throws
   * {@link LoneSurrogate} (and writes nothing) when `s` holds a lone surrogate.
   */
  string(s: string): void {
    const n = s.length;
    if (n > LONG_STRING) {
      this.longString(s);
      return;
    }
    this.room(n * 3 + 2);
    const b = this.buf;
    const start = this.at;
    let o = start;
    b[o++] = 34;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        if (c < 0x20 || c === 34 || c === 92) {
          this.at = start;
          this.escaped(s);
          return;
        }
        b[o++] = c;
      } else if (c < 0x800) {
        b[o++] = 0xc0 | (c >> 6);
        b[o++] = 0x80 | (c & 0x3f);
      } else if (c < 0xd800 || c > 0xdfff) {
        b[o++] = 0xe0 | (c >> 12);
        b[o++] = 0x80 | ((c >> 6) & 0x3f);
        b[o++] = 0x80 | (c & 0x3f);
      } else {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) {
          this.at = start;
          throw new LoneSurrogate();
        }
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        b[o++] = 0xf0 | (cp >> 18);
        b[o++] = 0x80 | ((cp >> 12) & 0x3f);
        b[o++] = 0x80 | ((cp >> 6) & 0x3f);
        b[o++] = 0x80 | (cp & 0x3f);
        i++;
      }
    }
    b[o++] = 34;
    this.at = o;
  }

  private longString(s: string): void {
    if (NEEDS_LOOK.test(s)) {
      this.escaped(s);
      return;
    }
    this.room(s.length * 3 + 2);
    this.buf[this.at++] = 34;
    this.at += this.buf.write(s, this.at, "utf8");
    this.buf[this.at++] = 34;
  }

  /** A string with something to escape (or surrogates to check): `JSON.stringify` escapes it. */
  private escaped(s: string): void {
    if (!s.isWellFormed()) throw new LoneSurrogate();
    const text = NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
    this.room(text.length * 3);
    this.at += this.buf.write(text, this.at, "utf8");
  }

  /** The bytes written so far (a view: valid until the sink is written again). */
  view(): Buffer {
    return this.buf.subarray(0, this.at);
  }
}

let idle: Utf8Sink | undefined = new Utf8Sink();

/**
 * The shared sink, emptied, or a new one while it is in use (a `toJSON` or a getter that writes
 * canonical JSON itself). Give it back with {@link returnSink} once its bytes are used.
 */
export function takeSink(): Utf8Sink {
  const sink = idle ?? new Utf8Sink(1024);
  idle = undefined;
  sink.at = 0;
  return sink;
}

export function returnSink(sink: Utf8Sink): void {
  if (sink.buf.length <= KEEP_AT_MOST) idle = sink;
}

/** The UTF-8 bytes of a string that `Utf8Sink.string` writes, quoted, with `:` after (a member name). */
export function quotedName(name: string): Uint8Array {
  const sink = new Utf8Sink(name.length * 3 + 8);
  sink.string(name);
  sink.byte(58);
  return new Uint8Array(sink.view());
}
