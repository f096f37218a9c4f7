// The tokenizer (io/tokenizer.hpp) on small tokenizer.json files written here, each expectation
// worked out by hand from the format's rules (BPE merge order, byte fallback, unknown tokens, added
// tokens, templates), and every refusal. The published vocabularies are checked against Hugging
// Face's own library in tests/reference/test_tokenizer_reference.py.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/sha256.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int64_t>;

// GPT-2's byte-to-character map for the bytes used here: printable ASCII maps to itself, the space
// (0x20) to U+0120 'Ġ'.
json byte_level_vocab() {
  json v = json::object();
  int id = 0;
  for (int b = 33; b <= 126; ++b) v[std::string(1, static_cast<char>(b))] = id++;
  v["\u0120"] = id++;  // the space, 94
  return v;
}

json byte_level_file(const json& merges, const json& extra_vocab) {
  json v = byte_level_vocab();
  for (auto it = extra_vocab.begin(); it != extra_vocab.end(); ++it) v[it.key()] = it.value();
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", v}, {"merges", merges}}}};
}

Tokenizer make(const json& j) { return Tokenizer::from_json(j.dump(), "test tokenizer.json"); }

std::string error_of(const json& j) {
  try {
    make(j);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Sha256, StandardTestVectors) {
  // FIPS 180-2 appendix B and the empty message.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55 and 56 bytes: the padding's one-block / two-block boundary.
  EXPECT_NE(sha256_hex(std::string(55, 'x')), sha256_hex(std::string(56, 'x')));
}

TEST(Sha256, IncrementalEqualsOneShotAtEveryChunking) {
  // The streaming form (files hashed in pieces for manifests) against the standard's 1e6 'a' vector
  // and against one-shot hashing of messages around the block and padding boundaries.
  Sha256 a;
  for (int i = 0; i < 1000; ++i) a.update(std::string(1000, 'a'));
  EXPECT_EQ(a.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::string msg;
  for (int i = 0; i < 300; ++i) msg.push_back(static_cast<char>('a' + (i * 7) % 26));
  for (std::size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 300})
    for (std::size_t chunk : {1, 3, 63, 64, 65, 200}) {
      Sha256 s;
      for (std::size_t off = 0; off < n; off += chunk) s.update(std::string_view(msg).substr(off, std::min(chunk, n - off)));
      EXPECT_EQ(s.hex(), sha256_hex(msg.substr(0, n))) << n << " in chunks of " << chunk;
    }
}

TEST(Tokenizer, ByteLevelBpeMergesLowestRankFirstThenLeftmost) {
  // Ranks: 0 "l l", 1 "h e", 2 "he ll", 3 "hell o". "hello": ll (rank 0), he (1), hell (2), hello (3).
  const json extra = {{"ll", 95}, {"he", 96}, {"hell", 97}, {"hello", 98}};
  const Tokenizer T = make(byte_level_file(json::array({"l l", "h e", "he ll", "hell o"}), extra));
  // The pre-tokenizer's regex gives "hello" and " hello" (-> "Ġhello"); Ġ has no merge with h.
  const Encoding e = T.encode("hello hello");
  EXPECT_EQ(e.pieces, (std::vector<std::string>{"hello", "\u0120", "hello"}));
  EXPECT_EQ(e.ids, (Ids{98, 94, 98}));
  EXPECT_EQ(T.decode(e.ids), "hello hello");
  // Equal ranks: the leftmost pair first ("lll" -> "ll" "l", not "l" "ll").
  EXPECT_EQ(T.encode("lll").pieces, (std::vector<std::string>{"ll", "l"}));
  EXPECT_EQ(T.encode("llll").pieces, (std::vector<std::string>{"ll", "ll"}));
  // Merges in the [a, b] pair form give the same.
  const Tokenizer P = make(byte_level_file(json::array({{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}}), extra));
  EXPECT_EQ(P.encode("hello hello").ids, e.ids);
  EXPECT_EQ(T.piece_text(94), " ");
  EXPECT_EQ(T.vocab_size(), 99);
  EXPECT_EQ(T.token_to_id("hell"), 97);
  EXPECT_FALSE(T.token_to_id("nope").has_value());
}

TEST(Tokenizer, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  // "abc" is in the vocabulary but no merge makes it: with ignore_merges it is one token.
  json j = byte_level_file(json::array({"a b"}), {{"ab", 95}, {"abc", 96}});
  EXPECT_EQ(make(j).encode("abc").ids, (Ids{95, 'c' - 33}));  // "ab" "c" (printable ASCII b has id b - 33)
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(j).encode("abc").ids, (Ids{96}));
}

