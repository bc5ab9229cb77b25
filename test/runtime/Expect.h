//===- Expect.h - gtest assertions the runtime tests share ------*- C++ -*-===//
#ifndef BRAID_TEST_RUNTIME_EXPECT_H
#define BRAID_TEST_RUNTIME_EXPECT_H

#include "runtime/Status.h"

#include <gtest/gtest.h>

#include <string>

/// `msg` (a std::string) contains `part`; on failure the whole message shows.
#define EXPECT_HAS(msg, part)                                                  \
  EXPECT_NE((msg).find(part), std::string::npos) << (msg)

/// `expr` is an ok braid::rt::Status; on failure its message shows.
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::braid::rt::Status braidTestStatus_ = (expr);                             \
    ASSERT_TRUE(braidTestStatus_.isOk()) << braidTestStatus_.message();        \
  } while (0)

#endif // BRAID_TEST_RUNTIME_EXPECT_H
