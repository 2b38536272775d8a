// The transcoder's forward pass, loss, gradients and one Adam step against NumPy float64
// (tests/inputs/transcoder/generate.py wrote reference.json), its training's checks, and its
// folder written and read, one of them written here by hand as another program would.
#include "ffn_trace/core/transcoder.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint_writer.hpp"
#include "checkpoint/transcoder_file.hpp"
#include "test_paths.hpp"

using namespace ffn_trace;
namespace ckpt = test::ckpt;
using json = nlohmann::json;

namespace {

json reference() {
    std::ifstream in(FFN_TRACE_TEST_INPUTS + "/transcoder/reference.json");
    return json::parse(in);
}

matrix matrix_of(const json& j) {
    matrix m(j.size(), j[0].size());
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c) m(r, c) = j[r][c].get<double>();
    return m;
}

std::vector<double> vector_of(const json& j) { return j.get<std::vector<double>>(); }

// The reference's transcoder: W_enc (F, d) held as W_encᵀ.
transcoder reference_transcoder(const json& r, const json& c) {
    transcoder tc;
    tc.act = c["k"].get<std::size_t>() > 0 ? transcoder::kind::topk : transcoder::kind::relu;
    tc.k = c["k"].get<std::size_t>();
    tc.encoder = matrix_of(r["W_enc"]).transposed();
    tc.b_enc = vector_of(r["b_enc"]);
    tc.decoder = matrix_of(r["W_dec"]);
    tc.b_dec = vector_of(r["b_dec"]);
    return tc;
}

training_options options(std::size_t features, std::size_t k, double l1 = 0) {
    training_options o;
    o.features = features;
    o.k = k;
    o.l1 = l1;
    return o;
}

void check_close(std::span<const double> got, std::span<const double> want, const char* what) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(what);
        CAPTURE(i);
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12).scale(1));
    }
}

}  // namespace

TEST_CASE("a transcoder's forward pass, loss, gradients and one Adam step equal NumPy float64's") {
    const json r = reference();
    const matrix x = matrix_of(r["x"]), y = matrix_of(r["y"]);
    for (const auto& c : r["cases"]) {
        CAPTURE(c["k"].get<std::size_t>());
        transcoder tc = reference_transcoder(r, c);
        const double l1 = c["l1"].get<double>();
        const transcoder_pass p = transcoder_forward(tc, x);
        check_close(p.pre.data, matrix_of(c["pre"]).data, "pre");
        check_close(p.z.data, matrix_of(c["z"]).data, "z");
        check_close(p.y_hat.data, matrix_of(c["y_hat"]).data, "y_hat");
        const transcoder_gradients g = transcoder_backward(tc, x, y, p, l1);
        CHECK(g.mse == doctest::Approx(c["mse"].get<double>()).epsilon(1e-12));
        CHECK(g.loss == doctest::Approx(c["loss"].get<double>()).epsilon(1e-12));
        const json& want = c["gradients"];
        check_close(g.encoder.data, matrix_of(want["W_enc"]).transposed().data, "dW_enc");
        check_close(g.b_enc, vector_of(want["b_enc"]), "db_enc");
        check_close(g.decoder.data, matrix_of(want["W_dec"]).data, "dW_dec");
        check_close(g.b_dec, vector_of(want["b_dec"]), "db_dec");
        adam_state s = adam_start(tc);
        adam_step(tc, s, g, c["lr"].get<double>());
        const json& after = c["after_adam"];
        check_close(tc.encoder.data, matrix_of(after["W_enc"]).transposed().data, "W_enc after Adam");
        check_close(tc.b_enc, vector_of(after["b_enc"]), "b_enc after Adam");
        check_close(tc.decoder.data, matrix_of(after["W_dec"]).data, "W_dec after Adam");
        check_close(tc.b_dec, vector_of(after["b_dec"]), "b_dec after Adam");
    }
}

