#!/usr/bin/python3
"""Reference renderer for the chat-template differential test (test/engine/chat-template.test.ts).

Renders NDJSON chat requests with Python's jinja2 set up the way Hugging Face transformers sets it
up for apply_chat_template (what vLLM serves): an ImmutableSandboxedEnvironment with trim_blocks
and lstrip_blocks, the loopcontrols extension, a `{% generation %}` tag whose body renders as is
(transformers' AssistantTracker, inactive), a tojson filter that is json.dumps with
ensure_ascii=False, and the globals raise_exception and strftime_now.

Usage: render_chat_reference.py [--tokenizer DIR] [--template FILE] [--openai] < requests
Each stdin line is the template context minus bos/eos; each stdout line is {"prompt": ...} or
{"error": ...}, like `disagg-engine render-chat`. Needs Debian's python3-jinja2 (3.1.x).

With --openai, each line is an OpenAI chat completions request body instead, prepared the way
vLLM prepares it before calling apply_chat_template (prepare_openai_request below: an independent
transcription of vLLM's source, written from reading it, not copied), and answers add
"content_format", the format vLLM detects on jinja2's AST of the template. Sources read, in
vllm-project/vllm: vllm/renderers/hf.py (02e64f58, e7ad92e5: _detect_content_format; the newest
stored version: _detect_developer_role_support, _convert_developer_to_system,
_consolidate_system_messages), vllm/renderers/chat_utils/parse_chat_message_content.py,
parse_chat_message.py (be90fe16) and mm_parser_map.py (5e29e21a), the same logic as
vllm/entrypoints/chat_utils.py (001eadcf); vllm/entrypoints/openai/engine/protocol.py (d7e52523:
OpenAIBaseModel extra="allow", FunctionDefinition), chat_completion/protocol.py (d5dba2d7:
ChatCompletionToolsParam, build_chat_params) and vllm/renderers/params.py (1aa021e8: merge_kwargs).
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


# ---- vLLM's content format detection, on jinja2's own AST


class _Unanalysable(Exception):
    """Where vLLM's detection hits a failed assertion (a non-name target) and falls back to "string"."""


def _loads_name(node, name):
    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name == name


def _refers_to(node, name, key=None):
    """`name` (or `name[key]` / `name.key`), possibly under filters, tests and slices."""
    while True:
        if isinstance(node, nodes.Filter):
            if node.node is None:
                return False
            node = node.node
        elif isinstance(node, nodes.Test):
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
            node = node.node
        else:
            break
    if key is None:
        return _loads_name(node, name)
    if isinstance(node, nodes.Getitem):
        return _loads_name(node.node, name) and isinstance(node.arg, nodes.Const) and node.arg.value == key
    if isinstance(node, nodes.Getattr):
        return _loads_name(node.node, name) and node.attr == key
    return False


def detect_content_format(env, source):
    try:
        root = env.parse(source)
    except Exception:
        return "string"
    try:
        # names bound to messages by `set`, transitively (vLLM's breadth-first search has no
        # visited set, so aliases that refer to each other would keep it going; this one stops)
        lists = ["messages"]
        for name in lists:
            for assign in root.find_all(nodes.Assign):
                if _refers_to(assign.node, name):
                    if not isinstance(assign.target, nodes.Name):
                        raise _Unanalysable()
                    if assign.target.name not in lists:
                        lists.append(assign.target.name)
        message_names = []
        for loop in root.find_all(nodes.For):
            for name in lists:
                if _refers_to(loop.iter, name):
                    if not isinstance(loop.target, nodes.Name):
                        raise _Unanalysable()
                    message_names.append(loop.target.name)
                    break
        for loop in root.find_all(nodes.For):
            for name in message_names:
                if _refers_to(loop.iter, name, "content"):
                    if not isinstance(loop.target, nodes.Name):
                        raise _Unanalysable()
                    return "openai"
        return "string"
    except _Unanalysable:
        return "string"


# ---- vLLM's preparation of the request's messages and tools

PART_TYPES = {
    "text": "text", "input_text": "text", "output_text": "text", "thinking": "thinking", "refusal": "refusal",
    "tool_reference": "name", "prompt_embeds": "data",
    "input_image": None, "image_url": None, "image_embeds": None, "audio_embeds": None, "video_embeds": None,
    "image_pil": None, "audio_url": None, "input_audio": None, "video_url": None,
}
DIRECT_KEYS = ["image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds", "prompt_embeds", "audio_url",
               "input_audio", "video_url", "tool_reference"]
KNOWN_PART_KEYS = {"type", "text", "image_url", "input_audio", "file", "refusal", "audio_url", "video_url", "image_pil",
                   "uuid", "image_embeds", "audio_embeds", "video_embeds", "data", "thinking", "closed", "name"}
TEXT_KINDS = {"text", "input_text", "output_text", "refusal", "thinking"}
BILLING_HEADER = "x-anthropic-billing-header"


class RequestError(Exception):
    pass


