// Renders an Indexed Job as the Pods Kubernetes would make of it, for
// `podman kube play` (which runs Pods, not Jobs): Pod JOB-I for each index
// I, with host name JOB-I, its pod template and the index in
// JOB_COMPLETION_INDEX, as the Job controller sets them. ConfigMaps and
// PersistentVolumeClaims pass through; Services are dropped (podman's
// network gives the DNS names). Two things podman 4.3 does not do as
// Kubernetes does are worked around: it binds every containerPort on the
// host (so ports are dropped), and it mounts Secret files 0644 whatever
// their defaultMode (so each Secret's files are written to SECRET_DIR/NAME,
// mode 0400, and mounted from there).
//   node job-to-pods.mjs FILE IMAGE SECRET_DIR   (IMAGE replaces the image)
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";

const [file, image, secretDir] = process.argv.slice(2);
if (!file || !image || !secretDir) {
  console.error("usage: node job-to-pods.mjs FILE IMAGE SECRET_DIR");
  process.exit(2);
}
const out = [];
for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
  const object = doc.toJS();
  if (!object || object.kind === "Service") continue;
  if (object.kind === "Secret") {
    const dir = join(secretDir, object.metadata.name);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const [key, value] of Object.entries(object.data ?? {}))
      writeFileSync(join(dir, key), Buffer.from(String(value).replace(/\s+/g, ""), "base64"), { mode: 0o400 });
    continue;
  }
  if (object.kind !== "Job") {
    out.push(object);
    continue;
  }
  if (object.spec?.completionMode !== "Indexed") {
    console.error(`Job ${object.metadata.name}: not Indexed`);
    process.exit(1);
  }
  const name = object.metadata.name;
  for (let i = 0; i < object.spec.parallelism; i++) {
    const spec = structuredClone(object.spec.template.spec);
    spec.hostname = `${name}-${i}`;
    for (const v of spec.volumes ?? [])
      if (v.secret) {
        v.hostPath = { path: join(secretDir, v.secret.secretName), type: "Directory" };
        delete v.secret;
      }
    for (const c of spec.containers) {
      c.image = image;
      delete c.ports;
      c.env = [...(c.env ?? []), { name: "JOB_COMPLETION_INDEX", value: String(i) }];
    }
    out.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `${name}-${i}`, labels: { ...(object.spec.template.metadata?.labels ?? {}) } },
      spec,
    });
  }
}
process.stdout.write(out.map((o) => stringify(o)).join("---\n"));