TEST_CASE("with few features active the gradients are NumPy's still, features that never fire getting none") {
    // The reference's 4 features and 60 more that never fire (an encoder column of 0 and b_enc
    // −100): at most 4 of 64 features a token are active, so the products run over the active
    // features alone, and the first 4 features' numbers must be the reference's.
    const json r = reference();
    const matrix x = matrix_of(r["x"]), y = matrix_of(r["y"]);
    constexpr std::size_t extra = 60;
    for (const auto& c : r["cases"]) {
        CAPTURE(c["k"].get<std::size_t>());
        const transcoder small = reference_transcoder(r, c);
        const std::size_t F = small.features(), d = small.d_model();
        transcoder tc = small;
        tc.encoder = matrix(d, F + extra);
        tc.decoder = matrix(F + extra, d);
        for (std::size_t i = 0; i < d; ++i)
            for (std::size_t f = 0; f < F + extra; ++f) {
                tc.encoder(i, f) = f < F ? small.encoder(i, f) : 0.0;
                tc.decoder(f, i) = f < F ? small.decoder(f, i) : 1.0;
            }
        tc.b_enc.resize(F + extra, -100.0);
        const double l1 = c["l1"].get<double>();
        const transcoder_pass p = transcoder_forward(tc, x);
        check_close(p.y_hat.data, matrix_of(c["y_hat"]).data, "y_hat");
        const transcoder_gradients g = transcoder_backward(tc, x, y, p, l1);
        CHECK(g.loss == doctest::Approx(c["loss"].get<double>()).epsilon(1e-12));
        const json& want = c["gradients"];
        const matrix w_enc = matrix_of(want["W_enc"]), w_dec = matrix_of(want["W_dec"]);
        for (std::size_t f = 0; f < F + extra; ++f) {
            CAPTURE(f);
            CHECK(g.b_enc[f] == doctest::Approx(f < F ? want["b_enc"][f].get<double>() : 0.0).epsilon(1e-12).scale(1));
            for (std::size_t i = 0; i < d; ++i) {
                CHECK(g.encoder(i, f) == doctest::Approx(f < F ? w_enc(f, i) : 0.0).epsilon(1e-12).scale(1));
                CHECK(g.decoder(f, i) == doctest::Approx(f < F ? w_dec(f, i) : 0.0).epsilon(1e-12).scale(1));
            }
        }
        check_close(g.b_dec, vector_of(want["b_dec"]), "db_dec");
    }
}

TEST_CASE("TopK keeps each row's k largest, ties to the lower index, and zeroes a kept negative value") {
    transcoder tc;
    tc.k = 2;
    matrix pre(2, 4);
    pre.data = {1, 3, 3, 2, -1, -2, -0.5, -3};
    const matrix z = transcoder_activate(tc, pre);
    CHECK(z.data == std::vector<double>{0, 3, 3, 0, 0, 0, 0, 0});
}

TEST_CASE("training refuses what cannot be trained, naming the option") {
    matrix x(10, 3), y(10, 3);
    transcoder tc;
    auto refused = [&](training_options o) {
        auto r = train_transcoder(tc, x, y, o);
        REQUIRE_FALSE(r);
        return r.err();
    };
    CHECK(refused(options(0, 0)).path == "features");
    CHECK(refused(options(4, 5)).path == "k");
    CHECK(refused(options(4, 0, -1)).path == "l1");
    CHECK(refused(options(4, 0, std::numeric_limits<double>::quiet_NaN())).path == "l1");
    const error small = refused(options(16, 2));
    CHECK(small.path == "corpus");
    CHECK(small.message.find("10 activations; 16 features need at least 16") != std::string::npos);
}

TEST_CASE("training lowers the loss and gives the same transcoder for the same seed") {
    matrix x(64, 3), y(64, 3);
    for (std::size_t t = 0; t < 64; ++t) {
        const double s = static_cast<double>(t);
        x(t, 0) = std::sin(0.3 * s);
        x(t, 1) = std::cos(0.7 * s);
        x(t, 2) = 0.1 * static_cast<double>(t % 5);
        for (std::size_t j = 0; j < 3; ++j) y(t, j) = std::max(0.0, x(t, j)) * 2 - x(t, (j + 1) % 3);
    }
    training_options o = options(8, 3);
    o.epochs = 30;
    o.lr = 0.01;
    o.seed = 3;
    o.batch = 16;
    transcoder a, b;
    auto ea = train_transcoder(a, x, y, o);
    auto eb = train_transcoder(b, x, y, o);
    REQUIRE(ea);
    REQUIRE(eb);
    REQUIRE(ea->size() == 30);
    CHECK(ea->back().mse < ea->front().mse / 2);
    CHECK(ea->back().explained_variance > ea->front().explained_variance);
    CHECK(ea->back().l0 <= 3);
    CHECK(a.encoder.data == b.encoder.data);
    CHECK(a.decoder.data == b.decoder.data);
}

