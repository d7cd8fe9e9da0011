import { describe, expect, it } from "vitest";
import { sessionsExample } from "../../examples/sessions.ts";

describe("examples/sessions.ts", () => {
  it("runs three messages of a session on its history, the third stopped by its budget and resumed", async () => {
    const { stopped, answer, history } = await sessionsExample();
    expect(stopped).toBe("budget");
    expect(answer).toBe("You said: Hello / Plan a trip to Lisbon / In May");
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user", "assistant"]);
  });
});
