import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Running `loom` as the unprivileged user `nobody` from a root test process, so that file modes
 * apply to it as to any user. A clone in a folder only root can read (mode 700, like /root) is
 * out of that user's reach, node_modules included: then the sources and the packages the CLI
 * loads are copied to a temp folder it can read.
 */

/** The unprivileged user (`nobody`) a root test runs a process as. */
export const NOBODY = { uid: 65534, gid: 65534 } as const;

/** Whether `nobody` can read `path` (and search every folder above it), asked of a process running as nobody. */
export function nobodyCanRead(path: string): boolean {
  const probe = "require('node:fs').accessSync(process.argv[1], require('node:fs').constants.R_OK)";
  return spawnSync(process.execPath, ["-e", probe, path], { ...NOBODY, stdio: "ignore" }).status === 0;
}

/** Where `nobody` can run Loom's CLI from: the clone itself, a readable copy of what it needs, or why it cannot. */
export type NobodyRoot =
  | { readonly root: string; readonly copied: boolean; readonly skip?: undefined }
  | { readonly skip: string; readonly root?: undefined };

/**
 * The folder `nobody` runs `node --import tsx src/cli/bin.ts` in: `root` when it can read the
 * sources and node_modules there, else a temp copy of package.json, tsconfig.json, src/ and the
 * packages the CLI loads (the runtime dependencies and tsx, with theirs). `remove` it after use
 * when `copied`. A skip reason when even `node` or the copy is out of its reach.
 */
export function rootForNobody(root: string): NobodyRoot {
  if (spawnSync(process.execPath, ["-e", ""], { ...NOBODY, stdio: "ignore" }).status !== 0)
    return { skip: `the user nobody (uid ${NOBODY.uid}) cannot run ${process.execPath}` };
  const needs = ["src/cli/bin.ts", "node_modules/tsx/package.json"];
  if (needs.every((path) => nobodyCanRead(join(root, path)))) return { root, copied: false };
  const copy = mkdtempSync(join(tmpdir(), "loom-nobody-"));
  chmodSync(copy, 0o755);
  for (const name of ["package.json", "tsconfig.json", "src"])
    cpSync(join(root, name), join(copy, name), { recursive: true });
  for (const name of runtimePackages(root))
    cpSync(join(root, "node_modules", name), join(copy, "node_modules", name), { recursive: true, dereference: true });
  if (!needs.every((path) => nobodyCanRead(join(copy, path)))) {
    rmSync(copy, { recursive: true, force: true });
    return { skip: `the user nobody (uid ${NOBODY.uid}) cannot read a copy of the CLI made in ${tmpdir()}` };
  }
  return { root: copy, copied: true };
}

/** The packages installed under `root` that the CLI can load: dependencies, optional ones and tsx, with theirs. */
function runtimePackages(root: string): string[] {
  const manifest = (dir: string) =>
    JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
  const namesOf = (dir: string) => {
    const m = manifest(dir);
    return [...Object.keys(m.dependencies ?? {}), ...Object.keys(m.optionalDependencies ?? {})];
  };
  const todo = [...namesOf(root), "tsx"];
  const found = new Set<string>();
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    const dir = join(root, "node_modules", name);
    if (found.has(name) || !existsSync(join(dir, "package.json"))) continue; // an optional one not installed
    found.add(name);
    todo.push(...namesOf(dir));
  }
  return [...found];
}
