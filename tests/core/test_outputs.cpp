// Declared outputs (outputs.hpp): the declared CSV writer refuses cells that break the declaration,
// a finished results folder is checked against it (undeclared files, headers, missing tables,
// summaries), summary.csv is written from the run's summaries, and every registered preset
// declares its tables, summaries and figures.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/outputs.hpp"

namespace tokdyn {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::slurp;

const TableDecl& demo_table() {
  static const TableDecl t{"demo.csv",
                           "one demo row",
                           {category("variant", "which variant", {{"a", "the first"}, {"b", "the second"}}),
                            index("layer", "layer", 1), integer("count", "a count"),
                            real("x", "a value", "1/layer").may_be_empty("not computed"), text("note", "free text"),
                            flag("ok", "it holds")}};
  return t;
}

TEST(Outputs, PathPatternsMatchOneComponentPerPlaceholder) {
  EXPECT_TRUE(path_matches("x0.npy", "x0.npy"));
  EXPECT_FALSE(path_matches("x0.npy", "x1.npy"));
  EXPECT_TRUE(path_matches("taps/<variant>/layer_<K>.npy", "taps/trained/layer_12.npy"));
  EXPECT_FALSE(path_matches("taps/<variant>/layer_<K>.npy", "taps/a/b/layer_12.npy"));  // <variant> is one component
  EXPECT_FALSE(path_matches("taps/<variant>/layer_<K>.npy", "taps//layer_1.npy"));      // and not empty
  EXPECT_FALSE(path_matches("taps/<variant>/layer_<K>.npy", "taps/a/layer_.npy"));
  EXPECT_TRUE(path_matches("mixing/<name>.npy", "mixing/layer_3_head_0.npy"));
}

TEST(Outputs, TheDeclaredWriterTakesItsColumnsAndChecksEveryCell) {
  TempDir d;
  {
    CsvWriter w(d.path(), demo_table());
    w.cell("a").cell(1L).cell(3L).cell(0.5).cell("fine, with a comma").cell("true").end_row();
    w.cell("b").cell(2L).cell(4.0).empty().cell("x").cell("false").end_row();  // an integral double in an integer column
  }
  EXPECT_EQ(slurp(d.path() / "demo.csv"),
            "variant,layer,count,x,note,ok\na,1,3,0.5,\"fine, with a comma\",true\nb,2,4,,x,false\n");
  CsvWriter w(d.path(), demo_table());
  EXPECT_THROW(w.cell("c"), std::logic_error);            // not a declared value of the category
  EXPECT_THROW(w.cell(0.5), std::logic_error);            // a number in a category column
  w.cell("a");
  EXPECT_THROW(w.cell(0L), std::logic_error);             // an index below its base (1)
  EXPECT_THROW(w.cell("1"), std::logic_error);            // text in a numeric column
  w.cell(1L);
  EXPECT_THROW(w.cell(2.5), std::logic_error);            // a fraction in an integer column
  EXPECT_THROW(w.empty(), std::logic_error);              // an empty cell where the column allows none
  w.cell(2L).empty().cell("n");
  EXPECT_THROW(w.cell("yes"), std::logic_error);          // flags are true / false
}

Experiment demo_experiment(std::function<void(const Params&, RunContext&)> run) {
  Experiment e{"demo-outputs", "a preset of the test", {}, std::move(run)};
  e.outputs.tables = {demo_table(), TableDecl{"maybe.csv", "a conditional table", {real("y", "y")}, "sometimes"}};
  e.outputs.arrays = {ArrayDecl{"taps/<variant>/layer_<K>.npy", "float64 [runs, tokens, d]"}};
  e.outputs.summaries = {SummaryDecl{"rate", "a rate", "1/layer"}, SummaryDecl{"steps", "a count"},
                         SummaryDecl{"extra", "only sometimes", "", "sometimes"}};
  return e;
}

/// Runs `e` into a fresh temporary folder of `d` as run_experiment does, up to finish_outputs.
void run_into(const Experiment& e, const fs::path& dir) {
  fs::create_directories(dir);
  RunContext ctx;
  ctx.dir = dir;
  ctx.outputs = &e.outputs;
  ctx.preset = e.name;
  e.run(Params{}, ctx);
  finish_outputs(e, ctx);
}

void write_demo(RunContext& ctx) {
  CsvWriter w = ctx.table("demo.csv");
  w.cell("a").cell(1L).cell(3L).cell(0.5).cell("n").cell("true").end_row();
}

TEST(Outputs, AFinishedFolderIsCheckedAgainstTheDeclaration) {
  TempDir d;
  // As declared: summary.csv is written from the summaries, in the order they were put.
  const Experiment ok = demo_experiment([](const Params&, RunContext& ctx) {
    write_demo(ctx);
    ctx.summary("steps", 12L);
    ctx.summary("rate", -0.25, "-0.3");
    fs::create_directories(ctx.dir / "taps" / "a");
    std::ofstream(ctx.dir / "taps" / "a" / "layer_3.npy") << "x";
  });
  run_into(ok, d.path() / "ok");
  EXPECT_EQ(slurp(d.path() / "ok" / "summary.csv"), "quantity,value,paper\nsteps,12,\nrate,-0.25,-0.3\n");

  // A non-finite summary is an empty cell (and null in the manifest).
  const Experiment nan = demo_experiment([](const Params&, RunContext& ctx) {
    write_demo(ctx);
    ctx.summary("rate", std::numeric_limits<double>::quiet_NaN());
    ctx.summary("steps", 1L);
    EXPECT_TRUE(summaries_json(ctx)["rate"].is_null());
  });
  run_into(nan, d.path() / "nan");
  EXPECT_EQ(slurp(d.path() / "nan" / "summary.csv"), "quantity,value,paper\nrate,,\nsteps,1,\n");

  struct Bad {
    const char* why;
    std::function<void(const Params&, RunContext&)> run;
    const char* needle;
  };
  const std::vector<Bad> bad = {
      {"an undeclared table", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); ctx.summary("steps", 1L);
                                                                  CsvWriter(ctx.dir / "other.csv", {"a"}); }, "other.csv: not declared"},
      {"a header not as declared", [](const Params&, RunContext& ctx) { CsvWriter(ctx.dir / "demo.csv", {"variant", "layer"});
                                                                        ctx.summary("rate", 1.0); ctx.summary("steps", 1L); }, "demo.csv: header"},
      {"a declared table missing", [](const Params&, RunContext& ctx) { ctx.summary("rate", 1.0); ctx.summary("steps", 1L); },
       "demo.csv: declared, not written"},
      {"an undeclared array", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); ctx.summary("steps", 1L);
                                                                  std::ofstream(ctx.dir / "x.npy") << "x"; }, "x.npy: not declared"},
      {"a summary missing", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); }, "summary 'steps': declared, not written"},
      {"a summary twice", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); ctx.summary("rate", 2.0);
                                                              ctx.summary("steps", 1L); }, "summary 'rate': written twice"},
      {"an undeclared summary", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); ctx.summary("steps", 1L);
                                                                    ctx.summary("speed", 1.0); }, "summary 'speed': not declared"},
      {"summary.csv by hand", [](const Params&, RunContext& ctx) { write_demo(ctx); ctx.summary("rate", 1.0); ctx.summary("steps", 1L);
                                                                  CsvWriter(ctx.dir / "summary.csv", {"quantity", "value", "paper"}); },
       "summary.csv: written by the preset itself"},
      {"an undeclared table opened", [](const Params&, RunContext& ctx) { (void)ctx.table("nope.csv"); }, "writes nope.csv without declaring it"}};
  int i = 0;
  for (const Bad& b : bad) {
    const Experiment e = demo_experiment(b.run);
    try {
      run_into(e, d.path() / ("bad" + std::to_string(i++)));
      ADD_FAILURE() << b.why << ": accepted";
    } catch (const std::logic_error& err) {
      EXPECT_NE(std::string(err.what()).find(b.needle), std::string::npos) << b.why << ": " << err.what();
    }
  }
}