def _strip_billing_header(parts):
    out = []
    for part in parts:
        if isinstance(part, str):
            text = part
        elif isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
        else:
            text = None
        if not (isinstance(text, str) and text.startswith(BILLING_HEADER)):
            out.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            out.append(rest if isinstance(part, str) else {**part, "text": rest})
    return out


def _part(part, openai):
    """One content part: a dict ("openai"), a string ("string"), or None when it adds nothing."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if openai else part
    if not isinstance(part, dict):
        raise RequestError("a content part must be a string or an object")
    kind = part.get("type")
    uuid = part.get("uuid")
    if isinstance(kind, str) and kind in PART_TYPES and uuid is None:
        key = PART_TYPES[kind]
        value = part.get(key) if key else "media"
    elif kind is None or uuid is not None:
        kind = next((k for k in DIRECT_KEYS if k in part), None)
        if kind is None:
            raise RequestError("Missing 'type' field in multimodal part.")
        value = part.get("name") if kind == "tool_reference" else part.get("data") if kind == "prompt_embeds" else "media"
    elif not isinstance(kind, str):
        raise RequestError("Invalid 'type' field in multimodal part.")
    else:
        raise RequestError(f"Unsupported chat content part type: {kind!r}")
    if kind in ("text", "refusal") and value is None:
        return None
    extras = {k: v for k, v in part.items() if k not in KNOWN_PART_KEYS}
    if kind in TEXT_KINDS:
        if value is not None and not isinstance(value, str):
            raise RequestError("a text part's text must be a string")
        return {"type": "text", "text": value, **extras} if openai else value
    if kind == "tool_reference":
        return {"type": "tool_reference", "name": value} if openai else value
    if kind == "prompt_embeds":
        if not value:
            raise RequestError("prompt_embeds content part requires a non-empty `data` field")
        return {"type": "text", "text": "<prompt_embeds>"} if openai else "<prompt_embeds>"
    if not openai:
        return None  # the model's own placeholder, which a text model does not have
    modality = "audio" if "audio" in kind else "video" if "video" in kind else "image"
    return {"type": modality, **extras}


def _message(message, openai):
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise RequestError("a message needs a string 'role'")
    role = message["role"]
    content = message.get("content")
    if content is None:
        parts = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        raise RequestError("content must be a string, a list of parts or null")
    if role == "system":
        parts = _strip_billing_header(parts)
    items = [p for p in (_part(part, openai) for part in parts) if p]
    out = {"role": role, "content": items if openai else "\n".join(items)}
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise RequestError("tool_calls must be a list")
            out["tool_calls"] = list(calls)
        reasoning = message.get("reasoning")
        if reasoning is not None:
            out["reasoning"] = reasoning
            out["reasoning_content"] = reasoning
    elif role == "tool":
        if "tool_call_id" in message:
            out["tool_call_id"] = message["tool_call_id"]
        if isinstance(out["content"], list):
            if not any(isinstance(i, dict) and i.get("type") != "text" for i in out["content"]):
                texts = [i.get("text", "") for i in out["content"] if isinstance(i, dict) and i.get("type") == "text"]
                out["content"] = "\n".join(t if isinstance(t, str) else "" for t in texts)
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    if isinstance(message.get("task"), str):
        out["task"] = message["task"]
    if role == "developer":
        out["tools"] = message.get("tools")
    return out


def _tool_calls(conversation):
    for message in conversation:
        if message["role"] != "assistant" or not isinstance(message.get("tool_calls"), list):
            continue
        if not message["tool_calls"]:
            del message["tool_calls"]
            continue
        calls = []
        for call in message["tool_calls"]:
            if not isinstance(call, dict):
                raise RequestError("assistant tool_calls entries must be objects.")
            function = call.get("function")
            if call.get("type", "function") != "function" or not isinstance(function, dict):
                raise RequestError("chat completions only support assistant tool_calls of type 'function'.")
            args = function.get("arguments")
            parsed = {}
            if args:
                if isinstance(args, dict):
                    parsed = args
                elif isinstance(args, str):
                    try:
                        decoded = json.loads(args)
                    except json.JSONDecodeError:
                        decoded = None
                    parsed = decoded if isinstance(decoded, dict) else {}
            calls.append({**call, "function": {**function, "arguments": parsed}})
        message["tool_calls"] = calls


def _developer_to_system(conversation):
    converted = []
    for m in conversation:
        if m["role"] == "developer":
            m = {k: v for k, v in m.items() if k != "tools"}
            m["role"] = "system"
        converted.append(m)
    texts, others, merge = [], [], False
    for i, m in enumerate(converted):
        if m["role"] != "system":
            others.append(m)
            continue
        merge = merge or i > 0 or bool(texts)
        c = m.get("content", "")
        if isinstance(c, list):
            c = "\n".join(p["text"] if isinstance(p, dict) else p
                          for p in c if (isinstance(p, dict) and "text" in p) or isinstance(p, str))
        if c:
            texts.append(c)
    if not merge:
        return converted
    return [{"role": "system", "content": "\n\n".join(texts)}] + others


def _dump_tools(tools):
    if not isinstance(tools, list):
        raise RequestError("tools must be a list")
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise RequestError("a tool must be {type: function, function: {...}}")
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise RequestError("a tool's function needs a string name")
        if fn.get("description") is not None and not isinstance(fn["description"], str):
            raise RequestError("description must be a string")
        if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
            raise RequestError("parameters must be an object")
        dumped_fn = {"name": fn["name"], "description": fn.get("description"), "parameters": fn.get("parameters")}
        dumped_fn.update((k, v) for k, v in fn.items() if k not in dumped_fn)
        dumped = {"type": "function", "function": dumped_fn}
        dumped.update((k, v) for k, v in tool.items() if k not in dumped)
        out.append(dumped)
    return out


def prepare_openai_request(body, content_format, source):
    """The template context vLLM builds for an OpenAI chat request (minus the special tokens)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    openai = content_format == "openai"
    conversation = [_message(m, openai) for m in messages]
    _tool_calls(conversation)
    if any(m["role"] == "developer" for m in conversation) and not ('"developer"' in source or "'developer'" in source):
        conversation = _developer_to_system(conversation)
    # (a value that is not a boolean: pydantic coerces or refuses it; the engine and this take the default)
    add_generation_prompt = body.get("add_generation_prompt", True)
    add_generation_prompt = add_generation_prompt if isinstance(add_generation_prompt, bool) else True
    continue_final = body.get("continue_final_message", False)
    continue_final = continue_final if isinstance(continue_final, bool) else False
    if add_generation_prompt and continue_final:
        raise RequestError("continue_final_message and add_generation_prompt cannot both be true")
    # (vLLM's pydantic model refuses a chat_template_kwargs that is not an object; the engine
    # ignores it, and so does this)
    kwargs = dict(body["chat_template_kwargs"]) if isinstance(body.get("chat_template_kwargs"), dict) else {}
    # the request's own fields override chat_template_kwargs unless null (merge_kwargs)
    for key in ("add_generation_prompt", "continue_final_message", "documents", "reasoning_effort"):
        if key in ("add_generation_prompt", "continue_final_message") or body.get(key) is not None:
            kwargs[key] = {"add_generation_prompt": add_generation_prompt,
                           "continue_final_message": continue_final}.get(key, body.get(key))
    kwargs.pop("continue_final_message")  # apply_chat_template's own parameter
    tools = body.get("tools")
    if tools == [] and body.get("tool_choice") == "required":
        tools = None  # ChatCompletionRequest.check_tool_usage drops them
    kwargs["messages"] = conversation
    kwargs["tools"] = None if tools is None else _dump_tools(tools)
    return kwargs, continue_final


