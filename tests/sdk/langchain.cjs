// LangChain JS (`@langchain/openai`'s ChatOpenAI) against a running
// `tps serve` (tests/test_openai_sdk.c starts it on stories260K and runs
// this). LangChain sends its own set of fields (stream_options, n,
// parallel_tool_calls, strict tool schemas...): every one must be honoured
// or refused, so a plain invoke failing here means tps refused a field a
// LangChain user cannot avoid sending. Checked: invoke and its usage, a
// stream whose chunks add up to the same reply, a bound tool forced and
// parsed by LangChain into an args object, tool_choice "required" cut by
// maxTokens keeping its complete calls, a ToolMessage round trip, and
// withStructuredOutput by JSON schema.
// usage: node langchain.cjs PORT   (NODE_PATH must reach node_modules/@langchain)
'use strict';
const { fail, check, calc } = require('./common.cjs');
const { ChatOpenAI } = require('@langchain/openai');
const { HumanMessage, ToolMessage } = require('@langchain/core/messages');

const port = process.argv[2];

const model = (extra) => new ChatOpenAI({
  model: 'tps', apiKey: 'none', configuration: { baseURL: `http://127.0.0.1:${port}/v1` },
  temperature: 0, maxTokens: 12, maxRetries: 0, ...extra,
});

const person = {
  title: 'person',
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
  required: ['name', 'age'],
  additionalProperties: false,
};

async function main() {
  const said = await model().invoke([new HumanMessage('Once upon a time')]);
  check(typeof said.content === 'string' && said.content.length > 0, `invoke content: ${JSON.stringify(said.content)}`);
  const u = said.usage_metadata;
  check(u && u.output_tokens > 0 && u.input_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens,
    `usage_metadata: ${JSON.stringify(u)}`);
  console.log('ok: invoke', JSON.stringify(said.content));

  let streamed = '';
  let usage = null;
  for await (const chunk of await model({ streamUsage: true }).stream([new HumanMessage('Once upon a time')])) {
    streamed += chunk.content;
    if (chunk.usage_metadata) usage = chunk.usage_metadata;
  }
  check(streamed === said.content, `stream ${JSON.stringify(streamed)} != invoke ${JSON.stringify(said.content)}`);
  check(usage && usage.output_tokens === u.output_tokens, `streamed usage: ${JSON.stringify(usage)}`);
  console.log('ok: stream equals invoke, with usage');

  const tooled = model({ maxTokens: 150, temperature: 1, modelKwargs: { seed: 3 } }).bindTools([calc], { tool_choice: 'calc' });
  const call = await tooled.invoke([new HumanMessage('Add two numbers.')]);
  const tc = call.tool_calls && call.tool_calls[0];
  check(tc && tc.name === 'calc' && tc.id, `tool_calls: ${JSON.stringify(call.tool_calls)}`);
  for (const k of ['a', 'b']) check(Number.isInteger(tc.args[k]) && tc.args[k] >= 0 && tc.args[k] <= 9, `args: ${JSON.stringify(tc.args)}`);
  console.log('ok: forced tool call', JSON.stringify(tc.args));

  // tool_choice "required" may write several calls; a cut by maxTokens in a
  // later one must keep every complete call before it (stories260K spells
  // nearly a token a character: one calc call is ~55 tokens, so 100 cuts
  // inside a second call where a real model's 64 would)
  const required = model({ maxTokens: 100, temperature: 0 }).bindTools([calc], { tool_choice: 'required' });
  const cut = await required.invoke([new HumanMessage('Add two numbers, then two more.')]);
  const first = cut.tool_calls && cut.tool_calls[0];
  check(first && first.name === 'calc' && Number.isInteger(first.args.a) && Number.isInteger(first.args.b),
    `required + maxTokens 100: ${JSON.stringify(cut.tool_calls)} (finish ${JSON.stringify(cut.response_metadata)})`);
  console.log('ok: required cut by maxTokens keeps the first complete call', JSON.stringify(cut.tool_calls.length),
    JSON.stringify(cut.response_metadata.finish_reason));

  const back = await model({ maxTokens: 8 }).bindTools([calc]).invoke([
    new HumanMessage('Add two numbers.'), call, new ToolMessage({ tool_call_id: tc.id, content: String(tc.args.a + tc.args.b) }),
  ]);
  check(back.usage_metadata.input_tokens > call.usage_metadata.input_tokens, 'the round trip prompt holds the call and result');
  console.log('ok: tool round trip');

  const structured = model({ maxTokens: 80 }).withStructuredOutput(person, { method: 'jsonSchema', strict: true });
  const p = await structured.invoke([new HumanMessage('Who are you?')]);
  check(p && typeof p.name === 'string' && p.name.length <= 12 && Number.isInteger(p.age) && p.age >= 0 && p.age <= 99,
    `structured: ${JSON.stringify(p)}`);
  check(Object.keys(p).every((k) => k === 'name' || k === 'age'), `extra keys: ${JSON.stringify(p)}`);
  console.log('ok: withStructuredOutput', JSON.stringify(p));
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
