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
  const auto read = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return nlohmann::json();
    std::ostringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  };
  const nlohmann::json m = read(dir / "manifest.json");
  if (!m.is_object() || m.value("tool", std::string()) != "tokdyn train") {
    // A checkpoint inside a training's folder (checkpoints/step-N): its step and losses so far.
    const nlohmann::json st = read(dir / "state.json"), args = read(dir.parent_path().parent_path() / "train-args.json");
    if (!st.is_object() || !args.is_object() || !st.contains("step") || !st["step"].is_number_integer()) return nullptr;
    nlohmann::json r{{"checkpoint_step", st["step"]}};
    for (const char* k : {"model", "size", "seed", "steps"})
      if (args.contains(k)) r[k] = args[k];
    if (args.contains("batch") && args.contains("context") && args["batch"].is_number_integer() && args["context"].is_number_integer())
      r["tokens_seen"] = st["step"].get<long long>() * args["batch"].get<long long>() * args["context"].get<long long>();
    if (st.contains("rows") && st["rows"].is_array())
      for (const auto& row : st["rows"])
        if (row.is_object() && row.contains("heldout_loss") && row["heldout_loss"].is_number()) r["heldout_loss"] = row["heldout_loss"];
    return r;
  }
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
