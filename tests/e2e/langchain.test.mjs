// LangChain's structured output and tool binding (Python langchain-openai, pinned in
// python-requirements.txt and installed by scripts/install-deps.sh into python_modules;
// skipped, saying so, where it is not installed): with_structured_output (json_schema strict,
// function calling), bind_tools with tool_choice "required", whole and streamed, and the call
// with its result sent back. tests/e2e/langchain_client.py does the calls; pydantic validates.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { API_KEY, MODEL_ID, models, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const python = process.env.TANDEM_PYTHON || 'python3';
const pythonPath = [path.join(here, 'python_modules'), process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
const probe = spawnSync(python, ['-c', 'import langchain_openai'], { env: { ...process.env, PYTHONPATH: pythonPath } });
const skip =
  probe.status === 0 ? false : 'the langchain-openai Python package is not installed (scripts/install-deps.sh installs it)';

function runAsync(command, args, { env, timeoutMs }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}

let server;
before(async () => {
  if (!skip) server = await startServer({ extra: ['-md', models.draft] });
});
after(async () => {
  if (server) await server.stop();
});

describe('LangChain (langchain-openai ChatOpenAI)', () => {
  it('with_structured_output and bind_tools(tool_choice="required") work against tandem', { skip }, async () => {
    // LangSmith tracing off: nothing may leave the machine.
    const env = { ...process.env, PYTHONPATH: pythonPath, LANGSMITH_TRACING: 'false', LANGCHAIN_TRACING_V2: 'false' };
    const r = await runAsync(python, [path.join(here, 'langchain_client.py'), server.baseURL, API_KEY, MODEL_ID], {
      env,
      timeoutMs: 300000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const o = JSON.parse(r.stdout);
    for (const method of ['json_schema', 'function_calling', 'json_schema_seeded']) {
      assert.ok(['captain', 'mate', 'harpooneer'].includes(o[method].role), JSON.stringify(o[method]));
      assert.ok(o[method].name.length <= 24);
    }
    assert.equal(typeof o.raw_content, 'string');
    assert.equal(o.finish_reason, 'tool_calls');
    assert.equal(o.invalid_tool_calls.length, 0);
    assert.equal(o.tool_calls.length, 1);
    assert.equal(o.tool_calls[0].name, 'get_weather');
    assert.ok(['celsius', 'fahrenheit'].includes(o.tool_calls[0].args.unit), JSON.stringify(o.tool_calls[0]));
    assert.equal(typeof o.tool_calls[0].args.city, 'string');
    assert.deepEqual(
      o.streamed_tool_calls.map((c) => [c.name, c.args]),
      o.tool_calls.map((c) => [c.name, c.args]),
    );
    assert.equal(o.follow_up_type, 'str');
  });
});
