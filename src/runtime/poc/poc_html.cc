#include "runtime/poc/poc_html.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace carve::poc {

std::string ChartJs();  // generated: cmake/embed_text.cmake

namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em;vertical-align:top;text-align:left}"
    ".pass{color:#075}.fail{color:#b00}.inconclusive{color:#a60}.not-run{color:#777}"
    "figure{max-width:40em}pre{white-space:pre-wrap}";

// Draws every canvas from its data-chart.
constexpr const char* kDraw =
    "document.querySelectorAll('canvas.chart').forEach(function(c){"
    "var d=JSON.parse(c.dataset.chart);"
    "new Chart(c,{type:'bar',data:{labels:d.labels,datasets:d.series.map(function(s){"
    "return {label:s.label,data:s.values};})},options:{animation:false,"
    "plugins:{title:{display:true,text:d.title}}}});});";

}  // namespace

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(
      s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&#39;"}});
}

std::string Dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Fixed2(const nlohmann::json& v) {
  return v.is_number() ? absl::StrFormat("%.2f", v.get<double>()) : "-";
}

std::string ChartFigure(const nlohmann::json& chart, int id) {
  return absl::StrCat("<figure><canvas class=\"chart\" id=\"chart-", id, "\" data-chart=\"",
                      Escape(Dump(chart)), "\"></canvas><figcaption>",
                      Escape(chart.value("title", "")), "</figcaption></figure>\n");
}

std::string Page(const std::string& title, const std::string& body) {
  return absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
                      Escape(title), "</title><style>", kStyle, "</style></head><body>\n<h1>",
                      Escape(title), "</h1>\n", body, "<script>", ChartJs(), "</script>\n<script>",
                      kDraw, "</script>\n</body></html>\n");
}

}  // namespace carve::poc
