// ffn-trace serve --checkpoint DIR [--checkpoint DIR …]: a live page on the loopback and the JSON API
// behind it. Every answer is a command's own JSON: the same library call and the same renderer as
// `run --format json`, `units --format json`, `locate --format json` and `edit --format json`, on
// models opened once at start; the page names a model by its index or its folder's name, never a path.
#include "serve_command.hpp"

#include <httplib.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/core.h>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <sys/socket.h>
#include <variant>
#include <vector>

#include "common.hpp"
#include "ffn_trace/analysis/corpus_units.hpp"
#include "ffn_trace/analysis/edit.hpp"
#include "ffn_trace/analysis/locate.hpp"
#include "ffn_trace/analysis/prompt.hpp"
#include "views/render_edit.hpp"
#include "views/render_locate.hpp"
#include "views/render_prompt.hpp"
#include "views/render_units.hpp"

namespace cli {

void setup_serve(CLI::App& app, int& status) {
    auto o = std::make_shared<serve_options>();
    auto* sub = app.add_subcommand("serve", "A live page on this computer: type a prompt and see the prediction, the lens "
                                            "and the units that write it; knock units out, trace and edit a fact; every "
                                            "number the same JSON the commands print");
    sub->add_option("--checkpoint", o->checkpoints, "A checkpoint folder the page may use (repeatable; the page names "
                                                    "it by its folder's name)")
        ->required()
        ->type_name("DIR");
    sub->add_option("--port", o->port, "The port to listen on; 0: a free one, printed")
        ->check(whole_number(0, 65535))
        ->capture_default_str();
    sub->add_option("--host", o->host, "The address to listen on; anything but 127.0.0.1 lets other computers in")
        ->capture_default_str();
    sub->add_option("--queue", o->queue, "Requests that may wait for the model; more are answered 503 at once")
        ->check(whole_number(1, 64))
        ->capture_default_str();
    sub->add_option("--time-limit", o->time_limit, "Seconds a request may wait for the model and run")
        ->check(number_between(0.1, 3600.0))
        ->capture_default_str();
    sub->callback([o, &status] { status = run_serve(*o); });
}

namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;

// The bounds of a request, whatever the model.
constexpr std::size_t max_body = 64u << 10;      // bytes of a request's JSON
constexpr std::size_t max_prompt_bytes = 4096;   // the model's positions bound its tokens too
constexpr std::size_t max_changes = 64;          // units knocked out or changed in one run
constexpr std::size_t max_top = 50;              // tokens and units of a view
constexpr std::size_t max_samples = 50;          // causal tracing's noised runs
constexpr std::size_t max_sessions = 16;         // pages open at once; a new one ends the least recently used
constexpr auto session_idle = std::chrono::minutes(30);  // a session unused this long ends

// A model given at start, opened once, with the corpus its units are read over and the edit's C
// is taken over (when there is one beside it).
struct served_model {
    std::size_t index = 0;
    std::string name, path;
    ffn_trace::transformer model;
    ffn_trace::tokenizer tok;
    ffn_trace::outcome<ffn_trace::corpus> corpus;
    ffn_trace::outcome<std::pair<std::string, std::string>> corpus_text;  // (file, text)
};

// A refusal: the HTTP status and its one-line reason.
struct refusal {
    int status = 400;
    std::string reason;
};
template <class T>
using answer = std::variant<T, refusal>;

refusal bad(std::string reason) { return {400, ffn_trace::one_line(reason, 400)}; }
refusal from(const ffn_trace::error& e) {
    if (e.message == ffn_trace::stopped_message) return {503, "stopped: the request took longer than the time limit"};
    return bad(e.to_string());
}

// The fields of a request, each of its kind and within its bounds, or a refusal naming it.
answer<std::string> text_field(const json& body, const char* name, std::size_t max_bytes) {
    const auto it = body.find(name);
    if (it == body.end() || !it->is_string()) return bad(fmt::format("{}: expected a string", name));
    const auto& s = it->get_ref<const std::string&>();
    if (s.empty()) return bad(fmt::format("{}: expected some text, got an empty string", name));
    if (s.size() > max_bytes) return bad(fmt::format("{}: {} bytes, more than the {} allowed", name, s.size(), max_bytes));
    return s;
}

answer<std::optional<std::size_t>> count_field(const json& body, const char* name, std::size_t lo, std::size_t hi) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::optional<std::size_t>{};
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() < lo || it->get<std::uint64_t>() > hi)
        return bad(fmt::format("{}: expected a whole number from {} to {}", name, lo, hi));
    return std::optional{static_cast<std::size_t>(it->get<std::uint64_t>())};
}

