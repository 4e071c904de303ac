// The OpenAI Agents SDK (`@openai/agents`, which speaks the Responses API)
// against a running `tps serve` (tests/test_agent_sdks.c starts it on
// stories260K, whose context is 512 tokens: hence one small tool): its run
// loop with one tool, the first turn forced to call
// it (toolChoice required; the SDK resets it after the call), the tool run
// by the SDK on arguments its zod schema validates, and the second turn
// answering with the tool's output in its prompt, as the agent's zod
// output type (text.format json_schema) says.
// usage: node agents_sdk.cjs PORT KEY   (NODE_PATH must reach node_modules)
'use strict';
const { fail, check } = require('./common.cjs');
const { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } = require('@openai/agents');
const OpenAI = require('openai');
const { z } = require('zod');

setTracingDisabled(true);
setOpenAIAPI('responses');
setDefaultOpenAIClient(new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[2]}/v1`, apiKey: process.argv[3] }));

let ran = null;
const calc = tool({
  name: 'sq',
  description: 'squares',
  parameters: z.object({ n: z.number().int().min(0).max(9) }),
  execute: async ({ n }) => { ran = { n }; return String(n * n); },
});

async function main() {
  const agent = new Agent({
    name: 'squarer', instructions: 'Square.', model: 'tps', tools: [calc],
    outputType: z.object({ square: z.number().int().min(0).max(99) }),
    // seeded (providerData goes into the request body): unseeded, 1 run in
    // ~40 spent the 25 tokens the 512-token context leaves on JSON whitespace
    modelSettings: { toolChoice: 'required', parallelToolCalls: false, temperature: 1, providerData: { seed: 1 } },
  });
  const result = await run(agent, 'Square 3.', { maxTurns: 3 });
  check(ran !== null, 'the tool never ran');
  const kinds = result.newItems.map((i) => i.type);
  check(kinds.includes('tool_call_item') && kinds.includes('tool_call_output_item'), `items ${kinds}`);
  check(result.finalOutput && Number.isInteger(result.finalOutput.square), `final output ${JSON.stringify(result.finalOutput)}`);
  console.log('ok: agents run loop', JSON.stringify(ran), '->', JSON.stringify(result.finalOutput));
}

main().catch((e) => fail(`(tool ran: ${JSON.stringify(ran)}) ` + (e.stack || String(e))));
