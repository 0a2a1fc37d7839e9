// chat_template.h — the chat-template renderer (a Jinja subset) lands here next; see tokenizer.h for
// the tokenizer it feeds.
#pragma once
