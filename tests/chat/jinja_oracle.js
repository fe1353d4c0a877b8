// jinja_oracle.js - the oracle of the chat template tests: renders each case
// with @huggingface/jinja, as Hugging Face renders chat templates.
//   node jinja_oracle.js JINJA_INDEX_CJS CASES.json OUT.json
// CASES: [{"template": "...", "vars": {...}}, ...]; OUT, in the same order:
// {"out": "..."} or {"error": "..."} (a parse or render error).
"use strict";
const fs = require("fs");
const [jinjaPath, casesPath, outPath] = process.argv.slice(2);
const { Template } = require(jinjaPath);
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const res = cases.map((c) => {
  try {
    return { out: new Template(c.template).render(c.vars) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
fs.writeFileSync(outPath, JSON.stringify(res, null, 1));
