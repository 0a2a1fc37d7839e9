#!/usr/bin/python3
"""Reference renderer for the chat-template differential test (test/engine/chat-template.test.ts).

Renders NDJSON chat requests with Python's jinja2 set up the way Hugging Face transformers sets it
up for apply_chat_template (what vLLM serves): an ImmutableSandboxedEnvironment with trim_blocks
and lstrip_blocks, the loopcontrols extension, a `{% generation %}` tag whose body renders as is
(transformers' AssistantTracker, inactive), a tojson filter that is json.dumps with
ensure_ascii=False, and the globals raise_exception and strftime_now.

Usage: render_chat_reference.py [--tokenizer DIR] [--template FILE] < requests   (one or both)
Each stdin line is the template context minus bos/eos; each stdout line is {"prompt": ...} or
{"error": ...}, like `disagg-engine render-chat`. Needs Debian's python3-jinja2 (3.1.x).
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: a call block whose caller output is returned unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_generation")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_generation(self, caller):
        return caller()


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(config, key):
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def main(argv):
    tokenizer_dir = None
    template_file = None
    args = argv[1:]
    while args:
        flag = args.pop(0)
        if flag == "--tokenizer" and args:
            tokenizer_dir = args.pop(0)
        elif flag == "--template" and args:
            template_file = args.pop(0)
        else:
            print(f"render_chat_reference: unknown flag {flag!r}", file=sys.stderr)
            return 2

    sources = {}
    bos = eos = None
    if tokenizer_dir is not None:
        with open(f"{tokenizer_dir}/tokenizer_config.json", encoding="utf-8") as f:
            config = json.load(f)
        bos = token_text(config, "bos_token")
        eos = token_text(config, "eos_token")
        chat_template = config.get("chat_template")
        if isinstance(chat_template, str):
            sources["default"] = chat_template
        elif isinstance(chat_template, list):
            for entry in chat_template:
                sources[entry["name"]] = entry["template"]
    if template_file is not None:
        with open(template_file, encoding="utf-8") as f:
            sources = {"default": f.read()}
    if not sources:
        print("render_chat_reference: no chat template", file=sys.stderr)
        return 1

    env = make_environment()
    templates = {}
    for name in ("default", "tool_use"):
        if name in sources:
            try:
                templates[name] = env.from_string(sources[name])
            except jinja2.exceptions.TemplateError as e:
                print(f"render_chat_reference: the {name} template does not compile: {e}", file=sys.stderr)
                return 1

    # Bytes in, split on \n only (text mode would also split on a lone \r), UTF-8 both ways.
    out = sys.stdout
    out.reconfigure(encoding="utf-8", newline="\n")
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8").rstrip("\n").rstrip("\r")
        if not line.strip(" \t"):
            continue
        try:
            context = json.loads(line)
        except ValueError:
            answer = {"error": "the request is not a JSON object"}
        else:
            if not isinstance(context, dict):
                answer = {"error": "the request is not a JSON object"}
            else:
                if bos is not None:
                    context.setdefault("bos_token", bos)
                if eos is not None:
                    context.setdefault("eos_token", eos)
                has_tools = context.get("tools") is not None
                template = templates.get("tool_use") if has_tools and "tool_use" in templates else templates.get("default", templates.get("tool_use"))
                try:
                    answer = {"prompt": template.render(**context)}
                except Exception as e:  # any failure of the template is an answer, as in the engine
                    answer = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