def cut_after_final_message(context, prompt):
    """transformers' continue_final_message: the render ends with the final message's text."""
    final = context["messages"][-1]["content"]
    if isinstance(final, list):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                break
        else:
            raise RequestError("continue_final_message: no text in the final message")
    final = (final or "").strip()
    if final not in prompt:
        raise RequestError("continue_final_message: the final message is not in the prompt")
    return prompt[: prompt.rindex(final) + len(final)]


def token_text(config, key):
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def main(argv):
    tokenizer_dir = None
    template_file = None
    openai_requests = False
    args = argv[1:]
    while args:
        flag = args.pop(0)
        if flag == "--tokenizer" and args:
            tokenizer_dir = args.pop(0)
        elif flag == "--template" and args:
            template_file = args.pop(0)
        elif flag == "--openai":
            openai_requests = True
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
    formats = {name: detect_content_format(env, text) for name, text in sources.items()}
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
                has_tools = context.get("tools") is not None
                if openai_requests and context.get("tools") == [] and context.get("tool_choice") == "required":
                    has_tools = False
                name = "tool_use" if has_tools and "tool_use" in templates else "default" if "default" in templates else "tool_use"
                template = templates[name]
                if openai_requests:
                    fmt = formats[name]
                    try:
                        body, continue_final = prepare_openai_request(context, fmt, sources[name])
                    except Exception as e:  # a request vLLM refuses: an error answer, as in the engine
                        answer = {"error": f"{type(e).__name__}: {e}", "content_format": fmt}
                    else:
                        special = {}
                        if bos is not None:
                            special["bos_token"] = bos
                        if eos is not None:
                            special["eos_token"] = eos
                        context = {**special, **body}
                        try:
                            prompt = template.render(**context)
                            if continue_final:
                                prompt = cut_after_final_message(context, prompt)
                            answer = {"prompt": prompt, "content_format": fmt}
                        except Exception as e:  # any failure of the template is an answer, as in the engine
                            answer = {"error": f"{type(e).__name__}: {e}", "content_format": fmt}
                else:
                    if bos is not None:
                        context.setdefault("bos_token", bos)
                    if eos is not None:
                        context.setdefault("eos_token", eos)
                    try:
                        answer = {"prompt": template.render(**context)}
                    except Exception as e:  # any failure of the template is an answer, as in the engine
                        answer = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
