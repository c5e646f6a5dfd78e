#pragma once
// Errors of brickdl.
//
// Two kinds, kept apart on purpose:
//  - UserError: the input is wrong (YAML, graph, CLI flag, database). It names where
//    (file, line, column, key) and what would be valid. Programs print it and exit 2.
//  - InternalError: an invariant of brickdl broke (BRICKDL_CHECK). That is a bug.
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace brickdl {

// Where in an input a problem sits. Lines and columns are 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key; // dotted path of the key, e.g. "search.brick_sizes[2]"

  std::string str() const;
};

class UserError : public std::runtime_error {
public:
  explicit UserError(const std::string& message) : std::runtime_error(message), message_(message) {}
  UserError(const SourceLocation& where, const std::string& message)
      : std::runtime_error(format(where, message)), where_(where), message_(message) {}
  // An error at `where` whose text (`shown`) leaves the place out: a place in a text the user
  // never wrote (core/experiment.h parse_bare_model) is kept for callers, not printed.
  UserError(const SourceLocation& where, const std::string& message, const std::string& shown)
      : std::runtime_error(shown), where_(where), message_(message) {}

  const SourceLocation& where() const { return where_; }
  // The message without the location prefix.
  const std::string& bare_message() const { return message_; }

private:
  static std::string format(const SourceLocation& where, const std::string& message);
  SourceLocation where_;
  std::string message_;
};

// A graph whose shapes do not fit; a UserError that names the layer and both shapes.
class ShapeError : public UserError {
public:
  using UserError::UserError;
};

class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

// Exit status of the command-line programs for bad input.
inline constexpr int kExitUserError = 2;
inline constexpr int kExitInternalError = 3;

// Levenshtein distance; used to suggest the nearest valid key or name.
int edit_distance(const std::string& a, const std::string& b);
// " (did you mean 'x'?)" when a candidate is close enough, else "".
std::string did_you_mean(const std::string& word, const std::initializer_list<const char*>& valid);
std::string did_you_mean(const std::string& word, const std::vector<std::string>& valid);
// "a, b, c" for error messages.
std::string join_names(const std::vector<std::string>& names, const std::string& sep = ", ");

// `text` as it may be shown on a terminal: text read from a file (a database, an ONNX node name,
// a YAML value) may hold control bytes that a terminal would act on (ESC sequences, C1 controls,
// carriage returns) or bytes that are no UTF-8. Printable ASCII and well-formed UTF-8 characters
// other than controls pass unchanged; every other byte becomes "\xNN" (two hex digits), a tab
// "\t"; a newline stays one when `keep_newlines`, else becomes "\n".
std::string printable(std::string_view text, bool keep_newlines = false);

namespace detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line,
                               const std::string& msg);
} // namespace detail

} // namespace brickdl

#define BRICKDL_CHECK(cond, ...)                                                                   \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::ostringstream brickdl_check_os_;                                                        \
      brickdl_check_os_ << "" __VA_ARGS__;                                                         \
      ::brickdl::detail::check_failed(#cond, __FILE__, __LINE__, brickdl_check_os_.str());         \
    }                                                                                              \
  } while (0)
