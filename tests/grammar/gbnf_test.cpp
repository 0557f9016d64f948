// GBNF parsing and the byte automaton, on hand-checked accept/reject strings.
#include <gtest/gtest.h>

#include "test_util.h"

namespace tandem::grammar {
namespace {

using testing::compile;
using testing::verdict;

TEST(Gbnf, LiteralsClassesAndRepetition) {
  auto g = compile(R"(root ::= "a" [b-d]+ "e"?)");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "ab"), 'a');
  EXPECT_EQ(verdict(g, "abcd"), 'a');
  EXPECT_EQ(verdict(g, "abde"), 'a');
  EXPECT_EQ(verdict(g, "a"), 'p');
  EXPECT_EQ(verdict(g, ""), 'p');
  EXPECT_EQ(verdict(g, "ae"), 'x');
  EXPECT_EQ(verdict(g, "abee"), 'x');
  EXPECT_EQ(verdict(g, "x"), 'x');
}

TEST(Gbnf, BoundedRepetition) {
  auto g = compile(R"(root ::= "x"{2,3} "y"{1} "z"{2,})");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "xxyzz"), 'a');
  EXPECT_EQ(verdict(g, "xxxyzzzz"), 'a');
  EXPECT_EQ(verdict(g, "xyzz"), 'x');
  EXPECT_EQ(verdict(g, "xxxxyzz"), 'x');
  EXPECT_EQ(verdict(g, "xxyz"), 'p');
}

// An empty item repeated (fuzz finding: `""*` read the last symbol of an empty
// sequence) is the empty string, whatever the repetition.
TEST(Gbnf, AnEmptyItemRepeatedIsEmpty) {
  auto g = compile(R"(root ::= "a" ""* ""+ (""){2,3} ""? "b")");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "ab"), 'a');
  EXPECT_EQ(verdict(g, "a"), 'p');
  EXPECT_EQ(verdict(g, "abb"), 'x');
  ASSERT_NE(compile(R"(root ::= ""*)"), nullptr);
}

TEST(Gbnf, RulesGroupsAlternativesAndComments) {
  auto g = compile(
      "# a comment\n"
      "root ::= greeting (\", \" name)*\n"
      "greeting ::= \"hi\"\n"
      "  | \"hello\"  # trailing comment\n"
      "name ::= [A-Z] [a-z]*\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "hi"), 'a');
  EXPECT_EQ(verdict(g, "hello, Ann, Bo"), 'a');
  EXPECT_EQ(verdict(g, "hello, "), 'p');
  EXPECT_EQ(verdict(g, "hello, ann"), 'x');
}

TEST(Gbnf, CodePointClassesLowerToUtf8) {
  auto g = compile("root ::= [α-ω]+");  // U+03B1..U+03C9, two bytes each
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "αβω"), 'a');
  EXPECT_EQ(verdict(g, "\xce"), 'p');  // half of a character
  EXPECT_EQ(verdict(g, "a"), 'x');
  EXPECT_EQ(verdict(g, "Ω"), 'x');  // U+03A9 is outside
  auto neg = compile(R"(root ::= [^a"]+)");
  ASSERT_NE(neg, nullptr);
  EXPECT_EQ(verdict(neg, "b€😀"), 'a');
  EXPECT_EQ(verdict(neg, "ba"), 'x');
  EXPECT_EQ(verdict(neg, "\xed\xa0\x80"), 'x');  // a surrogate is not UTF-8
  EXPECT_EQ(verdict(neg, "\xc0\x80"), 'x');      // overlong NUL
  auto any = compile(R"(root ::= . .)");
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(verdict(any, "a\xf0\x9f\x98\x80"), 'a');
  EXPECT_EQ(verdict(any, "a"), 'p');
}

TEST(Gbnf, Escapes) {
  auto g = compile(R"(root ::= "\"\\\n\x41\u00e9" [\]\-])");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "\"\\\nAé]"), 'a');
  EXPECT_EQ(verdict(g, "\"\\\nAé-"), 'a');
}

TEST(Gbnf, LeftRecursionIsRefusedAndNullableStarsWork) {
  auto left = parse_gbnf(R"(root ::= root "a" | "b")");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.status().message().find("left-recursive"), std::string::npos);
  EXPECT_FALSE(parse_gbnf("root ::= x \"a\"\nx ::= y\ny ::= \"\" | root").ok());
  auto star = compile(R"(root ::= ( "a"? )* "b")");  // a tail-only cycle: fine
  ASSERT_NE(star, nullptr);
  EXPECT_EQ(verdict(star, "aab"), 'a');
  EXPECT_EQ(verdict(star, "b"), 'a');
}

