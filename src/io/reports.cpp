#include "tokdyn/io/reports.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <variant>

#include "tokdyn/io/csv.hpp"

namespace tokdyn {


void write_table(const std::filesystem::path& file, const std::vector<Table>& parts) {
  if (parts.empty()) throw std::logic_error("write_table: no table");
  CsvWriter csv(file, parts.front().columns);
  for (const Table& t : parts) {
    if (t.columns != parts.front().columns) throw std::logic_error("write_table: " + t.name + ": the variants' columns differ");
    for (const auto& row : t.rows) {
      for (const Cell& c : row) {
        if (const auto* s = std::get_if<std::string>(&c)) csv.cell(*s);
        else if (const auto* l = std::get_if<long>(&c)) csv.cell(*l);
        else if (const auto* d = std::get_if<double>(&c)) csv.cell(*d);
        else csv.empty();
      }
      csv.end_row();
    }
  }
}

void write_tables(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const Observer*>>& variants,
                  const std::string& label) {
  std::vector<std::vector<Table>> per;  // [variant][table]
  for (const auto& [name, obs] : variants) per.push_back(obs->tables(label, name));
  if (per.empty()) return;
  for (std::size_t t = 0; t < per.front().size(); ++t) {
    std::vector<Table> parts;
    const std::string name = per.front()[t].name;
    for (auto& v : per) {
      if (v.size() <= t || v[t].name != name)
        throw std::logic_error("write_tables: the variants' observers emit different tables");
      parts.push_back(std::move(v[t]));
    }
    write_table(dir / (name + ".csv"), parts);
  }
}

}  // namespace tokdyn
