// What the SDK checks (openai_sdk.cjs, langchain.cjs) share: how a check
// fails (a FAIL line and exit status 1, which tests/test_openai_sdk.c
// reports) and the one tool both bind. No client here: each script drives
// its own SDK.
'use strict';

const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const check = (cond, msg) => { if (!cond) fail(msg); };

// A tool whose arguments the grammar can bound: two digits to add.
const calc = {
  type: 'function',
  function: {
    name: 'calc',
    description: 'adds',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['a', 'b'],
      additionalProperties: false,
    },
  },
};

module.exports = { fail, check, calc };
