// Writes src/schema.d.ts from the OpenAPI document of a running `remindkit api`
// (REMINDKIT_API_URL, default http://127.0.0.1:8765) or from a file given as argv[2].
import { readFile, writeFile } from "node:fs/promises";

const source = process.argv[2];
const doc = source
  ? JSON.parse(await readFile(source, "utf8"))
  : await (await fetch(`${process.env.REMINDKIT_API_URL ?? "http://127.0.0.1:8765"}/openapi.json`)).json();

function tsType(schema) {
  if (!schema) return "unknown";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.anyOf) return schema.anyOf.map(tsType).join(" | ");
  switch (schema.type) {
    case "string": return "string";
    case "integer": case "number": return "number";
    case "boolean": return "boolean";
    case "null": return "null";
    case "array": { const t = tsType(schema.items); return t.includes("|") ? `(${t})[]` : `${t}[]`; }
    case "object": return "Record<string, unknown>";
    default: return "unknown";
  }
}

let out = "// Generated from remindkit's OpenAPI document by scripts/gen-types.mjs: do not edit.\n";
for (const [name, schema] of Object.entries(doc.components?.schemas ?? {})) {
  if (schema.type !== "object" || !schema.properties) continue;
  const required = new Set(schema.required ?? []);
  out += `\nexport interface ${name} {\n`;
  for (const [prop, p] of Object.entries(schema.properties)) {
    const key = /^[A-Za-z_][A-Za-z0-9_]*$/.test(prop) ? prop : JSON.stringify(prop);
    if (p.description) out += `  /** ${p.description} */\n`;
    out += `  ${key}${required.has(prop) ? "" : "?"}: ${tsType(p)};\n`;
  }
  out += "}\n";
}
out += `\nexport type Path = ${Object.keys(doc.paths).map((p) => JSON.stringify(p)).join("\n  | ")};\n`;
await writeFile(new URL("../src/schema.d.ts", import.meta.url), out);
console.log("wrote src/schema.d.ts");
