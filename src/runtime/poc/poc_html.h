// The HTML the kit's pages share (report.html, compare.html): escaping, JSON text that never
// throws, bar charts drawn by Chart.js inlined into the page, so a page opens without a network.
#ifndef CARVE_RUNTIME_POC_POC_HTML_H_
#define CARVE_RUNTIME_POC_POC_HTML_H_

#include <string>

#include "nlohmann/json.hpp"

namespace carve::poc {

std::string Escape(const std::string& s);
// JSON text; invalid UTF-8 (a name given as raw bytes) becomes U+FFFD, never a throw.
std::string Dump(const nlohmann::json& j, int indent = -1);
// A number with two decimals; "-" when it is not a number.
std::string Fixed2(const nlohmann::json& v);
// A bar chart's canvas: `chart` is {title, labels, series: [{label, values}]}.
std::string ChartFigure(const nlohmann::json& chart, int id);
// A whole page: `title`, then `body` (HTML), then Chart.js and the script that draws every chart.
std::string Page(const std::string& title, const std::string& body);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_HTML_H_
