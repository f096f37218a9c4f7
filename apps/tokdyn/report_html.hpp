#pragma once
// The pieces `tokdyn report` builds its pages from: escaping, embedded images, relative links,
// tables of CSV cells, the page frame with its style (no script, no external resource).
#include <filesystem>
#include <string>
#include <vector>

namespace tokdyn::report_cli::html {

/// Text escaped for HTML element content and attribute values.
std::string esc(const std::string& s);
/// RFC 4648 base64.
std::string base64(const std::string& bytes);
/// A data: URI of an image file (png, svg, jpg); empty when the file cannot be read or is larger
/// than `max_bytes`.
std::string image_data_uri(const std::filesystem::path& file, std::uintmax_t max_bytes);
/// The link from a page in folder `from` to `target` (relative, '/'-separated, percent-encoded).
std::string href(const std::filesystem::path& from, const std::filesystem::path& target);
/// A number cell shown with 6 significant digits (the full text in its title); other text as is.
std::string number_cell(const std::string& cell);
/// A byte count for people: "812 B", "14.2 kB", "3.1 MB".
std::string bytes_text(std::uintmax_t n);

/// A CSV table (header = rows[0]) as <table>, at most `max_rows` data rows (a note says how many
/// were left out). `tips`: one tooltip per column (may be empty); `row_class(i)`: a class for data row
/// i (may be empty); `link(i, j)`: an href for the cell (may be empty).
struct TableStyle {
  std::vector<std::string> tips;
  std::string (*row_class)(const std::vector<std::string>& header, const std::vector<std::string>& row) = nullptr;
  std::vector<std::string> row_links;  ///< an href per data row for its first cell (may be empty)
  std::string table_class;
};
std::string csv_table(const std::vector<std::vector<std::string>>& rows, std::size_t max_rows, const TableStyle& style);

/// A whole page: title, an optional link back ("" for none) and the body.
std::string page(const std::string& title, const std::string& back_href, const std::string& back_text, const std::string& body);

}  // namespace tokdyn::report_cli::html
