#include "tokdyn/runtime/training_record.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tokdyn {

nlohmann::json training_record(const std::string& checkpoint) {
  namespace fs = std::filesystem;
  if (checkpoint.empty()) return nullptr;
  std::error_code ec;
  const fs::path dir = fs::is_directory(checkpoint, ec) ? fs::path(checkpoint) : fs::path(checkpoint).parent_path();
  std::ifstream in(dir / "manifest.json", std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream ss;
  ss << in.rdbuf();
  const nlohmann::json m = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || m.value("tool", std::string()) != "tokdyn train") return nullptr;
  nlohmann::json r = nlohmann::json::object();
  for (const char* k : {"model", "size", "parameters", "steps", "tokens_seen", "epochs", "unigram_entropy", "seed"})
    if (m.contains(k)) r[k] = m[k];
  if (m.contains("final") && m["final"].is_object() && m["final"].contains("heldout_loss")) r["heldout_loss"] = m["final"]["heldout_loss"];
  if (m.contains("corpus") && m["corpus"].is_object()) {
    r["corpus_sha256"] = m["corpus"].value("sha256", std::string());
    r["corpus_bytes"] = m["corpus"].value("bytes", 0);
  }
  if (m.contains("tokenizer") && m["tokenizer"].is_object()) r["tokenizer_sha256"] = m["tokenizer"].value("sha256", std::string());
  return r;
}

}  // namespace tokdyn
