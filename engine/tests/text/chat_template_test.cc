#include <gtest/gtest.h>

#include "chat_template.h"
