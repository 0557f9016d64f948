// CTest entry point: checks that the pinned npm dependencies are installed, then runs
// every *.test.mjs here with node's built-in test runner, one file at a time (each file
// starts its own `tandem serve` processes; the machine may have only two cores).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!existsSync(path.join(here, 'node_modules', 'openai', 'package.json'))) {
  console.error(
    `e2e: ${path.join(here, 'node_modules')} is missing the pinned 'openai' client.\n` +
      `     Run scripts/test.sh (it runs 'npm ci' for every committed package-lock.json), or:\n` +
      `     npm ci --prefix ${path.relative(process.cwd(), here) || '.'}`,
  );
  process.exit(1);
}
if (Number(process.versions.node.split('.')[0]) < 20)
  console.error(`e2e: warning: node ${process.version}; the pinned openai client supports Node.js 20 or later`);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.test.mjs'))
  .sort()
  .map((f) => path.join(here, f));
// One `node --test` per file, in order (node 18, Debian 12's, has no --test-concurrency).
let failed = 0;
for (const file of files) {
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...process.argv.slice(2), file], {
    stdio: 'inherit',
    env: process.env,
  });
  if (r.status !== 0) {
    console.error(`e2e: ${path.basename(file)} failed (exit ${r.status ?? r.signal})`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
