// `node --import ./test/support/withoutPg.mjs …`: a process in which the `pg` package is not
// installed, as in a project that did not add the optional peer dependency. Every import of `pg`
// is resolved from a folder with no node_modules, so Node fails it with its own
// ERR_MODULE_NOT_FOUND ("Cannot find package 'pg' …"); everything else resolves as usual.
import { register } from "node:module";

const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier === "pg" || specifier.startsWith("pg/")) {
    return next(specifier, { ...context, parentURL: "file:///nonexistent-loom-test/index.mjs" });
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
