// What the parts of scripts/grpc-check.js share.
'use strict';

// A harness error (bad input, a library that does not behave as driven):
// exit 2, not a FAIL.
class HarnessError extends Error {}

module.exports = { HarnessError };
