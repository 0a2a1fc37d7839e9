#include "chat_template.h"
