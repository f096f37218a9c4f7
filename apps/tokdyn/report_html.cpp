// HTML pieces of `tokdyn report` (report_html.hpp).
#include "report_html.hpp"

#include <cmath>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "tokdyn/build_info.hpp"
#include "tokdyn/io/file.hpp"

namespace tokdyn::report_cli::html {

namespace fs = std::filesystem;

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string base64(const std::string& bytes) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string o;
  o.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    o += t[v >> 18], o += t[(v >> 12) & 63], o += t[(v >> 6) & 63], o += t[v & 63];
  }
  if (const std::size_t r = bytes.size() - i; r > 0) {
    const unsigned v = (p[i] << 16) | (r == 2 ? p[i + 1] << 8 : 0);
    o += t[v >> 18], o += t[(v >> 12) & 63];
    o += r == 2 ? t[(v >> 6) & 63] : '=';
    o += '=';
  }
  return o;
}

std::string image_data_uri(const fs::path& file, std::uintmax_t max_bytes) {
  const std::string ext = file.extension().string();
  const char* mime = ext == ".png" ? "image/png" : ext == ".svg" ? "image/svg+xml" : (ext == ".jpg" || ext == ".jpeg") ? "image/jpeg" : nullptr;
  if (!mime) return "";
  try {
    return fmt::format("data:{};base64,{}", mime, base64(read_regular_file(file, max_bytes, "figure")));
  } catch (const std::exception&) {
    return "";
  }
}

std::string href(const fs::path& from, const fs::path& target) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(fs::absolute(from, ec), ec), b = fs::weakly_canonical(fs::absolute(target, ec), ec);
  fs::path rel = b.lexically_relative(a);
  if (rel.empty()) rel = b;
  std::string o;
  for (unsigned char c : rel.generic_string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') o += static_cast<char>(c);
    else o += fmt::format("%{:02X}", c);
  }
  return o;
}

std::string number_cell(const std::string& cell) {
  if (cell.empty()) return "";
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size() || cell.find_first_of("0123456789") == std::string::npos) return esc(cell);
  const std::string shown = std::isfinite(v) ? fmt::format("{:.6g}", v) : cell;
  if (shown == cell) return esc(cell);
  return fmt::format("<span title=\"{}\">{}</span>", esc(cell), esc(shown));
}

std::string bytes_text(std::uintmax_t n) {
  if (n < 1000) return fmt::format("{} B", n);
  if (n < 1000000) return fmt::format("{:.1f} kB", n / 1e3);
  if (n < 1000000000) return fmt::format("{:.1f} MB", n / 1e6);
  return fmt::format("{:.2f} GB", n / 1e9);
}

std::string csv_table(const std::vector<std::vector<std::string>>& rows, std::size_t max_rows, const TableStyle& style) {
  if (rows.empty()) return "<p class=\"note\">(empty file)</p>\n";
  const std::vector<std::string>& head = rows[0];
  std::string o = fmt::format("<div class=\"wide\"><table class=\"{}\">\n<thead><tr>", style.table_class.empty() ? "data" : style.table_class);
  for (std::size_t j = 0; j < head.size(); ++j) {
    const std::string tip = j < style.tips.size() ? style.tips[j] : "";
    o += tip.empty() ? fmt::format("<th>{}</th>", esc(head[j])) : fmt::format("<th title=\"{}\">{}</th>", esc(tip), esc(head[j]));
  }
  o += "</tr></thead>\n<tbody>\n";
  const std::size_t n = rows.size() - 1, shown = std::min(n, max_rows);
  for (std::size_t i = 1; i <= shown; ++i) {
    const std::vector<std::string>& r = rows[i];
    const std::string cls = style.row_class ? style.row_class(head, r) : "";
    o += cls.empty() ? "<tr>" : fmt::format("<tr class=\"{}\">", cls);
    for (std::size_t j = 0; j < r.size(); ++j) {
      std::string cell = number_cell(r[j]);
      if (j == 0 && i - 1 < style.row_links.size() && !style.row_links[i - 1].empty())
        cell = fmt::format("<a href=\"{}\">{}</a>", style.row_links[i - 1], cell);
      o += "<td>" + cell + "</td>";
    }
    o += "</tr>\n";
  }
  o += "</tbody></table></div>\n";
  if (shown < n) o += fmt::format("<p class=\"note\">{} of {} rows shown.</p>\n", shown, n);
  return o;
}

std::string page(const std::string& title, const std::string& back_href, const std::string& back_text, const std::string& body) {
  static const char* style = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;color:#1b1b1b;line-height:1.4}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em} h3{margin-bottom:.3em}
.meta,.note,.desc{color:#555} .desc{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.88em} th,td{border:1px solid #d0d0d0;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0} td{font-variant-numeric:tabular-nums}
tr.pass td{background:#e7f4ea} tr.fail td{background:#fbe3e1} tr.na td{background:#f3f3f3;color:#444}
span.pass{color:#1a7f37;font-weight:600} span.fail{color:#c0322b;font-weight:600} span.na{color:#666;font-weight:600}
figure{display:inline-block;margin:.6em .6em .6em 0;vertical-align:top} figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:.85em;color:#444;max-width:640px}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em} code{font-size:.92em}
.badges span{margin-right:1em} a{color:#0b5cad} div.wide{overflow-x:auto;max-width:100%}
)";
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"generator\" content=\"tokdyn report " TOKDYN_VERSION "\">\n";
  o += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(title), style);
  if (!back_href.empty()) o += fmt::format("<p><a href=\"{}\">&larr; {}</a></p>\n", back_href, esc(back_text));
  o += body;
  o += "\n<p class=\"note\">Written by <code>tokdyn report</code> (tokdyn " TOKDYN_VERSION "): a static page, no script, "
       "no network; figures are embedded, raw files linked relative to this page.</p>\n</body>\n</html>\n";
  return o;
}

}  // namespace tokdyn::report_cli::html
