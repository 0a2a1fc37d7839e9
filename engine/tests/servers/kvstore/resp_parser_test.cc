// RESP parser: framing, pipelining, limits, and that fragmentation never changes the result.
#include "resp_parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace disagg::kvstore {
namespace {

using Command = std::vector<std::string>;

std::string encode(const Command& cmd) {
  std::string out = "*" + std::to_string(cmd.size()) + "\r\n";
  for (const auto& a : cmd) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

struct Outcome {
  std::vector<Command> commands;
  std::size_t payload_args = 0;       // arguments received into their own Blob (kPayload)
  std::vector<std::string> errors;    // rejected commands, in order (as "!<message>" entries too)
  std::vector<std::string> sequence;  // "C" for command, "R" for rejected, "P" for protocol error
  std::size_t max_buffer = 0;         // the most bytes the caller had to keep at once
};

// Feeds `input` in chunks whose sizes come from `cut`, the way a connection does: bytes of a
// payload in flight go straight into it, the rest is appended to a buffer; parse until NeedMore,
// drop consumed/discardable bytes (and, on kPayload, the bytes copied into the payload). Every
// argument must view the current buffer or its own Blob, and a rejected command has none.
// Every kAdmit is answered by `admit(declared_bytes)`: true accepts, false refuses the command.
template <typename Cut, typename Admit>
Outcome feed(RespParser& parser, const std::string& input, Cut cut, Admit admit) {
  Outcome out;
  std::string buffer;
  std::size_t pos = 0;
  while (pos < input.size()) {
    const std::size_t n = std::min(cut(), input.size() - pos);
    const std::size_t direct = std::min(n, parser.payload_missing());
    if (direct > 0) {
      std::memcpy(parser.payload_space(), input.data() + pos, direct);
      parser.commit_payload(direct);
    }
    buffer.append(input, pos + direct, n - direct);
    out.max_buffer = std::max(out.max_buffer, buffer.size());
    pos += n;
    for (;;) {
      const ParseStatus st = parser.parse(buffer);
      if (st == ParseStatus::kNeedMore) {
        buffer.erase(0, parser.take_discardable());
        break;
      }
      if (st == ParseStatus::kPayload) {
        buffer.resize(parser.payload_offset());
        continue;
      }
      if (st == ParseStatus::kAdmit) {
        out.sequence.push_back("A" + std::to_string(parser.declared_bytes()));
        if (!admit(parser.declared_bytes())) parser.refuse("refused " + std::to_string(parser.declared_bytes()));
        continue;
      }
      if (st == ParseStatus::kProtocolError) {
        out.sequence.push_back("P");
        out.errors.push_back(parser.error());
        return out;
      }
      if (st == ParseStatus::kRejected) {
        out.sequence.push_back("R");
        out.errors.push_back(parser.error());
        if (!parser.args().empty()) ADD_FAILURE() << "a rejected command left args";
      } else if (!parser.args().empty()) {
        out.sequence.push_back("C");
        Command c;
        for (auto a : parser.args()) c.emplace_back(a);
        out.commands.push_back(std::move(c));
        std::size_t next_payload = 0;
        for (std::size_t i = 0; i < parser.args().size(); ++i) {
          const std::string_view arg = parser.args()[i];
          const auto& payloads = parser.payloads();
          if (next_payload < payloads.size() && payloads[next_payload].index == i) {
            // A payload argument views its own Blob, never the buffer.
            if (arg.data() != payloads[next_payload++].blob.data()) ADD_FAILURE() << "payload arg not in its blob";
            ++out.payload_args;
          } else if (!parser.owns(arg) &&
                     (arg.data() < buffer.data() || arg.data() + arg.size() > buffer.data() + buffer.size())) {
            ADD_FAILURE() << "arg " << i << " views bytes outside the buffer";
          }
        }
      }
      buffer.erase(0, parser.consumed());
    }
  }
  return out;
}

template <typename Cut>
Outcome feed(RespParser& parser, const std::string& input, Cut cut) {
  return feed(parser, input, cut, [](std::size_t) { return true; });
}

Outcome feed_all(const std::string& input, ParserLimits limits = {}) {
  RespParser parser(limits);
  return feed(parser, input, [&] { return input.size(); });
}

TEST(RespParser, ParsesOneArrayCommand) {
  // GIVEN a SET in RESP array form
  const std::string input = encode({"SET", "key", "value"});
  // WHEN it is parsed in one piece
  const Outcome out = feed_all(input);
  // THEN exactly that command comes out
  ASSERT_EQ(out.commands.size(), 1u);
  EXPECT_EQ(out.commands[0], (Command{"SET", "key", "value"}));
}

TEST(RespParser, ParsesPipelinedCommandsInOrder) {
  // GIVEN three commands sent back to back
  const std::string input = encode({"PING"}) + encode({"GET", "a"}) + encode({"DEL", "a", "b"});
  // WHEN parsed
  const Outcome out = feed_all(input);
  // THEN all three come out in order
  ASSERT_EQ(out.commands.size(), 3u);
  EXPECT_EQ(out.commands[1], (Command{"GET", "a"}));
  EXPECT_EQ(out.commands[2], (Command{"DEL", "a", "b"}));
}

TEST(RespParser, ValuesAreBinarySafe) {
  // GIVEN a value containing CRLF, NUL and '*' / '$' bytes
  const std::string value("a\r\n*2\r\n$1\0b", 12);
  // WHEN parsed
  const Outcome out = feed_all(encode({"SET", "k", value}));
  // THEN the value is returned byte for byte
  ASSERT_EQ(out.commands.size(), 1u);
  EXPECT_EQ(out.commands[0][2], value);
}

TEST(RespParser, ParsesInlineCommands) {
  // GIVEN telnet-style input, including a blank line
  const Outcome out = feed_all("PING\r\n\r\nSET  a   b\nGET a\r\n");
  // THEN words are split on spaces and the blank line is skipped
  ASSERT_EQ(out.commands.size(), 3u);
  EXPECT_EQ(out.commands[0], (Command{"PING"}));
  EXPECT_EQ(out.commands[1], (Command{"SET", "a", "b"}));
  EXPECT_EQ(out.commands[2], (Command{"GET", "a"}));
}

TEST(RespParser, EmptyArrayIsSkipped) {
  const Outcome out = feed_all("*0\r\n" + encode({"PING"}));
  ASSERT_EQ(out.commands.size(), 1u);
  EXPECT_EQ(out.sequence, (std::vector<std::string>{"C"}));
}

TEST(RespParser, RandomFragmentationGivesIdenticalCommands) {
  // GIVEN a seeded stream of random commands with random binary arguments
  std::mt19937_64 rng(20240607);
  std::vector<Command> sent;
  std::string input;
  for (int i = 0; i < 400; ++i) {
    Command cmd;
    const int argc = 1 + static_cast<int>(rng() % 6);
    for (int a = 0; a < argc; ++a) {
      std::string arg(rng() % 3 == 0 ? rng() % 5000 : rng() % 20, '\0');
      for (char& c : arg) c = static_cast<char>(rng() % 256);
      cmd.push_back(std::move(arg));
    }
    input += encode(cmd);
    sent.push_back(std::move(cmd));
  }
  const Outcome whole = feed_all(input);
  ASSERT_EQ(whole.commands, sent);
  // WHEN the same bytes arrive split at random boundaries (several seeds) and one byte at a time
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 cuts(seed);
    RespParser parser;
    const Outcome split = feed(parser, input, [&] { return 1 + cuts() % 97; });
    // THEN the commands are identical
    ASSERT_EQ(split.commands, sent) << "seed " << seed;
  }
  RespParser parser;
  const Outcome bytewise = feed(parser, input, [] { return std::size_t{1}; });
  EXPECT_EQ(bytewise.commands, sent);
  // AND with large arguments received into their own Blobs, the commands are identical too
  ParserLimits direct;
  direct.direct_bulk_bytes = 100;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 cuts(seed);
    RespParser p(direct);
    const Outcome split = feed(p, input, [&] { return 1 + cuts() % 1500; });
    ASSERT_EQ(split.commands, sent) << "seed " << seed;
    EXPECT_GT(split.payload_args, 0u) << "seed " << seed;
  }
}

