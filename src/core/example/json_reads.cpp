// The typed readers of an example file's JSON: nested arrays checked against a shape, matrices,
// vectors, strings and prose, and the keys an object may hold.
#include <algorithm>
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

outcome<tensor> json_fields::read_array(const json& j, const std::string& path,
                                        std::vector<std::optional<std::size_t>> shape,
                                        const std::vector<std::string_view>& units, std::string_view why,
                                        bool allow_null) const {
    tensor out;
    std::optional<error> problem;
    auto walk = [&](auto&& self, const json& node, const std::string& where, std::size_t level) -> void {
        if (problem) return;
        if (level == shape.size()) {
            if (node.is_null() && allow_null) {
                out.values.emplace_back(std::nullopt);
            } else if (!node.is_number()) {
                problem = fail(where, fmt::format("expected a number{}, got {}", allow_null ? " or null" : "",
                                                  kind_of(node)));
            } else {
                out.values.emplace_back(node.get<double>());
            }
            return;
        }
        if (!node.is_array()) {
            problem = fail(where, fmt::format("expected an array of {}{}, got {}", units[level], why, kind_of(node)));
            return;
        }
        if (!shape[level]) {
            if (node.empty()) {
                problem = fail(where, fmt::format("expected an array of {}{}, got an empty array", units[level], why));
                return;
            }
            shape[level] = node.size();
        }
        if (node.size() != *shape[level]) {
            problem = fail(where, fmt::format("expected {} {}{}, got {}", *shape[level], units[level], why, node.size()));
            return;
        }
        for (std::size_t i = 0; i < node.size(); ++i) self(self, node[i], fmt::format("{}[{}]", where, i), level + 1);
    };
    walk(walk, j, path, 0);
    if (problem) return *problem;
    for (const auto& d : shape) out.shape.push_back(*d);
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