TEST(Gbnf, DeepRightRecursionKeepsConstantState) {
  auto g = compile(R"(root ::= "[" item* "]"
item ::= "x")");
  ASSERT_NE(g, nullptr);
  ByteAutomaton a(g);
  int32_t s = a.next(a.start(), '[');
  for (int i = 0; i < 1000; ++i) s = a.next(s, 'x');
  EXPECT_LE(a.state_count(), 4u);  // start, after '[', after 'x' (same from then on), after ']'... bounded
  EXPECT_TRUE(a.accepting(a.next(s, ']')));
}

TEST(Gbnf, ExponentiallyAmbiguousGrammarsEndInsteadOfExploding) {
  // After n 'a's there are 2^n ways to close: the state is cut off at kMaxStacks.
  auto g = compile(R"(root ::= x
x ::= "a" x "b" | "a" x "c" | "")");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "aabc"), 'a');
  EXPECT_EQ(verdict(g, std::string(10, 'a')), 'p');
  ByteAutomaton a(g);
  EXPECT_EQ(a.advance(a.start(), std::string(40, 'a')), ByteAutomaton::kDead);
}

TEST(Gbnf, ErrorsNameTheProblem) {
  auto missing = parse_gbnf(R"(root ::= thing)");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'thing'"), std::string::npos);
  auto no_root = parse_gbnf(R"(start ::= "a")");
  ASSERT_FALSE(no_root.ok());
  EXPECT_NE(no_root.status().message().find("root"), std::string::npos);
  auto bad = parse_gbnf("root ::= \"a\"\nx ::= \"b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(parse_gbnf(R"(root ::= ("a")").ok());
  EXPECT_FALSE(parse_gbnf(R"(root ::= "a"{3,2})").ok());
  EXPECT_FALSE(parse_gbnf(R"(root ::= [b-a])").ok());
  EXPECT_FALSE(parse_gbnf("").ok());
}

// A grammar whose root derives no finite text used to parse: generation then stopped at once
// with "" and finish_reason "stop", text the grammar never allowed. A tail-position cycle with no
// way out (x ::= x) and classes of no character are such roots; they are now errors.
TEST(Gbnf, ARootThatMatchesNoTextIsAnError) {
  for (const char* text :
       {"root ::= x\nx ::= x", "root ::= \"a\" root", "root ::= x | y\nx ::= \"a\" y\ny ::= x",
        R"(root ::= [\uD800-\uDFFF])", R"(root ::= "a" [\uDC00])"}) {
    auto g = parse_gbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    const std::string& m = g.status().message();
    EXPECT_TRUE(m.find("matches no text") != std::string::npos ||
                m.find("empty character class") != std::string::npos)
        << text << ": " << m;
  }
  // Cycles with a way out, and dead alternatives beside a live one, still parse.
  auto g = compile("root ::= x\nx ::= \"a\" x | \"b\" | y\ny ::= y");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "aab"), 'a');
}

// UTF-8 encodes the Unicode scalar values: U+0000..U+10FFFF without the surrogates U+D800..U+DFFF
// (RFC 3629, section 3). An escape outside them was lowered to bytes that are not UTF-8 (a
// literal) or to a class matching nothing; it is now an error naming the escape.
TEST(Gbnf, EscapesThatAreNotCharactersAreErrors) {
  for (const char* text : {R"(root ::= "\uD800")", R"(root ::= "\uDFFF")", R"(root ::= "\U00110000")",
                           R"(root ::= [\U00110000])", R"(root ::= "\UFFFFFFFF")"}) {
    auto g = parse_gbnf(text);
    EXPECT_FALSE(g.ok()) << text;
  }
  auto beyond = parse_gbnf(R"(root ::= "\U00110000")");
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("U00110000"), std::string::npos) << beyond.status().message();
  // The last scalar value and ranges across the surrogates are fine.
  auto g = compile(R"(root ::= "\U0010FFFF" [\uD7FF-\uE000])");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "\xF4\x8F\xBF\xBF\xED\x9F\xBF"), 'a');  // U+10FFFF U+D7FF
  EXPECT_EQ(verdict(g, "\xF4\x8F\xBF\xBF\xEE\x80\x80"), 'a');  // U+10FFFF U+E000
  EXPECT_EQ(verdict(g, "\xF4\x8F\xBF\xBF\xED\xA0\x80"), 'x');  // U+D800's would-be bytes
}

}  // namespace
}  // namespace tandem::grammar
