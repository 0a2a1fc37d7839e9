#!/usr/bin/env node
import { runCli } from './run-cli';

// The `disagg` binary: everything lives in runCli so tests run it in-process.
void runCli(process.argv.slice(2), {
  out: text => process.stdout.write(text + '\n'),
  err: text => process.stderr.write(text + '\n'),
  progress: process.stderr.isTTY ? text => process.stderr.write(text) : undefined,
}).then(code => {
  // exitCode, not exit(): lets piped stdout drain first.
  process.exitCode = code;
});
