#pragma once
// The tidy CSV files the observers emit (observers.hpp Table: the observer declares its columns and rows,
// io only writes them).
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokdyn/io/csv.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn {

/// Writes the tables of observers, one per variant, into `dir`: table T goes to <T.name>.csv, the
/// rows of every variant one after another (the first column, `label`, names the variant). Every
/// observer must emit the same tables with the same columns (std::logic_error otherwise).
void write_tables(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const Observer*>>& variants,
                  const std::string& label = "variant");

/// Writes one table to `file` (cells: empty, text, integer or real as CsvWriter prints them).
void write_table(const std::filesystem::path& file, const std::vector<Table>& parts);

}  // namespace tokdyn
