import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The comments of src/ ship: tsc copies them into the .d.ts files users read in their editor, and
 * typedoc into the API reference. They say what is meant in words, never by citing a document
 * users do not have (the project's design notes, decision records or issue numbers).
 */

const SRC = fileURLToPath(new URL("../../src", import.meta.url));

/** A citation of a document users do not have, and what it looks like. */
const CITATIONS: readonly [string, RegExp][] = [
  ["a decision record", /\bADR\b/],
  ["a decision of a record (D1, D2 …)", /\bD\d\b/],
  ["the design notes", /\bDESIGN\b|§/],
  ["the style notes", /\bSTYLE\.md\b/],
  ["an issue", /\bissues? #?\d+/i],
];

/** Every comment of a TypeScript file, with its line (leading and trailing comments of every node). */
function commentsOf(fileName: string, text: string): { line: number; text: string }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const seen = new Map<number, { line: number; text: string }>();
  const visit = (node: ts.Node) => {
    const ranges = [
      ...(ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []),
      ...(ts.getTrailingCommentRanges(text, node.getEnd()) ?? []),
    ];
    for (const r of ranges) {
      const line = source.getLineAndCharacterOfPosition(r.pos).line + 1;
      seen.set(r.pos, { line, text: text.slice(r.pos, r.end) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  ts.getLeadingCommentRanges(text, source.endOfFileToken.getFullStart())?.forEach((r) => {
    seen.set(r.pos, { line: source.getLineAndCharacterOfPosition(r.pos).line + 1, text: text.slice(r.pos, r.end) });
  });
  return [...seen.values()];
}

/** The citations in the comments of a file, as `file:line: what (the comment's line)`. */
function citationsIn(fileName: string, text: string): string[] {
  if (!CITATIONS.some(([, pattern]) => pattern.test(text))) return []; // no need to parse the file
  return commentsOf(fileName, text).flatMap((comment) =>
    comment.text
      .split("\n")
      .flatMap((lineText, i) =>
        CITATIONS.filter(([, pattern]) => pattern.test(lineText)).map(
          ([what]) => `${fileName}:${comment.line + i}: ${what}: ${lineText.trim()}`,
        ),
      ),
  );
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("shipped comments speak to users", () => {
  it("cite no design note, decision record or issue number in src/", () => {
    const files = tsFiles(SRC);
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((file) => citationsIn(relative(SRC, file), readFileSync(file, "utf8")));
    expect(found).toEqual([]);
  });

  it("finds a citation in a doc comment, a line comment and a trailing comment", () => {
    const text = [
      "/**",
      " * The mode pin (ADR 0142 D3): the log's shape.",
      " */",
      "export const a = 1; // as DESIGN §4 says",
      "// Versions before issue 36 offered it.",
      "export const b = 2;",
    ].join("\n");
    expect(citationsIn("x.ts", text)).toEqual([
      "x.ts:2: a decision record: * The mode pin (ADR 0142 D3): the log's shape.",
      "x.ts:2: a decision of a record (D1, D2 …): * The mode pin (ADR 0142 D3): the log's shape.",
      "x.ts:4: the design notes: // as DESIGN §4 says",
      "x.ts:5: an issue: // Versions before issue 36 offered it.",
    ]);
  });

  it("does not read strings or code as comments", () => {
    const text = 'export const issue = "see issue 36 and ADR 0142";\nconst D2 = 2;\n';
    expect(citationsIn("x.ts", text)).toEqual([]);
  });
});
