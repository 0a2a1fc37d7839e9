// RESP parser: framing, pipelining, limits, and that fragmentation never changes the result.
#include "resp_parser.h"

#include <gtest/gtest.h>

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
  std::vector<std::string> errors;  // rejected commands, in order (as "!<message>" entries too)
  std::vector<std::string> sequence;  // "C" for command, "R" for rejected, "P" for protocol error
};

// Feeds `input` in chunks whose sizes come from `cut`, the way a connection does: append to a
// buffer, parse until NeedMore, drop consumed/discardable bytes.
template <typename Cut>
Outcome feed(RespParser& parser, const std::string& input, Cut cut) {
  Outcome out;
  std::string buffer;
  std::size_t pos = 0;
  while (pos < input.size()) {
    const std::size_t n = std::min(cut(), input.size() - pos);
    buffer.append(input, pos, n);
    pos += n;
    for (;;) {
      const ParseStatus st = parser.parse(buffer);
      if (st == ParseStatus::kNeedMore) {
        buffer.erase(0, parser.take_discardable());
        break;
      }
      if (st == ParseStatus::kProtocolError) {
        out.sequence.push_back("P");
        out.errors.push_back(parser.error());
        return out;
      }
      if (st == ParseStatus::kRejected) {
        out.sequence.push_back("R");
        out.errors.push_back(parser.error());
      } else if (!parser.args().empty()) {
        out.sequence.push_back("C");
        Command c;
        for (auto a : parser.args()) c.emplace_back(a);
        out.commands.push_back(std::move(c));
      }
      buffer.erase(0, parser.consumed());
    }
  }
  return out;
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
}

TEST(RespParser, OversizedValueIsRejectedWithoutBufferingAndStreamContinues) {
  // GIVEN a 10 KiB limit, a 100 KiB SET, then a PING
  ParserLimits limits;
  limits.max_bulk_bytes = 10 * 1024;
  const std::string big(100 * 1024, 'x');
  const std::string input = encode({"SET", "k", big}) + encode({"PING"});
  // WHEN fed in 4 KiB pieces, tracking the largest buffer the caller had to keep
  RespParser parser(limits);
  std::string buffer;
  std::size_t max_buffer = 0;
  std::vector<std::string> seq;
  for (std::size_t pos = 0; pos < input.size(); pos += 4096) {
    buffer.append(input, pos, 4096);
    max_buffer = std::max(max_buffer, buffer.size());
    for (;;) {
      const ParseStatus st = parser.parse(buffer);
      if (st == ParseStatus::kNeedMore) {
        buffer.erase(0, parser.take_discardable());
        break;
      }
      ASSERT_NE(st, ParseStatus::kProtocolError) << parser.error();
      seq.push_back(st == ParseStatus::kRejected ? "R:" + parser.error() : std::string(parser.args()[0]));
      buffer.erase(0, parser.consumed());
    }
  }
  // THEN the SET is rejected with a message naming the limit, the PING still parses,
  // and the skipped value was never held in full
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_NE(seq[0].find("--max-value-bytes"), std::string::npos) << seq[0];
  EXPECT_EQ(seq[1], "PING");
  EXPECT_LE(max_buffer, 2 * 4096u);
}

TEST(RespParser, RequestByteLimitRejectsLargeMultiKeyCommands) {
  ParserLimits limits;
  limits.max_bulk_bytes = 1000;
  limits.max_request_bytes = 2500;
  const std::string v(900, 'v');
  const Outcome out = feed_all(encode({"MSET", "a", v, "b", v, "c", v}) + encode({"GET", "a"}), limits);
  ASSERT_EQ(out.sequence, (std::vector<std::string>{"R", "C"}));
  EXPECT_NE(out.errors[0].find("--max-request-bytes"), std::string::npos);
}

TEST(RespParser, MalformedInputIsAProtocolError) {
  // GIVEN several malformed streams
  const std::vector<std::string> bad = {
      "*1\r\n+PING\r\n",          // element is not a bulk string
      "*1\r\n$abc\r\n",           // non-numeric length
      "*1\r\n$-5\r\nPING\r\n",    // negative bulk length
      "*99999999999999\r\n",      // more arguments than allowed
      "*1\r\n$4\r\nPINGxx",       // missing CRLF after data
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

}  // namespace
}  // namespace disagg::kvstore
