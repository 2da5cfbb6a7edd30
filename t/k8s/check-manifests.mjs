// Checks rendered Kubernetes manifests (multi-document YAML, as
// `kubectl kustomize` prints them) offline, as an API server would:
//   node check-manifests.mjs FILE
// kubernetes-models validates each object against the API's schemas
// (types, enums, formats, required fields); the TypeScript compiler, with
// kubernetes-types, refuses fields the API does not know (a misspelt key
// that a server would drop or refuse). One line per problem; exit 1 if any.
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const file = process.argv[2];
if (!file) {
  console.error("usage: node check-manifests.mjs FILE");
  process.exit(2);
}
const problems = [];
const objects = [];
for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
  if (doc.errors.length) {
    problems.push(`${file}: ${doc.errors[0].message}`);
    continue;
  }
  const object = doc.toJS();
  // Base64 in a Secret may be folded over lines (kustomize folds it): the
  // API server's decoder skips line breaks, so the check does too.
  if (object?.kind === "Secret" && object.data)
    for (const key of Object.keys(object.data))
      if (typeof object.data[key] === "string") object.data[key] = object.data[key].replace(/\s+/g, "");
  if (object) objects.push(object);
}

// "batch/v1" -> "batch/v1"; "v1" -> the core group.
const groupPath = (apiVersion, core) => (apiVersion.includes("/") ? apiVersion : `${core}/${apiVersion}`).replace(/^\//, "");
const nameOf = (o) => `${o.kind ?? "?"} ${o.metadata?.name ?? "?"}`;

for (const object of objects) {
  if (!object.apiVersion || !object.kind) {
    problems.push(`${nameOf(object)}: no apiVersion or kind`);
    continue;
  }
  let models;
  try {
    models = await import(`kubernetes-models/${groupPath(object.apiVersion, "")}`);
  } catch {
    problems.push(`${nameOf(object)}: unknown apiVersion ${object.apiVersion}`);
    continue;
  }
  const Model = models[object.kind];
  if (!Model) {
    problems.push(`${nameOf(object)}: unknown kind in ${object.apiVersion}`);
    continue;
  }
  try {
    new Model(object).validate();
  } catch (e) {
    for (const error of e.errors ?? [{ instancePath: "", message: e.message }])
      problems.push(`${nameOf(object)}: ${error.instancePath || "/"} ${error.message}`);
  }
}

// Unknown fields: TypeScript's excess property check of object literals.
const work = mkdtempSync(join(tmpdir(), "k8s-check-"));
try {
  const lines = [];
  objects.forEach((object, i) => {
    const module = `kubernetes-types/${groupPath(object.apiVersion ?? "v1", "core")}`;
    lines.push(`import type { ${object.kind} as T${i} } from ${JSON.stringify(module)};`);
    lines.push(`export const o${i}: T${i} = ${JSON.stringify(object)};`);
  });
  writeFileSync(join(work, "manifests.ts"), lines.join("\n") + "\n");
  const modules = join(here, "node_modules");
  writeFileSync(join(work, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, skipLibCheck: true, pretty: false, types: [], moduleResolution: "node",
      baseUrl: modules, paths: { "kubernetes-types/*": [join(modules, "kubernetes-types/*")] },
    },
    files: ["manifests.ts"],
  }));
  try {
    execFileSync(process.execPath, [join(modules, "typescript/bin/tsc"), "-p", work],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    for (const line of String(e.stdout).split("\n").filter((l) => l.includes("error TS"))) {
      const index = Number(line.match(/manifests\.ts\((\d+),/)?.[1] ?? 0);
      const object = objects[Math.floor((index - 1) / 2)];
      problems.push(`${object ? nameOf(object) : "?"}: ${line.replace(/^.*error TS\d+: /, "")}`);
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

for (const p of problems) console.log(p);
if (problems.length) process.exit(1);
console.log(`${objects.length} objects: valid`);
