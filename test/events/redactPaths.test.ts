import { describe, expect, it } from "vitest";
import { isRedactionError, type RedactionError, redaction } from "../../src/events/redaction/redact.ts";

const at = { runId: "r", type: "frame.completed", field: "output" } as const;
const doc = {
  user: { email: "a@x", "x-api-key": "k", "it's": 1 },
  rows: [
    { ssn: "1", keep: true },
    { ssn: "2", keep: true },
  ],
  deep: { list: [{ email: "b@x" }, { other: { email: "c@x" } }] },
};

function thrown(f: () => unknown): RedactionError {
  try {
    f();
  } catch (e) {
    return e as RedactionError;
  }
  throw new Error("expected a throw");
}

describe("redaction paths (the JSONPath subset)", () => {
  it.each([
    ["$.user.email", ["$['user']['email']"]],
    ["$.user['x-api-key']", ["$['user']['x-api-key']"]],
    [`$.user["it's"]`, ["$['user']['it\\'s']"]],
    ["$.rows[*].ssn", ["$['rows'][0]['ssn']", "$['rows'][1]['ssn']"]],
    ["$.rows[1].ssn", ["$['rows'][1]['ssn']"]],
    ["$.user.*", ["$['user']['email']", "$['user']['it\\'s']", "$['user']['x-api-key']"]],
    ["$..email", ["$['deep']['list'][0]['email']", "$['deep']['list'][1]['other']['email']", "$['user']['email']"]],
    ["$.missing.email", []],
    ["$.rows[7]", []],
  ])("%s selects %j", async (path, paths) => {
    const out = await redaction({ paths: [path] }).apply(doc, at);
    expect(out?.record.paths ?? []).toEqual(paths);
  });

  it("replaces what it selects with the replacement, leaving the original untouched", async () => {
    const out = await redaction({ paths: ["$.rows[*].ssn"], replacement: null }).apply(doc, at);
    expect(out?.value).toMatchObject({
      rows: [
        { ssn: null, keep: true },
        { ssn: null, keep: true },
      ],
    });
    expect(doc.rows[0]?.ssn).toBe("1");
  });

  it.each([
    ["user.email", /must start with \$/],
    ["$", /the root itself cannot be replaced/],
    ["$.", /`\.` takes a member name/],
    ["$..", /`\.\.` takes a member name/],
    ["$.a['b", /an unclosed \['name'\]/],
    ["$.a[?(@.x)]", /unexpected "\["/],
    ["$.a[1:3]", /unexpected "\["/],
  ])("refuses %s (badRedactionPath, naming it)", (path, message) => {
    const e = thrown(() => redaction({ paths: [path] }));
    expect(isRedactionError(e) && e.code).toBe("badRedactionPath");
    expect(e.path).toBe(path);
    expect(e.message).toMatch(message);
    expect(e.message).toContain(JSON.stringify(path));
  });
});
