// Tests of the in-place HTTP/1.1 parser (engine/src/lib/http/http_parse.h): request and response
// heads, framing and keep-alive rules, the errors that keep two parsers from disagreeing about
// where a message ends, and the chunked decoder at every split of its input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/http/http_parse.h"

namespace disagg::http {
namespace {

Head parse_request(const std::string& bytes, ParseError expected = ParseError::none) {
  Head h;
  EXPECT_EQ(parse_request_head(bytes, h), expected) << bytes;
  return h;
}

TEST(HttpParse, RequestHeadFieldsAndFraming) {
  // GIVEN a request with padded field values, preceded by an empty line (RFC 9112 2.2)
  const std::string bytes =
      "\r\nPOST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:application/json \r\n"
      "content-length: 12\r\nX-Empty:\r\nX-Session:  abc \t\r\n\r\n";
  std::size_t searched = 0;
  // WHEN its end is found and it is parsed
  ASSERT_EQ(find_head_end(bytes, searched), bytes.size());
  const Head h = parse_request(bytes);
  // THEN method, target, version, trimmed values and the body length come out
  EXPECT_EQ(h.method, "POST");
  EXPECT_EQ(h.target, "/v1/completions?x=1");
  EXPECT_EQ(h.version, 11u);
  EXPECT_EQ(h.field_count, 5u);
  EXPECT_EQ(h["content-type"], "application/json");
  EXPECT_EQ(h["X-SESSION"], "abc");
  EXPECT_EQ(h["x-empty"], "");
  EXPECT_NE(h.find("X-Empty"), nullptr);
  EXPECT_EQ(h.find("X-Missing"), nullptr);
  EXPECT_EQ(h.body, BodyKind::length);
  EXPECT_EQ(h.content_length, 12u);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_FALSE(h.expect_continue);
}

TEST(HttpParse, KeepAliveFollowsVersionAndConnection) {
  EXPECT_TRUE(parse_request("GET / HTTP/1.1\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_request("GET / HTTP/1.1\r\nConnection: Upgrade, close\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse_request("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse_request("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
  const Head h = parse_request("PUT /u HTTP/1.1\r\nExpect: 100-Continue\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(h.expect_continue);
  EXPECT_EQ(h.body, BodyKind::chunked);
  EXPECT_EQ(parse_request("GET / HTTP/1.1\r\n\r\n").body, BodyKind::none);
}

TEST(HttpParse, RefusesWhatTwoParsersCouldReadDifferently) {
  // GIVEN heads that are malformed or ambiguous THEN each is refused with its own error
  struct Case {
    const char* bytes;
    ParseError error;
  };
  const std::vector<Case> cases = {
      {"THIS IS NOT HTTP\r\n\r\n", ParseError::bad_request_line},
      {"GET  / HTTP/1.1\r\n\r\n", ParseError::bad_request_line},
      {"GET / HTTP/1.1 \r\n\r\n", ParseError::bad_request_line},
      {"GET / HTTX/1.1\r\n\r\n", ParseError::bad_request_line},
      {"GET / HTTP/2.0\r\n\r\n", ParseError::bad_version},
      {"GET / HTTP/1.1\n\n", ParseError::bad_request_line},
      {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", ParseError::bad_field},
      {"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", ParseError::bad_field},
      {"GET / HTTP/1.1\r\n: a\r\n\r\n", ParseError::bad_field},
      {"GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n", ParseError::bad_field},
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", ParseError::bad_field},
      {"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", ParseError::bad_content_length},
      {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", ParseError::bad_content_length},
      {"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", ParseError::bad_content_length},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", ParseError::bad_content_length},
      {"POST / HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n", ParseError::bad_content_length},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ParseError::bad_transfer_encoding},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", ParseError::bad_transfer_encoding},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", ParseError::unsupported_transfer_encoding},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: ,\r\n\r\n", ParseError::bad_transfer_encoding},
  };
  for (const Case& c : cases) parse_request(c.bytes, c.error);
  // Two equal Content-Length fields are one length (RFC 9110 8.6).
  EXPECT_EQ(parse_request("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n").content_length, 5u);
  // More fields than Head::kMaxFields.
  std::string many = "GET / HTTP/1.1\r\n";
  for (std::size_t i = 0; i <= Head::kMaxFields; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  parse_request(many + "\r\n", ParseError::too_many_fields);
}

TEST(HttpParse, FieldValuesRefuseControlCharactersAtEveryPosition) {
  // GIVEN a 40-byte value (scanned eight bytes at a time) with HTAB, obs-text and a trailing space
  const std::string value = "text/plain;\tq=0.5 \xc3\xa9t\xc3\xa9 and more words ok";
  const Head h = parse_request("GET / HTTP/1.1\r\nX-V: " + value + " \r\n\r\n");
  // THEN it is accepted whole, trimmed at the end only
  EXPECT_EQ(h["x-v"], value);
  // GIVEN a control character or DEL at each position of a long value THEN the head is refused
  for (const char bad : {'\x00', '\x01', '\x0b', '\x1f', '\x7f', '\n'}) {
    for (std::size_t at = 0; at < value.size(); ++at) {
      std::string v = value;
      v[at] = bad;
      parse_request("GET / HTTP/1.1\r\nX-V: " + v + "\r\n\r\n", ParseError::bad_field);
    }
  }
}

TEST(HttpParse, FindsTheHeadEndHoweverTheBytesArrive) {
  // GIVEN a head followed by body bytes, fed one byte more at a time
  const std::string head = "\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string bytes = head + "body";
  std::size_t searched = 0;
  std::size_t found = 0;
  std::size_t calls_until_found = 0;
  for (std::size_t n = 0; n <= bytes.size() && found == 0; ++n) {
    found = find_head_end(std::string_view(bytes).substr(0, n), searched);
    calls_until_found = n;
  }
  // THEN the end is found exactly when its last byte arrives, leading empty lines included
  EXPECT_EQ(found, head.size());
  EXPECT_EQ(calls_until_found, head.size());
  // AND a bare-LF head also ends (the parser then refuses it) instead of waiting for the limit
  searched = 0;
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: h\n\nrest", searched), 24u);
  searched = 0;
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: h\r\n", searched), 0u);
}

TEST(HttpParse, ResponseHeads) {
  Head h;
  // GIVEN a response with a reason and a length
  ASSERT_EQ(parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", h), ParseError::none);
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.reason, "OK");
  EXPECT_EQ(h.body, BodyKind::length);
  // GIVEN no reason at all THEN it parses; a fourth digit does not
  ASSERT_EQ(parse_response_head("HTTP/1.1 503\r\nTransfer-Encoding: chunked\r\n\r\n", h), ParseError::none);
  EXPECT_EQ(h.status, 503u);
  EXPECT_EQ(h.body, BodyKind::chunked);
  EXPECT_EQ(parse_response_head("HTTP/1.1 2000 OK\r\n\r\n", h), ParseError::bad_status_line);
  EXPECT_EQ(parse_response_head("HTTP/1.1 20 OK\r\n\r\n", h), ParseError::bad_status_line);
  // GIVEN no framing THEN the body runs to the end of the connection, which is not kept
  ASSERT_EQ(parse_response_head("HTTP/1.1 200 OK\r\n\r\n", h), ParseError::none);
  EXPECT_EQ(h.body, BodyKind::until_close);
  EXPECT_FALSE(h.keep_alive);
  // GIVEN 204, 304, 1xx or the answer to HEAD THEN no body whatever the fields say
  for (const char* bytes : {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                            "HTTP/1.1 100 Continue\r\n\r\n"}) {
    ASSERT_EQ(parse_response_head(bytes, h), ParseError::none) << bytes;
    EXPECT_EQ(h.body, BodyKind::none) << bytes;
    EXPECT_TRUE(h.keep_alive) << bytes;
  }
  ASSERT_EQ(parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", h, /*head_request=*/true),
            ParseError::none);
  EXPECT_EQ(h.body, BodyKind::none);
}

// Decodes `wire` in pieces cut at the given offsets, in place, as ClientStream does.
std::string decode_split(const std::string& wire, const std::vector<std::size_t>& cuts, bool& done, ParseError& error,
                         std::size_t& consumed) {
  ChunkedDecoder d(64);
  std::string out;
  std::string pending;
  std::size_t prev = 0;
  consumed = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(wire.size());
  for (const std::size_t end : ends) {
    pending += wire.substr(prev, end - prev);
    prev = end;
    const auto r = d.decode(pending.data(), pending.size(), pending.data(), pending.size());
    out += pending.substr(0, r.produced);
    pending.erase(0, r.consumed);
    consumed += r.consumed;
    error = r.error;
    if (r.error != ParseError::none || d.done()) break;
  }
  done = d.done();
  return out;
}

TEST(HttpParse, ChunkedBodiesDecodeInPlaceAtEverySplit) {
  // GIVEN a chunked body with an extension, upper-case hex, a trailer, and the next message after it
  const std::string body = "5;name=value\r\nhello\r\nA\r\n, chunked!\r\n1 \r\n?\r\n0\r\nX-Trailer: t\r\n\r\n";
  const std::string wire = body + "GET /next HTTP/1.1\r\n";
  // WHEN it is decoded whole, in every two-piece split, and a byte at a time
  std::vector<std::vector<std::size_t>> splits = {{}};
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) splits.push_back({cut});
  std::vector<std::size_t> bytewise;
  for (std::size_t i = 1; i < wire.size(); ++i) bytewise.push_back(i);
  splits.push_back(bytewise);
  for (const auto& cuts : splits) {
    bool done = false;
    ParseError error = ParseError::none;
    std::size_t consumed = 0;
    const std::string out = decode_split(wire, cuts, done, error, consumed);
    // THEN the data comes out whole, the body's end is found, and nothing after it is consumed
    ASSERT_EQ(error, ParseError::none) << cuts.size();
    ASSERT_TRUE(done) << cuts.size();
    ASSERT_EQ(out, "hello, chunked!?") << cuts.size();
    ASSERT_EQ(consumed, body.size()) << cuts.size();
  }
}

TEST(HttpParse, ChunkedDecoderStopsAtAFullOutputAndResumes) {
  // GIVEN an output of 3 bytes WHEN a 10-byte chunk is decoded THEN it comes out 3 bytes at a time
  const std::string wire = "a\r\n0123456789\r\n0\r\n\r\n";
  ChunkedDecoder d;
  std::string out;
  std::size_t at = 0;
  char buf[3];
  for (int i = 0; i < 20 && !d.done(); ++i) {
    const auto r = d.decode(wire.data() + at, wire.size() - at, buf, sizeof buf);
    ASSERT_EQ(r.error, ParseError::none);
    out.append(buf, r.produced);
    at += r.consumed;
  }
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "0123456789");
  EXPECT_EQ(d.total(), 10u);
  EXPECT_EQ(at, wire.size());
}

TEST(HttpParse, ChunkedDecoderRefusesMalformedFraming) {
  struct Case {
    std::string wire;
    ParseError error;
  };
  const std::vector<Case> cases = {
      {"x\r\n", ParseError::bad_chunk},                                          // no hex digit
      {"5\r\nhelloX\r\n", ParseError::bad_chunk},                                // data not followed by CRLF
      {"5\nhello\r\n", ParseError::bad_chunk},                                   // bare LF after the size
      {"1000000000000000\r\n", ParseError::bad_chunk},                           // 16 hex digits: over 2^60
      {"5;" + std::string(100, 'e') + "\r\n", ParseError::chunk_line_too_long},  // limit 64 below
      {"0\r\n" + std::string(100, 't') + "\r\n\r\n", ParseError::chunk_line_too_long},
      {"0\r\nX: a\nb\r\n\r\n", ParseError::bad_chunk},  // bare LF in a trailer
      {"3\x01\r\nabc\r\n", ParseError::bad_chunk},      // control character in the size line
  };
  for (const Case& c : cases) {
    ChunkedDecoder d(64);
    std::string buf = c.wire;
    const auto r = d.decode(buf.data(), buf.size(), buf.data(), buf.size());
    EXPECT_EQ(r.error, c.error) << c.wire;
    // AND the error sticks
    EXPECT_EQ(d.decode("0\r\n\r\n", 5, buf.data(), buf.size()).error, c.error) << c.wire;
  }
}

}  // namespace
}  // namespace disagg::http