TEST(RespParser, OversizedBulkLengthIsAProtocolErrorAtItsHeader) {
  // GIVEN the default 512 MiB value limit and a SET whose header declares 2 GiB, with no data yet
  const std::string head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2147483648\r\n";
  // WHEN only the header is parsed
  const Outcome out = feed_all(head);
  // THEN it is refused at once, as Redis refuses one over proto-max-bulk-len, naming the limit
  ASSERT_EQ(out.sequence, (std::vector<std::string>{"P"}));
  EXPECT_EQ(out.errors[0].rfind("ERR Protocol error: invalid bulk length", 0), 0u) << out.errors[0];
  EXPECT_NE(out.errors[0].find("--max-value-bytes"), std::string::npos) << out.errors[0];
}

TEST(RespParser, OversizedValueIsRefusedBeforeItsBytesAreBuffered) {
  // GIVEN a 10 KiB limit and a 100 KiB SET fed in 4 KiB pieces
  ParserLimits limits;
  limits.max_bulk_bytes = 10 * 1024;
  RespParser parser(limits);
  const Outcome out =
      feed(parser, encode({"SET", "k", std::string(100 * 1024, 'x')}), [] { return std::size_t{4096}; });
  // THEN the first piece (the header) ends the stream, with at most that piece buffered
  ASSERT_EQ(out.sequence, (std::vector<std::string>{"P"}));
  EXPECT_LE(out.max_buffer, 4096u);
}

