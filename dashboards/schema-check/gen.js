// Writes check.gen.ts: each dashboard JSON as a literal typed as Grafana's Dashboard, so
// tsc checks every field (string enums included) against @grafana/schema.
const fs = require("fs");
const path = require("path");
const dir = process.argv[2];
let out = 'import type { Dashboard } from "@grafana/schema";\n';
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const name = f.replace(/\W/g, "_");
  out += `export const ${name}: Dashboard = ${fs.readFileSync(path.join(dir, f), "utf8")};\n`;
}
fs.writeFileSync("check.gen.ts", out);
