// The edited model written out (edit.hpp's write_edited_checkpoint): the checkpoint's folder
// copied to a temporary folder beside the new one, the file holding W2 rewritten by the
// safetensors writer, and the folder renamed into place, so that the new one is whole or absent.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "ffn_trace/analysis/edit.hpp"
#include "ffn_trace/model/transformer.hpp"
#include "checkpoint/safetensors_writer.hpp"

namespace ffn_trace {

namespace {

namespace fs = std::filesystem;

// Whether `inner` is `outer` or lies inside it, both made absolute without needing to exist.
bool within(const fs::path& inner, const fs::path& outer) {
    std::error_code ec;
    const fs::path a = fs::weakly_canonical(inner, ec), b = fs::weakly_canonical(outer, ec);
    auto i = a.begin();
    for (auto o = b.begin(); o != b.end(); ++o, ++i)
        if (o->empty()) continue;
        else if (i == a.end() || *i != *o) return false;
    return true;
}

}  // namespace

std::optional<error> edit_output_error(const std::string& from, const std::string& to) {
    std::error_code ec;
    if (!fs::is_directory(from, ec))
        return error{from, "output", "the edited model is written as a copy of the checkpoint's folder; give the folder"};
    if (within(to, from)) return error{to, "output", fmt::format("is the checkpoint's folder {} or inside it; give a new folder elsewhere", from)};
    if (fs::exists(fs::symlink_status(to, ec)))
        return error{to, "output", "already exists; give a folder that does not exist yet (nothing is written over)"};
    const fs::path parent = fs::path(to).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec)) return error{to, "output", "its parent folder does not exist"};
    return std::nullopt;
}

namespace {

// A shard index's metadata.total_size after a shard changed size by `change` bytes.
std::optional<error> adjust_index(const fs::path& index, std::int64_t change) {
    std::ifstream in(index);
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::ordered_json::parse(text.str(), nullptr, false);
    if (!j.is_object()) return error{index.string(), "", "the shard index is not a JSON object"};
    if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("total_size") &&
        j["metadata"]["total_size"].is_number_integer())
        j["metadata"]["total_size"] = j["metadata"]["total_size"].get<std::int64_t>() + change;
    std::ofstream out(index, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return error{index.string(), "", "writing the shard index failed"};
    return std::nullopt;
}

outcome<written_checkpoint> copy_and_replace(const checkpoint& ck, const fs::path& from, const fs::path& tmp,
                                             const std::string& tensor, const matrix& values, dtype as) {
    const tensor_info* info = ck.tensors().find(tensor);
    if (!info) return error{ck.origin(), tensor, "no tensor of this name"};
    std::error_code ec;
    const fs::path held = fs::weakly_canonical(info->file, ec);
    written_checkpoint w;
    w.written = as;
    fs::create_directory(tmp, ec);
    if (ec) return error{tmp.string(), "output", fmt::format("cannot create the folder: {}", ec.message())};
    for (const auto& entry : fs::recursive_directory_iterator(from, ec)) {
        // Lexically: a file that is a link (as a Hugging Face cache links its blobs) keeps its own name.
        const fs::path rel = entry.path().lexically_relative(from), dest = tmp / rel;
        if (entry.is_directory()) {
            fs::create_directories(dest, ec);
        } else if (fs::weakly_canonical(entry.path(), ec) == held) {
            auto size = write_safetensors_replacing(info->file, dest.string(), tensor, values.data, as);
            if (!size) return size.err();
            w.rewritten = rel.string();
            const auto before = static_cast<std::int64_t>(fs::file_size(info->file, ec));
            const fs::path index = tmp / rel.parent_path() / "model.safetensors.index.json";
            if (static_cast<std::int64_t>(*size) != before && fs::exists(index))
                if (auto e = adjust_index(index, static_cast<std::int64_t>(*size) - before)) return *e;
        } else {
            fs::copy_file(entry.path(), dest, ec);
        }
        if (ec) return error{dest.string(), "output", fmt::format("cannot write: {}", ec.message())};
        if (!entry.is_directory()) w.files.push_back(rel.string());
    }
    if (ec) return error{from.string(), "", fmt::format("cannot read the folder: {}", ec.message())};
    if (w.rewritten.empty()) return error{info->file, tensor, "the file holding the tensor is not inside the checkpoint's folder"};
    return w;
}

}  // namespace

outcome<written_checkpoint> write_edited_checkpoint(const checkpoint& ck, const std::string& from, const std::string& to,
                                                   const std::string& tensor, const matrix& values, dtype as) {
    if (auto e = edit_output_error(from, to)) return *e;
    const fs::path target(to);
    const fs::path tmp = target.parent_path() / fmt::format(".{}.partial-{}", target.filename().string(), ::getpid());
    auto w = copy_and_replace(ck, from, tmp, tensor, values, as);
    std::error_code ec;
    if (w) fs::rename(tmp, target, ec);
    if (!w || ec) {
        fs::remove_all(tmp, ec);
        if (!w) return w.err();
        return error{to, "output", "cannot rename the finished folder into place"};
    }
    w->directory = target.string();
    return w;
}

std::optional<error> check_written(const std::string& directory, const tokenizer& tok, edit_trace& t) {
    auto ck = checkpoint::open(directory);
    if (!ck) return ck.err();
    auto model = transformer::open(std::make_shared<const checkpoint>(std::move(*ck)));
    if (!model) return model.err();
    const auto& ids = t.contexts.front().prompt.ids;
    hook_request q;
    q.head_rows = {ids.size() - 1};
    auto run = model->run_with_hooks(ids, q);
    if (!run) return run.err();
    const auto z = run->logits.row(0);
    const softmax_sums s = softmax_sums_of(z);
    const auto best = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
    const std::string text = tok.text(best);
    t.written = directory;
    t.written_prediction = edit_prediction{best, text.empty() ? fmt::format("#{}", best) : text, s.p(z[best]),
                                           s.p(z[t.target_id]), s.p(z[t.efficacy.true_id])};
    return std::nullopt;
}

}  // namespace ffn_trace
