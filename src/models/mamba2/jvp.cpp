// Linearisation of one Mamba-2 depth step (mamba2.hpp, BlockMap): forward mode in double.
// Every quantity of Engine::mixer is carried with its tangents; the weights are constants, so each
// projection is two GEMMs (value and tangents) and each pointwise map uses its derivative (nn.hpp:
// SiLU', softplus' = s below the threshold 20, the RMS normaliser's dr), the SSD kernel's exponent
// A (cum_t - cum_s), and the retraction's Dpi (sphere.hpp) for update = sphere. One definition
// serves one tangent (jvp, step_double) and k tangents (depth spectra).
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "tokdyn/core/linalg.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/core/nn.hpp"
#include "tokdyn/core/sphere.hpp"

namespace tokdyn::mamba2 {

namespace {

// A float weight matrix in double, rows on the thread team (a copy: the same bits on any count).
Mat to_double(const MatF& W) {
  Mat out(W.rows(), W.cols());
#pragma omp parallel for schedule(static) if (W.size() >= (1L << 18))
  for (Eigen::Index i = 0; i < W.rows(); ++i) out.row(i) = W.row(i).cast<double>();
  return out;
}

// SiLU and SiLU' of a row of pre-activations at once, vectorised (Eigen's exp): with
// e = exp(-x) and s = 1/(1 + e), SiLU(x) = x/(1 + e) (nn::silu's formula) and SiLU'(x) =
// s (1 + x (1 - s)) (nn::silu_derivative's). Large |x| behaves: x < -709 gives e = inf, s = 0,
// SiLU = -0 and SiLU' = 0; large x gives s = 1 and SiLU' = 1. The value rows of the tangent
// step are few (R T) and this was their bottleneck with three scalar exps per entry.
template <class X, class Y, class D>
void silu_with_derivative(const X& x, Y&& y, D&& dy) {
  const Eigen::ArrayXd xa = x.transpose().array();
  const Eigen::ArrayXd one_e = 1.0 + (-xa).exp();
  const Eigen::ArrayXd sg = one_e.inverse();
  dy = (sg * (1.0 + xa * (1.0 - sg))).transpose().matrix();
  y = (xa / one_e).transpose().matrix();
}

}  // namespace

// One tangent is the case m = 1 of the shared step: a single definition of the double forward.
void BlockMap::jvp(long k, const Batch& Z, const Tokens& V, Tokens& out) const {
  Tokens Y;
  step_double_tangents(k, Z, V, Y, out);
}

void BlockMap::step_double(long k, const Batch& Z, const Tokens& V, Tokens& Y, Tokens& dY) const {
  step_double_tangents(k, Z, V, Y, dY);
}

// The value once, the m tangents sharing it. Forward mode, with each primal
// quantity and each derivative factor of a pointwise map (SiLU'(pre-activation), softplus' = s,
// the norms' r, the gate's SiLU(z) and y SiLU'(z), the SSD's E dt_s and (C.B) E) computed once per
// run, then applied to the tangents of the run: a tangent row q belongs to state row q mod (R T).
void BlockMap::step_double_tangents(long k, const Batch& Zb, const Tokens& V, Tokens& Yout, Tokens& dYout) const {
  const Config& c = cfg_;
  const int d = c.d_model, di = c.d_inner(), H = c.nheads(), Pd = c.headdim, N = c.d_state, G = c.ngroups,
            K = c.d_conv, cd = c.conv_dim();
  const Tokens& X = Zb.Z;
  const int runs = Zb.runs, len = Zb.len;
  const Eigen::Index RT = X.rows();
  if (X.cols() != d || RT != static_cast<Eigen::Index>(runs) * len || RT == 0)
    throw std::logic_error("mamba2::BlockMap: state has the wrong shape");
  if (V.cols() != d || V.rows() == 0 || V.rows() % RT != 0)
    throw std::logic_error("mamba2::BlockMap: directions must be m >= 1 blocks of the shape of the state");
  const Eigen::Index MT = V.rows();  // m R T tangent rows; row q is at state row q % RT
  const long pairs = static_cast<long>(MT / len);  // (direction, run) pairs: rows p len .. p len + len - 1
  const std::shared_ptr<const Layer> layer_k = layers_->at_layer(k);
  const Layer& L = *layer_k;
  const double eps = c.eps;

  // 1. pre-norm: u = x r w, r = (|x|^2/d + eps)^{-1/2};  du = (dx r + x dr) w, dr = -r^3 <x, dx>/d.
  const Eigen::RowVectorXd nw = L.norm_w.cast<double>().transpose();
  // The value rows and the tangent rows in one matrix (value first), so that each projection is one
  // (R T + m R T)-row product: one pass over the weights, and the R T value rows no longer a
  // separate thin product (in_proj and out_proj together 1.5 ms less per k = 16 step, same bits).
  Tokens UU(RT + MT, d);
  auto U = UU.topRows(RT);
  auto dU = UU.bottomRows(MT);
  Eigen::VectorXd rU(RT);
  for (Eigen::Index i = 0; i < RT; ++i) {
    const double r = nn::rms_inverse(X.row(i), eps);
    rU[i] = r;
    U.row(i) = ((X.row(i) * r).array() * nw.array()).matrix();
  }
#pragma omp parallel for schedule(static) if (rows_in_parallel(MT, d))
  for (Eigen::Index q = 0; q < MT; ++q) {
    const Eigen::Index i = q % RT;
    const double r = rU[i];
    const double dr = nn::rms_inverse_derivative(r, X.row(i), V.row(q));
    dU.row(q) = ((V.row(q) * r + X.row(i) * dr).array() * nw.array()).matrix();
  }

  // 2. in_proj (columns z | xBC | dt): the value on R T rows, the tangents on m R T rows.
  const Mat Win = to_double(L.in_proj);
  Mat PP;
  gemm_nt_blocked(UU, Win, PP);
  const auto P = PP.topRows(RT);
  const auto dP = PP.bottomRows(MT);
  const int xoff = di, dtoff = di + cd;

  // 3. causal depthwise conv + SiLU (fX = SiLU' at the pre-activation, 1 where no SiLU acts);
  // 4. dt = softplus(dt_raw + dt_bias), threshold 20 (fdt = its derivative: sigmoid, or 1).
  Mat XBC(RT, cd), fX(RT, cd), dt(RT, H), fdt(RT, H);
  // The taps as K contiguous rows (conv_w is cd x K, row-major): tap kk of every channel in one
  // vector load instead of a stride-K gather. The same products and sums as before.
  const Mat cw = L.conv_w.cast<double>().transpose();  // K x cd
  const Eigen::RowVectorXd cb = L.conv_b.cast<double>().transpose();
  for (Eigen::Index i = 0; i < RT; ++i) {
    const int t = static_cast<int>(i % len);
    if (sw_.conv) {
      XBC.row(i) = cb;
      for (int kk = 0; kk < K; ++kk) {
        const int src = t - (K - 1) + kk;
        if (src < 0) continue;
        XBC.row(i) += cw.row(kk).cwiseProduct(P.row(i - t + src).segment(xoff, cd));
      }
    } else {
      XBC.row(i) = P.row(i).segment(xoff, cd);
    }
    // SiLU on the x part (columns < di) and on B, C, each when switched on; fX = 1 where none acts.
    for (const auto& [j0, width, on] : {std::tuple<int, int, bool>{0, di, sw_.silu_x}, {di, cd - di, sw_.silu_bc}}) {
      auto seg = XBC.row(i).segment(j0, width);
      if (on)
        silu_with_derivative(seg, seg, fX.row(i).segment(j0, width));  // x is copied before y is written
      else
        fX.row(i).segment(j0, width).setOnes();
    }
    for (int h = 0; h < H; ++h) {
      const double a = P(i, dtoff + h) + static_cast<double>(L.dt_bias[h]);
      dt(i, h) = nn::softplus_thresholded(a);
      fdt(i, h) = nn::softplus_thresholded_derivative(a);
    }
  }
  Mat dXBC(MT, cd), ddt(MT, H);
#pragma omp parallel for schedule(static) if (rows_in_parallel(MT, static_cast<long>(cd) * K))
  for (Eigen::Index q = 0; q < MT; ++q) {
    const Eigen::Index i = q % RT;
    const int t = static_cast<int>(q % len);
    if (sw_.conv) {
      dXBC.row(q).setZero();
      for (int kk = 0; kk < K; ++kk) {
        const int src = t - (K - 1) + kk;
        if (src < 0) continue;
        dXBC.row(q) += cw.row(kk).cwiseProduct(dP.row(q - t + src).segment(xoff, cd));
      }
    } else {
      dXBC.row(q) = dP.row(q).segment(xoff, cd);
    }
    dXBC.row(q) = dXBC.row(q).cwiseProduct(fX.row(i));
    for (int h = 0; h < H; ++h) ddt(q, h) = fdt(i, h) * dP(q, dtoff + h);
  }

  // 5. SSD quadratic form. Value, per run and head: M(t, s) = CB(t, s) E(t, s) dt_s (s <= t),
  //    E = exp(A (cum_t - cum_s)), y = M x + D x; kept: M, Edt = E dt_s and CBE = CB E.
  //    Tangent: dM = dCB Edt + CBE (A (dcum_t - dcum_s) dt_s + ddt_s), dCB = dC B^T + C dB^T,
  //    dy = dM x + M dx + D dx.
  const int hpg = H / G;
  std::vector<Eigen::MatrixXd> Ms(static_cast<std::size_t>(runs) * H), Edts(Ms.size()), CBEs(Ms.size());
  Mat YY(RT + MT, di);  // the value rows, then the tangent rows (one out_proj product)
  auto Y = YY.topRows(RT);
  const long run_heads = static_cast<long>(runs) * H;
#pragma omp parallel if (rows_in_parallel(RT, static_cast<long>(di) * len))
  {
    Eigen::MatrixXd CB(len, len);
    Eigen::VectorXd cum(len);
#pragma omp for schedule(static)
    for (long rh = 0; rh < run_heads; ++rh) {
      const int r = static_cast<int>(rh / H), h = static_cast<int>(rh % H), g = h / hpg;
      const Eigen::Index r0 = static_cast<Eigen::Index>(r) * len;
      const auto B = XBC.block(r0, di + g * N, len, N), C = XBC.block(r0, di + G * N + g * N, len, N);
      CB.noalias() = C * B.transpose();
      const double A = -std::exp(static_cast<double>(L.A_log[h]));
      double acc = 0.0;
      for (int t = 0; t < len; ++t) cum[t] = (acc += dt(r0 + t, h));
      Eigen::MatrixXd& M = Ms[rh];
      Eigen::MatrixXd& Edt = Edts[rh];
      Eigen::MatrixXd& CBE = CBEs[rh];
      M.setZero(len, len);
      Edt.setZero(len, len);
      CBE.setZero(len, len);
      for (int t = 0; t < len; ++t)
        for (int s = 0; s <= t; ++s) {
          const double E = std::exp(A * (cum[t] - cum[s]));
          const double dts = dt(r0 + s, h);
          M(t, s) = CB(t, s) * E * dts;
          Edt(t, s) = E * dts;
          CBE(t, s) = CB(t, s) * E;
        }
      const auto Xh = XBC.block(r0, h * Pd, len, Pd);
      auto Yh = Y.block(r0, h * Pd, len, Pd);
      Yh.noalias() = M * Xh;
      if (sw_.d_skip) Yh += static_cast<double>(L.D[h]) * Xh;
    }
  }
  auto dY = YY.bottomRows(MT);
#pragma omp parallel if (rows_in_parallel(MT, static_cast<long>(di) * len))
  {
    Eigen::MatrixXd dCB(len, len), dM = Eigen::MatrixXd::Zero(len, len);  // dM: only s <= t is written
    Eigen::VectorXd dcum(len);
#pragma omp for schedule(static)
    for (long p = 0; p < pairs; ++p) {
      const int r = static_cast<int>(p % runs);
      const Eigen::Index r0 = static_cast<Eigen::Index>(r) * len, q0 = static_cast<Eigen::Index>(p) * len;
      for (int g = 0; g < G; ++g) {
        const auto B = XBC.block(r0, di + g * N, len, N), dB = dXBC.block(q0, di + g * N, len, N);
        const auto C = XBC.block(r0, di + G * N + g * N, len, N), dC = dXBC.block(q0, di + G * N + g * N, len, N);
        dCB.noalias() = dC * B.transpose();
        dCB.noalias() += C * dB.transpose();
        for (int h = g * hpg; h < (g + 1) * hpg; ++h) {
          const long rh = static_cast<long>(r) * H + h;
          const Eigen::MatrixXd &M = Ms[rh], &Edt = Edts[rh], &CBE = CBEs[rh];
          const double A = -std::exp(static_cast<double>(L.A_log[h]));
          double dacc = 0.0;
          for (int t = 0; t < len; ++t) dcum[t] = (dacc += ddt(q0 + t, h));
          for (int s = 0; s < len; ++s) {
            const double dts = dt(r0 + s, h), ddts = ddt(q0 + s, h);
            for (int t = s; t < len; ++t)
              dM(t, s) = dCB(t, s) * Edt(t, s) + CBE(t, s) * (A * (dcum[t] - dcum[s]) * dts + ddts);
          }
          const auto Xh = XBC.block(r0, h * Pd, len, Pd), dXh = dXBC.block(q0, h * Pd, len, Pd);
          auto dYh = dY.block(q0, h * Pd, len, Pd);
          dYh.noalias() = dM * Xh;
          dYh.noalias() += M * dXh;
          if (sw_.d_skip) dYh += static_cast<double>(L.D[h]) * dXh;
        }
      }
    }
  }

  // 6. gate before the norm: v = y SiLU(z) (kept: SiLU(z) and y SiLU'(z)); grouped RMSNorm times w
  //    (kept: v and each group's r).
  const int gs = di / G;
  const Eigen::RowVectorXd mw = L.mix_norm_w.cast<double>().transpose();
  Mat gz, gy;  // SiLU(z), y SiLU'(z)
  if (sw_.gate) {
    gz.resize(RT, di);
    gy.resize(RT, di);
    for (Eigen::Index i = 0; i < RT; ++i) {
      silu_with_derivative(P.row(i).head(di), gz.row(i), gy.row(i));  // gy: SiLU'(z) here
      gy.row(i).array() *= Y.row(i).array();
      Y.row(i).array() *= gz.row(i).array();
    }
  }
  Mat Vg;
  Eigen::MatrixXd rN;
  if (sw_.mixer_norm) {
    Vg = Y;
    rN.resize(RT, G);
    for (Eigen::Index i = 0; i < RT; ++i)
      for (int g = 0; g < G; ++g) {
        auto seg = Y.row(i).segment(g * gs, gs);
        const double r = nn::rms_inverse(seg, eps);
        rN(i, g) = r;
        seg = ((seg * r).array() * mw.segment(g * gs, gs).array()).matrix();
      }
  }
#pragma omp parallel for schedule(static) if (rows_in_parallel(MT, di))
  for (Eigen::Index q = 0; q < MT; ++q) {
    const Eigen::Index i = q % RT;
    if (sw_.gate)
      dY.row(q).array() = dY.row(q).array() * gz.row(i).array() + gy.row(i).array() * dP.row(q).head(di).array();
    if (sw_.mixer_norm)
      for (int g = 0; g < G; ++g) {
        auto dseg = dY.row(q).segment(g * gs, gs);
        const auto vseg = Vg.row(i).segment(g * gs, gs);
        const double r = rN(i, g);
        const double dr = nn::rms_inverse_derivative(r, vseg, dseg);
        dseg = ((dseg * r + vseg * dr).array() * mw.segment(g * gs, gs).array()).matrix();
      }
  }

  // 7. out_proj: the value on R T rows, the tangents on m R T rows.
  const Mat Wout = to_double(L.out_proj);
  Mat OO;
  gemm_nt_blocked(YY, Wout, OO);
  const auto O = OO.topRows(RT);
  const auto dO = OO.bottomRows(MT);

  // Depth update: residual x + o, or sphere pi(x + tau o) with Dpi(u)[w] = (w - pi <pi, w>)/|u|.
  if (update_ == Update::Residual) {
    Yout = X + O;
    dYout = V + dO;
    return;
  }
  const double tau = tau_;
  Yout = X + tau * O;
  dYout = V + tau * dO;
  Eigen::VectorXd nu(RT);
  for (Eigen::Index i = 0; i < RT; ++i) {
    nu[i] = Yout.row(i).norm();
    Yout.row(i) /= nu[i];
  }
#pragma omp parallel for schedule(static) if (rows_in_parallel(MT, d))
  for (Eigen::Index q = 0; q < MT; ++q) {
    const Eigen::Index i = q % RT;
    retraction_derivative(Yout.row(i), nu[i], dYout.row(q));
  }
}

}  // namespace tokdyn::mamba2
