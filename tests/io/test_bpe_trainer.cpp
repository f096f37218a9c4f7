// The byte-level BPE trainer (io/bpe_trainer.hpp): merges worked out by hand on tiny corpora (the
// counts, the tie rule, min_frequency), the written tokenizer.json read back by tokdyn's Tokenizer
// (every text encodes and decodes to itself), the same result on any thread count, refusals.
// tests/train/test_bpe_reference.py compares the merges with an independent brute-force trainer on
// a real corpus.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/bpe_trainer.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn {
namespace {

const std::string kG = "\u0120";  // GPT-2's character of the space byte

TEST(BpeTrainer, MergesOfATinyCorpusByHand) {
  // Words: "ab" x1, "Ġab" x2, "Ġabc" x1. Pair counts: (a,b) 4, (Ġ,a) 3, (b,c) 1 -> "a b"; then
  // (Ġ,ab) 3, (ab,c) 1 -> "Ġ ab"; then (Ġab,c) 1 < min_frequency 2: stop.
  BpeTrainOptions o;
  o.vocab_size = 1000;
  const auto r = train_bpe({"ab ab ab abc"}, o);
  ASSERT_EQ(r.merges, (std::vector<std::string>{"a b", kG + " ab"}));
  EXPECT_EQ(r.vocab_size, 256 + 2 + 1);
  EXPECT_EQ(r.words, 4);
  EXPECT_EQ(r.unique_words, 3);
  const auto j = nlohmann::json::parse(r.json);
  EXPECT_EQ(j["model"]["vocab"]["ab"], 256);
  EXPECT_EQ(j["model"]["vocab"][kG + "ab"], 257);
  EXPECT_EQ(j["added_tokens"][0]["id"], 258);
  EXPECT_EQ(j["added_tokens"][0]["content"], "<|endoftext|>");
  // With min_frequency 1 the last pair is merged too; the vocabulary size caps the merges.
  o.min_frequency = 1;
  EXPECT_EQ(train_bpe({"ab ab ab abc"}, o).merges.back(), kG + "ab c");
  o.vocab_size = 256 + 1 + 1;
  EXPECT_EQ(train_bpe({"ab ab ab abc"}, o).merges, (std::vector<std::string>{"a b"}));
}

TEST(BpeTrainer, TiesGoToTheSmallerPairOfIds) {
  // "xy zw": pairs (x,y), (Ġ,z), (z,w) once each. Ids are bytes: Ġ = 32 < x = 120 < z = 122, so
  // "Ġ z" first; then (Ġz = 256, w) against (x, y): (120, 121) is smaller -> "x y"; then "Ġz w".
  BpeTrainOptions o;
  o.vocab_size = 1000;
  o.min_frequency = 1;
  EXPECT_EQ(train_bpe({"xy zw"}, o).merges, (std::vector<std::string>{kG + " z", "x y", kG + "z w"}));
}

TEST(BpeTrainer, RepeatedSymbolsMergeLeftToRight) {
  // "aaaa" x1: (a,a) counted 3 times -> "a a"; the word becomes [aa, aa]: (aa,aa) once.
  BpeTrainOptions o;
  o.vocab_size = 1000;
  o.min_frequency = 1;
  EXPECT_EQ(train_bpe({"aaaa"}, o).merges, (std::vector<std::string>{"a a", "aa aa"}));
}

TEST(BpeTrainer, TheFileLoadsAndEveryTextRoundTrips) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("In the beginning God created the heaven and the earth. And the earth was without form, and void " +
                    std::to_string(i) + "\n");
  BpeTrainOptions o;
  o.vocab_size = 400;
  const auto r = train_bpe(texts, o);
  const Tokenizer t = Tokenizer::from_json(r.json, "trained");
  EXPECT_EQ(t.vocab_size(), r.vocab_size);
  const auto e = t.encode("In the beginning", false);
  EXPECT_LE(e.ids.size(), 3u);  // frequent words became single tokens
  for (const std::string s : {"In the beginning", "naïve café 東京 🙂\n\t x", "<|endoftext|>", ""}) {
    const auto enc = t.encode(s, false);
    EXPECT_TRUE(enc.unknown.empty());
    EXPECT_EQ(t.decode(enc.ids), s);
  }
  EXPECT_TRUE(t.is_special(r.vocab_size - 1));
  EXPECT_EQ(t.encode("a<|endoftext|>", false).ids.back(), r.vocab_size - 1);
}

TEST(BpeTrainer, TheSameOnAnyThreadCount) {
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) texts.push_back("word" + std::to_string(i % 37) + " and the " + std::to_string(i * 7919 % 1000) + "\n");
  BpeTrainOptions o;
  o.vocab_size = 600;
  o.threads = 1;
  const auto a = train_bpe(texts, o);
  o.threads = 2;
  const auto b = train_bpe(texts, o);
  o.threads = 3;
  const auto c = train_bpe(texts, o);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.json, c.json);
}

TEST(BpeTrainer, Refusals) {
  BpeTrainOptions o;
  o.vocab_size = 257;  // 256 bytes + the special token: no room for a merge
  EXPECT_THROW(train_bpe({"ab"}, o), std::invalid_argument);
  o.vocab_size = 1000;
  o.min_frequency = 0;
  EXPECT_THROW(train_bpe({"ab"}, o), std::invalid_argument);
  o.min_frequency = 2;
  o.special_tokens = {"<a>", "<a>"};
  EXPECT_THROW(train_bpe({"ab"}, o), std::invalid_argument);
  o.special_tokens = {""};
  EXPECT_THROW(train_bpe({"ab"}, o), std::invalid_argument);
  o.special_tokens = {};
  EXPECT_THROW(train_bpe({"ok", std::string("\xff")}, o), InputError);
  try {
    train_bpe({"ok", std::string("\xff")}, o);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("text 2"), std::string::npos) << e.what();
  }
  // No special tokens at all: the vocabulary is the bytes and the merges.
  const auto r = train_bpe({"ab ab"}, o);
  EXPECT_EQ(r.vocab_size, 257);
}

}  // namespace
}  // namespace tokdyn
