// The official `@anthropic-ai/sdk` npm package against a running `tps
// serve` (tests/test_agent_sdks.c starts it on stories260K, with an API
// key the SDK sends as x-api-key): messages.create, messages.stream (text
// deltas add up to the final message), a forced tool_use whose input a
// schema validator (zod) checks and a tool_result round trip,
// count_tokens, and Anthropic's error shape.
// usage: node anthropic_sdk.cjs PORT KEY   (NODE_PATH must reach node_modules)
'use strict';
const { fail, check } = require('./common.cjs');
const Anthropic = require('@anthropic-ai/sdk');
const { z } = require('zod');

const client = new Anthropic({ baseURL: `http://127.0.0.1:${process.argv[2]}`, apiKey: process.argv[3] });
const Input = z.object({ a: z.number().int().min(0).max(9), b: z.number().int().min(0).max(9) }).strict();
const calc = {
  name: 'calc', description: 'adds',
  input_schema: {
    type: 'object',
    properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['a', 'b'], additionalProperties: false,
  },
};
const user = [{ role: 'user', content: 'Hi.' }];

async function create() {
  const m = await client.messages.create({ model: 'tps', max_tokens: 16, system: 'Tell a story.', messages: user, metadata: { user_id: 'u1' } });
  check(m.type === 'message' && m.role === 'assistant' && m.content[0].type === 'text' && m.content[0].text.length, JSON.stringify(m));
  check(['end_turn', 'max_tokens'].includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
  check(m.usage.input_tokens > 0 && m.usage.output_tokens > 0, `usage ${JSON.stringify(m.usage)}`);
  console.log('ok: messages.create', JSON.stringify(m.content[0].text));
}

async function stream() {
  const s = client.messages.stream({ model: 'tps', max_tokens: 12, messages: user, stop_sequences: ['\n\n'] });
  let text = '';
  const seen = new Set();
  s.on('text', (t) => { text += t; });
  s.on('streamEvent', (ev) => seen.add(ev.type));
  const m = await s.finalMessage();
  check(m.content[0].text === text && text.length > 0, `streamed ${JSON.stringify(text)} vs ${JSON.stringify(m.content)}`);
  for (const t of ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
    check(seen.has(t), `no ${t} event: ${[...seen]}`);
  check(m.usage.output_tokens > 0 && m.usage.input_tokens > 0, `usage ${JSON.stringify(m.usage)}`);
  console.log('ok: messages.stream', m.usage.output_tokens, 'tokens');
}

async function tools() {
  const m = await client.messages.create({
    // greedy: the Messages API has no seed, and an unseeded draw can spend
    // the 150 tokens on JSON whitespace (stories260K spells a token a character)
    model: 'tps', max_tokens: 150, temperature: 0, messages: [{ role: 'user', content: 'Add 2 and 3.' }],
    tools: [calc], tool_choice: { type: 'tool', name: 'calc' },
  });
  const use = m.content.find((b) => b.type === 'tool_use');
  check(m.stop_reason === 'tool_use' && use && use.name === 'calc' && use.id, `no tool_use: ${JSON.stringify(m)}`);
  const parsed = Input.safeParse(use.input);
  check(parsed.success, `input ${JSON.stringify(use.input)}: ${parsed.error}`);
  console.log('ok: forced tool_use', JSON.stringify(use.input));
  const back = await client.messages.create({
    model: 'tps', max_tokens: 8, tools: [calc],
    messages: [{ role: 'user', content: 'Add 2 and 3.' }, { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: String(parsed.data.a + parsed.data.b) }] }],
  });
  check(back.type === 'message' && back.usage.input_tokens + back.usage.cache_read_input_tokens > m.usage.input_tokens,
    `round trip ${JSON.stringify(back.usage)}`);
  console.log('ok: tool_result round trip');
}

async function countAndErrors() {
  const c = await client.messages.countTokens({ model: 'tps', messages: user });
  check(Number.isInteger(c.input_tokens) && c.input_tokens > 0, `count_tokens ${JSON.stringify(c)}`);
  try {
    await client.messages.create({ model: 'tps', messages: user, max_tokens: 8, tools: [{ type: 'web_search_20250305', name: 'web_search' }] });
    fail('a built-in tool was accepted');
  } catch (e) {
    check(e.status === 400 && e.error && e.error.type === 'error' && e.error.error.type === 'invalid_request_error',
      `Anthropic's error shape: ${e.status} ${JSON.stringify(e.error)}`);
  }
  console.log('ok: count_tokens', c.input_tokens, 'and the error shape');
}

create().then(stream).then(tools).then(countAndErrors)
  .then(() => console.log('ok: anthropic'))
  .catch((e) => fail(e.stack || String(e)));