TEST(RespParser, RequestByteLimitIsAProtocolErrorAtTheHeaderThatPassesIt) {
  ParserLimits limits;
  limits.max_bulk_bytes = 1000;
  limits.max_request_bytes = 2500;
  const std::string v(900, 'v');
  const Outcome out = feed_all(encode({"MSET", "a", v, "b", v, "c", v}) + encode({"GET", "a"}), limits);
  ASSERT_EQ(out.sequence, (std::vector<std::string>{"P"}));
  EXPECT_NE(out.errors[0].find("--max-request-bytes"), std::string::npos);
}

TEST(RespParser, LargeCommandsAskForAdmissionBeforeTheirBytes) {
  // GIVEN admission above 1000 bytes, a small GET, then an MSET whose values pass it one by one
  ParserLimits limits;
  limits.admit_above = 1000;
  const std::string v(600, 'v');
  const std::string input = encode({"GET", "a"}) + encode({"MSET", "a", v, "b", v, "c", v});
  // WHEN fed whole, or one byte at a time, admitting everything
  for (std::size_t piece : {input.size(), std::size_t{1}}) {
    RespParser parser(limits);
    const Outcome out = feed(parser, input, [&] { return piece; });
    // THEN the GET never asks; the MSET asks at each header once past 1000 declared bytes
    // (4+1+600+1+600 = 1206, key "c" 1207, its value 1807), and both commands come out whole
    EXPECT_EQ(out.sequence, (std::vector<std::string>{"C", "A1206", "A1207", "A1807", "C"})) << piece;
    ASSERT_EQ(out.commands.size(), 2u);
    EXPECT_EQ(out.commands[1][6], v);
  }
}

TEST(RespParser, RefusedCommandIsSkippedUnbufferedAndTheStreamGoesOn) {
  // GIVEN admission above 4 KiB and a 1 MiB SET refused when it asks, then a PING
  ParserLimits limits;
  limits.admit_above = 4096;
  limits.direct_bulk_bytes = 1024;
  RespParser parser(limits);
  const std::string input = encode({"SET", "k", std::string(1 << 20, 'x')}) + encode({"PING"});
  // WHEN fed in 8 KiB pieces
  const Outcome out = feed(
      parser, input, [] { return std::size_t{8192}; }, [](std::size_t) { return false; });
  // THEN the SET ends as rejected with the refusal's message, the PING parses, and the caller never
  // held more than a piece of the value
  EXPECT_EQ(out.sequence, (std::vector<std::string>{"A1048580", "R", "C"}));
  EXPECT_EQ(out.errors[0], "refused 1048580");
  EXPECT_EQ(out.commands[0][0], "PING");
  EXPECT_LE(out.max_buffer, 2 * 8192u);
  EXPECT_EQ(out.payload_args, 0u);
}

