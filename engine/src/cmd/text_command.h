// text_command.h — the `disagg-engine tokenize` and `disagg-engine render-chat` roles.
//
// Both read NDJSON requests on stdin and write one NDJSON answer per request on stdout, in order,
// so that a test or a benchmark can drive thousands of cases through one process. They exist for
// the differential tests against the reference implementations (Hugging Face's Rust tokenizers,
// Python's jinja2) and for offline use; the servers call the library directly.
#pragma once

namespace disagg::text {

/// Runs `tokenize --tokenizer DIR [...]`; argv[0] is "tokenize". Returns 0 when every request was
/// answered (a request that fails gets an {"error": ...} line, not an exit), 2 on a bad flag and 1
/// when the tokenizer files cannot be loaded, with the reason on stderr. Never throws.
int run_tokenize_command(int argc, char** argv);

/// Runs `render-chat --tokenizer DIR [...]`; argv[0] is "render-chat". Same contract as
/// run_tokenize_command, for chat-template rendering.
int run_render_chat_command(int argc, char** argv);

}  // namespace disagg::text