answer<std::vector<std::string>> list_field(const json& body, const char* name, std::size_t max_items) {
    std::vector<std::string> out;
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return out;
    if (!it->is_array() || it->size() > max_items)
        return bad(fmt::format("{}: expected a list of at most {} strings", name, max_items));
    for (const auto& item : *it) {
        if (!item.is_string() || item.get_ref<const std::string&>().size() > 64)
            return bad(fmt::format("{}: expected a list of strings such as \"172\" or \"172@4*0.5\"", name));
        out.push_back(item.get<std::string>());
    }
    return out;
}

// A page's session: the edit it keeps per model (the model with the edited W2 held in memory, never
// written), used by its later prompts, knock-outs, units and traces until undone or the session ends.
struct kept_edit {
    std::string text;  // what the page shows: "France → \" Rome\" at layer 1"
    ffn_trace::transformer model;
};
struct page_session {
    clock::time_point used;
    std::map<std::size_t, kept_edit> edits;  // by the model's index
};

// The sessions open, at most max_sessions, each ended after session_idle unused. Their edits are
// read and changed only by requests in the work queue, one at a time; the table itself by any.
class session_table {
public:
    std::string open() {
        std::lock_guard lock(mutex_);
        drop_idle();
        if (open_.size() >= max_sessions) {
            auto oldest = open_.begin();
            for (auto it = open_.begin(); it != open_.end(); ++it)
                if (it->second->used < oldest->second->used) oldest = it;
            open_.erase(oldest);
        }
        std::string id;
        for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", random_());
        open_[id] = std::make_shared<page_session>(page_session{clock::now(), {}});
        return id;
    }
    std::shared_ptr<page_session> find(const std::string& id) {
        std::lock_guard lock(mutex_);
        drop_idle();
        const auto it = open_.find(id);
        if (it == open_.end()) return nullptr;
        it->second->used = clock::now();
        return it->second;
    }
    bool end(const std::string& id) {
        std::lock_guard lock(mutex_);
        return open_.erase(id) > 0;
    }

private:
    void drop_idle() {
        std::erase_if(open_, [](const auto& s) { return clock::now() - s.second->used > session_idle; });
    }
    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<page_session>> open_;
    std::random_device random_;
};