json sentencepiece_file(bool byte_fallback, const json& unk, bool fuse_unk) {
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0xC3>", 4}, {"<0xA9>", 5}, {"\u2581", 6}, {"\u2581ab", 7}};
  return json{{"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}}})},
              {"normalizer", {{"type", "Sequence"},
                              {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                           {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", {{"type", "Sequence"},
                           {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                                     {{"type", "ByteFallback"}},
                                                     {{"type", "Fuse"}},
                                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "\u2581 ab"})}, {"unk_token", unk},
                         {"byte_fallback", byte_fallback}, {"fuse_unk", fuse_unk}}}};
}

TEST(Tokenizer, ByteFallbackUnknownTokenAndFusing) {
  const Tokenizer T = make(sentencepiece_file(true, "<unk>", true));
  // "abé" -> "▁abé": ▁ a b, then é (not in the vocabulary) as its two UTF-8 bytes C3 A9.
  // Merges: a b (rank 0) -> ab, then ▁ ab (rank 1) -> ▁ab.
  Encoding e = T.encode("abé");
  EXPECT_EQ(e.ids, (Ids{7, 4, 5}));
  EXPECT_TRUE(e.unknown.empty());
  EXPECT_EQ(T.decode(e.ids), "abé");
  // One byte alone is invalid UTF-8: the byte-fallback decoder gives U+FFFD.
  EXPECT_EQ(T.decode(Ids{4}), "\xef\xbf\xbd");
  // 'z' has neither a token nor a byte token: the unknown token; two in a row fuse into one.
  e = T.encode("abzz");
  EXPECT_EQ(e.ids, (Ids{7, 0}));
  EXPECT_EQ(e.unknown, (std::vector<std::string>{"zz"}));
  const Tokenizer U = make(sentencepiece_file(true, "<unk>", false));
  e = U.encode("abzz");
  EXPECT_EQ(e.ids, (Ids{7, 0, 0}));
  EXPECT_EQ(e.unknown, (std::vector<std::string>{"z", "z"}));
  // Byte-fallback tokens between two fused unknown characters: one unk token (as Hugging Face), its
  // text the two characters ("zéz": z unk, é as bytes C3 A9, z fused into the open unk).
  e = T.encode("zéz");
  EXPECT_EQ(e.ids, (Ids{6, 4, 5, 0}));
  EXPECT_EQ(e.unknown, (std::vector<std::string>{"zz"}));
  // No unknown token: the character is dropped, and reported.
  const Tokenizer D = make(sentencepiece_file(false, nullptr, false));
  e = D.encode("az");
  EXPECT_EQ(e.ids, (Ids{6, 1}));  // "▁" "a": no merge "▁ a"
  EXPECT_EQ(e.unknown, (std::vector<std::string>{"z"}));
  // The special token <unk> spelled in the text is the added token, matched before normalising;
  // each segment around it is normalised alone (Prepend adds ▁ to both).
  e = T.encode("ab<unk>ab");
  EXPECT_EQ(e.ids, (Ids{7, 0, 7}));
  EXPECT_EQ(e.special, (std::vector<char>{0, 1, 0}));
  EXPECT_EQ(T.decode(e.ids, true), "ab ab");
}

TEST(Tokenizer, AddedTokensStripAndSingleWord) {
  json j = byte_level_file(json::array(), json::object());
  j["added_tokens"] = json::array({{{"id", 200}, {"content", "[M]"}, {"lstrip", true}, {"rstrip", true}, {"special", true},
                                    {"normalized", false}},
                                   {{"id", 201}, {"content", "cat"}, {"single_word", true}, {"special", false}, {"normalized", false}}});
  const Tokenizer T = make(j);
  // lstrip / rstrip: the spaces around [M] belong to it.
  Encoding e = T.encode("a  [M]  b");
  EXPECT_EQ(e.pieces, (std::vector<std::string>{"a", "[M]", "b"}));
  // single_word: "cat" inside "cats" or "concat" is not the added token.
  EXPECT_EQ(T.encode("cat").ids, (Ids{201}));
  EXPECT_EQ(T.encode("cats").ids.size(), 4u);
  EXPECT_EQ(T.encode("a cat!").pieces, (std::vector<std::string>{"a", "\u0120", "cat", "!"}));
  EXPECT_EQ(T.vocab_size(), 202);
  EXPECT_TRUE(T.is_special(200));
  EXPECT_FALSE(T.is_special(201));
}

TEST(Tokenizer, TemplateAddsBosOnlyWithSpecialTokens) {
  json j = byte_level_file(json::array(), json::object());
  j["added_tokens"] = json::array({{{"id", 100}, {"content", "<s>"}, {"special", true}, {"normalized", false}}});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {100}}, {"tokens", {"<s>"}}}}}}};
  const Tokenizer T = make(j);
  EXPECT_EQ(T.encode("a").ids, (Ids{100, 'a' - 33}));
  EXPECT_EQ(T.encode("a", false).ids, (Ids{'a' - 33}));
  EXPECT_EQ(T.encode("").ids, (Ids{100}));
  EXPECT_EQ(T.encode("", false).ids, Ids{});
}

