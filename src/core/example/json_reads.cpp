// The typed readers of an example file's JSON: nested arrays checked against a shape, matrices,
// vectors, strings and prose, and the keys an object may hold.
#include <algorithm>
#include <cmath>
#include <limits>
#include <fmt/format.h>

#include "base/text.hpp"
#include "example/loading.hpp"
#include "json/json_reader.hpp"

namespace ffn_trace::detail {

std::string join(const std::vector<std::string_view>& words, std::string_view sep) {
    return fmt::format("{}", fmt::join(words, sep));
}

const json* member(const json& object, std::string_view key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

std::optional<peeked> peek(const json* j) {
    if (!j || !j->is_array() || j->empty() || !(*j)[0].is_array() || (*j)[0].empty()) return std::nullopt;
    return peeked{j->size(), (*j)[0].size()};
}

array_reader::array_reader(const json_fields& fields, std::string path, std::vector<std::optional<std::size_t>> expected,
                           std::vector<std::string_view> units, std::string_view why, bool allow_null)
    : shape(std::move(expected)), fields_(fields), path_(std::move(path)), units_(std::move(units)), why_(why), allow_null_(allow_null) {}

bool array_reader::fail(std::string message) {
    std::string where = path_;
    for (auto i : at_) where += fmt::format("[{}]", i);
    problem = fields_.fail(std::move(where), std::move(message));
    return false;
}

bool array_reader::read(const json& node, std::size_t level, std::size_t index) {
    if (problem) return false;
    at_.clear();
    if (level == 1) at_.push_back(index);
    return walk(node, level);
}

bool array_reader::walk(const json& node, std::size_t level) {
    if (level == shape.size()) {
        if (node.is_null() && allow_null_) {
            values.push_back(std::numeric_limits<double>::quiet_NaN());
            return true;
        }
        if (!node.is_number())
            return fail(fmt::format("expected a number{}, got {}", allow_null_ ? " or null" : "", kind_of(node)));
        values.push_back(node.get<double>());
        return true;
    }
    if (!node.is_array()) return fail(fmt::format("expected an array of {}{}, got {}", units_[level], why_, kind_of(node)));
    if (!shape[level]) {
        if (node.empty()) return fail(fmt::format("expected an array of {}{}, got an empty array", units_[level], why_));
        shape[level] = node.size();
    }
    if (node.size() != *shape[level])
        return fail(fmt::format("expected {} {}{}, got {}", *shape[level], units_[level], why_, node.size()));
    at_.push_back(0);
    for (std::size_t i = 0; i < node.size(); ++i) {
        at_.back() = i;
        if (!walk(node[i], level + 1)) return false;
    }
    at_.pop_back();
    return true;
}

bool array_reader::finish(std::size_t count) {
    if (problem) return false;
    at_.clear();
    if (!shape[0]) {
        if (count == 0) return fail(fmt::format("expected an array of {}{}, got an empty array", units_[0], why_));
        shape[0] = count;
    }
    if (count != *shape[0]) return fail(fmt::format("expected {} {}{}, got {}", *shape[0], units_[0], why_, count));
    return true;
}

outcome<tensor> json_fields::read_array(const json& j, const std::string& path,
                                        std::vector<std::optional<std::size_t>> shape,
                                        const std::vector<std::string_view>& units, std::string_view why,
                                        bool allow_null) const {
    array_reader reader(*this, path, std::move(shape), units, why, allow_null);
    if (!reader.read(j, 0)) return *reader.problem;
    tensor out;
    for (const auto& d : reader.shape) out.shape.push_back(*d);
    out.values.reserve(reader.values.size());
    for (const double v : reader.values) out.values.push_back(std::isnan(v) ? std::nullopt : std::optional<double>(v));
    return out;
}

outcome<matrix> json_fields::read_matrix(const json& j, const std::string& path, std::size_t rows,
                                         std::size_t cols, std::string_view why) const {
    auto t = read_array(j, path, {rows, cols}, {"rows", "numbers"}, why);
    if (!t) return t.err();
    matrix m(rows, cols);
    std::transform(t->values.begin(), t->values.end(), m.data.begin(), [](auto v) { return *v; });
    return m;
}

outcome<std::vector<double>> json_fields::read_vector(const json& j, const std::string& path, std::size_t n,
                                                      std::string_view why) const {
    auto t = read_array(j, path, {n}, {"numbers"}, why);
    if (!t) return t.err();
    std::vector<double> v;
    for (auto x : t->values) v.push_back(*x);
    return v;
}

outcome<std::string> json_fields::read_string(const json& j, const std::string& path) const {
    if (!j.is_string()) return fail(path, fmt::format("expected a string, got {}", kind_of(j)));
    return j.get<std::string>();
}

outcome<std::string> json_fields::read_text(const json& j, const std::string& path) const {
    auto s = read_string(j, path);
    if (!s) return s;
    return one_line(*s);
}

std::optional<error> json_fields::check_keys(const json& object, const std::string& prefix,
                                             const std::vector<std::string_view>& valid) const {
    for (const auto& [key, value] : object.items()) {
        if (std::find(valid.begin(), valid.end(), key) != valid.end()) continue;
        return fail(prefix + escape(key), fmt::format("unknown key; did you mean \"{}\"? (valid keys here: {})",
                                                      nearest(key, valid), join(valid)));
    }
    return std::nullopt;
}

}  // namespace ffn_trace::detail