#define FFN_TRY(var, expr)                                          \
    auto var##_got = (expr);                                        \
    if (auto* r = std::get_if<refusal>(&var##_got)) return *r;      \
    auto var = std::move(std::get<0>(var##_got))

// What every request shares: the model it names and the work's deadline.
struct request_context {
    const std::vector<std::unique_ptr<served_model>>& models;
    ffn_trace::progress watcher;
    std::shared_ptr<page_session> session;  // null: the request names none
};

// The model a request runs: the one given at start, or its session's edited copy.
const ffn_trace::transformer& model_of(const served_model& m, const request_context& c) {
    if (c.session)
        if (const auto it = c.session->edits.find(m.index); it != c.session->edits.end()) return it->second.model;
    return m.model;
}

answer<const served_model*> model_field(const json& body, const request_context& c) {
    const auto it = body.find("model");
    if (it == body.end() || it->is_null()) return c.models.front().get();
    if (it->is_number_unsigned() && it->get<std::uint64_t>() < c.models.size()) return c.models[it->get<std::size_t>()].get();
    if (it->is_string())
        for (const auto& m : c.models)
            if (m->name == it->get_ref<const std::string&>()) return m.get();
    std::string names;
    for (const auto& m : c.models) names += (names.empty() ? "" : ", ") + m->name;
    return bad(fmt::format("model: expected one of the models given at start by index from 0 or by name ({})", names));
}

answer<ffn_trace::prompt_tokens> prompt_field(const json& body, const served_model& m) {
    FFN_TRY(text, text_field(body, "prompt", max_prompt_bytes));
    auto p = ffn_trace::tokenize_prompt(m.tok, text);
    if (!p) return from(p.err());
    if (auto e = ffn_trace::check_prompt_length(m.model, p->ids.size())) return from(*e);
    return std::move(*p);
}

// POST /api/prompt {model, prompt, top}: `run --checkpoint DIR --prompt TEXT --layer all --top N --format json`.
answer<std::string> prompt_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    FFN_TRY(prompt, prompt_field(body, *m));
    FFN_TRY(top, count_field(body, "top", 1, max_top));
    auto t = ffn_trace::run_layers(model_of(*m, c), std::move(prompt), top.value_or(10), std::nullopt);
    if (!t) return from(t.err());
    t->checkpoint = m->path;
    return ffn_trace::render_layers_json(*t);
}

// POST /api/run {model, prompt, ablate, intervene, top}: `run --checkpoint DIR --prompt TEXT --layer all
// [--ablate L:J …] [--intervene L:J*F …] --top N --format json`: the prediction, the lens and every
// layer's push and units with units of any layer changed, and the change.
answer<std::string> run_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    FFN_TRY(prompt, prompt_field(body, *m));
    FFN_TRY(top, count_field(body, "top", 1, max_top));
    FFN_TRY(ablate, list_field(body, "ablate", max_changes));
    FFN_TRY(intervene, list_field(body, "intervene", max_changes));
    ffn_trace::prompt_options o;
    for (const auto& item : ablate) {
        auto units = ffn_trace::parse_units(item);
        // every layer is traced, so a unit names its layer
        if (!units)
            return bad(fmt::format("ablate: expected a unit as L:J, unit J of layer L, in decimal digits with no leading zero; got {}",
                                   ffn_trace::quote(item)));
        o.ablate.insert(o.ablate.end(), units->begin(), units->end());
    }
    if (o.ablate.size() > max_changes) return bad(fmt::format("ablate: more than {} units", max_changes));
    for (const auto& item : intervene) {
        auto iv = ffn_trace::parse_intervention(item);
        if (!iv) return from(iv.err());
        o.interventions.push_back(std::move(*iv));
    }
    auto changes = ffn_trace::interventions_by_layer(m->model, o);
    if (!changes) return from(changes.err());
    auto t = ffn_trace::run_layers(model_of(*m, c), std::move(prompt), top.value_or(10), std::nullopt, std::move(*changes));
    if (!t) return from(t.err());
    t->checkpoint = m->path;
    return ffn_trace::render_layers_json(*t);
}

// POST /api/unit {model, layer, unit, top}: `units --checkpoint DIR --layer N --unit J --top N --format json`.
answer<std::string> unit_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    FFN_TRY(layer, count_field(body, "layer", 0, m->model.n_layers() - 1));
    FFN_TRY(top, count_field(body, "top", 1, max_top));
    FFN_TRY(unit, text_field(body, "unit", 64));
    if (!layer) return bad("layer: expected the unit's layer, a whole number from 0");
    if (!m->corpus) return from(m->corpus.err());
    auto units = ffn_trace::parse_units(unit);
    if (!units) return from(units.err());
    if (units->size() != 1) return bad("unit: expected one unit, J or E:J");
    ffn_trace::units_options uo;
    uo.layer = *layer;
    uo.units = {{*layer, units->front()}};
    uo.top = top.value_or(10);
    uo.watcher = c.watcher;
    auto u = ffn_trace::read_corpus_units(model_of(*m, c), m->tok, *m->corpus, uo);
    if (!u) return from(u.err());
    ffn_trace::units_view view;
    view.cards = true;
    return ffn_trace::render_units_json(*u, *m->corpus, view);
}

// POST /api/locate {model, prompt, subject, samples}: `locate --checkpoint DIR --prompt TEXT --subject TEXT
// --samples S --format json`.
answer<std::string> locate_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    FFN_TRY(prompt, prompt_field(body, *m));
    FFN_TRY(subject, text_field(body, "subject", max_prompt_bytes));
    FFN_TRY(samples, count_field(body, "samples", 1, max_samples));
    ffn_trace::locate_options o;
    o.subject = subject;
    o.samples = samples.value_or(10);
    o.watcher = c.watcher;
    if (auto e = ffn_trace::locate_options_error(o)) return from(*e);
    if (auto e = ffn_trace::locate_model_error(m->model.source())) return from(*e);
    auto t = ffn_trace::locate(model_of(*m, c), std::move(prompt), o);
    if (!t) return from(t.err());
    return ffn_trace::render_locate_json(*t);
}