TEST(RespParser, MalformedInputIsAProtocolError) {
  // GIVEN several malformed streams
  const std::vector<std::string> bad = {
      "*1\r\n+PING\r\n",            // element is not a bulk string
      "*1\r\n$abc\r\n",             // non-numeric length
      "*1\r\n$-5\r\nPING\r\n",      // negative bulk length
      "*99999999999999\r\n",        // more arguments than allowed
      "*1\r\n$4\r\nPINGxx",         // missing CRLF after data
      "*1" + std::string(40, '1'),  // header line without end
  };
  for (const std::string& input : bad) {
    // WHEN parsed
    const Outcome out = feed_all(input);
    // THEN it is a protocol error with a Redis-style message
    ASSERT_EQ(out.sequence, (std::vector<std::string>{"P"})) << input;
    EXPECT_EQ(out.errors[0].rfind("ERR Protocol error", 0), 0u);
  }
}

TEST(RespParser, TooLongInlineLineIsAProtocolError) {
  ParserLimits limits;
  limits.max_inline_bytes = 64;
  const Outcome out = feed_all(std::string(100, 'a'), limits);
  EXPECT_EQ(out.sequence, (std::vector<std::string>{"P"}));
}

TEST(RespParser, WantedHintCoversALargeValue) {
  // GIVEN only the header of a 1 MiB SET value
  RespParser parser;
  const std::string head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n";
  // WHEN parsed
  ASSERT_EQ(parser.parse(head), ParseStatus::kNeedMore);
  // THEN the parser asks for the whole command at once, so the buffer grows once
  EXPECT_EQ(parser.wanted(), head.size() + 1048576 + 2);
}

TEST(RespParser, LargeArgumentIsReceivedIntoItsOwnBlob) {
  // GIVEN direct payloads from 1 KiB, and a SET whose 4 KiB value has only 10 bytes buffered
  ParserLimits limits;
  limits.direct_bulk_bytes = 1024;
  RespParser parser(limits);
  std::string value(4096, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 7 + 3);
  const std::string head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4096\r\n";
  std::string buffer = head + value.substr(0, 10);
  // WHEN parsed
  ASSERT_EQ(parser.parse(buffer), ParseStatus::kPayload);
  // THEN the parser took the 10 bytes and asks for the other 4086 straight into the payload
  EXPECT_EQ(parser.payload_offset(), head.size());
  ASSERT_EQ(parser.payload_missing(), 4086u);
  buffer.resize(parser.payload_offset());
  std::memcpy(parser.payload_space(), value.data() + 10, 4000);
  parser.commit_payload(4000);
  EXPECT_EQ(parser.parse(buffer), ParseStatus::kNeedMore);
  std::memcpy(parser.payload_space(), value.data() + 4010, 86);
  parser.commit_payload(86);
  EXPECT_EQ(parser.payload_missing(), 0u);
  EXPECT_EQ(parser.parse(buffer), ParseStatus::kNeedMore);  // its CRLF is still to come
  buffer += "\r\n";
  ASSERT_EQ(parser.parse(buffer), ParseStatus::kCommand);
  // AND the command carries the value as a Blob the store can keep without copying
  EXPECT_EQ(parser.consumed(), buffer.size());
  ASSERT_EQ(parser.args().size(), 3u);
  EXPECT_EQ(parser.args()[2], value);
  ASSERT_EQ(parser.payloads().size(), 1u);
  EXPECT_EQ(parser.payloads()[0].index, 2u);
  EXPECT_EQ(parser.payloads()[0].blob.view(), value);
  parser.release_payloads();
  EXPECT_TRUE(parser.payloads().empty());
}

TEST(RespParser, PayloadWithoutCrlfIsAProtocolError) {
  ParserLimits limits;
  limits.direct_bulk_bytes = 16;
  RespParser parser(limits);
  std::string buffer = "*2\r\n$4\r\nECHO\r\n$32\r\n";
  ASSERT_EQ(parser.parse(buffer), ParseStatus::kPayload);
  std::memset(parser.payload_space(), 'x', 32);
  parser.commit_payload(32);
  buffer += "xx";  // where CRLF belongs
  EXPECT_EQ(parser.parse(buffer), ParseStatus::kProtocolError);
}

