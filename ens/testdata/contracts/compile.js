// Compiles the test contracts with solc from npm (offline once installed)
// and writes build/<Contract>.abi and build/<Contract>.bin for the tests.
// Usage: npm ci && npm run build
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const dir = __dirname;
const sources = {};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[f] = { content: fs.readFileSync(path.join(dir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const e of output.errors || []) {
  console.error(e.formattedMessage);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);

const out = path.join(dir, 'build');
fs.mkdirSync(out, { recursive: true });
for (const file of Object.keys(output.contracts).sort()) {
  for (const [name, c] of Object.entries(output.contracts[file])) {
    fs.writeFileSync(path.join(out, name + '.abi'), JSON.stringify(c.abi, null, 1) + '\n');
    fs.writeFileSync(path.join(out, name + '.bin'), c.evm.bytecode.object + '\n');
    console.log(`${file}: ${name}`);
  }
}
console.log(`solc ${solc.version()}`);
