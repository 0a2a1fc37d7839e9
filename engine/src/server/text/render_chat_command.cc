#include "text_command.h"

#include <iostream>

namespace disagg::text {

int run_render_chat_command(int, char**) {
  std::cerr << "render-chat: the chat-template renderer is not in this build yet\n";
  return 2;
}

}  // namespace disagg::text
