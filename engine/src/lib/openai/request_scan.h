// request_scan.h — the router's fast path for parsing a completions / chat request.
//
// json::parse followed by parse_generate_request (request_parse.h) cost about a fifth of the
// router's CPU time per request (nlohmann's lexer copies every byte of every string into its token
// buffer, then the document is built, only for five fields to be read). scan_generate_request
// validates the whole body in one pass without building a document and reads those fields from
// the bytes.
//
// Contract: it either succeeds with exactly the GenerateRequest and tokens that the slow path gives
// for the same body, or it declines ("not sure") and the caller runs the slow path, which also
// produces every error answer. It declines any body the slow path would refuse, and some it would
// accept but that this scanner does not handle: \u escapes in a field it reads, an escaped or
// repeated key among those it reads, a UTF-8 byte-order mark, nesting deeper than
// kMaxRequestJsonDepth (64, json_depth.h: the slow path refuses those with a 400), numbers
// that could overflow a double, and every kind of invalid field. A differential test and the
// request-parse fuzz target hold the two paths to this contract.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "request_parse.h"

namespace disagg::router {

/// Fast path of `json::parse(body)` + parse_generate_request (same arguments and meaning). True:
/// `out` and the tokens appended to `tokens` are what the slow path gives. False: run the slow path
/// (`tokens` is left as it was; `out` and `scratch` may have changed). Allocates only when
/// `tokens` or `scratch` grow past their capacity.
/// With the served model's `tokenizer`, chat requests (whose render needs the whole document) and
/// requests that set add_special_tokens are declined; so are requests with a cache_salt.
bool scan_generate_request(std::string_view body, bool chat, std::span<const std::string> models, GenerateRequest& out,
                           std::vector<TokenId>& tokens, std::string& scratch,
                           const PromptTokenizer* tokenizer = nullptr);

}  // namespace disagg::router
