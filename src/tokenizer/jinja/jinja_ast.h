// Jinja template syntax tree and the lexer/parser that build it.
// parse_template() turns template source into a Template (statements), with
// transformers' whitespace settings (trim_blocks, lstrip_blocks) and Jinja's
// `-`/`+` whitespace control. Errors name the construct and its line.
// Immutable after parsing; safe to render from several threads.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "jinja_value.h"

namespace tandem::tok::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // kwargs-like pairs: children alternate key, value
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (null = omitted)
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs)
    kTest,     // children[0] is [not] name(children[1..])
    kUnary,    // name in {"-", "+", "not"} children[0]
    kBinary,   // children[0] name children[1]
    kCond,     // children[0] if children[1] else children[2] (may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                                     // kText
  ExprPtr expr;                                         // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;       // kIf: (condition or null for else, body)
  std::vector<std::string> targets;                     // kFor/kSet names; kSet "ns.attr" uses attr
  std::string attr;                                     // kSet on a namespace attribute
  ExprPtr filter;                                       // kFor inline `if`
  Body body, else_body;                                 // kFor, kSetBlock, kMacro
  std::string macro_name;                               // kMacro
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
  bool recursive = false;
};

struct Template {
  Body body;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

Expected<std::shared_ptr<const Template>> parse_template(const std::string& source,
                                                         const LexOptions& options);

// Lexer tokens (exposed for the parser).
struct Token {
  enum class Kind {
    kText,
    kExprOpen,
    kExprClose,
    kStmtOpen,
    kStmtClose,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
  };
  Kind kind;
  std::string text;
  int line = 0;
  int64_t int_value = 0;
  double float_value = 0;
};
Expected<std::vector<Token>> lex_template(const std::string& source, const LexOptions& options);

}  // namespace tandem::tok::jinja