TEST(Tokenizer, BatchEqualsOneByOneAtAnyThreadCount) {
  const Tokenizer T = make(byte_level_file(json::array({"l l", "h e", "he ll", "hell o"}),
                                           {{"ll", 95}, {"he", 96}, {"hell", 97}, {"hello", 98}}));
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) texts.push_back(std::string(static_cast<std::size_t>(i % 7), 'l') + " hello" + std::to_string(i));
  const auto one = T.encode_batch(texts, true, 1);
  const auto two = T.encode_batch(texts, true, 2);
  ASSERT_EQ(one.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(one[i].ids, T.encode(texts[i]).ids);
    EXPECT_EQ(two[i].ids, one[i].ids);
  }
}

TEST(Tokenizer, RefusesWhatItDoesNotImplementByName) {
  const json base = byte_level_file(json::array(), json::object());
  json j = base;
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(j).find("model type \"WordPiece\" is not supported"), std::string::npos) << error_of(j);
  j = base;
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of(j).find("normalizer type 'Lowercase' is not supported"), std::string::npos) << error_of(j);
  j = base;
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  EXPECT_NE(error_of(j).find("pre-tokenizer type 'BertPreTokenizer' is not supported"), std::string::npos) << error_of(j);
  j = base;
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(j).find("decoder type 'WordPiece' is not supported"), std::string::npos) << error_of(j);
  j = base;
  j["post_processor"] = {{"type", "Bogus"}};
  EXPECT_NE(error_of(j).find("post-processor type 'Bogus' is not supported"), std::string::npos) << error_of(j);
  j = base;
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(error_of(j).find("dropout"), std::string::npos) << error_of(j);
  j = base;
  j["model"]["merges"] = json::array({"a q"});
  j["model"]["vocab"].erase("q");
  EXPECT_NE(error_of(j).find("names 'q', which is not in the vocabulary"), std::string::npos) << error_of(j);
  j = base;
  j["model"]["merges"] = json::array({"a b"});
  EXPECT_NE(error_of(j).find("makes 'ab', which is not in the vocabulary"), std::string::npos) << error_of(j);
  j = base;
  j["truncation"] = {{"max_length", 8}};
  EXPECT_NE(error_of(j).find("truncation: is set"), std::string::npos) << error_of(j);
  j = base;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of(j).find("regular expression"), std::string::npos) << error_of(j);
  // A pattern with a line break is quoted on one line (found by fuzz/fuzz_tokenizer_json.cpp).
  j["pre_tokenizer"]["pattern"]["Regex"] = "(a\nb";
  EXPECT_NE(error_of(j).find("regular expression /(a\\x0ab/ is invalid"), std::string::npos) << error_of(j);
  EXPECT_EQ(error_of(j).find('\n'), std::string::npos) << error_of(j);
  EXPECT_THROW(Tokenizer::from_json("{\"model\": ", "t.json"), InputError);
  EXPECT_THROW(Tokenizer::from_json("[]", "t.json"), InputError);
  EXPECT_THROW(Tokenizer::from_json("{}", "t.json"), InputError);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), InputError);
}

TEST(Tokenizer, AHostileRegexIsBoundedNotMinutes) {
  // (a+)+$ on "aaa...a!" backtracks exponentially per start; the search budget ends it in bad input.
  json j = byte_level_file(json::array(), json::object());
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}, {"invert", false}};
  const Tokenizer T = make(j);
  std::string text;
  for (int k = 0; k < 40; ++k) text += std::string(22, 'a') + "!";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    T.encode(text);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("backtracks without bound"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(a+)+$"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  // The same pattern on a benign text matches as usual.
  EXPECT_EQ(T.encode("baa").pieces, (std::vector<std::string>{"b", "a", "a"}));
}

TEST(Tokenizer, InvalidUtf8AndUnknownIdsAreBadInput) {
  const Tokenizer T = make(byte_level_file(json::array(), json::object()));
  try {
    T.encode("ab\xff");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(T.encode("\xe2\x82"), InputError);       // truncated
  EXPECT_THROW(T.encode("\xed\xa0\x80"), InputError);   // a surrogate
  EXPECT_THROW(T.encode("\xc0\xaf"), InputError);       // overlong
  EXPECT_THROW(T.decode(Ids{5000}), InputError);
  EXPECT_THROW(T.decode(Ids{-1}), InputError);
}

}  // namespace
}  // namespace tokdyn
