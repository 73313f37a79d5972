/*
 * The C tests' checks: CHECK(cond) and EXPECT(call, code) count every
 * check in `checks` and exit(1) on the first failure, printing the file,
 * the line, the expression and dplog's last error message.
 */
#ifndef DPLOG_TEST_CHECK_H
#define DPLOG_TEST_CHECK_H

#include <dplog.h>
#include <stdio.h>
#include <stdlib.h>

static int checks;

#define CHECK(cond)                                                            \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      char m_[512];                                                            \
      dplog_last_error(m_, sizeof m_, NULL);                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, m_);                                            \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define EXPECT(call, code)                                                     \
  do {                                                                         \
    dplog_result r_ = (call);                                                  \
    checks++;                                                                  \
    if (r_ != (code)) {                                                        \
      char m_[512];                                                            \
      dplog_last_error(m_, sizeof m_, NULL);                                   \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %s (last: %s)\n",  \
              __FILE__, __LINE__, #call, r_, dplog_strerror(r_), #code, m_);   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#endif