// POST /api/edit {model, prompt, subject, target, layer, at, keep}: `edit --checkpoint DIR --prompt TEXT --subject TEXT
// --target TOKEN [--layer N] [--at subject|last] --format json`, in memory: nothing is written. The edit is made to the model
// given at start; with `keep` (and a session) the edited model replaces it for the session's later
// requests, in place of any edit kept before, until undone (/api/undo) or the session ends.
answer<std::string> edit_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    FFN_TRY(prompt, text_field(body, "prompt", max_prompt_bytes));
    FFN_TRY(subject, text_field(body, "subject", max_prompt_bytes));
    FFN_TRY(target, text_field(body, "target", 64));
    FFN_TRY(layer, count_field(body, "layer", 0, m->model.n_layers() - 1));
    const auto keep_field = body.find("keep");
    const bool keep = keep_field != body.end() && *keep_field == true;
    if (keep && !c.session) return bad("keep: an edit is kept for a session: give the session /api/session opened");
    if (!m->corpus_text) return from(m->corpus_text.err());
    ffn_trace::edit_request r;
    r.layer = layer.value_or(0);
    r.prompt = prompt;
    r.subject = subject;
    r.position = {ffn_trace::edit_position::kind::subject, 0};
    if (const auto at = body.find("at"); at != body.end() && !at->is_null()) {  // --at subject or last
        if (*at == "last") r.position.at = ffn_trace::edit_position::kind::last;
        else if (*at != "subject") return bad("at: expected \"subject\" (the subject's last token) or \"last\" (the prompt's)");
    }
    r.watcher = c.watcher;
    if (auto e = ffn_trace::edit_request_error(r)) return from(*e);
    if (auto e = ffn_trace::edit_model_error(m->model.source())) return from(*e);
    if (auto length = prompt_field(body, *m); std::holds_alternative<refusal>(length)) return std::get<refusal>(length);
    auto id = ffn_trace::single_token(m->tok, target);
    if (!id) return from(id.err());
    r.target = *id;
    std::optional<ffn_trace::edit_layer_choice> chosen;
    if (!layer) {
        auto choice = ffn_trace::layer_by_tracing(m->model, m->tok, r);
        if (!choice) return from(choice.err());
        chosen = *choice;
        r.layer = choice->layer;
    }
    auto t = ffn_trace::edit_layer(m->model, m->tok, r, m->corpus_text->second, m->corpus_text->first);
    if (!t) return from(t.err());
    t->layer_choice = chosen;
    if (keep) {
        if (t->expert) return bad("keep: an expert's edit is not kept; try it without keep");
        auto w = ffn_trace::edited_tensor(m->model.source(), *t);
        if (!w) return from(w.err());
        auto edited = m->model.with_w2(t->layer, t->transposed ? w->transposed() : std::move(*w));
        if (!edited) return from(edited.err());
        c.session->edits.insert_or_assign(m->index, kept_edit{fmt::format("{} → {} at layer {}", subject, ffn_trace::quote(t->target), t->layer),
                                                              std::move(*edited)});
    }
    return ffn_trace::render_edit_json(*t);
}

// POST /api/undo {model, session}: the session's kept edit of the model dropped.
answer<std::string> undo_answer(const json& body, const request_context& c) {
    FFN_TRY(m, model_field(body, c));
    if (!c.session) return bad("session: expected the session /api/session opened");
    return json{{"undone", c.session->edits.erase(m->index) > 0}}.dump();
}

// One model runs one request at a time; `limit` more may wait for it, each at most the time limit.
class work_queue {
public:
    work_queue(std::size_t limit, std::chrono::milliseconds time_limit) : limit_(limit), time_limit_(time_limit) {}

    template <class Work>
    answer<std::string> run(Work work) {
        if (waiting_.fetch_add(1) > limit_) {
            waiting_.fetch_sub(1);
            return refusal{503, fmt::format("busy: {} requests are waiting for the model; try again", limit_)};
        }
        const auto deadline = clock::now() + time_limit_;
        std::unique_lock lock(running_, std::defer_lock);
        const bool got = lock.try_lock_until(deadline);
        waiting_.fetch_sub(1);
        if (!got) return refusal{503, "busy: the model was not free within the time limit; try again"};
        return work([deadline](std::string_view, std::size_t, std::size_t) { return !interrupted() && clock::now() < deadline; });
    }

private:
    std::size_t limit_;
    std::chrono::milliseconds time_limit_;
    std::atomic<std::size_t> waiting_{0};
    std::timed_mutex running_;
};

void send_json(httplib::Response& res, int status, std::string body) {
    res.status = status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::move(body), "application/json; charset=utf-8");
}

void send_refusal(httplib::Response& res, const refusal& r) { send_json(res, r.status, json{{"error", r.reason}}.dump()); }