TEST(Outputs, EveryPresetDeclaresTablesSummariesAndFigures) {
  for (const Experiment* e : experiments()) {
    if (e->name.rfind("test-", 0) == 0) continue;  // presets the tests register for themselves
    const OutputDecl& o = e->outputs;
    EXPECT_FALSE(o.tables.empty() && o.subruns.empty()) << e->name << ": no tables declared";
    EXPECT_FALSE(o.summaries.empty()) << e->name << ": no scalar summaries declared";
    EXPECT_EQ(o.figures.empty(), e->figure_kind.empty()) << e->name << ": figures declared iff it has a figure kind";
    std::set<std::string> files, names;
    for (const TableDecl& t : o.tables) {
      EXPECT_TRUE(files.insert(t.file).second) << e->name << ": " << t.file << " declared twice";
      EXPECT_NE(t.file, "summary.csv") << e->name << ": summary.csv is written from the summaries (ctx.summary)";
      EXPECT_FALSE(t.description.empty()) << e->name << ": " << t.file;
      std::set<std::string> cols;
      for (const ColumnDecl& c : t.columns) {
        EXPECT_TRUE(cols.insert(c.name).second) << e->name << ": " << t.file << ":" << c.name << " twice";
        EXPECT_FALSE(c.meaning.empty()) << e->name << ": " << t.file << ":" << c.name << " has no meaning";
        EXPECT_NE(c.name, "config") << e->name << ": " << t.file << ": the configuration column is called 'variant'";
        if (c.kind == ColumnKind::Category) {
          EXPECT_FALSE(c.values.empty()) << e->name << ": " << t.file << ":" << c.name;
        }
      }
    }
    for (const SummaryDecl& s : o.summaries) {
      EXPECT_TRUE(names.insert(s.name).second) << e->name << ": summary " << s.name << " twice";
      EXPECT_FALSE(s.meaning.empty()) << e->name << ": summary " << s.name;
    }
    for (const FigureDecl& f : o.figures) EXPECT_FALSE(f.description.empty()) << e->name << ": " << f.file;
  }
}

TEST(Outputs, TheVerdictTableIsDeclaredOnceWithItsReferenceKinds) {
  const TableDecl& t = checks_table();
  EXPECT_EQ(t.column_names(), CheckTable::columns());
  const ColumnDecl* kind = t.column("reference_kind");
  ASSERT_NE(kind, nullptr);
  ASSERT_EQ(kind->values.size(), kRefKindNames.size());
  for (std::size_t i = 0; i < kRefKindNames.size(); ++i) EXPECT_EQ(kind->values[i].first, kRefKindNames[i]);
  TempDir d;
  EXPECT_THROW(CheckTable(d.path() / "verdicts.csv"), std::logic_error);  // checks.csv, nothing else
}

}  // namespace
}  // namespace tokdyn