TEST(RespParser, RefusedCommandDropsItsPayloads) {
  // GIVEN an MSET whose first value is received as a payload and whose second is refused admission
  ParserLimits limits;
  limits.direct_bulk_bytes = 64;
  limits.admit_above = 300;
  RespParser parser(limits);
  const std::string input = encode({"MSET", "a", std::string(200, 'a'), "b", std::string(200, 'b')}) + encode({"PING"});
  // WHEN it is fed in small pieces
  const Outcome out = feed(
      parser, input, [] { return std::size_t{50}; }, [](std::size_t) { return false; });
  // THEN the MSET is rejected, no payload survives it, and the stream goes on
  EXPECT_EQ(out.sequence, (std::vector<std::string>{"A406", "R", "C"}));
  EXPECT_EQ(out.payload_args, 0u);
  EXPECT_TRUE(parser.payloads().empty());
}

TEST(RespParser, RefusedCommandLeavesNoStaleArgs) {
  // GIVEN a two-letter inline command, then one whose 4097-byte argument is refused admission
  ParserLimits limits;
  limits.admit_above = 4096;
  RespParser parser(limits);
  const std::string input = "ab\n" + encode({std::string(4097, 'x')});
  // WHEN it is fed one byte at a time, dropping consumed and discardable bytes
  const Outcome out = feed(
      parser, input, [] { return std::size_t{1}; }, [](std::size_t) { return false; });
  // THEN both are seen, and args() never viewed bytes outside the current buffer: the rejected
  // command's are empty, not the inline command's views into bytes already consumed (feed checks)
  EXPECT_EQ(out.sequence, (std::vector<std::string>{"C", "A4097", "R"}));
}

TEST(RespParser, InlineQuotesSplitAsRedisDoes) {
  // GIVEN inline lines with quotes and escapes (expected splits checked against redis-server 7.0)
  const std::vector<std::pair<std::string, Command>> cases = {
      {"SET k \"hello world\"\r\n", {"SET", "k", "hello world"}},
      {"SET k 'it\\'s'\r\n", {"SET", "k", "it's"}},
      {"SET k \"a\\x41\\n\\t\\\"q\\\\\"\n", {"SET", "k", "aA\n\t\"q\\"}},
      {"ECHO ab\"c d\"\r\n", {"ECHO", "abc d"}},
      {"SET k \"\"\r\n", {"SET", "k", ""}},
      {"  GET\t'k'  \r\n", {"GET", "k"}},
      {"ECHO 'a\\nb'\n", {"ECHO", "a\\nb"}},
      {"ECHO \"\\xzz\"\n", {"ECHO", "xzz"}},
      {"''\n", {""}},  // only empty arguments: they view the parser's (empty) storage
  };
  for (const auto& [line, expected] : cases) {
    // WHEN parsed whole and one byte at a time
    RespParser parser;
    const Outcome bytewise = feed(parser, line, [] { return std::size_t{1}; });
    const Outcome whole = feed_all(line);
    // THEN each gives Redis's arguments
    ASSERT_EQ(whole.commands.size(), 1u) << line;
    EXPECT_EQ(whole.commands[0], expected) << line;
    EXPECT_EQ(bytewise.commands, whole.commands) << line;
  }
}

TEST(RespParser, UnbalancedInlineQuotesAreAProtocolError) {
  for (const std::string line :
       {"SET k \"abc\r\n", "SET k 'abc\r\n", "SET k \"abc\"def\r\n", "SET k 'a'b\n", "ECHO \"trailing\\\"\n"}) {
    const Outcome out = feed_all(line + "PING\r\n");
    ASSERT_EQ(out.sequence, (std::vector<std::string>{"P"})) << line;
    EXPECT_EQ(out.errors[0], "ERR Protocol error: unbalanced quotes in request") << line;
  }
}

}  // namespace
}  // namespace disagg::kvstore