// The Host header names this server (the address it listens on, or the loopback's names): a page of
// another site that a DNS name was pointed at 127.0.0.1 for (DNS rebinding) is refused.
std::optional<refusal> refused_host(const std::string& host_header, const std::string& listening, int port) {
    if (host_header.empty()) return refusal{400, "the request has no Host header"};
    std::string name = host_header, given_port;
    const auto colon = name.rfind(':');
    if (colon != std::string::npos && name.find(']', colon) == std::string::npos) {
        given_port = name.substr(colon + 1);
        name.resize(colon);
    }
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool ours = name == "localhost" || name == "127.0.0.1" || name == "[::1]" || name == listening ||
                      name == "[" + listening + "]";
    if (!ours || (!given_port.empty() && given_port != std::to_string(port)))
        return refusal{403, fmt::format("the Host header names {}, not this server", ffn_trace::quote(host_header))};
    return std::nullopt;
}

// The folder's name the page knows a checkpoint by: "capitals" for data/models/capitals/.
std::string model_name(const std::string& path) {
    const auto p = std::filesystem::path(directory_of(path)).lexically_normal();
    const auto name = p.filename().empty() ? p.parent_path().filename() : p.filename();
    return name.string();
}

ffn_trace::outcome<std::unique_ptr<served_model>> open_model(const std::string& path) {
    ffn_trace::prompt_source s;
    s.checkpoint = path;
    auto opened = ffn_trace::open_prompt_model(s);
    if (!opened) return opened.err();
    auto corpus = corpus_beside(path, "", ffn_trace::load_options{}.max_file_size, opened->tok, opened->model.max_positions());
    ffn_trace::outcome<std::pair<std::string, std::string>> text = ffn_trace::error{};
    if (auto file = ffn_trace::corpus_file(path, "", " to take the edit's C over"); !file) text = file.err();
    else if (auto read = ffn_trace::read_prompt_file(*file, ffn_trace::load_options{}.max_file_size); !read) text = read.err();
    else text = std::pair{*file, std::move(*read)};
    return std::make_unique<served_model>(
        served_model{0, model_name(path), path, std::move(opened->model), std::move(opened->tok), std::move(corpus), std::move(text)});
}

json models_listing(const std::vector<std::unique_ptr<served_model>>& models) {
    json list = json::array();
    for (std::size_t i = 0; i < models.size(); ++i)
        list.push_back({{"index", i},
                        {"name", models[i]->name},
                        {"layers", models[i]->model.n_layers()},
                        {"positions", models[i]->model.max_positions()}});
    return json{{"models", list},
                {"limits", {{"body_bytes", max_body}, {"prompt_bytes", max_prompt_bytes}, {"changes", max_changes},
                            {"top", max_top}, {"samples", max_samples}}}};
}

using endpoint = answer<std::string> (*)(const json&, const request_context&);

}  // namespace