TEST_CASE("a transcoder's folder written by hand as circuit-tracer lays it out is read") {
    const json r = reference();
    ckpt::temp_dir dir;
    auto flat = [](const json& j) {
        std::vector<double> v;
        for (const auto& row : j)
            for (const auto& e : row) v.push_back(e.get<double>());
        return v;
    };
    std::vector<ckpt::tensor> tensors{{"W_enc", "F64", {4, 3}, flat(r["W_enc"])},
                                      {"W_dec", "F64", {4, 3}, flat(r["W_dec"])},
                                      {"b_enc", "F64", {4}, vector_of(r["b_enc"])},
                                      {"b_dec", "F64", {3}, vector_of(r["b_dec"])}};
    dir.write("layer_2.safetensors", ckpt::safetensors_file(tensors));
    dir.write("config.json", R"({"layer": 2, "activation": "topk", "k": 2})");
    auto tc = read_transcoder(dir.path());
    REQUIRE(tc);
    CHECK(tc->layer == 2);
    CHECK(tc->act == transcoder::kind::topk);
    CHECK(tc->k == 2);
    REQUIRE(tc->d_model() == 3);
    REQUIRE(tc->features() == 4);
    CHECK(tc->encoder(1, 2) == r["W_enc"][2][1].get<double>());  // W_encᵀ
    CHECK(tc->decoder(2, 1) == r["W_dec"][2][1].get<double>());
    const transcoder_pass p = transcoder_forward(*tc, matrix_of(r["x"]));
    check_close(p.y_hat.data, matrix_of(r["cases"][0]["y_hat"]).data, "y_hat");

    SUBCASE("and what ffn-trace writes reads back to float32") {
        ckpt::temp_dir out;
        tc->model = "a model";
        REQUIRE_FALSE(write_transcoder(*tc, out.path()));
        auto back = read_transcoder(out.path());
        REQUIRE(back);
        CHECK(back->model == "a model");
        CHECK(back->k == 2);
        for (std::size_t i = 0; i < tc->encoder.data.size(); ++i)
            CHECK(back->encoder.data[i] == static_cast<double>(static_cast<float>(tc->encoder.data[i])));
        std::ifstream config(out / "config.json");
        const json c = json::parse(config);
        CHECK(c["feature_input_hook"] == "blocks.2.mlp_in");
        CHECK(c["feature_output_hook"] == "blocks.2.mlp_out");
        CHECK(c["d_transcoder"] == 4);
    }
    SUBCASE("a missing tensor is named") {
        tensors.pop_back();
        dir.write("layer_2.safetensors", ckpt::safetensors_file(tensors));
        auto e = read_transcoder(dir.path());
        REQUIRE_FALSE(e);
        CHECK(e.err().path == "b_dec");
    }
    SUBCASE("a decoder of the wrong shape is named with the shape expected") {
        tensors[1].shape = {3, 4};
        dir.write("layer_2.safetensors", ckpt::safetensors_file(tensors));
        auto e = read_transcoder(dir.path());
        REQUIRE_FALSE(e);
        CHECK(e.err().path == "W_dec");
        CHECK(e.err().message.find("expected shape [4, 3]") != std::string::npos);
    }
    SUBCASE("a value that is not finite is refused") {
        tensors[0].values[5] = std::numeric_limits<double>::infinity();
        dir.write("layer_2.safetensors", ckpt::safetensors_file(tensors));
        CHECK_FALSE(read_transcoder(dir.path()));
    }
    SUBCASE("k larger than the features is refused") {
        dir.write("config.json", R"({"layer": 2, "activation": "topk", "k": 9})");
        auto e = read_transcoder(dir.path());
        REQUIRE_FALSE(e);
        CHECK(e.err().path == "k");
    }
}
