// The official `openai` npm package against a running `tps serve`
// (tests/test_openai_sdk.c starts it on stories260K and runs this):
// json_schema at temperature 0 and 1, a forced tool call, streamed
// tool-call deltas assembled by hand, a tool-result round trip, and
// logprobs. JSON outputs are checked with JSON.parse and plain checks of
// the schema's constraints (independent of tps's grammar code).
// usage: node openai_sdk.cjs PORT   (NODE_PATH must reach node_modules/openai)
'use strict';
const { fail, check, calc } = require('./common.cjs');
const OpenAI = require('openai');

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[2]}/v1`, apiKey: 'none' });

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 2 },
  },
  required: ['name', 'age', 'pets'],
  additionalProperties: false,
};
const user = [{ role: 'user', content: 'Hi.' }];

function checkPerson(text) {
  let v;
  try { v = JSON.parse(text); } catch (e) { fail(`not JSON: ${text}`); }
  check(typeof v.name === 'string' && v.name.length <= 16, `name: ${text}`);
  check(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, `age: ${text}`);
  check(Array.isArray(v.pets) && v.pets.length <= 2 && v.pets.every((p) => p === 'cat' || p === 'dog'), `pets: ${text}`);
  check(Object.keys(v).every((k) => ['name', 'age', 'pets'].includes(k)), `extra keys: ${text}`);
}

function checkArgs(args) {
  let v;
  try { v = JSON.parse(args); } catch (e) { fail(`arguments not JSON: ${args}`); }
  for (const k of ['a', 'b']) check(Number.isInteger(v[k]) && v[k] >= 0 && v[k] <= 9, `${k}: ${args}`);
}

async function main() {
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({
      model: 'tps', messages: user, temperature, seed: 7, max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
    });
    check(r.choices[0].finish_reason === 'stop', `json_schema finish ${r.choices[0].finish_reason}`);
    checkPerson(r.choices[0].message.content);
  }
  console.log('ok: json_schema at temperature 0 and 1');

  const forced = await client.chat.completions.create({
    model: 'tps', messages: user, temperature: 1, seed: 3, max_tokens: 150, tools: [calc],
    tool_choice: { type: 'function', function: { name: 'calc' } }, parallel_tool_calls: false,
  });
  const call = forced.choices[0].message.tool_calls && forced.choices[0].message.tool_calls[0];
  check(forced.choices[0].finish_reason === 'tool_calls', `forced finish ${forced.choices[0].finish_reason}`);
  check(call && call.type === 'function' && call.function.name === 'calc' && call.id, 'no calc call');
  checkArgs(call.function.arguments);
  console.log('ok: forced tool call', call.function.arguments);

  const stream = await client.chat.completions.create({
    model: 'tps', messages: user, temperature: 1, seed: 5, max_tokens: 150, tools: [calc],
    tool_choice: 'required', parallel_tool_calls: false, stream: true,
  });
  const parts = {};
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const d of (c.delta && c.delta.tool_calls) || []) {
      const p = (parts[d.index] = parts[d.index] || { name: '', args: '', id: null });
      if (d.id) p.id = d.id;
      if (d.function && d.function.name) p.name += d.function.name;
      if (d.function && d.function.arguments) p.args += d.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(finish === 'tool_calls', `streamed finish ${finish}`);
  check(parts[0] && parts[0].id && parts[0].name === 'calc', 'streamed call');
  checkArgs(parts[0].args);
  console.log('ok: streamed tool-call deltas', parts[0].args);

  const back = await client.chat.completions.create({
    model: 'tps', temperature: 0, max_tokens: 8, tools: [calc],
    messages: [...user, forced.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '5' }],
  });
  check(['stop', 'length', 'tool_calls'].includes(back.choices[0].finish_reason), 'round trip');
  check(back.usage.prompt_tokens > forced.usage.prompt_tokens, 'the round trip prompt holds the call and result');
  console.log('ok: tool round trip');

  const lp = await client.chat.completions.create({
    model: 'tps', messages: user, temperature: 0, max_tokens: 4, logprobs: true, top_logprobs: 3,
  });
  const content = lp.choices[0].logprobs.content;
  check(content.length === lp.usage.completion_tokens, 'one logprob per token');
  check(content.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3), 'logprobs shape');
  const cmp = await client.completions.create({ model: 'tps', prompt: 'Once', max_tokens: 4, temperature: 0, logprobs: 2 });
  check(cmp.choices[0].logprobs.token_logprobs.length === 4, 'completion logprobs');
  console.log('ok: logprobs');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