int run_serve(const serve_options& o) {
    if (auto e = ffn_trace::prepare_matrix_library()) return report(*e);
    std::vector<std::unique_ptr<served_model>> models;
    set_activity({"reading the checkpoints", "the models given"});
    for (const auto& path : o.checkpoints) {
        auto m = open_model(path);
        if (!m) return report(m.err());
        for (const auto& other : models)
            if (other->name == (*m)->name)
                return report({path, "--checkpoint", fmt::format("is named {} as {} is: the page names models by their "
                                                                 "folder's name; give folders of different names",
                                                                 ffn_trace::quote(other->name), other->path)});
        (*m)->index = models.size();
        models.push_back(std::move(*m));
    }

    httplib::Server server;
    server.set_payload_max_length(max_body);  // a longer body is answered 413 before it is read
    server.set_read_timeout(5, 0);            // a client that sends slowly is dropped
    server.set_write_timeout(5, 0);
    server.set_keep_alive_timeout(2);         // an idle browser's connection frees its thread soon
    // The port is this server's alone (not SO_REUSEPORT, httplib's default, which would let another
    // program listen on it too and take some of its connections); and the socket is kept, so that
    // its backlog can be raised from httplib's 5, under which a burst of clients is reset.
    int listening = -1;
    server.set_socket_options([&listening](socket_t sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        listening = sock;
    });
    work_queue queue(o.queue, std::chrono::milliseconds(static_cast<long long>(o.time_limit * 1000)));
    int port = 0;
    server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
        if (auto r = refused_host(req.get_header_value("Host"), o.host, port)) {
            send_refusal(res, *r);
            return httplib::Server::HandlerResponse::Handled;
        }
        res.set_header("X-Content-Type-Options", "nosniff");
        return httplib::Server::HandlerResponse::Unhandled;
    });
    server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return;
        const std::string reason = res.status == 413   ? fmt::format("the body is larger than {} bytes", max_body)
                                   : res.status == 404 ? "no such page: the API is /api/models, and POST /api/session, "
                                                         "/api/session/end, /api/prompt, /api/run, /api/unit, /api/locate, "
                                                         "/api/edit, /api/undo"
                                                       : fmt::format("HTTP {}", res.status);
        send_json(res, res.status, json{{"error", reason}}.dump());
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_refusal(res, {500, "the request could not be answered"});
    });
    const auto page = [](const char* type, std::string (*content)()) {
        return [type, content](const httplib::Request&, httplib::Response& res) {
            res.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'");
            res.set_content(content(), type);
        };
    };
    server.Get("/", page("text/html; charset=utf-8", serve_page));
    server.Get("/page.css", page("text/css; charset=utf-8", serve_style));
    server.Get("/page.js", page("text/javascript; charset=utf-8", serve_script));
    server.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    server.Get("/api/models", [&](const httplib::Request&, httplib::Response& res) { send_json(res, 200, models_listing(models).dump()); });
    session_table sessions;
    server.Post("/api/session", [&](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, json{{"session", sessions.open()}, {"idle_minutes", session_idle.count()}}.dump());
    });
    server.Post("/api/session/end", [&](const httplib::Request& req, httplib::Response& res) {
        const json body = json::parse(req.body, nullptr, false);
        const auto it = body.is_object() ? body.find("session") : body.end();
        if (it == body.end() || !it->is_string()) return send_refusal(res, bad("session: expected the session to end"));
        send_json(res, 200, json{{"ended", sessions.end(it->get<std::string>())}}.dump());
    });
    const std::pair<const char*, endpoint> endpoints[] = {{"/api/prompt", prompt_answer}, {"/api/run", run_answer},
                                                           {"/api/unit", unit_answer},     {"/api/locate", locate_answer},
                                                           {"/api/edit", edit_answer},     {"/api/undo", undo_answer}};
    for (const auto& [route, handler] : endpoints)
        server.Post(route, [&, handler = handler](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            if (body.is_discarded() || !body.is_object()) return send_refusal(res, bad("the body is not a JSON object"));
            std::shared_ptr<page_session> session;
            if (const auto it = body.find("session"); it != body.end() && !it->is_null())
                if (!it->is_string() || !(session = sessions.find(it->get<std::string>())))
                    return send_refusal(res, bad(fmt::format("session: no such session: it ended, or went unused for {} minutes; reload "
                                                             "the page", session_idle.count())));
            answer<std::string> a = queue.run([&](ffn_trace::progress watcher) -> answer<std::string> {
                try {
                    return handler(body, request_context{models, std::move(watcher), session});
                } catch (const std::bad_alloc&) {
                    return refusal{503, "out of memory: try a shorter prompt or fewer samples"};
                } catch (const std::length_error&) {
                    return refusal{503, "out of memory: try a shorter prompt or fewer samples"};
                }
            });
            if (auto* r = std::get_if<refusal>(&a)) return send_refusal(res, *r);
            send_json(res, 200, std::move(std::get<std::string>(a)));
        });

    port = o.port == 0 ? server.bind_to_any_port(o.host) : (server.bind_to_port(o.host, static_cast<int>(o.port)) ? static_cast<int>(o.port) : -1);
    if (port <= 0)
        return report({"", o.port == 0 ? "--host" : "--port",
                       fmt::format("could not listen on {} port {}: it is taken, or not an address of this computer", o.host, o.port)});
    ::listen(listening, SOMAXCONN);
    if (o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1")
        std::fputs(fmt::format("warning: listening on {}, not the loopback: any computer that reaches it can use the page "
                               "and the models given\n",
                               o.host)
                       .c_str(),
                   stderr);
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m->name;
    const std::string shown_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
    std::fputs(fmt::format("serving http://{}:{}/ ({}); Ctrl-C stops it\n", shown_host, port, names).c_str(), stdout);
    std::fflush(stdout);
    if (!server.listen_after_bind())
        return report({"", "--port", fmt::format("stopped listening on {} port {}", o.host, port)});
    return exit_ok;
}

}  // namespace cli
