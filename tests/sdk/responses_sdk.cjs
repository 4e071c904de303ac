// The official `openai` npm package's Responses API (client.responses.*)
// against a running `tps serve` (tests/test_agent_sdks.c starts it on
// stories260K): a plain answer, a streamed one (every documented event in
// order, with type and sequence_number), a forced function call whose
// arguments a schema validator (zod) checks, a function_call_output round
// trip, and previous_response_id (the stored turn continued, its prefix
// served by the cache), retrieve and delete.
// usage: node responses_sdk.cjs PORT KEY   (NODE_PATH must reach node_modules)
'use strict';
const { fail, check } = require('./common.cjs');
const OpenAI = require('openai');
const { z } = require('zod');

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[2]}/v1`, apiKey: process.argv[3] });
const Args = z.object({ a: z.number().int().min(0).max(9), b: z.number().int().min(0).max(9) }).strict();
const calc = {
  type: 'function', name: 'calc', description: 'adds', strict: true,
  parameters: {
    type: 'object',
    properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['a', 'b'], additionalProperties: false,
  },
};

function checkUsage(u, what) {
  check(u && u.input_tokens > 0 && u.output_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens,
    `${what}: usage ${JSON.stringify(u)}`);
  check(u.input_tokens_details && Number.isInteger(u.input_tokens_details.cached_tokens), `${what}: cached_tokens`);
  check(u.output_tokens_details && Number.isInteger(u.output_tokens_details.reasoning_tokens), `${what}: reasoning_tokens`);
}

async function plain() {
  const r = await client.responses.create({ model: 'tps', input: 'Hi.', instructions: 'Tell a story.', max_output_tokens: 16, temperature: 0 });
  check(r.object === 'response' && r.id.startsWith('resp_'), `object ${r.object} ${r.id}`);
  check(typeof r.output_text === 'string' && r.output_text.length > 0, `output_text ${JSON.stringify(r.output)}`);
  checkUsage(r.usage, 'plain');
  console.log('ok: plain', JSON.stringify(r.output_text));
}

async function streamed() {
  const stream = await client.responses.create({ model: 'tps', input: 'Hi.', max_output_tokens: 12, stream: true });
  const types = [];
  let seq = -1, text = '', done = null, completed = null;
  for await (const ev of stream) {
    check(typeof ev.type === 'string' && ev.sequence_number === seq + 1, `sequence ${seq} then ${JSON.stringify(ev)}`);
    seq = ev.sequence_number;
    if (types[types.length - 1] !== ev.type) types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.output_text.done') done = ev.text;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  const want = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.completed'];
  check(JSON.stringify(types) === JSON.stringify(want), `events ${types.join(' ')}`);
  check(done === text && text.length > 0, `deltas ${JSON.stringify(text)} vs done ${JSON.stringify(done)}`);
  check(completed.output[0].content[0].text === text, 'completed output');
  checkUsage(completed.usage, 'stream');
  console.log('ok: streamed', seq + 1, 'events');
}

async function forcedAndRoundTrip() {
  const r = await client.responses.create({
    model: 'tps', input: 'Add 2 and 3.', tools: [calc], tool_choice: { type: 'function', name: 'calc' },
    temperature: 1, seed: 3, max_output_tokens: 150, store: false,
  });
  const call = r.output.find((o) => o.type === 'function_call');
  check(call && call.name === 'calc' && call.call_id, `no calc call: ${JSON.stringify(r.output)}`);
  const parsed = Args.safeParse(JSON.parse(call.arguments));
  check(parsed.success, `arguments ${call.arguments}: ${parsed.error}`);
  console.log('ok: forced function call', call.arguments);
  const back = await client.responses.create({
    model: 'tps', tools: [calc], max_output_tokens: 8, store: false,
    input: [{ role: 'user', content: 'Add 2 and 3.' }, call,
      { type: 'function_call_output', call_id: call.call_id, output: String(parsed.data.a + parsed.data.b) }],
  });
  check(back.status === 'completed' || back.status === 'incomplete', `round trip status ${back.status}`);
  checkUsage(back.usage, 'round trip');
  check(back.usage.input_tokens > r.usage.input_tokens, 'the call and its output reached the prompt');
  console.log('ok: function_call_output round trip');
}

async function previous() {
  const first = await client.responses.create({ model: 'tps', input: 'Once upon a time', max_output_tokens: 40, temperature: 0 });
  const second = await client.responses.create({ model: 'tps', previous_response_id: first.id, input: 'And then?', max_output_tokens: 8, temperature: 0 });
  const turn1 = first.usage.input_tokens + first.usage.output_tokens;
  check(second.usage.input_tokens > turn1, `turn 2 prompt ${second.usage.input_tokens} holds turn 1 (${turn1})`);
  check(second.usage.input_tokens_details.cached_tokens >= 32,
    `turn 2 prefill reused turn 1's prefix: cached ${second.usage.input_tokens_details.cached_tokens}`);
  const got = await client.responses.retrieve(first.id);
  check(got.id === first.id && got.output_text === first.output_text, 'retrieve');
  await client.responses.delete(first.id);
  try {
    await client.responses.create({ model: 'tps', previous_response_id: first.id, input: 'x', max_output_tokens: 2 });
    fail('a deleted previous_response_id was accepted');
  } catch (e) {
    check(e.status === 404 && /deleted/.test(e.message), `404 with the reason: ${e.status} ${e.message}`);
  }
  console.log('ok: previous_response_id, cached', second.usage.input_tokens_details.cached_tokens, 'of', second.usage.input_tokens);
}

async function refusals() {
  try {
    await client.responses.create({ model: 'tps', input: 'x', tools: [{ type: 'web_search' }] });
    fail('a built-in tool was accepted');
  } catch (e) {
    check(e.status === 400 && /web_search/.test(e.message), `built-in tool: ${e.status} ${e.message}`);
  }
  console.log('ok: built-in tools refused by name');
}

plain().then(streamed).then(forcedAndRoundTrip).then(previous).then(refusals)
  .then(() => console.log('ok: responses'))
  .catch((e) => fail(e.stack || String(e)));
